"""Gumbel, HalfNormal, Geometric and the relaxed (Concrete / Gumbel-softmax) distributions:
RelaxedBernoulli, RelaxedOneHotCategorical and their logit-space bases, with PyTorch's names and
formulas. Every sampler is ember's ``rand`` transformed in ember ops; the relaxed ones and
Gumbel and HalfNormal are reparameterized (``rsample``)."""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np

from ..grad_mode import no_grad
from . import constraints
from ._util import (
    ConstraintError,
    E,
    broadcast_all,
    clamp_probs,
    finfo_eps,
    logits_to_probs,
    probs_to_logits,
)
from .continuous import Normal
from .discrete import Categorical, _softplus
from .distribution import Distribution, _shape
from .transforms import ExpTransform, SigmoidTransform, TransformedDistribution

__all__ = [
    "Gumbel",
    "HalfNormal",
    "Geometric",
    "LogitRelaxedBernoulli",
    "RelaxedBernoulli",
    "ExpRelaxedCategorical",
    "RelaxedOneHotCategorical",
]

_EULER_GAMMA = 0.57721566490153286060


def _tiny(dtype) -> float:
    return float(np.finfo(dtype.np).tiny)


def _expand(self, cls, batch_shape, _instance, names, event=()):
    new = self._get_checked_instance(cls, _instance)
    batch_shape = _shape(batch_shape)
    for name in names:
        value = getattr(self, name)
        setattr(new, name, value.expand(*batch_shape, *event))
    Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
    new._validate_args = self._validate_args
    return new


class Gumbel(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(tuple(self.loc.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        return _expand(self, Gumbel, batch_shape, _instance, ("loc", "scale"))

    @property
    def mean(self):
        return self.loc + self.scale * _EULER_GAMMA

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def rsample(self, sample_shape=()):
        dtype = self.loc.dtype
        u = E.uniform(
            _tiny(dtype), 1 - finfo_eps(dtype), self._extended_shape(sample_shape), dtype=dtype
        )
        return self.loc - self.scale * (-u.log()).log()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    def cdf(self, value):
        return (-(-(value - self.loc) / self.scale).exp()).exp()

    def icdf(self, value):
        return self.loc - self.scale * (-value.log()).log()

    def entropy(self):
        return self.scale.log() + (1 + _EULER_GAMMA)


class HalfNormal(Distribution):
    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        (self.scale,) = broadcast_all(scale)
        self._normal = Normal(E.zeros_like(self.scale), self.scale, validate_args=False)
        super().__init__(tuple(self.scale.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = _expand(self, HalfNormal, batch_shape, _instance, ("scale",))
        new._normal = self._normal.expand(batch_shape)
        return new

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def mode(self):
        return E.zeros_like(self.scale)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)

    def rsample(self, sample_shape=()):
        return self._normal.rsample(sample_shape).abs()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self._normal.log_prob(value) + math.log(2)
        return E.where(value >= 0, log_prob, E.full_like(log_prob, -np.inf))

    def cdf(self, value):
        return 2 * self._normal.cdf(value) - 1

    def icdf(self, prob):
        return self._normal.icdf((prob + 1) / 2)

    def entropy(self):
        return self._normal.entropy() - math.log(2)


class Geometric(Distribution):
    """The number of failures before the first success."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ConstraintError("Geometric: pass exactly one of probs and logits", op="Geometric")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            self._param = self.probs
        else:
            (self.logits,) = broadcast_all(logits)
            self._param = self.logits
        super().__init__(tuple(self._param.shape), validate_args=validate_args)

    @cached_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @cached_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    def expand(self, batch_shape, _instance=None):
        name = "probs" if "probs" in self.__dict__ else "logits"
        new = _expand(self, Geometric, batch_shape, _instance, (name,))
        new._param = new.__dict__[name]
        return new

    @property
    def mean(self):
        return self.probs.reciprocal() - 1

    @property
    def mode(self):
        return E.zeros_like(self.probs)

    @property
    def variance(self):
        return (self.probs.reciprocal() - 1) / self.probs

    def sample(self, sample_shape=()):
        # (probs read before no_grad, as PyTorch's finfo(self.probs.dtype): derived from logits,
        # they keep their graph for a later entropy())
        dtype = self.probs.dtype
        with no_grad():
            u = E.uniform(_tiny(dtype), 1.0, self._extended_shape(sample_shape), dtype=dtype)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_all(value, self.probs)
        # at probs == 1 the only value is 0, whose log-probability is 0 (not 0 * -inf)
        safe = E.where((probs == 1) & (value == 0), E.zeros_like(probs), probs)
        return value * (-safe).log1p() + self.probs.log()

    def entropy(self):
        bce = _softplus(self.logits) - self.probs * self.logits
        return bce / self.probs


def _temperature(temperature, like):
    return (
        temperature
        if hasattr(temperature, "shape")
        else E.tensor(np.asarray(temperature, dtype=like.dtype.np))
    )


class LogitRelaxedBernoulli(Distribution):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ConstraintError(
                "LogitRelaxedBernoulli: pass exactly one of probs and logits",
                op="LogitRelaxedBernoulli",
            )
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            self._param = self.probs
        else:
            (self.logits,) = broadcast_all(logits)
            self._param = self.logits
        self.temperature = _temperature(temperature, self._param)
        super().__init__(tuple(self._param.shape), validate_args=validate_args)

    @cached_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @cached_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    def expand(self, batch_shape, _instance=None):
        name = "probs" if "probs" in self.__dict__ else "logits"
        new = _expand(self, LogitRelaxedBernoulli, batch_shape, _instance, (name,))
        new._param = new.__dict__[name]
        new.temperature = self.temperature
        return new

    def rsample(self, sample_shape=()):
        u = clamp_probs(E.rand(*self._extended_shape(sample_shape), dtype=self._param.dtype))
        return (u.log() - (-u).log1p() + self.logits) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value * self.temperature
        return self.temperature.log() + diff - 2 * _softplus(diff)


class RelaxedBernoulli(TransformedDistribution):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = LogitRelaxedBernoulli(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedBernoulli, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs


class ExpRelaxedCategorical(Distribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = _temperature(temperature, self._categorical._param)
        super().__init__(
            self._categorical.batch_shape,
            (self._categorical._num_events,),
            validate_args=validate_args,
        )

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(ExpRelaxedCategorical, _instance)
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, _shape(batch_shape), self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        u = clamp_probs(E.rand(*shape, dtype=self.logits.dtype))
        gumbels = -((-(u.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - E.logsumexp(scores, -1, keepdim=True)

    def log_prob(self, value):
        k = self._event_shape[0]
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        log_scale = math.lgamma(k) + (k - 1) * self.temperature.log()
        score = logits - value * self.temperature
        score = (score - E.logsumexp(score, -1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        base = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(RelaxedOneHotCategorical, _instance)
        return super().expand(batch_shape, _instance=new)

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs
