"""MultivariateNormal and Independent.

MultivariateNormal keeps a lower-triangular scale ``L`` (``covariance = L L^T``): given as
``scale_tril``, or the Cholesky factor of ``covariance_matrix``, or derived from
``precision_matrix`` as PyTorch does. ember has no factorization ops yet, so the Cholesky
factor and the triangular solves are loops of matrix products over the event size
(``_util.py``): exact and differentiable, but with a Python loop of length ``n``.
"""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np

from ..errors import ArgumentError, ShapeError
from . import constraints
from ._util import (
    E,
    batch_mahalanobis,
    cholesky,
    diagonal,
    precision_to_scale_tril,
    solve_lower,
    sum_rightmost,
)
from .distribution import Distribution, _shape

__all__ = ["MultivariateNormal", "Independent"]


class MultivariateNormal(Distribution):
    arg_constraints = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(
        self,
        loc,
        covariance_matrix=None,
        precision_matrix=None,
        scale_tril=None,
        validate_args=None,
    ):
        given = [m for m in (covariance_matrix, precision_matrix, scale_tril) if m is not None]
        if len(given) != 1:
            raise ArgumentError(
                "MultivariateNormal: pass exactly one of covariance_matrix, precision_matrix "
                "and scale_tril"
            )
        if loc.ndim < 1:
            raise ShapeError("MultivariateNormal: loc must be at least one-dimensional")
        matrix = given[0]
        if matrix.ndim < 2 or matrix.shape[-1] != matrix.shape[-2]:
            raise ShapeError(
                f"MultivariateNormal: the matrix must be (..., n, n), got {tuple(matrix.shape)}",
                op="MultivariateNormal",
            )
        n = loc.shape[-1]
        if matrix.shape[-1] != n:
            raise ShapeError(
                f"MultivariateNormal: loc has {n} components but the matrix is "
                f"{tuple(matrix.shape)}",
                op="MultivariateNormal",
            )
        batch_shape = np.broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1]))
        self.loc = loc.expand(*batch_shape, n)
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(*batch_shape, n, n)
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(*batch_shape, n, n)
        else:
            self.precision_matrix = precision_matrix.expand(*batch_shape, n, n)
        super().__init__(batch_shape, (n,), validate_args=validate_args)
        if scale_tril is not None:
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            self._unbroadcasted_scale_tril = precision_to_scale_tril(precision_matrix)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(MultivariateNormal, _instance)
        batch_shape = _shape(batch_shape)
        n = self._event_shape[0]
        new.loc = self.loc.expand(*batch_shape, n)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(*batch_shape, n, n))
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self):
        return (*self._batch_shape, *self._event_shape, *self._event_shape)

    @cached_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(*self._matrix_shape())

    @cached_property
    def covariance_matrix(self):
        lower = self._unbroadcasted_scale_tril
        return (lower @ lower.transpose(-2, -1)).expand(*self._matrix_shape())

    @cached_property
    def precision_matrix(self):
        lower = self._unbroadcasted_scale_tril
        inverse = solve_lower(lower, E.eye(lower.shape[-1], dtype=lower.dtype))
        return (inverse.transpose(-2, -1) @ inverse).expand(*self._matrix_shape())

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return (
            self._unbroadcasted_scale_tril.pow(2)
            .sum(-1)
            .expand(*self._batch_shape, *self._event_shape)
        )

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        eps = E.randn(*shape, dtype=self.loc.dtype)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        m = batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        half_log_det = diagonal(self._unbroadcasted_scale_tril).log().sum(-1)
        n = self._event_shape[0]
        return -0.5 * (n * math.log(2 * math.pi) + m) - half_log_det

    def entropy(self):
        half_log_det = diagonal(self._unbroadcasted_scale_tril).log().sum(-1)
        n = self._event_shape[0]
        h = 0.5 * n * (1.0 + math.log(2 * math.pi)) + half_log_det
        return h.expand(*self._batch_shape) if self._batch_shape else h


class Independent(Distribution):
    """Reinterprets the rightmost ``reinterpreted_batch_ndims`` batch dimensions of
    ``base_distribution`` as event dimensions."""

    arg_constraints: dict = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims: int, validate_args=None):
        n = int(reinterpreted_batch_ndims)
        shape = base_distribution.batch_shape + base_distribution.event_shape
        if n > len(base_distribution.batch_shape):
            raise ShapeError(
                f"Independent: reinterpreted_batch_ndims={n} exceeds the base distribution's "
                f"batch dimensions {base_distribution.batch_shape}",
                op="Independent",
            )
        event_dim = n + len(base_distribution.event_shape)
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = n
        super().__init__(
            shape[: len(shape) - event_dim], shape[len(shape) - event_dim :], validate_args
        )

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Independent, _instance)
        batch_shape = _shape(batch_shape)
        k = self.reinterpreted_batch_ndims
        base_batch = batch_shape + self._event_shape[:k] if k else batch_shape
        new.base_dist = self.base_dist.expand(base_batch)
        new.reinterpreted_batch_ndims = k
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def has_enumerate_support(self):
        return False if self.reinterpreted_batch_ndims else self.base_dist.has_enumerate_support

    @property
    def support(self):
        base = self.base_dist.support
        if base is None or not self.reinterpreted_batch_ndims:
            return base
        return constraints.independent(base, self.reinterpreted_batch_ndims)

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def __repr__(self) -> str:
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"
