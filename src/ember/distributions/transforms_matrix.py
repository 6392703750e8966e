"""Transforms onto matrices of ``torch.distributions.transforms``, PyTorch's formulas in
ember ops: LowerCholesky, PositiveDefinite and CorrCholesky; and the lower-triangle packing
helpers ``tril_matrix_to_vec`` / ``vec_to_tril_matrix`` (torch.distributions.utils').
(transforms_extra.py re-exports them with the other transforms.)"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ArgumentError
from ..ops.decompositions import cholesky
from . import constraints
from ._util import E, finfo_eps
from .transforms import Transform, _softplus

__all__ = [
    "CorrCholeskyTransform",
    "LowerCholeskyTransform",
    "PositiveDefiniteTransform",
    "tril_matrix_to_vec",
    "vec_to_tril_matrix",
]


def _pad_last(x, before: int, after: int, value: float):
    parts = []
    if before:
        parts.append(E.full(tuple(x.shape[:-1]) + (before,), value, dtype=x.dtype))
    parts.append(x)
    if after:
        parts.append(E.full(tuple(x.shape[:-1]) + (after,), value, dtype=x.dtype))
    return E.cat(parts, -1)


def _tril_positions(n: int, diag: int):
    rows, cols = np.nonzero(np.arange(n) < np.arange(n).reshape(-1, 1) + (diag + 1))
    return rows, cols


def tril_matrix_to_vec(mat, diag: int = 0):
    """The lower triangle of (batches of) D x D matrices (from diagonal ``diag``), row by
    row, as vectors."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ArgumentError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    rows, cols = _tril_positions(n, diag)
    flat = mat.reshape(*mat.shape[:-2], n * n)
    return E.index_select(flat, -1, E.tensor(rows * n + cols))


def vec_to_tril_matrix(vec, diag: int = 0):
    """The inverse of `tril_matrix_to_vec`: D x D matrices, zero above diagonal ``diag``."""
    k = vec.shape[-1]
    n = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * k + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    if abs(round(n) - n) > 1e-9:
        raise ArgumentError(
            f"The size of last dimension is {k} which cannot be expressed as the lower "
            "triangular part of a square D x D matrix."
        )
    n = round(n)
    rows, cols = _tril_positions(n, diag)
    source = np.full(n * n, k, dtype=np.int64)  # k: the zero appended below
    source[rows * n + cols] = np.arange(k)
    padded = E.cat([vec, E.zeros(tuple(vec.shape[:-1]) + (1,), dtype=vec.dtype)], -1)
    flat = E.index_select(padded, -1, E.tensor(source))
    return flat.reshape(*vec.shape[:-1], n, n)


def _diag_embed(d):
    n = d.shape[-1]
    return E.unsqueeze(d, -1) * E.eye(n, dtype=d.dtype)


class LowerCholeskyTransform(Transform):
    """Any square matrix onto a lower Cholesky factor: the strict lower triangle kept, the
    diagonal exponentiated (not bijective, as PyTorch counts it: the upper triangle is lost)."""

    bijective = False
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky
    event_dim = 2

    def _call(self, x):
        return x.tril(-1) + _diag_embed(E.diagonal(x, 0, -2, -1).exp())

    def _inverse(self, y):
        return y.tril(-1) + _diag_embed(E.diagonal(y, 0, -2, -1).log())


class PositiveDefiniteTransform(Transform):
    """Any square matrix onto a positive-definite one: ``L L^T`` of `LowerCholeskyTransform`
    (not bijective)."""

    bijective = False
    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite
    event_dim = 2

    def _call(self, x):
        lower = LowerCholeskyTransform()(x)
        return lower @ lower.transpose(-2, -1)

    def _inverse(self, y):
        return LowerCholeskyTransform().inv(cholesky(y))


class CorrCholeskyTransform(Transform):
    """Unconstrained vectors of length D(D-1)/2 onto Cholesky factors of D x D correlation
    matrices (tanh, then stick-breaking on the rows' squares), as Stan and PyTorch."""

    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    event_dim = 1

    def _call(self, x):
        x = x.tanh()
        eps = finfo_eps(x.dtype)
        x = x.clamp(min=-1 + eps, max=1 - eps)
        r = vec_to_tril_matrix(x, diag=-1)
        z1m_cumprod_sqrt = (1 - r * r).sqrt().cumprod(-1)
        r = r + E.eye(r.shape[-1], dtype=r.dtype)
        return r * _pad_last(z1m_cumprod_sqrt[..., :-1], 1, 0, 1.0)

    def _inverse(self, y):
        y_cumsum = 1 - (y * y).cumsum(-1)
        y_cumsum_shifted = _pad_last(y_cumsum[..., :-1], 1, 0, 1.0)
        y_vec = tril_matrix_to_vec(y, diag=-1)
        y_cumsum_vec = tril_matrix_to_vec(y_cumsum_shifted, diag=-1)
        t = y_vec / y_cumsum_vec.sqrt()
        return (t.log1p() - (-t).log1p()) / 2

    def log_abs_det_jacobian(self, x, y, intermediates=None):
        y1m_cumsum = 1 - (y * y).cumsum(-1)
        stick_breaking = 0.5 * tril_matrix_to_vec(y1m_cumsum, diag=-2).log().sum(-1)
        tanh = -2 * (x + _softplus(-2 * x) - math.log(2.0)).sum(-1)
        return stick_breaking + tanh

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ArgumentError("Too few dimensions on input")
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ArgumentError("Input is not a flattened lower-diagonal number")
        return tuple(shape[:-1]) + (d, d)

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise ArgumentError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ArgumentError("Input is not square")
        d = shape[-1]
        return tuple(shape[:-2]) + (d * (d - 1) // 2,)
