"""Conformance samples for ops/decompositions.py, ops/spectral.py and ops/linalg_composite.py
(ember.linalg's systems, determinants and factorizations). test_conformance.py checks each
op's rule against its kernel, the gradient against finite differences and PyTorch, and
tracing, scripting and graph gradients against eager.

The symmetric-input functions (cholesky, eigh, eigvalsh) read one triangle, so their samples
symmetrize the input first: finite differences then see the symmetric gradient PyTorch's
formulas give. Singular vectors are compared sign-normalized (see opinfo_issue19linalg.py)."""

import numpy as np

import ember

from .harness import Sample, rng

r = rng(1920)
SQ = r.standard_normal((2, 3, 3)) + 2 * np.eye(3)
RHS = r.standard_normal((2, 3, 2))
TALL = r.standard_normal((2, 5, 3))
WIDE = r.standard_normal((3, 5))
_X = r.standard_normal((2, 3, 3))
SPD = _X @ np.swapaxes(_X, -1, -2) + 3 * np.eye(3)
SYM = SPD - 4 * np.eye(3)


def torch():
    import torch as t

    return t


def _sym(x):
    return (x + x.transpose(-2, -1)) / 2


def _signs(mod, u, s, vh):
    pick = u.abs().argmax(-2, keepdim=True)
    sign = mod.sign(u.gather(-2, pick))
    return u * sign, s, vh * sign.transpose(-2, -1)


SAMPLES = [
    Sample("linalg.inv", lambda a: ember.linalg.inv(a), (SQ,), lambda a: torch().linalg.inv(a)),
    Sample("linalg.det", lambda a: ember.linalg.det(a), (SQ,), lambda a: torch().linalg.det(a)),
    Sample(
        "linalg.slogdet",
        lambda a: tuple(ember.linalg.slogdet(a)),
        (SQ,),
        lambda a: tuple(torch().linalg.slogdet(a)),
    ),
    Sample(
        "linalg.solve",
        lambda a, b: ember.linalg.solve(a, b),
        (SQ, RHS),
        lambda a, b: torch().linalg.solve(a, b),
    ),
    Sample(
        "linalg.solve_triangular",
        lambda a, b: ember.linalg.solve_triangular(a, b, upper=True),
        (SQ, RHS),
        lambda a, b: torch().linalg.solve_triangular(a, b, upper=True),
    ),
    # (the factor's triangle taken first: PyTorch's gradient is the full factor's, which finite
    # differences of the value, reading the triangle only, do not see)
    Sample(
        "cholesky_solve",
        lambda b, f: ember.cholesky_solve(b, f.tril()),
        (RHS, SPD),
        lambda b, f: torch().cholesky_solve(b, f.tril()),
    ),
    Sample(
        "cholesky_inverse",
        lambda f: ember.cholesky_inverse(f.triu(), upper=True),
        (SPD,),
        lambda f: torch().cholesky_inverse(f.triu(), upper=True),
    ),
    Sample(
        "linalg.cholesky",
        lambda a: ember.linalg.cholesky(_sym(a)),
        (SPD,),
        lambda a: torch().linalg.cholesky(_sym(a)),
    ),
    Sample(
        "linalg.qr",
        lambda a: tuple(ember.linalg.qr(a)),
        (TALL,),
        lambda a: tuple(torch().linalg.qr(a)),
    ),
    Sample(
        "linalg.qr/wide",
        lambda a: tuple(ember.linalg.qr(a)),
        (WIDE,),
        lambda a: tuple(torch().linalg.qr(a)),
    ),
    Sample(
        "linalg.eigh",
        lambda a: tuple(ember.linalg.eigh(_sym(a))),
        (SYM,),
        lambda a: tuple(torch().linalg.eigh(_sym(a))),
    ),
    Sample(
        "linalg.eigvalsh",
        lambda a: ember.linalg.eigvalsh(_sym(a)),
        (SYM,),
        lambda a: torch().linalg.eigvalsh(_sym(a)),
    ),
    Sample(
        "linalg.svd/tall",
        lambda a: _signs(ember, *ember.linalg.svd(a, full_matrices=False)),
        (TALL,),
        lambda a: _signs(torch(), *torch().linalg.svd(a, full_matrices=False)),
    ),
    Sample(
        "linalg.svd/wide",
        lambda a: _signs(ember, *ember.linalg.svd(a, full_matrices=False)),
        (WIDE,),
        lambda a: _signs(torch(), *torch().linalg.svd(a, full_matrices=False)),
    ),
    Sample(
        "linalg.pinv",
        lambda a: ember.linalg.pinv(a),
        (TALL,),
        lambda a: torch().linalg.pinv(a),
    ),
    Sample(
        "linalg.pinv/wide",
        lambda a: ember.linalg.pinv(a),
        (WIDE,),
        lambda a: torch().linalg.pinv(a),
    ),
    Sample(
        "linalg.lstsq",
        lambda a, b: ember.linalg.lstsq(a, b).solution,
        (TALL, r.standard_normal((2, 5, 2))),
        lambda a, b: torch().linalg.lstsq(a, b).solution,
    ),
    Sample(
        "linalg.matrix_power/-3",
        lambda a: ember.linalg.matrix_power(a, -3),
        (SQ,),
        lambda a: torch().linalg.matrix_power(a, -3),
    ),
]

SAMPLES.append(
    Sample(
        "linalg.matrix_exp",
        lambda a: ember.linalg.matrix_exp(a),
        (0.5 * SQ,),
        lambda a: torch().linalg.matrix_exp(a),
    )
)
