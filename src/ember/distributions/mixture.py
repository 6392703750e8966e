"""Dirichlet, Cauchy and MixtureSameFamily (``torch.distributions``' names and formulas).

Dirichlet draws PyTorch's values (its normalized gamma draws) and reparameterizes them with
PyTorch's estimator (`_dirichlet_rsample.py`); Cauchy's ``rsample`` is ``loc + scale * tan(pi (u -
1/2))`` from ember's ``rand``.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ArgumentTypeError, ShapeError
from ..grad_mode import no_grad
from ..ops.extra_random import standard_cauchy
from . import constraints
from ._dirichlet_rsample import dirichlet_rsample
from ._gamma_rsample import dirichlet_draws
from ._util import E, broadcast_all, digamma, lgamma, xlogy
from .discrete import Categorical
from .distribution import Distribution, _shape
from .exp_family import ExponentialFamily

__all__ = ["Dirichlet", "Cauchy", "MixtureSameFamily"]


class Dirichlet(ExponentialFamily):
    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True

    @property
    def _natural_params(self):
        return (self.concentration,)

    def _log_normalizer(self, x):
        return lgamma(x).sum(-1) - lgamma(x.sum(-1))

    def __init__(self, concentration, validate_args=None):
        if concentration.ndim < 1:
            raise ShapeError(
                "Dirichlet: concentration must be at least one-dimensional", op="Dirichlet"
            )
        self.concentration = concentration
        shape = tuple(concentration.shape)
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Dirichlet, _instance)
        batch_shape = _shape(batch_shape)
        new.concentration = self.concentration.expand(*batch_shape, *self._event_shape)
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        m1 = (self.concentration - 1).clamp(min=0)
        mode = m1 / m1.sum(-1, keepdim=True)
        below = (self.concentration < 1).all(-1, keepdim=True)
        first = E.one_hot(mode.argmax(-1), self._event_shape[0]).to(mode.dtype)
        return E.where(below, first, mode)

    @property
    def variance(self):
        total = self.concentration.sum(-1, keepdim=True)
        return self.concentration * (total - self.concentration) / (total.pow(2) * (total + 1))

    def sample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return E.tensor(dirichlet_draws(self.concentration, shape))  # (PyTorch's draws)

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(sample_shape)
        return dirichlet_rsample(self.concentration, shape)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        # xlogy, as PyTorch: a concentration of 1 leaves a zero coordinate's density finite
        return xlogy(c - 1, value).sum(-1) + lgamma(c.sum(-1)) - lgamma(c).sum(-1)

    def entropy(self):
        c = self.concentration
        k = c.shape[-1]
        total = c.sum(-1)
        return (
            lgamma(c).sum(-1)
            - lgamma(total)
            - (k - total) * digamma(total)
            - ((c - 1.0) * digamma(c)).sum(-1)
        )


class Cauchy(Distribution):
    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(tuple(self.loc.shape), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(Cauchy, _instance)
        batch_shape = _shape(batch_shape)
        new.loc = self.loc.expand(*batch_shape)
        new.scale = self.scale.expand(*batch_shape)
        Distribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self):
        return E.full_like(self.loc, np.nan)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return E.full_like(self.loc, np.inf)

    def rsample(self, sample_shape=()):
        # PyTorch's: loc + cauchy_() draws * scale
        eps = standard_cauchy(self._extended_shape(sample_shape), self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        return -math.log(math.pi) - self.scale.log() - (z.pow(2)).log1p()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return E.atan((value - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return E.tan(math.pi * (value - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()


class MixtureSameFamily(Distribution):
    """A mixture of ``component_distribution``'s rightmost batch dimension, weighted by
    ``mixture_distribution`` (a Categorical)."""

    arg_constraints: dict = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        if not isinstance(mixture_distribution, Categorical):
            raise ArgumentTypeError(
                "MixtureSameFamily: mixture_distribution must be a Categorical, got "
                f"{type(mixture_distribution).__name__}"
            )
        if not isinstance(component_distribution, Distribution):
            raise ArgumentTypeError(
                "MixtureSameFamily: component_distribution must be a Distribution, got "
                f"{type(component_distribution).__name__}"
            )
        self.mixture_distribution = mixture_distribution
        self.component_distribution = component_distribution
        mdbs = mixture_distribution.batch_shape
        cdbs = component_distribution.batch_shape[:-1]
        for a, b in zip(reversed(mdbs), reversed(cdbs)):
            if a != 1 and b != 1 and a != b:
                raise ShapeError(
                    f"MixtureSameFamily: the mixture's batch shape {mdbs} does not match the "
                    f"components' batch shape {cdbs}",
                    op="MixtureSameFamily",
                )
        km = mixture_distribution._num_events
        kc = component_distribution.batch_shape[-1]
        if km != kc:
            raise ShapeError(
                f"MixtureSameFamily: the mixture has {km} components but "
                f"component_distribution's last batch dimension is {kc}",
                op="MixtureSameFamily",
            )
        self._num_component = km
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(cdbs, component_distribution.event_shape, validate_args=validate_args)

    @property
    def support(self):
        return self.component_distribution.support

    def __repr__(self) -> str:  # (PyTorch's layout: each part on its own line)
        return (
            f"MixtureSameFamily(\n  {self.mixture_distribution},\n  {self.component_distribution})"
        )

    def _pad(self, x):
        return x.unsqueeze(-1 - self._event_ndims)

    def _pad_mixture_dimensions(self, x):
        dist_batch_ndims = len(self._batch_shape)
        cat_batch_ndims = len(self.mixture_distribution.batch_shape)
        pad_ndims = 0 if cat_batch_ndims == 1 else dist_batch_ndims - cat_batch_ndims
        xs = tuple(x.shape)
        return x.reshape(*xs[:-1], *([1] * pad_ndims), *xs[-1:], *([1] * self._event_ndims))

    @property
    def mean(self):
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        return (probs * self.component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self):
        probs = self._pad_mixture_dimensions(self.mixture_distribution.probs)
        dim = -1 - self._event_ndims
        mean_cond_var = (probs * self.component_distribution.variance).sum(dim)
        deviation = (self.component_distribution.mean - self._pad(self.mean)).pow(2)
        return mean_cond_var + (probs * deviation).sum(dim)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        log_prob_x = self.component_distribution.log_prob(self._pad(value))
        log_mix = E.log_softmax(self.mixture_distribution.logits, -1)
        return E.logsumexp(log_prob_x + log_mix, -1)

    def cdf(self, value):
        """The mixture's CDF, ``sum_k p_k cdf_k(value)`` (as PyTorch's: for components
        whose events are scalars)."""
        if self._validate_args:
            self._validate_sample(value)
        cdf_x = self.component_distribution.cdf(self._pad(value))
        return (cdf_x * self.mixture_distribution.probs).sum(-1)

    def sample(self, sample_shape=()):
        sample_shape = _shape(sample_shape)
        with no_grad():
            gather_dim = len(sample_shape) + len(self._batch_shape)
            es = self._event_shape
            mix = self.mixture_distribution.sample(sample_shape)
            comp = self.component_distribution.sample(sample_shape)
            index = mix.reshape(*mix.shape, *([1] * (len(es) + 1)))
            index = E.broadcast_to(index, (*mix.shape, 1, *es))
            return comp.gather(gather_dim, index).squeeze(gather_dim)
