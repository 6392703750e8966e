"""Distributions over matrices, with PyTorch's names, parameters and formulas:
``Wishart`` (positive-definite matrices; ``covariance_matrix``, ``precision_matrix`` or
``scale_tril``) and ``LKJCholesky`` (Cholesky factors of correlation matrices).

``log_prob``, ``entropy`` and the moments are ember ops (differentiable, capturable). Wishart
samples by PyTorch's Bartlett decomposition over Chi2's reparameterized draws (``rsample``,
differentiable in ``df`` and the scale), with PyTorch's retries, so a seed gives PyTorch's
matrices; LKJCholesky by PyTorch's onion method over Beta draws.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from ..errors import ArgumentError, user_stacklevel
from ..ops.decompositions import cholesky, slogdet, solve_triangular
from . import constraints
from ._util import E, broadcast_all, digamma, lgamma
from .continuous import Beta
from .distribution import Distribution, _shape
from .extra import Chi2
from .transforms_extra import vec_to_tril_matrix

__all__ = ["LKJCholesky", "Wishart"]

_LOG_2 = math.log(2.0)


def _mvlgamma(x, p: int):
    """``log Gamma_p(x)``, the multivariate log-gamma (``torch.mvlgamma``), in ember ops."""
    offsets = E.tensor(np.arange(p) / 2.0, dtype=x.dtype)
    return lgamma(E.unsqueeze(x, -1) - offsets).sum(-1) + p * (p - 1) / 4 * math.log(math.pi)


def _mvdigamma(x, p: int):
    offsets = E.tensor(np.arange(p) / 2.0, dtype=x.dtype)
    return digamma(E.unsqueeze(x, -1) - offsets).sum(-1)


def _diag(m):
    return E.diagonal(m, 0, -2, -1)


class Wishart(Distribution):
    """The Wishart distribution of ``df`` degrees of freedom and scale matrix given by exactly
    one of ``covariance_matrix``, ``precision_matrix`` or ``scale_tril``."""

    support = constraints.positive_definite

    def __init__(
        self, df, covariance_matrix=None, precision_matrix=None, scale_tril=None,
        validate_args=None,
    ):  # fmt: skip
        given = [p for p in (covariance_matrix, precision_matrix, scale_tril) if p is not None]
        if len(given) != 1:
            raise AssertionError(
                "Exactly one of covariance_matrix or precision_matrix or scale_tril may be "
                "specified."
            )
        param = given[0]
        if param.ndim < 2:
            raise ArgumentError(
                "scale_tril must be at least two-dimensional, with optional leading batch "
                "dimensions"
            )
        if isinstance(df, (int, float)):
            batch_shape = tuple(param.shape[:-2])
            self.df = E.tensor(float(df), dtype=param.dtype)
        else:
            batch_shape = tuple(np.broadcast_shapes(tuple(param.shape[:-2]), tuple(df.shape)))
            self.df = df.expand(*batch_shape)
        event_shape = tuple(param.shape[-2:])
        p = event_shape[-1]
        if bool((self.df <= p - 1).any()):
            raise ArgumentError(f"Value of df={df} expected to be greater than ndim - 1 = {p - 1}.")
        full = batch_shape + event_shape
        if scale_tril is not None:
            self.scale_tril = param.expand(*full)
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self.covariance_matrix = param.expand(*full)
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            self.precision_matrix = param.expand(*full)
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        if bool((self.df < p).any()):
            warnings.warn(
                "Low df values detected. Singular samples are highly likely to occur for "
                "ndim - 1 < df < ndim.",
                stacklevel=user_stacklevel(),
            )
        super().__init__(batch_shape, event_shape, validate_args=validate_args)
        self._chi2_df = E.unsqueeze(self.df, -1) - E.arange(p, dtype=self.df.dtype)

    @property
    def arg_constraints(self):
        return {
            "covariance_matrix": constraints.positive_definite,
            "precision_matrix": constraints.positive_definite,
            "scale_tril": constraints.lower_cholesky,
            "df": constraints.greater_than(self._event_shape[-1] - 1),
        }

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Wishart, _instance)
        batch_shape = _shape(batch_shape)
        full = batch_shape + tuple(self._event_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril.expand(*full)
        new.df = self.df.expand(*batch_shape)
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                setattr(new, name, self.__dict__[name].expand(*full))
        new._chi2_df = E.unsqueeze(new.df, -1) - E.arange(self._event_shape[-1], dtype=new.df.dtype)
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def __getattr__(self, name):
        # the other two parametrizations, derived lazily (PyTorch's lazy_property)
        full = None
        if name in ("scale_tril", "covariance_matrix", "precision_matrix"):
            tril = self.__dict__["_unbroadcasted_scale_tril"]
            full = tuple(self._batch_shape) + tuple(self._event_shape)
            if name == "scale_tril":
                value = tril.expand(*full)
            elif name == "covariance_matrix":
                value = (tril @ tril.transpose(-2, -1)).expand(*full)
            else:
                eye = E.eye(self._event_shape[-1], dtype=tril.dtype)
                value = E.cholesky_solve(eye, tril).expand(*full)
            setattr(self, name, value)
            return value
        raise AttributeError(name)

    @property
    def mean(self):
        return self.df.reshape(tuple(self._batch_shape) + (1, 1)) * self.covariance_matrix

    @property
    def mode(self):
        factor = self.df - self.covariance_matrix.shape[-1] - 1
        factor = E.where(factor <= 0, E.full_like(factor, math.nan), factor)
        return factor.reshape(tuple(self._batch_shape) + (1, 1)) * self.covariance_matrix

    @property
    def variance(self):
        v = self.covariance_matrix
        d = _diag(v)
        outer = E.unsqueeze(d, -1) * E.unsqueeze(d, -2)
        return self.df.reshape(tuple(self._batch_shape) + (1, 1)) * (v.pow(2) + outer)

    has_rsample = True

    def _bartlett(self, sample_shape: tuple):
        """PyTorch's Bartlett draw: Chi2 roots on the diagonal (clamped above eps), normals
        below it, the scale's Cholesky factor times that, times its transpose."""
        p = self._event_shape[-1]
        chi2 = Chi2(self._chi2_df, validate_args=False).rsample(sample_shape)
        eps = float(np.finfo(chi2.dtype.np).eps)
        diag = chi2.sqrt().clamp(min=eps)
        noise = E.unsqueeze(diag, -1) * E.eye(p, dtype=diag.dtype)
        count = p * (p - 1) // 2
        normal = E.randn(*(sample_shape + tuple(self._batch_shape) + (count,)), dtype=diag.dtype)
        noise = noise + vec_to_tril_matrix(normal, diag=-1)
        chol = self._unbroadcasted_scale_tril @ noise
        return chol @ chol.transpose(-2, -1)

    def _redrawn(self, mask) -> tuple:
        """Whether each sample (over the sample dimensions) is flagged by ``mask`` of the
        samples' checks, reduced over the batch dimensions as PyTorch's amax."""
        if self._batch_shape:
            mask = mask.reshape(tuple(mask.shape[: mask.ndim - len(self._batch_shape)]) + (-1,))
            mask = mask.any(-1)
        return mask

    def rsample(self, sample_shape=(), max_try_correction=None):
        """PyTorch's rsample: a Bartlett draw, then its retries. PyTorch 2.13 flags the draws
        its support check *passes* for a retry (its test lacks a negation), so every sample
        is drawn again and the second draw kept, then retried while singular; ember draws as
        it does, so a seed gives PyTorch's samples."""
        sample_shape = _shape(sample_shape)
        tries = 10 if max_try_correction is None else max_try_correction
        sample = self._bartlett(sample_shape)
        flagged = self._redrawn(self.support.check(sample)).reshape(-1)
        if not bool(flagged.any()):
            return sample
        warnings.warn("Singular sample detected.", stacklevel=user_stacklevel())
        flat = sample.reshape((-1,) + tuple(sample.shape[len(sample_shape) :]))
        for _ in range(tries):
            index = E.nonzero(flagged).reshape(-1)
            new = self._bartlett((int(index.shape[0]),))
            flat = E.index_copy(flat, 0, index, new)
            still = self._redrawn(~self.support.check(new)).reshape(-1)
            flagged = E.index_put(E.zeros_like(flagged), (index,), still)
            if not bool(flagged.any()):
                break
        return flat.reshape(tuple(sample.shape))

    def sample(self, sample_shape=()):
        from ..autograd import no_grad

        with no_grad():
            return self.rsample(sample_shape)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        nu, p = self.df, self._event_shape[-1]
        tril = self._unbroadcasted_scale_tril
        return (
            -nu * (p * _LOG_2 / 2 + _diag(tril).log().sum(-1))
            - _mvlgamma(nu / 2, p)
            + (nu - p - 1) / 2 * slogdet(value).logabsdet
            - _diag(E.cholesky_solve(value, tril)).sum(-1) / 2
        )

    def entropy(self):
        nu, p = self.df, self._event_shape[-1]
        tril = self._unbroadcasted_scale_tril
        return (
            (p + 1) * (p * _LOG_2 / 2 + _diag(tril).log().sum(-1))
            + _mvlgamma(nu / 2, p)
            - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p)
            + nu * p / 2
        )


def _precision_to_scale_tril(precision):
    """PyTorch's: the lower Cholesky factor of the inverse of ``precision``, through the
    Cholesky factor of the flipped matrix (no explicit inverse)."""
    flipped = precision.flip(-2, -1)
    lf = cholesky(flipped)
    lf_inv = lf.flip(-2, -1).transpose(-2, -1)
    eye = E.eye(precision.shape[-1], dtype=precision.dtype)
    return solve_triangular(lf_inv, eye, upper=False)


class LKJCholesky(Distribution):
    """The LKJ distribution over Cholesky factors of ``dim`` x ``dim`` correlation matrices,
    with ``concentration`` (1: uniform over correlation matrices)."""

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(self, dim: int, concentration=1.0, validate_args=None):
        if dim < 2:
            raise ArgumentError(
                f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}."
            )
        self.dim = dim
        (self.concentration,) = broadcast_all(concentration)
        marginal = self.concentration + 0.5 * (dim - 2)
        offset = np.concatenate([[0.0], np.arange(dim - 1, dtype=float)])
        offset_t = E.tensor(offset, dtype=self.concentration.dtype)
        self._beta = Beta(offset_t + 0.5, E.unsqueeze(marginal, -1) - 0.5 * offset_t)
        super().__init__(tuple(self.concentration.shape), (dim, dim), validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LKJCholesky, _instance)
        batch_shape = _shape(batch_shape)
        new.dim = self.dim
        new.concentration = self.concentration.expand(*batch_shape)
        new._beta = self._beta.expand(batch_shape + (self.dim,))
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=()):
        y = E.unsqueeze(self._beta.sample(sample_shape), -1)
        u = E.randn(*self._extended_shape(sample_shape), dtype=y.dtype).tril(-1)
        u = u / u.norm(dim=-1, keepdim=True)
        first_row = E.reshape(E.arange(self.dim) == 0, (self.dim, 1))
        u = E.where(first_row, E.zeros((), dtype=u.dtype), u)  # (its NaN row)
        w = y.sqrt() * u
        tiny = float(np.finfo(w.dtype.np).tiny)
        diag = (1 - (w * w).sum(-1)).clamp(min=tiny).sqrt()
        return (w + E.unsqueeze(diag, -1) * E.eye(self.dim, dtype=w.dtype)).detach()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diag = _diag(value)[..., 1:]
        order = E.arange(2, self.dim + 1, dtype=self.concentration.dtype)
        order = 2 * E.unsqueeze(self.concentration - 1, -1) + self.dim - order
        unnormalized = (order * diag.log()).sum(-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = lgamma(alpha) * dm1
        numerator = _mvlgamma(alpha - 0.5, dm1)
        pi_constant = 0.5 * dm1 * math.log(math.pi)
        return unnormalized - (pi_constant + numerator - denominator)
