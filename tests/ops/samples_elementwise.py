"""Conformance samples for ops/elementwise.py and ops/compare.py."""

import numpy as np

import ember

from .harness import Sample, away_from, rng

r = rng(0)
A = r.standard_normal((3, 4))
B = r.standard_normal((3, 4))
ROW = r.standard_normal((4,))
COL = r.standard_normal((3, 1))
POS = r.uniform(0.5, 2.0, (3, 4))
UNIT = r.uniform(-0.9, 0.9, (3, 4))

SAMPLES = []


def unary(name, x, torch_name=None, **kw):
    SAMPLES.append(
        Sample(
            f"{name}",
            lambda t: getattr(ember, name)(t),
            (x,),
            torch_fn=lambda t: getattr(__import__("torch"), torch_name or name)(t),
            **kw,
        )
    )


unary("neg", A)
unary("abs", away_from(A))
unary("sign", away_from(A))
unary("exp", A)
unary("log", POS)
unary("log1p", POS)
unary("expm1", A)
unary("sqrt", POS)
unary("rsqrt", POS)
unary("reciprocal", POS)
unary("sin", A)
unary("cos", A)
unary("tanh", A)
unary("sigmoid", A * 4)
unary("relu", away_from(A))
unary("erf", A)
SAMPLES.append(
    Sample(
        "softsign/wide",  # far into both tails (its kink at 0: samples_functional_act.py)
        lambda t: ember.nn.functional.softsign(t),
        (away_from(A * np.array([1e-3, 1.0, 30.0, 1e3])),),
        torch_fn=lambda t: __import__("torch").nn.functional.softsign(t),
    )
)
unary("floor", away_from(A * 3, points=np.arange(-9, 10)))
unary("ceil", away_from(A * 3, points=np.arange(-9, 10)))
unary("round", away_from(A * 3, points=np.arange(-9, 10) + 0.5))
unary("trunc", away_from(A * 3, points=np.arange(-9, 10)))


def binary(name, x, y, torch_name=None, **kw):
    SAMPLES.append(
        Sample(
            f"{name}/{np.shape(x)}x{np.shape(y)}",
            lambda a, b: getattr(ember, name)(a, b),
            (x, y),
            torch_fn=lambda a, b: getattr(__import__("torch"), torch_name or name)(a, b),
            **kw,
        )
    )


for other in (B, ROW, COL):
    binary("add", A, other)
    binary("sub", A, other)
    binary("mul", A, other)
    binary("div", A, other + np.sign(other) * 0.5)
binary("pow", POS, B)
binary("pow", POS, ROW)
binary("maximum", A, B)
binary("minimum", A, COL)
binary(
    "mod",
    away_from(A * 3, points=np.arange(-9, 10) * 0.7),
    np.full((4,), 0.7),
    torch_name="remainder",
)
binary(
    "floor_div",
    away_from(A * 3, points=np.arange(-9, 10) * 0.7),
    np.full((4,), 0.7),
    torch_name="floor_divide",
    torch_grad=False,
)

SAMPLES += [
    Sample("pow/scalar", lambda a: a**3, (A,), torch_fn=lambda a: a**3),
    Sample("rpow/scalar", lambda a: 2.0**a, (A,), torch_fn=lambda a: 2.0**a),
    Sample(
        "pow/zero-base",
        lambda a, b: ember.pow(a, b),
        (np.array([0.0, 1.5]), np.array([2.0, 0.5])),
        torch_fn=lambda a, b: a**b,
    ),
    Sample(
        "maximum/ties",
        lambda a, b: ember.maximum(a, b),
        (np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 3.0])),
        torch_fn=lambda a, b: __import__("torch").maximum(a, b),
        fd=False,
    ),
    Sample(
        "where",
        lambda c, a, b: ember.where(c, a, b),
        (r.standard_normal((3, 4)) > 0, A, ROW),
        torch_fn=lambda c, a, b: __import__("torch").where(c, a, b),
    ),
    Sample(
        "where/scalar",
        lambda c, a: ember.where(c, a, 0.0),
        (r.standard_normal(4) > 0, ROW),
        torch_fn=lambda c, a: __import__("torch").where(c, a, 0.0),
    ),
    Sample(
        "clip",
        lambda a: ember.clip(a, -0.5, 0.7),
        (away_from(A, (-0.5, 0.7)),),
        torch_fn=lambda a: a.clamp(-0.5, 0.7),
    ),
    Sample(
        "clip/min-only",
        lambda a: a.clamp(min=0.1),
        (away_from(A, (0.1,)),),
        torch_fn=lambda a: a.clamp(min=0.1),
    ),
    Sample(
        "clip/tensor-bounds",
        lambda a, lo: ember.clip(a, min=lo),
        (A, COL * 0.3),
        torch_fn=lambda a, lo: a.clamp(min=lo),
    ),
    Sample(
        "cast/f32",
        lambda a: a.float() * 2,
        (A,),
        torch_fn=lambda a: a.float() * 2,
        rtol=1e-6,
        atol=1e-6,
        float32=False,
        fd_eps=1e-2,
    ),
    Sample(
        "cast/int", lambda a: (a * 3).long(), (A,), torch_fn=lambda a: (a * 3).long(), grad=False
    ),
    Sample("clone", lambda a: a.clone() * 2, (A,), torch_fn=lambda a: a.clone() * 2),
    Sample(
        "stop_gradient",
        lambda a: ember.stop_gradient(a) * a,
        (A,),
        torch_fn=lambda a: a.detach() * a,
        fd=False,  # a cut gradient is not the derivative; PyTorch's detach is the reference
    ),
]

for cmp in ("eq", "ne", "lt", "le", "gt", "ge"):
    SAMPLES.append(
        Sample(
            f"compare/{cmp}",
            lambda a, b, cmp=cmp: getattr(ember, cmp)(a, b),
            (np.round(A), np.round(ROW)),
            grad=False,
            torch_fn=lambda a, b, cmp=cmp: getattr(__import__("torch"), cmp)(a, b),
        )
    )

BOOLS = (r.standard_normal((3, 4)) > 0, r.standard_normal((4,)) > 0)
for logical in ("logical_and", "logical_or", "logical_xor"):
    SAMPLES.append(
        Sample(
            logical,
            lambda a, b, f=logical: getattr(ember, f)(a, b),
            BOOLS,
            grad=False,
            torch_fn=lambda a, b, f=logical: getattr(__import__("torch"), f)(a, b),
        )
    )
SAMPLES += [
    Sample(
        "logical_not",
        lambda a: ember.logical_not(a),
        BOOLS[:1],
        grad=False,
        torch_fn=lambda a: __import__("torch").logical_not(a),
    ),
    Sample(
        "isnan/isinf/isfinite",
        lambda a: (ember.isnan(a), ember.isinf(a), ember.isfinite(a)),
        (np.array([1.0, np.nan, np.inf, -np.inf]),),
        grad=False,
        torch_fn=lambda a: (a.isnan(), a.isinf(), a.isfinite()),
    ),
]
