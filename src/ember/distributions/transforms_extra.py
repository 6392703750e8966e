"""The rest of ``torch.distributions.transforms``, PyTorch's formulas in ember ops (so they
differentiate and capture): Abs, Power, Softplus, Softmax, StickBreaking, LowerCholesky,
PositiveDefinite, CorrCholesky, Reshape, Independent, Cat, Stack and
CumulativeDistribution, and ``identity_transform``; and the lower-triangle packing helpers
``tril_matrix_to_vec`` / ``vec_to_tril_matrix`` (torch.distributions.utils')."""

from __future__ import annotations

import math

import numpy as np

from ..ops.decompositions import cholesky
from . import constraints
from ._util import E, broadcast_all, finfo_eps, sum_rightmost
from .transforms import ComposeTransform, Transform, _softplus

__all__ = [
    "AbsTransform",
    "CatTransform",
    "CorrCholeskyTransform",
    "CumulativeDistributionTransform",
    "IndependentTransform",
    "LowerCholeskyTransform",
    "PositiveDefiniteTransform",
    "PowerTransform",
    "ReshapeTransform",
    "SoftmaxTransform",
    "SoftplusTransform",
    "StackTransform",
    "StickBreakingTransform",
    "identity_transform",
    "tril_matrix_to_vec",
    "vec_to_tril_matrix",
]

identity_transform = ComposeTransform([])


def _tril_positions(n: int, diag: int):
    rows, cols = np.nonzero(np.arange(n) < np.arange(n).reshape(-1, 1) + (diag + 1))
    return rows, cols


def tril_matrix_to_vec(mat, diag: int = 0):
    """The lower triangle of (batches of) D x D matrices (from diagonal ``diag``), row by
    row, as vectors."""
    n = mat.shape[-1]
    if diag < -n or diag >= n:
        raise ValueError(f"diag ({diag}) provided is outside [{-n}, {n - 1}].")
    rows, cols = _tril_positions(n, diag)
    flat = mat.reshape(*mat.shape[:-2], n * n)
    return E.index_select(flat, -1, E.tensor(rows * n + cols))


def vec_to_tril_matrix(vec, diag: int = 0):
    """The inverse of `tril_matrix_to_vec`: D x D matrices, zero above diagonal ``diag``."""
    k = vec.shape[-1]
    n = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * k + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    if abs(round(n) - n) > 1e-9:
        raise ValueError(
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


def _pad_last(x, before: int, after: int, value: float):
    parts = []
    if before:
        parts.append(E.full(tuple(x.shape[:-1]) + (before,), value, dtype=x.dtype))
    parts.append(x)
    if after:
        parts.append(E.full(tuple(x.shape[:-1]) + (after,), value, dtype=x.dtype))
    return E.cat(parts, -1)


def _diag_embed(d):
    n = d.shape[-1]
    return E.unsqueeze(d, -1) * E.eye(n, dtype=d.dtype)


class AbsTransform(Transform):
    """``y = |x|`` (not bijective: the inverse is ``y`` itself)."""

    bijective = False
    codomain = constraints.positive

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y

    def __eq__(self, other):
        return isinstance(other, AbsTransform)


class PowerTransform(Transform):
    """``y = x ** exponent`` on the positive reals."""

    domain = constraints.positive
    codomain = constraints.positive

    def __init__(self, exponent, cache_size: int = 0):
        super().__init__(cache_size)
        # a tensor of the default dtype, as PyTorch's broadcast_all makes it (so 1 / exponent
        # rounds as there)
        (self.exponent,) = broadcast_all(exponent)

    @property
    def sign(self):
        return self.exponent.sign()

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()

    def forward_shape(self, shape):
        return tuple(np.broadcast_shapes(tuple(shape), tuple(self.exponent.shape)))

    inverse_shape = forward_shape


class SoftplusTransform(Transform):
    """``y = log(1 + exp(x))``."""

    codomain = constraints.positive

    def _call(self, x):
        return _softplus(x)

    def _inverse(self, y):
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x, y):
        return -_softplus(-x)

    def __eq__(self, other):
        return isinstance(other, SoftplusTransform)


class SoftmaxTransform(Transform):
    """``y = softmax(x)`` over the last dimension (not bijective; the inverse is ``log y``)."""

    domain = constraints.real_vector
    codomain = constraints.simplex
    event_dim = 1
    bijective = False

    def _call(self, x):
        probs = (x - x.max(-1, keepdim=True)[0]).exp()
        return probs / probs.sum(-1, keepdim=True)

    def _inverse(self, y):
        return y.log()


class StickBreakingTransform(Transform):
    """The stick-breaking map from the reals^(K-1) onto the K-simplex (bijective)."""

    domain = constraints.real_vector
    codomain = constraints.simplex
    event_dim = 1

    def _call(self, x):
        k = x.shape[-1]
        offset = E.tensor(np.arange(k, 0, -1, dtype=float), dtype=x.dtype)  # k + 1 - cumsum
        eps = finfo_eps(x.dtype)
        z = (x - offset.log()).sigmoid().clamp(min=eps, max=1 - eps)
        z_cumprod = (1 - z).cumprod(-1)
        return _pad_last(z, 0, 1, 1.0) * _pad_last(z_cumprod, 1, 0, 1.0)

    def _inverse(self, y):
        y_crop = y[..., :-1]
        k = y_crop.shape[-1]
        offset = E.tensor(np.arange(k, 0, -1, dtype=float), dtype=y.dtype)
        sf = (1 - y_crop.cumsum(-1)).clamp(min=float(np.finfo(y.dtype.np).tiny))
        return y_crop.log() - sf.log() + offset.log()

    def log_abs_det_jacobian(self, x, y):
        k = x.shape[-1]
        offset = E.tensor(np.arange(k, 0, -1, dtype=float), dtype=x.dtype)
        x = x - offset.log()
        return (-x - _softplus(-x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return tuple(shape[:-1]) + (shape[-1] - 1,)


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
            raise ValueError("Too few dimensions on input")
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattened lower-diagonal number")
        return tuple(shape[:-1]) + (d, d)

    def inverse_shape(self, shape):
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        d = shape[-1]
        return tuple(shape[:-2]) + (d * (d - 1) // 2,)


class ReshapeTransform(Transform):
    """The rightmost dimensions ``in_shape`` reshaped to ``out_shape`` (as many elements)."""

    def __init__(self, in_shape, out_shape, cache_size: int = 0):
        self.in_shape = tuple(int(s) for s in in_shape)
        self.out_shape = tuple(int(s) for s in out_shape)
        if int(np.prod(self.in_shape)) != int(np.prod(self.out_shape)):
            raise ValueError("in_shape, out_shape have different numbers of elements")
        self.event_dim = len(self.in_shape)
        super().__init__(cache_size)
        self.domain = constraints.independent(constraints.real, len(self.in_shape))
        self.codomain = constraints.independent(constraints.real, len(self.out_shape))

    def _call(self, x):
        batch = tuple(x.shape[: x.ndim - len(self.in_shape)])
        return x.reshape(batch + self.out_shape)

    def _inverse(self, y):
        batch = tuple(y.shape[: y.ndim - len(self.out_shape)])
        return y.reshape(batch + self.in_shape)

    def log_abs_det_jacobian(self, x, y):
        batch = tuple(x.shape[: x.ndim - len(self.in_shape)])
        return E.zeros(batch, dtype=x.dtype)

    def forward_shape(self, shape):
        cut = len(shape) - len(self.in_shape)
        if cut < 0 or tuple(shape[cut:]) != self.in_shape:
            raise ValueError(
                f"Shape mismatch: expected {tuple(shape[cut:])} but got {self.in_shape}"
            )
        return tuple(shape[:cut]) + self.out_shape

    def inverse_shape(self, shape):
        cut = len(shape) - len(self.out_shape)
        if cut < 0 or tuple(shape[cut:]) != self.out_shape:
            raise ValueError(
                f"Shape mismatch: expected {tuple(shape[cut:])} but got {self.out_shape}"
            )
        return tuple(shape[:cut]) + self.in_shape


class IndependentTransform(Transform):
    """``base_transform`` with ``reinterpreted_batch_ndims`` more dimensions as event: its
    log-Jacobian summed over them."""

    def __init__(self, base_transform, reinterpreted_batch_ndims: int, cache_size: int = 0):
        self.base_transform = base_transform
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        self.event_dim = base_transform.event_dim + reinterpreted_batch_ndims
        super().__init__(cache_size)
        self.domain = constraints.independent(base_transform.domain, reinterpreted_batch_ndims)
        self.codomain = constraints.independent(base_transform.codomain, reinterpreted_batch_ndims)
        self.bijective = base_transform.bijective

    @property
    def sign(self):
        return self.base_transform.sign

    def _call(self, x):
        return self.base_transform(x)

    def _inverse(self, y):
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x, y):
        result = self.base_transform.log_abs_det_jacobian(x, y)
        return sum_rightmost(result, self.reinterpreted_batch_ndims)

    def forward_shape(self, shape):
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape):
        return self.base_transform.inverse_shape(shape)


class CatTransform(Transform):
    """``tseq[i]`` applied to the slice of length ``lengths[i]`` (1 each by default) along
    ``dim``, the results concatenated."""

    def __init__(self, tseq, dim: int = 0, lengths=None, cache_size: int = 0):
        if not all(isinstance(t, Transform) for t in tseq):
            raise AssertionError("All elements of tseq must be Transform instances")
        self.transforms = list(tseq)
        self.lengths = [1] * len(self.transforms) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise AssertionError(
                f"lengths ({len(self.lengths)}) must match transforms ({len(self.transforms)})"
            )
        self.dim = dim
        self.event_dim = max(t.event_dim for t in self.transforms)
        super().__init__(cache_size)
        self.bijective = all(t.bijective for t in self.transforms)
        self.domain = constraints.cat([t.domain for t in self.transforms], dim, self.lengths)
        self.codomain = constraints.cat([t.codomain for t in self.transforms], dim, self.lengths)

    @property
    def length(self) -> int:
        return sum(self.lengths)

    def _check(self, x, what: str):
        if not -x.ndim <= self.dim < x.ndim:
            raise AssertionError(f"dim {self.dim} out of range for {what} with {x.ndim} dimensions")
        if x.shape[self.dim] != self.length:
            raise AssertionError(
                f"{what}.size({self.dim}) = {x.shape[self.dim]} must equal length {self.length}"
            )

    def _pieces(self, x):
        start = 0
        for t, length in zip(self.transforms, self.lengths):
            yield t, x.narrow(self.dim, start, length)
            start += length

    def _call(self, x):
        self._check(x, "x")
        return E.cat([t(piece) for t, piece in self._pieces(x)], self.dim)

    def _inverse(self, y):
        self._check(y, "y")
        return E.cat([t.inv(piece) for t, piece in self._pieces(y)], self.dim)

    def log_abs_det_jacobian(self, x, y):
        self._check(x, "x")
        self._check(y, "y")
        terms = []
        for (t, xs), (_, ys) in zip(self._pieces(x), self._pieces(y)):
            term = t.log_abs_det_jacobian(xs, ys)
            if t.event_dim < self.event_dim:
                term = sum_rightmost(term, self.event_dim - t.event_dim)
            terms.append(term)
        dim = self.dim - x.ndim if self.dim >= 0 else self.dim
        dim += self.event_dim
        if dim < 0:
            return E.cat(terms, dim)
        return sum(terms[1:], terms[0])


class StackTransform(Transform):
    """``tseq[i]`` applied to index ``i`` along ``dim``, the results stacked."""

    def __init__(self, tseq, dim: int = 0, cache_size: int = 0):
        if not all(isinstance(t, Transform) for t in tseq):
            raise AssertionError("All elements of tseq must be Transform instances")
        self.transforms = list(tseq)
        self.dim = dim
        super().__init__(cache_size)
        self.bijective = all(t.bijective for t in self.transforms)
        self.domain = constraints.stack([t.domain for t in self.transforms], dim)
        self.codomain = constraints.stack([t.codomain for t in self.transforms], dim)

    def _check(self, x, what: str):
        if not -x.ndim <= self.dim < x.ndim:
            raise AssertionError(f"dim {self.dim} out of range for {what} with {x.ndim} dimensions")
        if x.shape[self.dim] != len(self.transforms):
            raise AssertionError(
                f"{what}.size({self.dim}) = {x.shape[self.dim]} must equal len(transforms) "
                f"{len(self.transforms)}"
            )

    def _slices(self, z):
        return [z.select(self.dim, i) for i in range(z.shape[self.dim])]

    def _call(self, x):
        self._check(x, "x")
        return E.stack([t(s) for s, t in zip(self._slices(x), self.transforms)], self.dim)

    def _inverse(self, y):
        self._check(y, "y")
        return E.stack([t.inv(s) for s, t in zip(self._slices(y), self.transforms)], self.dim)

    def log_abs_det_jacobian(self, x, y):
        self._check(x, "x")
        self._check(y, "y")
        terms = [
            t.log_abs_det_jacobian(xs, ys)
            for xs, ys, t in zip(self._slices(x), self._slices(y), self.transforms)
        ]
        return E.stack(terms, self.dim)


class CumulativeDistributionTransform(Transform):
    """``y = distribution.cdf(x)``: values of ``distribution.support`` onto (0, 1), the
    log-Jacobian its ``log_prob``."""

    bijective = True
    codomain = constraints.unit_interval
    sign = 1

    def __init__(self, distribution, cache_size: int = 0):
        super().__init__(cache_size)
        self.distribution = distribution
        self.domain = distribution.support

    def _call(self, x):
        return self.distribution.cdf(x)

    def _inverse(self, y):
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x, y):
        return self.distribution.log_prob(x)
