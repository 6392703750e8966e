"""Conformance samples for ops/householder.py (geqrf; householder_product is composed of
other ops and differentiated through them) and ops/ldl.py (ldl_factor, ldl_solve); see
harness.py. None of the three primitives has a derivative (as PyTorch's)."""

import ember

from .harness import Sample, rng

r = rng(7108)
TALL = r.standard_normal((2, 5, 3))
TAU = r.uniform(0.2, 1.5, (2, 3))
_S = r.standard_normal((2, 4, 4))
SYM = _S + _S.swapaxes(-1, -2)
RHS = r.standard_normal((2, 4, 2))


def torch():
    import torch as t

    return t


def _solve(mod, a, b):
    LD, piv = mod.linalg.ldl_factor(a)
    return mod.linalg.ldl_solve(LD, piv, b)


SAMPLES = [
    Sample(
        "geqrf",
        lambda a: tuple(ember.geqrf(a)),
        (TALL,),
        lambda a: tuple(torch().geqrf(a)),
        grad=False,
    ),
    Sample(
        "linalg.householder_product",
        ember.linalg.householder_product,
        (TALL, TAU),
        lambda a, t: torch().linalg.householder_product(a, t),
    ),
    Sample(
        "linalg.ldl_factor",
        lambda a: ember.linalg.ldl_factor(a).LD,
        (SYM,),
        lambda a: torch().linalg.ldl_factor(a).LD,
        grad=False,
    ),
    Sample(
        "linalg.ldl_solve",
        lambda a, b: _solve(ember, a, b),
        (SYM, RHS),
        lambda a, b: _solve(torch(), a, b),
        grad=False,
    ),
]
