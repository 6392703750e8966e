"""Chi2, HalfCauchy, Pareto, Weibull, InverseGamma, Kumaraswamy and VonMises, with PyTorch's
names, parameters and formulas (NegativeBinomial and Multinomial are in extra_discrete.py,
LowRankMultivariateNormal in low_rank_mvn.py).

Reparameterized samplers (HalfCauchy, Pareto, Weibull, Kumaraswamy) transform ember's
``rand``/``randn`` in ember ops; Chi2 and InverseGamma draw through Gamma's sampler (PyTorch's
draws, with its gradient estimator for ``rsample``) and VonMises runs PyTorch's rejection
sampler on ember's generator."""

from __future__ import annotations

import math

from ..grad_mode import no_grad
from ..ops.extra_random import standard_cauchy, standard_exponential
from ..special import i1
from . import constraints
from ._gamma_rsample import standard_gamma
from ._util import E, as_tensor, broadcast_all, digamma, lgamma
from .continuous import Gamma, _expand_params
from .distribution import Distribution

__all__ = [
    "Chi2",
    "HalfCauchy",
    "InverseGamma",
    "Kumaraswamy",
    "Pareto",
    "VonMises",
    "Weibull",
]

_EULER_GAMMA = 0.57721566490153286060


def _inf_where(cond, x):
    return E.where(cond, x, E.full_like(x, math.inf))


class Chi2(Gamma):
    """Gamma(df / 2, rate 1/2)."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        (df,) = broadcast_all(df)
        super().__init__(0.5 * df, E.full_like(df, 0.5), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Chi2, _instance)
        return super().expand(batch_shape, new)

    @property
    def df(self):
        return self.concentration * 2


class HalfCauchy(Distribution):
    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        (self.scale,) = broadcast_all(scale)
        super().__init__(tuple(self.scale.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, HalfCauchy, batch_shape, _instance, ("scale",))

    @property
    def mean(self):
        return E.full_like(self.scale, math.inf)

    @property
    def mode(self):
        return E.zeros_like(self.scale)

    @property
    def variance(self):
        return E.full_like(self.scale, math.inf)

    def rsample(self, sample_shape=()):
        # PyTorch's: |Cauchy(0, scale)|, a cauchy_() draw times the scale
        eps = standard_cauchy(self._extended_shape(sample_shape), self.scale.dtype)
        return (eps * self.scale).abs()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = as_tensor(value, like=self.scale)
        lp = math.log(2 / math.pi) - self.scale.log() - (value / self.scale).pow(2).log1p()
        return E.where(value >= 0, lp, E.full_like(lp, -math.inf))

    def cdf(self, value):
        return 2 / math.pi * E.atan(value / self.scale)

    def icdf(self, prob):
        return self.scale * E.tan(math.pi / 2 * prob)

    def entropy(self):
        return (4 * math.pi * self.scale).log() - math.log(2)


class Pareto(Distribution):
    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = broadcast_all(scale, alpha)
        super().__init__(tuple(self.scale.shape), validate_args=validate_args)

    has_rsample = True

    @property
    def support(self):
        return constraints.greater_than_eq(self.scale)

    def expand(self, batch_shape, _instance=None):
        return _expand_params(self, Pareto, batch_shape, _instance, ("scale", "alpha"))

    @property
    def mean(self):
        a = self.alpha.clamp(min=1)
        return a * self.scale / (a - 1)

    @property
    def mode(self):
        return self.scale

    @property
    def variance(self):
        a = self.alpha.clamp(min=2)
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    def rsample(self, sample_shape=()):
        # PyTorch's: Exponential(alpha) draws (exponential_() / alpha), exp, times the scale
        e = standard_exponential(self._extended_shape(sample_shape), self.scale.dtype)
        return self.scale * (e / self.alpha).exp()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.alpha.log() + self.alpha * self.scale.log() - (self.alpha + 1) * value.log()

    def cdf(self, value):
        return 1 - (self.scale / value).pow(self.alpha)

    def icdf(self, prob):
        return self.scale * (-(-prob).log1p() / self.alpha).exp()

    def entropy(self):
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())


class Weibull(Distribution):
    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        super().__init__(tuple(self.scale.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = _expand_params(self, Weibull, batch_shape, _instance, ("scale", "concentration"))
        new.concentration_reciprocal = new.concentration.reciprocal()
        return new

    @property
    def mean(self):
        return self.scale * lgamma(1 + self.concentration_reciprocal).exp()

    @property
    def mode(self):
        k = self.concentration
        return self.scale * ((k - 1) / k).pow(self.concentration_reciprocal)

    @property
    def variance(self):
        r = self.concentration_reciprocal
        return self.scale.pow(2) * (lgamma(1 + 2 * r).exp() - (2 * lgamma(1 + r)).exp())

    def rsample(self, sample_shape=()):
        # PyTorch's: Exponential(1) draws to the power 1 / concentration, times the scale
        e = standard_exponential(self._extended_shape(sample_shape), self.scale.dtype) / 1.0
        return self.scale * e.pow(self.concentration_reciprocal)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        k, z = self.concentration, value / self.scale
        return k.log() - self.scale.log() + (k - 1) * z.log() - z.pow(k)

    def cdf(self, value):
        return 1 - (-(value / self.scale).pow(self.concentration)).exp()

    def icdf(self, prob):
        return self.scale * (-(-prob).log1p()).pow(self.concentration_reciprocal)

    def entropy(self):
        r = self.concentration_reciprocal
        return _EULER_GAMMA * (1 - r) + (self.scale * r).log() + 1


class InverseGamma(Distribution):
    """The reciprocal of Gamma(concentration, rate)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(tuple(self.rate.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        names = ("concentration", "rate")
        return _expand_params(self, InverseGamma, batch_shape, _instance, names)

    @property
    def mean(self):
        c = self.concentration
        return _inf_where(c > 1, self.rate / (c - 1))

    @property
    def mode(self):
        return self.rate / (self.concentration + 1)

    @property
    def variance(self):
        c = self.concentration
        return _inf_where(c > 2, self.rate.pow(2) / ((c - 1).pow(2) * (c - 2)))

    def sample(self, sample_shape=()):
        with no_grad():  # (PyTorch's: its rsample's draws)
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        # PyTorch's: a Gamma(concentration, rate) draw raised to the power -1
        shape = self._extended_shape(sample_shape)
        return (standard_gamma(self.concentration, shape) / self.rate.expand(*shape)).pow(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c, r = self.concentration, self.rate
        return c * r.log() - lgamma(c) - (c + 1) * value.log() - r / value

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return E.igammac(self.concentration, self.rate / value)

    def entropy(self):
        c = self.concentration
        return c + self.rate.log() + lgamma(c) - (1 + c) * digamma(c)


def _kumaraswamy_moment(a, b, n: int):
    """``E[X^n] = b * B(1 + n / a, b)``."""
    arg = 1 + n / a
    return (b.log() + lgamma(arg) + lgamma(b) - lgamma(arg + b)).exp()


class Kumaraswamy(Distribution):
    arg_constraints = {
        "concentration1": constraints.positive,
        "concentration0": constraints.positive,
    }
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        super().__init__(tuple(self.concentration1.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        names = ("concentration1", "concentration0")
        return _expand_params(self, Kumaraswamy, batch_shape, _instance, names)

    @property
    def mean(self):
        return _kumaraswamy_moment(self.concentration1, self.concentration0, 1)

    @property
    def variance(self):
        a, b = self.concentration1, self.concentration0
        return _kumaraswamy_moment(a, b, 2) - self.mean.pow(2)

    def rsample(self, sample_shape=()):
        # PyTorch's transforms of a uniform draw: u ** (1 / b), 1 - that, to the power 1 / a
        u = E.rand(*self._extended_shape(sample_shape), dtype=self.concentration1.dtype)
        a, b = self.concentration1, self.concentration0
        return (1 - u.pow(b.reciprocal())).pow(a.reciprocal())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return a.log() + b.log() + (a - 1) * value.log() + (b - 1) * (-value.pow(a)).log1p()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        a, b = self.concentration1, self.concentration0
        return (1 - (b * (-value.pow(a)).log1p()).exp()).clamp(0.0, 1.0)

    def icdf(self, value):
        a, b = self.concentration1, self.concentration0
        return (1 - ((-value).log1p() / b).exp()).pow(a.reciprocal())

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        h0 = digamma(b + 1) + _EULER_GAMMA
        return (1 - b.reciprocal()) + (1 - a.reciprocal()) * h0 - a.log() - b.log()


class VonMises(Distribution):
    """A circular distribution on [-pi, pi): ``exp(k cos(x - loc)) / (2 pi I0(k))``."""

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real

    def __init__(self, loc, concentration, validate_args=None):
        self.loc, self.concentration = broadcast_all(loc, concentration)
        super().__init__(tuple(self.loc.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        names = ("loc", "concentration")
        return _expand_params(self, VonMises, batch_shape, _instance, names)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        k = self.concentration
        return 1 - i1(k) / E.i0(k)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        k = self.concentration
        return k * E.cos(value - self.loc) - math.log(2 * math.pi) - E.i0(k).log()

    def sample(self, sample_shape=()):
        """PyTorch's rejection sampler (Best and Fisher, 1979) in double: three uniform draws
        per element a round, until every element is accepted (eagerly: it reads them)."""
        shape = self._extended_shape(sample_shape)
        with no_grad():
            loc, kappa = self.loc.double(), self.concentration.double()
            tau = 1 + (1 + 4 * kappa**2).sqrt()
            rho = (tau - (2 * tau).sqrt()) / (2 * kappa)
            r = E.where(kappa < 1e-5, 1 / kappa + kappa, (1 + rho**2) / (2 * rho))
            x = E.zeros(shape, dtype=loc.dtype)
            done = E.zeros(shape, dtype=bool)
            while not bool(done.all()):
                u1, u2, u3 = E.rand(3, *shape, dtype=loc.dtype).unbind()
                z = E.cos(math.pi * u1)
                f = (1 + r * z) / (r + z)
                c = kappa * (r - f)
                accept = ((c * (2 - c) - u2) > 0) | ((c / u2).log() + 1 - c >= 0)
                if bool(accept.any()):
                    x = E.where(accept, (u3 - 0.5).sign() * f.acos(), x)
                    done = done | accept
            return ((x + math.pi + loc) % (2 * math.pi) - math.pi).to(self.loc.dtype)
