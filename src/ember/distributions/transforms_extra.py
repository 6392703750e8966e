"""The rest of ``torch.distributions.transforms``, PyTorch's formulas in ember ops (so they
differentiate and capture): Abs, Power, Softplus, Softmax, StickBreaking, Reshape,
Independent, Cat, Stack and CumulativeDistribution, and ``identity_transform``; with the
matrix transforms of transforms_matrix.py (LowerCholesky, PositiveDefinite, CorrCholesky and
the lower-triangle packing helpers) re-exported."""

from __future__ import annotations

import numpy as np

from ..errors import ArgumentError
from . import constraints
from ._util import E, broadcast_all, clipped_sigmoid, sum_rightmost
from .transforms import ComposeTransform, Transform, _softplus
from .transforms_matrix import (
    CorrCholeskyTransform,
    LowerCholeskyTransform,
    PositiveDefiniteTransform,
    _pad_last,
    tril_matrix_to_vec,
    vec_to_tril_matrix,
)

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
        z = clipped_sigmoid(x - offset.log())
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
            raise ArgumentError("Too few dimensions on input")
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape):
        if len(shape) < 1:
            raise ArgumentError("Too few dimensions on input")
        return tuple(shape[:-1]) + (shape[-1] - 1,)


class ReshapeTransform(Transform):
    """The rightmost dimensions ``in_shape`` reshaped to ``out_shape`` (as many elements)."""

    def __init__(self, in_shape, out_shape, cache_size: int = 0):
        self.in_shape = tuple(int(s) for s in in_shape)
        self.out_shape = tuple(int(s) for s in out_shape)
        if int(np.prod(self.in_shape)) != int(np.prod(self.out_shape)):
            raise ArgumentError("in_shape, out_shape have different numbers of elements")
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
            raise ArgumentError(
                f"Shape mismatch: expected {tuple(shape[cut:])} but got {self.in_shape}"
            )
        return tuple(shape[:cut]) + self.out_shape

    def inverse_shape(self, shape):
        cut = len(shape) - len(self.out_shape)
        if cut < 0 or tuple(shape[cut:]) != self.out_shape:
            raise ArgumentError(
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
