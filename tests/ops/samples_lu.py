"""Conformance samples for ops/lu.py (the lu_factor and lu_permutation primitives, reached
through torch.linalg.lu_factor, lu and lu_solve); see harness.py."""

import numpy as np

import ember

from .harness import Sample, rng

r = rng(4243)
SQ = r.standard_normal((2, 3, 3)) + 2 * np.eye(3)
WIDE = r.standard_normal((3, 4))
TALL = r.standard_normal((2, 4, 3))
RHS = r.standard_normal((2, 3, 2))


def torch():
    import torch as t

    return t


def _solve(mod, a, b):
    LU, piv = mod.linalg.lu_factor(a)
    return mod.linalg.lu_solve(LU, piv, b)


SAMPLES = [
    Sample(
        "linalg.lu_factor",
        lambda a: ember.linalg.lu_factor(a).LU,
        (SQ,),
        lambda a: torch().linalg.lu_factor(a).LU,
    ),
    Sample(
        "linalg.lu/wide",
        lambda a: tuple(ember.linalg.lu(a)[1:]),
        (WIDE,),
        lambda a: tuple(torch().linalg.lu(a)[1:]),
    ),
    Sample(
        "linalg.lu/tall",
        lambda a: tuple(ember.linalg.lu(a)[1:]),
        (TALL,),
        lambda a: tuple(torch().linalg.lu(a)[1:]),
    ),
    Sample(
        "linalg.lu_solve",
        lambda a, b: _solve(ember, a, b),
        (SQ, RHS),
        lambda a, b: _solve(torch(), a, b),
    ),
]
