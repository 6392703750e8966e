"""ContinuousBernoulli, FisherSnedecor, GeneralizedPareto, LogisticNormal and
OneHotCategoricalStraightThrough, with PyTorch's names, parameters and formulas (in ember
ops: they differentiate and record under capture).

ContinuousBernoulli and GeneralizedPareto sample by their inverse CDF of ember's ``rand``
(reparameterized, as PyTorch's). FisherSnedecor draws the ratio of two Gamma draws, Gamma's
NumPy sampler, eagerly and without ``rsample`` (ember's Gamma has none); a seed gives other
draws than PyTorch's, from the same distribution.
"""

from __future__ import annotations

import math

from ..errors import ArgumentError
from ..functional.loss_binary import binary_cross_entropy_with_logits
from . import constraints
from ._util import (
    E,
    as_tensor,
    broadcast_all,
    clamp_probs,
    lgamma,
    logits_to_probs,
    probs_to_logits,
)
from .continuous import Gamma, Normal, _expand_params
from .discrete import OneHotCategorical
from .distribution import Distribution, _shape
from .transforms import TransformedDistribution
from .transforms_extra import StickBreakingTransform

__all__ = [
    "ContinuousBernoulli",
    "FisherSnedecor",
    "GeneralizedPareto",
    "LogisticNormal",
    "OneHotCategoricalStraightThrough",
]


def _tiny(dtype) -> float:
    import numpy as np

    return float(np.finfo(dtype.np).tiny)


class ContinuousBernoulli(Distribution):
    """The continuous Bernoulli on [0, 1] (Loaiza-Ganem and Cunningham), parameterized by
    ``probs`` or ``logits``; near ``probs = 0.5`` (within ``lims``) its normalizer and moments
    are Taylor expansions, as PyTorch's."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        if (probs is None) == (logits is None):
            raise ArgumentError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (p,) = broadcast_all(probs)
            if validate_args is not None and not bool(self.arg_constraints["probs"].check(p).all()):
                raise ArgumentError("The parameter probs has invalid values")
            self.probs = clamp_probs(p)
            self._param = self.probs
        else:
            (self.logits,) = broadcast_all(logits)
            self._param = self.logits
        self._lims = lims
        super().__init__(tuple(self._param.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ContinuousBernoulli, _instance)
        new._lims = self._lims
        batch_shape = _shape(batch_shape)
        if "probs" in self.__dict__:
            new.probs = self.probs.expand(*batch_shape)
            new._param = new.probs
        if "logits" in self.__dict__:
            new.logits = self.logits.expand(*batch_shape)
            new._param = new.logits
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def __getattr__(self, name):
        # probs / logits derived from the other, lazily (PyTorch's lazy_property)
        if name == "probs" and "logits" in self.__dict__:
            self.probs = clamp_probs(logits_to_probs(self.logits, is_binary=True))
            return self.probs
        if name == "logits" and "probs" in self.__dict__:
            self.logits = probs_to_logits(self.probs, is_binary=True)
            return self.logits
        raise AttributeError(name)

    @property
    def param_shape(self):
        return tuple(self._param.shape)

    def _outside_unstable_region(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self):
        return E.where(
            self._outside_unstable_region(), self.probs, E.full_like(self.probs, self._lims[0])
        )

    def _cont_bern_log_norm(self):
        cut = self._cut_probs()
        below = E.where(cut <= 0.5, cut, E.zeros_like(cut))
        above = E.where(cut >= 0.5, cut, E.ones_like(cut))
        log_norm = (((-cut).log1p() - cut.log()).abs()).log() - E.where(
            cut <= 0.5, (-2.0 * below).log1p(), (2.0 * above - 1.0).log()
        )
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return E.where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self):
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / ((-cut).log1p() - cut.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return E.where(self._outside_unstable_region(), mus, taylor)

    @property
    def stddev(self):
        return self.variance.sqrt()

    @property
    def variance(self):
        cut = self._cut_probs()
        var = cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2) + 1.0 / ((-cut).log1p() - cut.log()).pow(
            2
        )
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return E.where(self._outside_unstable_region(), var, taylor)

    def sample(self, sample_shape=()):
        return self.rsample(sample_shape).detach()

    def rsample(self, sample_shape=()):
        u = E.rand(*self._extended_shape(sample_shape), dtype=self.probs.dtype)
        return self.icdf(u)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, as_tensor(value, like=self.logits))
        bce = binary_cross_entropy_with_logits(logits, value, reduction="none")
        return -bce + self._cont_bern_log_norm()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = as_tensor(value, like=self.probs)
        cut = self._cut_probs()
        cdfs = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = E.where(self._outside_unstable_region(), cdfs, value)
        return E.where(
            value <= 0.0,
            E.zeros_like(value),
            E.where(value >= 1.0, E.ones_like(value), unbounded),
        )

    def icdf(self, value):
        cut = self._cut_probs()
        inverse = ((-cut + value * (2.0 * cut - 1.0)).log1p() - (-cut).log1p()) / (
            cut.log() - (-cut).log1p()
        )
        return E.where(self._outside_unstable_region(), inverse, value)

    def entropy(self):
        log_probs0 = (-self.probs).log1p()
        log_probs1 = self.probs.log()
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0


class FisherSnedecor(Distribution):
    """The F distribution with ``df1`` and ``df2`` degrees of freedom."""

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        self.df1, self.df2 = broadcast_all(df1, df2)
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)
        super().__init__(tuple(self.df1.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = _expand_params(self, FisherSnedecor, batch_shape, _instance, ("df1", "df2"))
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        return new

    @property
    def mean(self):
        df2 = self.df2
        return E.where(df2 <= 2, E.full_like(df2, math.nan), df2 / (df2 - 2))

    @property
    def mode(self):
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return E.where(self.df1 <= 2, E.full_like(mode, math.nan), mode)

    @property
    def variance(self):
        df1, df2 = self.df1, self.df2
        var = 2 * df2.pow(2) * (df1 + df2 - 2) / (df1 * (df2 - 2).pow(2) * (df2 - 4))
        return E.where(df2 <= 4, E.full_like(var, math.nan), var)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x1 = self._gamma1.sample(sample_shape).reshape(shape)
        x2 = self._gamma2.sample(sample_shape).reshape(shape)
        tiny = _tiny(x2.dtype)
        return (x1 / x2.clamp(min=tiny)).clamp(min=tiny)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        x1 = self._gamma1.rsample(sample_shape).reshape(shape)
        x2 = self._gamma2.rsample(sample_shape).reshape(shape)
        tiny = _tiny(x2.dtype)
        return (x1 / x2.clamp(min=tiny)).clamp(min=tiny)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = as_tensor(value, like=self.df1)
        ct1, ct2 = self.df1 * 0.5, self.df2 * 0.5
        ct3 = self.df1 / self.df2
        t1 = lgamma(ct1 + ct2) - lgamma(ct1) - lgamma(ct2)
        t2 = ct1 * ct3.log() + (ct1 - 1) * value.log()
        t3 = (ct1 + ct2) * (ct3 * value).log1p()
        return t1 + t2 - t3


class GeneralizedPareto(Distribution):
    """The generalized Pareto distribution (``loc``, ``scale``, ``concentration``): the
    exponential at concentration 0, bounded above for a negative one."""

    arg_constraints = {
        "loc": constraints.real,
        "scale": constraints.positive,
        "concentration": constraints.real,
    }
    has_rsample = True

    def __init__(self, loc, scale, concentration, validate_args=None):
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        super().__init__(tuple(self.loc.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        names = ("loc", "scale", "concentration")
        return _expand_params(self, GeneralizedPareto, batch_shape, _instance, names)

    def _safe(self):
        eq_zero = E.isclose(self.concentration, E.zeros_like(self.concentration))
        return eq_zero, E.where(eq_zero, E.ones_like(self.concentration), self.concentration)

    def rsample(self, sample_shape=()):
        u = E.rand(*self._extended_shape(sample_shape), dtype=self.loc.dtype)
        return self.icdf(u)

    def sample(self, sample_shape=()):
        return self.rsample(sample_shape).detach()

    def _z(self, x):
        return (as_tensor(x, like=self.loc) - self.loc) / self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, conc = self._safe()
        y = 1 / conc + E.ones_like(z)
        nonzero = E.where(y == 0, y, y * (conc * z).log1p())
        return -self.scale.log() - E.where(eq_zero, z, nonzero)

    def log_survival_function(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, conc = self._safe()
        return E.where(eq_zero, -z, -(conc * z).log1p() / conc)

    def log_cdf(self, value):
        return (-self.log_survival_function(value).exp()).log1p()

    def cdf(self, value):
        return self.log_cdf(value).exp()

    def icdf(self, value):
        eq_zero, conc = self._safe()
        logu = (-as_tensor(value, like=self.loc)).log1p()
        nonzero = self.loc + self.scale / conc * (-conc * logu).expm1()
        return E.where(eq_zero, self.loc - self.scale * logu, nonzero)

    @property
    def mean(self):
        valid = self.concentration < 1
        conc = E.where(valid, self.concentration, E.full_like(self.concentration, 0.5))
        return E.where(valid, self.loc + self.scale / (1 - conc), E.full_like(conc, math.nan))

    @property
    def variance(self):
        valid = self.concentration < 0.5
        conc = E.where(valid, self.concentration, E.full_like(self.concentration, 0.25))
        var = self.scale.pow(2) / ((1 - conc).pow(2) * (1 - 2 * conc))
        return E.where(valid, var, E.full_like(var, math.nan))

    @property
    def mode(self):
        return self.loc

    def entropy(self):
        ans = self.scale.log() + self.concentration + 1
        return ans.expand(*self._batch_shape)

    @property
    def support(self):
        lower = self.loc
        upper = E.where(
            self.concentration < 0,
            lower - self.scale / self.concentration,
            E.full_like(lower, math.inf),
        )
        return constraints.interval(lower, upper)


class LogisticNormal(TransformedDistribution):
    """A Normal on the reals^(K-1) pushed onto the K-simplex by `StickBreakingTransform`."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base = Normal(loc, scale, validate_args=validate_args)
        if not base.batch_shape:
            base = base.expand([1])
        super().__init__(base, StickBreakingTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogisticNormal, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def loc(self):
        return self.base_dist.loc

    @property
    def scale(self):
        return self.base_dist.scale


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """OneHotCategorical whose ``rsample`` is the one-hot draw with the straight-through
    gradient of the probabilities (``sample + probs - probs.detach()``)."""

    has_rsample = True

    def rsample(self, sample_shape=()):
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())
