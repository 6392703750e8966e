"""Univariate continuous distributions: Normal, Uniform, Laplace, Exponential, Gamma, Beta,
StudentT.

Reparameterized samples (``rsample``) of Normal, Uniform, Laplace and Exponential are ember's
random ops (``randn``, ``rand``) transformed in ember ops, so they follow ``ember.manual_seed``
and record under capture. Gamma, Beta and StudentT draw PyTorch's gamma values on ember's
generator (eagerly) and reparameterize them implicitly as PyTorch does (`_gamma_rsample.py`,
`_dirichlet_rsample.py`).
"""

from __future__ import annotations

import math

from ..grad_mode import no_grad
from ..ops.extra_random import standard_exponential
from . import constraints
from ._dirichlet_rsample import dirichlet_rsample
from ._gamma_rsample import dirichlet_draws, standard_gamma
from ._util import (
    ConstraintError,
    E,
    broadcast_all,
    digamma,
    erfinv,
    finfo_eps,
    is_eager,
    lgamma,
    xlogy,
)
from .distribution import Distribution, _shape
from .exp_family import ExponentialFamily

__all__ = ["Normal", "Uniform", "Laplace", "Exponential", "Gamma", "Beta", "StudentT"]

_LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))


def _expand_params(self, cls, batch_shape, _instance, names):
    new = self._get_checked_instance(cls, _instance)
    batch_shape = _shape(batch_shape)
    for name in names:
        setattr(new, name, getattr(self, name).expand(*batch_shape))
    Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
    new._validate_args = self._validate_args
    return new


class Normal(ExponentialFamily):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    @property
    def _natural_params(self):
        return (self.loc / self.scale**2, -0.5 / self.scale**2)

    def _log_normalizer(self, x, y):
        return -0.25 * x**2 / y + 0.5 * E.log(-math.pi / y)

    _mean_carrier_measure = 0

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(tuple(self.loc.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Normal, batch_shape, _instance, ("loc", "scale"))

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.scale.pow(2)

    def rsample(self, sample_shape=()):
        eps = E.randn(*self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale**2
        return -((value - self.loc) ** 2) / (2 * var) - self.scale.log() - _LOG_SQRT_2PI

    def cdf(self, value):
        return 0.5 * (1 + E.erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value):
        return self.loc + self.scale * erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()


class Uniform(Distribution):
    arg_constraints = {"low": constraints.real, "high": constraints.real}
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(tuple(self.low.shape), validate_args=validate_args)
        if (
            self._validate_args
            and is_eager(self.low, self.high)
            and not bool((self.low < self.high).all())
        ):
            raise ConstraintError(
                f"expected parameter low of Uniform of shape {tuple(self.low.shape)} to be less "
                "than high everywhere, but some values are not",
                op="Uniform",
            )

    @property
    def support(self):
        return constraints.interval(self.low, self.high, half_open=True)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Uniform, batch_shape, _instance, ("low", "high"))

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return self.high * math.nan

    @property
    def stddev(self):
        return (self.high - self.low) / 12**0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=()):
        u = E.rand(*self._extended_shape(sample_shape), dtype=self.low.dtype)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        inside = ((self.low <= value) & (value < self.high)).to(self.low.dtype)
        return inside.log() - (self.high - self.low).log()

    def cdf(self, value):
        return ((value - self.low) / (self.high - self.low)).clamp(0, 1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return (self.high - self.low).log()


class Laplace(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(tuple(self.loc.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Laplace, batch_shape, _instance, ("loc", "scale"))

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return 2**0.5 * self.scale

    def rsample(self, sample_shape=()):
        eps = finfo_eps(self.loc.dtype)
        u = E.uniform(eps - 1, 1.0, self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        d = value - self.loc
        return 0.5 - 0.5 * d.sign() * (-d.abs() / self.scale).expm1()

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self):
        return 1 + (2 * self.scale).log()


class Exponential(ExponentialFamily):
    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    @property
    def _natural_params(self):
        return (-self.rate,)

    def _log_normalizer(self, x):
        return -E.log(-x)

    _mean_carrier_measure = 0

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(tuple(self.rate.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Exponential, batch_shape, _instance, ("rate",))

    @property
    def mean(self):
        return self.rate.reciprocal()

    @property
    def mode(self):
        return E.zeros_like(self.rate)

    @property
    def stddev(self):
        return self.rate.reciprocal()

    @property
    def variance(self):
        return self.rate.pow(-2)

    def rsample(self, sample_shape=()):
        # PyTorch's `rate.new(shape).exponential_() / rate`, the same draws
        return standard_exponential(self._extended_shape(sample_shape), self.rate.dtype) / self.rate

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        return 1 - (-self.rate * value).exp()

    def icdf(self, value):
        return -(-value).log1p() / self.rate

    def entropy(self):
        return 1.0 - self.rate.log()


class Gamma(ExponentialFamily):
    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    @property
    def _natural_params(self):
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x, y):
        return lgamma(x + 1) + (x + 1) * E.log(-1 / y)

    _mean_carrier_measure = 0

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(tuple(self.rate.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Gamma, batch_shape, _instance, ("concentration", "rate"))

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def sample(self, sample_shape=()):
        with no_grad():  # (PyTorch's: its rsample's draws)
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return standard_gamma(self.concentration, shape) / self.rate.expand(*shape)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c, r = self.concentration, self.rate
        # xlogy, as PyTorch: concentration 1 (an exponential) has density r at 0, not NaN
        return xlogy(c, r) + xlogy(c - 1, value) - r * value - lgamma(c)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return E.igamma(self.concentration, self.rate * value)

    def entropy(self):
        c = self.concentration
        return c - self.rate.log() + lgamma(c) + (1.0 - c) * digamma(c)


class Beta(ExponentialFamily):
    arg_constraints = {
        "concentration1": constraints.positive,
        "concentration0": constraints.positive,
    }
    support = constraints.unit_interval
    has_rsample = True

    @property
    def _natural_params(self):
        return (self.concentration1, self.concentration0)

    def _log_normalizer(self, x, y):
        return lgamma(x) + lgamma(y) - lgamma(x + y)

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        super().__init__(tuple(self.concentration1.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(
            self, Beta, batch_shape, _instance, ("concentration1", "concentration0")
        )

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        # PyTorch's (its Dirichlet's): modes below 1 clamp to 0; both below 1 gives 1
        a = (self.concentration1 - 1).clamp(min=0)
        b = (self.concentration0 - 1).clamp(min=0)
        both_below = (self.concentration1 < 1) & (self.concentration0 < 1)
        return E.where(both_below, E.ones_like(a), a / (a + b))

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def sample(self, sample_shape=()):
        # PyTorch's: a Dirichlet draw of (concentration1, concentration0), its first part
        shape = self._extended_shape(sample_shape)
        pairs = E.stack([self.concentration1, self.concentration0], -1)
        return E.tensor(dirichlet_draws(pairs, (*shape, 2))[..., 0])

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        pairs = E.stack([self.concentration1, self.concentration0], -1)
        return dirichlet_rsample(pairs, (*shape, 2))[..., 0]  # (PyTorch's: its first part)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        # xlogy, as PyTorch's (its Dirichlet's): Beta(1, b) has density b at 0, not NaN
        return (
            xlogy(a - 1, value) + xlogy(b - 1, 1 - value) - (lgamma(a) + lgamma(b) - lgamma(a + b))
        )

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        total = a + b
        log_beta = lgamma(a) + lgamma(b) - lgamma(total)
        return log_beta - (a - 1) * digamma(a) - (b - 1) * digamma(b) + (total - 2) * digamma(total)


class StudentT(Distribution):
    """Student's t with ``df`` degrees of freedom: PyTorch's draws (a normal over the square
    root of a chi-squared from Gamma's sampler); ``rsample`` goes through Gamma's implicit
    reparameterization (distributions/_gamma_rsample.py), as PyTorch's."""

    arg_constraints = {
        "df": constraints.positive,
        "loc": constraints.real,
        "scale": constraints.positive,
    }
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        super().__init__(tuple(self.df.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, StudentT, batch_shape, _instance, ("df", "loc", "scale"))

    @property
    def mean(self):
        nan = E.full_like(self.loc, math.nan)
        return E.where(self.df > 1, self.loc, nan)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        finite = self.scale.pow(2) * df / (df - 2).clamp(min=finfo_eps(df.dtype))
        result = E.where(df > 2, finite, E.full_like(finite, math.inf))
        return E.where(df <= 1, E.full_like(finite, math.nan), result)

    def sample(self, sample_shape=()):
        with no_grad():  # (PyTorch's: its rsample's draws)
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        # PyTorch's: a standard normal over the square root of a Chi2(df) / df draw, the
        # normal drawn first
        shape = self._extended_shape(sample_shape)
        z = E.randn(*shape, dtype=self.df.dtype)
        chi2 = standard_gamma(0.5 * self.df, shape) / 0.5
        return self.loc + self.scale * (z * (chi2 / self.df).rsqrt())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (value - self.loc) / self.scale
        z = (
            self.scale.log()
            + 0.5 * self.df.log()
            + 0.5 * math.log(math.pi)
            + lgamma(0.5 * self.df)
            - lgamma(0.5 * (self.df + 1.0))
        )
        return -0.5 * (self.df + 1.0) * (y.pow(2) / self.df).log1p() - z

    def entropy(self):
        half = 0.5 * self.df
        half_plus = 0.5 * (self.df + 1)
        lbeta = lgamma(half) + math.lgamma(0.5) - lgamma(half_plus)
        return (
            self.scale.log()
            + half_plus * (digamma(half_plus) - digamma(half))
            + 0.5 * self.df.log()
            + lbeta
        )
