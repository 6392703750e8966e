"""NegativeBinomial and Multinomial with PyTorch's names, parameters, formulas and draws
(NegativeBinomial: its Gamma sample, then a Poisson draw; Multinomial: ``total_count``
categorical draws counted by a scatter-add)."""

from __future__ import annotations

import math

from ..grad_mode import no_grad
from . import constraints
from ._util import E, broadcast_all, lgamma, logits_to_probs, probs_to_logits
from .continuous import Gamma, _expand_params
from .discrete import Binomial, _one_of, _softplus
from .distribution import Distribution, _shape


def _logits_probs(self, name, probs, logits, *params, binary=True):
    _one_of(name, probs, logits)
    if probs is not None:
        *params, self.probs = broadcast_all(*params, probs)
        self.logits = probs_to_logits(self.probs, is_binary=binary)
    else:
        *params, self.logits = broadcast_all(*params, logits)
        self.probs = logits_to_probs(self.logits, is_binary=binary)
    return params


class NegativeBinomial(Distribution):
    """The number of successes before ``total_count`` failures, each trial a success with
    probability ``probs``."""

    arg_constraints = {
        "total_count": constraints.greater_than_eq(0),
        "probs": constraints.half_open_interval(0.0, 1.0),
        "logits": constraints.real,
    }
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        (count,) = _logits_probs(self, "NegativeBinomial", probs, logits, total_count)
        self.total_count = count.to(self.logits.dtype)
        super().__init__(tuple(self.logits.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        names = ("total_count", "probs", "logits")
        return _expand_params(self, NegativeBinomial, batch_shape, _instance, names)

    @property
    def mean(self):
        return self.total_count * self.logits.exp()

    @property
    def mode(self):
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self):
        return self.mean / E.sigmoid(-self.logits)

    def sample(self, sample_shape=()):
        """A Poisson draw at a Gamma(total_count, rate exp(-logits)) rate, as PyTorch's."""
        with no_grad():  # (PyTorch's draws: its Gamma sample, then torch.poisson)
            rate = Gamma(self.total_count, E.exp(-self.logits), validate_args=False)
            return E.poisson(rate.sample(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        r, logits = self.total_count, self.logits
        unnormalized = r * -_softplus(logits) + value * -_softplus(-logits)
        normalization = -lgamma(r + value) + lgamma(1.0 + value) + lgamma(r)
        normalization = E.where(r + value == 0, E.zeros_like(normalization), normalization)
        return unnormalized - normalization


class Multinomial(Distribution):
    """Counts of ``total_count`` draws from a categorical distribution over the last axis."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("Multinomial: inhomogeneous total_count is not supported")
        _one_of("Multinomial", probs, logits)
        self.total_count = total_count
        if probs is not None:
            self.probs = probs / probs.sum(-1, keepdim=True)
            self.logits = probs_to_logits(self.probs)
        else:
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
            self.probs = logits_to_probs(self.logits)
        shape = tuple(self.logits.shape)
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    @property
    def support(self):
        return constraints.independent(constraints.integer_interval(0, self.total_count), 1)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Multinomial, _instance)
        batch_shape = _shape(batch_shape)
        new.total_count = self.total_count
        new.probs = self.probs.expand(*batch_shape, *self._event_shape)
        new.logits = self.logits.expand(*batch_shape, *self._event_shape)
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        # PyTorch's: total_count categorical samples per draw (one multinomial call with
        # replacement, as Categorical.sample), counted by a scatter_add along the last axis
        sample_shape = _shape(sample_shape)
        shape = self._extended_shape(sample_shape)
        n = self.total_count * math.prod(sample_shape)
        with no_grad():
            rows = self.probs.reshape(-1, self._event_shape[0])
            draws = E.multinomial(rows, n, True).T.reshape(
                (self.total_count, *sample_shape, *self._batch_shape)
            )
            draws = draws.permute(*range(1, draws.ndim), 0)
            counts = E.zeros(shape, dtype=draws.dtype).scatter_add(-1, draws, E.ones_like(draws))
            return counts.to(self.probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        logits = E.where((value == 0) & (logits == -math.inf), E.zeros_like(logits), logits)
        # (PyTorch's: the counts' own total, which its support lets fall short of total_count)
        log_factorial_n = lgamma(value.sum(-1) + 1)
        log_factorial_xs = lgamma(value + 1).sum(-1)
        return log_factorial_n - log_factorial_xs + (logits * value).sum(-1)

    def entropy(self):
        n = self.total_count
        binomial = Binomial(n, probs=self.probs, validate_args=False)
        support = E.arange(n + 1, dtype=self.probs.dtype).reshape(
            (n + 1,) + (1,) * len(self.probs.shape)
        )
        binomial_probs = binomial.log_prob(support).exp()
        weights = lgamma(support + 1)
        categorical = -(self.probs * self.logits).sum(-1)
        return n * categorical - math.lgamma(n + 1) + (binomial_probs * weights).sum((0, -1))
