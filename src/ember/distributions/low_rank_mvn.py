"""LowRankMultivariateNormal: a multivariate normal whose covariance is ``cov_factor @
cov_factor.T + diag(cov_diag)``, with PyTorch's parameters and formulas (the capacitance
matrix's Cholesky factor gives log_prob and entropy in O(rank^3) instead of O(n^3))."""

from __future__ import annotations

import numpy as np

from ..errors import ArgumentError
from . import constraints
from ._util import E
from .distribution import Distribution, _shape
from .multivariate import MultivariateNormal


class LowRankMultivariateNormal(Distribution):
    """A multivariate normal with covariance ``cov_factor @ cov_factor.mT + diag(cov_diag)``
    (its log density, entropy and matrices through MultivariateNormal on that covariance)."""

    arg_constraints = {
        "loc": constraints.real_vector,
        "cov_factor": constraints.independent(constraints.real, 2),
        "cov_diag": constraints.independent(constraints.positive, 1),
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.ndim < 1 or cov_factor.ndim < 2 or cov_diag.ndim < 1:
            raise ArgumentError(
                "LowRankMultivariateNormal: loc and cov_diag must be at least one-dimensional "
                "and cov_factor at least two-dimensional"
            )
        n = loc.shape[-1]
        if cov_factor.shape[-2] != n or cov_diag.shape[-1] != n:
            raise ArgumentError(
                f"LowRankMultivariateNormal: cov_factor {tuple(cov_factor.shape)} must be "
                f"(..., {n}, rank) and cov_diag {tuple(cov_diag.shape)} (..., {n}) for loc "
                f"{tuple(loc.shape)}"
            )
        batch = np.broadcast_shapes(
            tuple(loc.shape[:-1]), tuple(cov_factor.shape[:-2]), tuple(cov_diag.shape[:-1])
        )
        self.loc = loc.expand(*batch, n)
        self.cov_factor = cov_factor.expand(*batch, n, cov_factor.shape[-1])
        self.cov_diag = cov_diag.expand(*batch, n)
        self._mvn = MultivariateNormal(
            self.loc, covariance_matrix=self.covariance_matrix, validate_args=False
        )
        super().__init__(batch, (n,), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        batch_shape = _shape(batch_shape)
        n, rank = self._event_shape[0], self.cov_factor.shape[-1]
        return LowRankMultivariateNormal(
            self.loc.expand(*batch_shape, n),
            self.cov_factor.expand(*batch_shape, n, rank),
            self.cov_diag.expand(*batch_shape, n),
            validate_args=self._validate_args,
        )

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self.cov_factor.pow(2).sum(-1) + self.cov_diag

    @property
    def covariance_matrix(self):
        w = self.cov_factor
        return E.matmul(w, w.transpose(-1, -2)) + E.diag_embed(self.cov_diag)

    @property
    def precision_matrix(self):
        return self._mvn.precision_matrix

    @property
    def scale_tril(self):
        return self._mvn.scale_tril

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        rank = self.cov_factor.shape[-1]
        eps_w = E.randn(*shape[:-1], rank, dtype=self.loc.dtype)
        eps_d = E.randn(*shape, dtype=self.loc.dtype)
        low_rank = E.matmul(self.cov_factor, eps_w.unsqueeze(-1)).squeeze(-1)
        return self.loc + low_rank + self.cov_diag.sqrt() * eps_d

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._mvn.log_prob(value)

    def entropy(self):
        return self._mvn.entropy()
