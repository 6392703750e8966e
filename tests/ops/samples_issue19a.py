"""Conformance samples for issue 19's elementwise math (ops/pointwise.py), pointwise composites
(ops/pointwise_composite.py), rearranging (ops/rearrange.py) and products
(ops/contractions.py): rules against kernels, gradients against finite differences and
PyTorch, and traced / scripted against eager (test_conformance.py)."""

import numpy as np

import ember
from ember.ops._registry import apply
from ember.ops.cdist_direct import CDIST_DIRECT_BACKWARD
from ember.ops.cdist_direct import _kernel as _cdist_kernel

from .harness import Sample, away_from, rng

r = rng(1919)
A = r.standard_normal((3, 4))
B = r.standard_normal((3, 4))
ROW = r.standard_normal((4,))
POS = r.uniform(0.5, 2.0, (3, 4))
UNIT = r.uniform(-0.9, 0.9, (3, 4))


def _torch():
    return __import__("torch")


SAMPLES = []


def unary(name, x, **kw):
    SAMPLES.append(
        Sample(
            name,
            lambda t: getattr(ember, name)(t),
            (x,),
            torch_fn=lambda t: getattr(_torch(), name)(t),
            **kw,
        )
    )


unary("tan", UNIT)
unary("asin", UNIT)
unary("acos", UNIT)
unary("atan", A * 2)
unary("sinh", A)
unary("cosh", A)
unary("log2", POS)
unary("log10", POS)
unary("square", A)

SAMPLES += [
    Sample(
        "atan2",
        lambda a, b: ember.atan2(a, b),
        (A, ROW),
        torch_fn=lambda a, b: _torch().atan2(a, b),
    ),
    Sample(
        "fmod",
        lambda a, b: ember.fmod(a, b),
        (away_from(A * 3, points=np.arange(-9, 10) * 0.7), np.array([0.7, -0.7, 0.7, -0.7])),
        torch_fn=lambda a, b: _torch().fmod(a, b),
    ),
    Sample(
        "copysign",
        lambda a, b: ember.copysign(a, b),
        (away_from(A, points=np.array([0.0])), ROW),
        torch_fn=lambda a, b: _torch().copysign(a, b),
    ),
    Sample(
        "add/alpha",
        lambda a, b: ember.add(a, b, alpha=-2.5),
        (A, ROW),
        torch_fn=lambda a, b: _torch().add(a, b, alpha=-2.5),
    ),
    Sample(
        "sub/alpha",
        lambda a, b: a.sub(b, alpha=3),
        (A, B),
        torch_fn=lambda a, b: a.sub(b, alpha=3),
    ),
    Sample(
        "nan_to_num",
        lambda a: ember.nan_to_num(a, nan=0.5, posinf=2.0) + a.nan_to_num(neginf=-3.0),
        (np.array([1.5, np.nan, np.inf, -np.inf, -0.5]),),
        torch_fn=lambda a: _torch().nan_to_num(a, nan=0.5, posinf=2.0) + a.nan_to_num(neginf=-3.0),
        fd=False,  # (finite differences around NaN and inf are NaN)
    ),
    Sample(
        "addcmul",
        lambda x, a, b: ember.addcmul(x, a, b, value=0.5),
        (A, B, ROW),
        torch_fn=lambda x, a, b: _torch().addcmul(x, a, b, value=0.5),
    ),
    Sample(
        "addcdiv",
        lambda x, a, b: x.addcdiv(a, b, value=-2),
        (A, B, POS),
        torch_fn=lambda x, a, b: x.addcdiv(a, b, value=-2),
    ),
    Sample(
        "lerp/tensor-weight",
        lambda x, y, w: ember.lerp(x, y, w),
        (A, B, r.uniform(-1.0, 1.5, (4,))),
        torch_fn=lambda x, y, w: _torch().lerp(x, y, w),
    ),
    Sample(
        "lerp/scalar-weight",
        lambda x, y: x.lerp(y, 0.75),
        (A, B),
        torch_fn=lambda x, y: x.lerp(y, 0.75),
    ),
    Sample(
        "isclose",
        lambda a, b: ember.isclose(a, b, rtol=1e-3),
        (A, A + np.where(B > 0, 1e-5, 1e-2)),
        torch_fn=lambda a, b: _torch().isclose(a, b, rtol=1e-3),
        grad=False,
    ),
    Sample(
        "roll",
        lambda a: ember.roll(a, (1, -3), (0, 1)),
        (A,),
        torch_fn=lambda a: _torch().roll(a, (1, -3), (0, 1)),
    ),
    Sample(
        "roll/flat",
        lambda a: a.roll(5),
        (A,),
        torch_fn=lambda a: a.roll(5),
    ),
    Sample(
        "meshgrid",
        lambda a, b: ember.meshgrid(a, b, indexing="xy"),
        (ROW, A[0, :3]),
        torch_fn=lambda a, b: _torch().meshgrid(a, b, indexing="xy"),
    ),
    Sample(
        "diag/vector",
        lambda a: ember.diag(a, -1),
        (ROW,),
        torch_fn=lambda a: _torch().diag(a, -1),
    ),
    Sample(
        "diag/matrix",
        lambda a: a.diag(1),
        (A,),
        torch_fn=lambda a: a.diag(1),
    ),
    Sample(
        "diagonal",
        lambda a: ember.diagonal(a, -1, 2, 0),
        (r.standard_normal((3, 2, 4)),),
        torch_fn=lambda a: _torch().diagonal(a, -1, 2, 0),
    ),
    Sample(  # overlapping windows along a middle dimension (unfold_view's gradient adds up)
        "Tensor.unfold",
        lambda a: a.unfold(1, 3, 2),
        (r.standard_normal((2, 7, 3)),),
        torch_fn=lambda a: a.unfold(1, 3, 2),
    ),
    Sample(
        "hstack",
        lambda a, b: ember.hstack([a, b]),
        (A, B[:, :2]),
        torch_fn=lambda a, b: _torch().hstack([a, b]),
    ),
    Sample(
        "vstack",
        lambda a, b: ember.vstack([a, b]),
        (A, ROW),
        torch_fn=lambda a, b: _torch().vstack([a, b]),
    ),
    Sample(
        "t",
        lambda a: a.t() * ember.t(a).t().t(),
        (A,),
        torch_fn=lambda a: a.t() * a.t().t().t(),
    ),
    Sample(
        "tensordot",
        lambda a, b: ember.tensordot(a, b, ([0, 2], [1, 0])),
        (r.standard_normal((2, 3, 4)), r.standard_normal((4, 2, 5))),
        torch_fn=lambda a, b: _torch().tensordot(a, b, ([0, 2], [1, 0])),
    ),
    Sample(
        "baddbmm",
        lambda x, a, b: ember.baddbmm(x, a, b, beta=0.5, alpha=-2.0),
        (ROW[:3], r.standard_normal((2, 4, 5)), r.standard_normal((2, 5, 3))),
        torch_fn=lambda x, a, b: _torch().baddbmm(x, a, b, beta=0.5, alpha=-2.0),
    ),
]

_X1 = r.standard_normal((4, 3))
_X2 = r.standard_normal((2, 5, 3))
_X2[1, 2] = _X1[0]  # a zero distance: gradient 0 there, as PyTorch's
for _p in (2.0, 1.0, 3.0, float("inf")):
    SAMPLES.append(
        Sample(
            f"cdist/p={_p}",
            lambda a, b, p=_p: ember.cdist(a, b, p),
            (_X1, _X2),
            torch_fn=lambda a, b, p=_p: _torch().cdist(a, b, p),
            # (finite differences straddle |x| at a zero coordinate of the coinciding rows)
            fd=_p == 2.0,
        )
    )
_G = r.standard_normal((2, 4, 5))


def _torch_cdist_grad(p):
    def fn(g, a, b, dist):  # (dist: the distances themselves, which PyTorch recomputes)
        torch = _torch()
        a = a.detach().requires_grad_()
        y = torch.cdist(a, b, p, compute_mode="donot_use_mm_for_euclid_dist")
        return torch.autograd.grad(y, a, g)[0]

    return fn


# the eager gradient op (ops/cdist_direct.py) called directly: recorded gradients, which the
# samples above check, take its composite form instead
_X1B = np.stack([_X1, _X1[::-1]])
for _p in (0.0, 1.0, 2.0, 3.0, 0.5, float("inf")):
    SAMPLES.append(
        Sample(
            f"cdist_direct_backward/p={_p}",
            lambda g, a, b, d, p=_p: apply(CDIST_DIRECT_BACKWARD, g, a, b, d, p=p),
            (_G, _X1B, _X2, _cdist_kernel(_X1B, _X2, p=_p)),
            torch_fn=_torch_cdist_grad(_p),
            grad=False,
        )
    )
SAMPLES.append(
    Sample(
        "cdist/products",
        lambda a, b: ember.cdist(a, b, compute_mode="use_mm_for_euclid_dist"),
        (_X1, _X2[0]),
        torch_fn=lambda a, b: _torch().cdist(a, b, compute_mode="use_mm_for_euclid_dist"),
        rtol=1e-5,
        atol=1e-6,
    )
)
