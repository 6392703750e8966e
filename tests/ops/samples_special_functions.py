"""Conformance samples for ops/special_functions.py (rules against kernels, gradients against
finite differences and PyTorch, traced against eager; test_conformance.py): every op runs,
every VJP (the scaled Bessel and error functions, ndtri, and the second operand of igamma,
igammac and zeta) is checked."""

import numpy as np

import ember
from ember.ops.special_functions import POLYNOMIALS

from .harness import Sample, rng

r = rng(27182)
A = r.uniform(-3.0, 3.0, (3, 4))
POS = r.uniform(0.3, 4.0, (3, 4))
PROB = r.uniform(0.05, 0.95, (3, 4))


def _torch():
    return __import__("torch")


def special(name, *inputs, grad=True, **kw):
    return Sample(
        f"special.{name}",
        lambda *t: getattr(ember.special, name)(*t),
        inputs,
        torch_fn=lambda *t: getattr(_torch().special, name)(*t),
        grad=grad,
        **kw,
    )


SAMPLES = [
    special("i0e", A * 1.3),
    special("i1e", A * 1.3),
    special("erfcx", A),
    special("ndtri", PROB),
    special("gammainc", POS, POS[::-1] + 0.2, nondiff=(0,)),
    special("gammaincc", POS, POS[::-1] + 0.2, nondiff=(0,)),
    special("zeta", POS + 1.5, POS, nondiff=(0,), rtol=1e-4),
]
# no gradient, as PyTorch's (its approximations are about 1e-8 from the true values; ember's
# are SciPy's): compared at the tolerance that leaves
for _name, _x in (
    ("airy_ai", A),
    ("bessel_j0", A * 2),
    ("bessel_j1", A * 2),
    ("bessel_y0", POS),
    ("bessel_y1", POS),
    ("modified_bessel_i0", A),
    ("modified_bessel_i1", A),
    ("modified_bessel_k0", POS),
    ("modified_bessel_k1", POS),
    ("scaled_modified_bessel_k0", POS),
    ("scaled_modified_bessel_k1", POS),
    ("spherical_bessel_j0", A * 2),
):
    SAMPLES.append(special(_name, _x, grad=False, rtol=1e-4, atol=1e-6))
_DEGREES = np.array([[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 7.0, 9.0], [6.0, 8.0, 10.0, 12.0]])
for _name in POLYNOMIALS:  # (every one ember defines)
    SAMPLES.append(special(_name, A / 3, _DEGREES, grad=False, nondiff=(1,)))
