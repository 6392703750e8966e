"""Conformance samples for issue 19's long tail (helper c): the primitives of
ops/extra_math.py, ops/extra_reduce.py and ops/extra_alias.py (rules against kernels,
gradients against finite differences and PyTorch, traced / scripted against eager;
test_conformance.py)."""

import numpy as np

import ember
from ember.ops._registry import apply
from ember.ops.add_scaled import ADD_SCALED

from .harness import Sample, rng

r = rng(19190)
A = r.standard_normal((3, 4))
B = r.standard_normal((3, 4))
POS = r.uniform(0.5, 3.0, (3, 4))
UNIT = r.uniform(-0.9, 0.9, (3, 4))
DISTINCT = r.permutation(np.arange(12.0)).reshape(3, 4) * 0.4 - 2.0


def _torch():
    return __import__("torch")


SAMPLES = []


def unary(name, x, torch_fn=None, **kw):
    SAMPLES.append(
        Sample(
            name,
            lambda t: getattr(ember, name)(t),
            (x,),
            torch_fn=torch_fn or (lambda t: getattr(_torch(), name)(t)),
            **kw,
        )
    )


unary("lgamma", POS)
# (add_scaled: x + alpha * y rounded once, alpha a 0-d tensor: a recorded optimizer step's)
SAMPLES.append(
    Sample(
        "add_scaled",
        lambda x, y, a: apply(ADD_SCALED, x, y, a),
        (A, B, np.array(-0.75)),
        torch_fn=lambda x, y, a: x + a * y,
    )
)
# (sinc: one op since sem60, its gradient PyTorch's sinc_backward; 0.0 is its removable point)
unary("sinc", np.concatenate([A[:, :3], np.zeros((3, 1))], axis=1))
unary("digamma", POS)
unary("erfinv", UNIT)
unary("erfc", A)
unary("i0", A)
unary("asinh", A)
unary("acosh", POS + 1.0)
unary("atanh", UNIT)
unary("signbit", A, grad=False)

SAMPLES += [
    Sample(
        "i1",
        lambda t: ember.special.i1(t),
        (A,),
        torch_fn=lambda t: _torch().special.i1(t),
    ),
    Sample(
        "log_ndtr",
        lambda t: ember.special.log_ndtr(t),
        (A * 3,),
        torch_fn=lambda t: _torch().special.log_ndtr(t),
    ),
    Sample(
        "logit",
        lambda t: ember.logit(t),
        (r.uniform(0.05, 0.95, (3, 4)),),
        torch_fn=lambda t: _torch().logit(t),
    ),
    Sample(
        "logit/eps",
        lambda t: ember.logit(t, 0.1),
        (r.uniform(0.15, 0.85, (3, 4)),),
        torch_fn=lambda t: _torch().logit(t, 0.1),
    ),
    Sample(
        "entr",
        lambda t: ember.special.entr(t),
        (POS,),
        torch_fn=lambda t: _torch().special.entr(t),
    ),
    Sample(
        "polygamma",
        lambda t: ember.polygamma(1, t),
        (POS,),
        torch_fn=lambda t: _torch().polygamma(1, t),
    ),
    Sample(
        "hypot", lambda a, b: ember.hypot(a, b), (A, B), torch_fn=lambda a, b: _torch().hypot(a, b)
    ),
    Sample(
        "xlogy",
        lambda a, b: ember.special.xlogy(a, b),
        (A, POS),
        torch_fn=lambda a, b: _torch().special.xlogy(a, b),
    ),
    Sample(
        "xlog1py/broadcast",
        lambda a, b: ember.special.xlog1py(a, b),
        (A, POS[0]),
        torch_fn=lambda a, b: _torch().special.xlog1py(a, b),
    ),
    Sample(
        "logaddexp",
        lambda a, b: ember.logaddexp(a, b),
        (A, B[0]),
        torch_fn=lambda a, b: _torch().logaddexp(a, b),
    ),
    Sample(
        "logaddexp2",
        lambda a, b: ember.logaddexp2(a, b),
        (A, B),
        torch_fn=lambda a, b: _torch().logaddexp2(a, b),
    ),
    # the selections: positions (no gradient) and the values gathered at them
    Sample(
        "select_index",
        lambda t: ember.cummax(t, 1).values + ember.median(t, 0).values.sum(),
        (DISTINCT,),
        torch_fn=lambda t: _torch().cummax(t, 1).values + _torch().median(t, 0).values.sum(),
    ),
    Sample(
        "histc",
        lambda t: ember.histc(t, 6),
        (A,),
        torch_fn=lambda t: _torch().histc(t, 6),
        grad=False,
    ),
    Sample(
        "searchsorted",
        lambda s, v: ember.searchsorted(s, v),
        (np.sort(A, 1), B),
        torch_fn=lambda s, v: _torch().searchsorted(s.contiguous(), v.contiguous()),
        grad=False,
    ),
]
