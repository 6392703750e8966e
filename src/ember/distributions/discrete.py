"""Discrete distributions: Bernoulli, Categorical, OneHotCategorical, Poisson, Binomial.

Given ``probs`` or ``logits`` (exactly one), the other is derived on first access, as in
PyTorch: Categorical normalizes ``probs`` to sum to 1 and ``logits`` to log-probabilities.
Bernoulli and Categorical sample with ember's random ops as PyTorch does (``bernoulli``'s
uniform draws; ``multinomial`` with replacement), Poisson with ``poisson`` and Binomial with
``binomial`` (PyTorch's samplers on ember's generator), so a seed gives PyTorch's samples.
"""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np

from .. import dtypes as dt
from ..grad_mode import no_grad
from . import constraints
from ._util import (
    ConstraintError,
    E,
    broadcast_all,
    lgamma,
    logits_to_probs,
    probs_to_logits,
    xlogy,
)
from .distribution import Distribution, _shape
from .exp_family import ExponentialFamily

__all__ = ["Bernoulli", "Categorical", "OneHotCategorical", "Poisson", "Binomial"]


def _softplus(x):
    """``log(1 + exp(x))`` without overflow."""
    return x.clamp(min=0) + (-x.abs()).exp().log1p()


def _one_of(name: str, probs, logits):
    if (probs is None) == (logits is None):
        raise ConstraintError(f"{name}: pass exactly one of probs and logits", op=name)


class Bernoulli(ExponentialFamily):
    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    @property
    def _natural_params(self):
        return (E.log(self.probs / (1 - self.probs)),)

    def _log_normalizer(self, x):
        return E.log1p(E.exp(x))

    _mean_carrier_measure = 0

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of("Bernoulli", probs, logits)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            param = self.probs
        else:
            (self.logits,) = broadcast_all(logits)
            param = self.logits
        self._param = param
        super().__init__(tuple(param.shape), validate_args=validate_args)

    @cached_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @cached_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @property
    def param_shape(self):
        return tuple(self._param.shape)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Bernoulli, _instance)
        batch_shape = _shape(batch_shape)
        name = "probs" if "probs" in self.__dict__ else "logits"
        setattr(new, name, self.__dict__[name].expand(*batch_shape))
        new._param = new.__dict__[name]
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return E.where(self.probs == 0.5, E.full_like(mode, np.nan), mode)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            u = E.rand(*shape, dtype=self._param.dtype)
            return (u < self.probs).to(self._param.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return value * logits - _softplus(logits)

    def entropy(self):
        return _softplus(self.logits) - self.probs * self.logits

    def enumerate_support(self, expand: bool = True):
        values = E.arange(2, dtype=self._param.dtype).reshape(2, *(1,) * len(self._batch_shape))
        return values.expand(2, *self._batch_shape) if expand else values


class Categorical(Distribution):
    arg_constraints = {
        "probs": constraints.simplex,
        "logits": constraints.independent(constraints.real, 1),
    }
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of("Categorical", probs, logits)
        if probs is not None:
            if probs.ndim < 1:
                raise ConstraintError("Categorical: probs must have at least one dimension")
            self.probs = probs / probs.sum(-1, keepdim=True)
            param = self.probs
        else:
            if logits.ndim < 1:
                raise ConstraintError("Categorical: logits must have at least one dimension")
            self.logits = logits - E.logsumexp(logits, -1, keepdim=True)
            param = self.logits
        self._param = param
        self._num_events = param.shape[-1]
        super().__init__(tuple(param.shape[:-1]), validate_args=validate_args)

    @cached_property
    def probs(self):
        return logits_to_probs(self.logits)

    @cached_property
    def logits(self):
        return probs_to_logits(self.probs)

    @property
    def param_shape(self):
        return tuple(self._param.shape)

    @property
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(type(self), _instance)
        batch_shape = _shape(batch_shape)
        name = "probs" if "probs" in self.__dict__ else "logits"
        setattr(new, name, self.__dict__[name].expand(*batch_shape, self._num_events))
        new._param = new.__dict__[name]
        new._num_events = self._num_events
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return E.full(self._batch_shape, fill_value=np.nan, dtype=self._param.dtype)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return E.full(self._batch_shape, fill_value=np.nan, dtype=self._param.dtype)

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        count = math.prod(_shape(sample_shape))
        # PyTorch's: all the samples of a row of probabilities by one multinomial call. The
        # probabilities are read with gradients on, as there: derived from logits on first
        # access, they keep their graph for a later entropy() or mean (A2C's entropy bonus)
        rows = self.probs.reshape(-1, self._num_events)
        with no_grad():
            if count == 0:
                return E.zeros(shape, dtype=dt.int64)
            return E.multinomial(rows, count, True).T.reshape(shape)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long()
        shape = np.broadcast_shapes(tuple(value.shape), self._batch_shape)
        log_pmf = E.broadcast_to(self.logits, (*shape, self._num_events))
        index = E.broadcast_to(value.unsqueeze(-1), (*shape, 1))
        return log_pmf.gather(-1, index).squeeze(-1)

    def entropy(self):
        min_real = float(np.finfo(self.logits.dtype.np).min)
        logits = self.logits.clamp(min=min_real)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True):
        n = self._num_events
        values = E.arange(n).reshape(n, *(1,) * len(self._batch_shape))
        return values.expand(n, *self._batch_shape) if expand else values


class OneHotCategorical(Distribution):
    arg_constraints = {
        "probs": constraints.simplex,
        "logits": constraints.independent(constraints.real, 1),
    }
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        super().__init__(
            self._categorical.batch_shape,
            (self._categorical._num_events,),
            validate_args=validate_args,
        )

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(OneHotCategorical, _instance)
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, _shape(batch_shape), self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        return E.one_hot(self.probs.argmax(-1), self._event_shape[0]).to(self.probs.dtype)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        indices = self._categorical.sample(sample_shape)
        return E.one_hot(indices, self._event_shape[0]).to(self.probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self._categorical.log_prob(value.argmax(-1))

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand: bool = True):
        n = self._event_shape[0]
        values = E.eye(n, dtype=self.probs.dtype).reshape(n, *(1,) * len(self._batch_shape), n)
        return values.expand(n, *self._batch_shape, n) if expand else values


class Poisson(ExponentialFamily):
    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    @property
    def _natural_params(self):
        return (E.log(self.rate),)

    def _log_normalizer(self, x):
        return E.exp(x)

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(tuple(self.rate.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Poisson, _instance)
        new.rate = self.rate.expand(*_shape(batch_shape))
        Distribution.__init__(new, _shape(batch_shape), validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        with no_grad():  # (PyTorch's: torch.poisson of the expanded rates, its draws)
            return E.poisson(self.rate.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        rate, value = broadcast_all(self.rate, value)
        return xlogy(value, rate) - rate - lgamma(value + 1)


class Binomial(Distribution):
    arg_constraints = {
        "total_count": constraints.nonnegative_integer,
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        _one_of("Binomial", probs, logits)
        if probs is not None:
            self.total_count, self.probs = broadcast_all(total_count, probs)
            self.total_count = self.total_count.to(self.probs.dtype)
            param = self.probs
        else:
            self.total_count, self.logits = broadcast_all(total_count, logits)
            self.total_count = self.total_count.to(self.logits.dtype)
            param = self.logits
        self._param = param
        super().__init__(tuple(param.shape), validate_args=validate_args)

    @cached_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @cached_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @property
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Binomial, _instance)
        batch_shape = _shape(batch_shape)
        new.total_count = self.total_count.expand(*batch_shape)
        name = "probs" if "probs" in self.__dict__ else "logits"
        setattr(new, name, self.__dict__[name].expand(*batch_shape))
        new._param = new.__dict__[name]
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.total_count * self.probs

    @property
    def mode(self):
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        """PyTorch's draws: ``torch.binomial`` of the count and probabilities expanded to the
        sample's shape, without gradients."""
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            count = self.total_count.to(self._param.dtype).expand(shape)
            return E.binomial(count, self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        log_factorial_n = lgamma(n + 1)
        log_factorial_k = lgamma(value + 1)
        log_factorial_nmk = lgamma(n - value + 1)
        # (max(x, 0) + x - min(x, 0)) / 2, as PyTorch's: n * max(logits, 0) with its gradient
        clamped = (logits.clamp(min=0) + logits - logits.clamp(max=0)) / 2
        normalize = n * clamped + n * (-logits.abs()).exp().log1p() - log_factorial_n
        return value * logits - log_factorial_k - log_factorial_nmk - normalize

    def entropy(self):
        n = int(self.total_count.max().item())
        if not bool((self.total_count == n).all()):
            raise NotImplementedError("Binomial.entropy needs the same total_count everywhere")
        values = self.enumerate_support(False)
        log_prob = self.log_prob(values)
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand: bool = True):
        n = int(self.total_count.max().item())
        values = E.arange(1 + n, dtype=self._param.dtype)
        values = values.reshape(-1, *(1,) * len(self._batch_shape))
        return values.expand(-1, *self._batch_shape) if expand else values
