"""The rest of PyTorch's KL registry: the low-rank multivariate normal's pairs and the
continuous Bernoulli's (``torch.distributions.kl``), registered with `register_kl` when the
package is imported.

ember's `LowRankMultivariateNormal` carries the dense `MultivariateNormal` of its covariance
``W W^T + D`` (``_mvn``), so its divergences are the dense ones of that same distribution."""

from __future__ import annotations

import math

from ._util import E
from .continuous import Beta, Exponential, Gamma, Laplace, Normal, Uniform
from .continuous_extra import ContinuousBernoulli
from .extra import Pareto
from .kl import _infinite, _kl_mvn_mvn, register_kl
from .low_rank_mvn import LowRankMultivariateNormal
from .multivariate import MultivariateNormal
from .relaxed import Gumbel

__all__: list[str] = []


def _dense(d):
    return d._mvn if isinstance(d, LowRankMultivariateNormal) else d


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
@register_kl(LowRankMultivariateNormal, MultivariateNormal)
@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank(p, q):
    return _kl_mvn_mvn(_dense(p), _dense(q))


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_cb_cb(p, q):
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + (-p.probs).log1p()
    t3 = -q._cont_bern_log_norm() - (-q.probs).log1p()
    return t1 + t2 + t3


@register_kl(ContinuousBernoulli, Exponential)
def _kl_cb_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_cb_normal(p, q):
    t1 = -p.entropy()
    t2 = 0.5 * (math.log(2.0 * math.pi) + (q.loc / q.scale).pow(2)) + q.scale.log()
    t3 = (p.variance + p.mean.pow(2) - 2.0 * q.loc * p.mean) / (2.0 * q.scale.pow(2))
    return t1 + t2 + t3


@register_kl(ContinuousBernoulli, Uniform)
def _kl_cb_uniform(p, q):
    # infinite unless the uniform's support [low, high] strictly contains [0, 1] (PyTorch's)
    result = -p.entropy() + (q.high - q.low).log()
    outside = (q.low >= 0.0) | (q.high <= 1.0)
    return E.where(outside, E.full_like(result, math.inf), result)


def _kl_to_cb(p, q):
    return -p.entropy() - p.mean * q.logits - (-q.probs).log1p() - q._cont_bern_log_norm()


register_kl(Beta, ContinuousBernoulli)(_kl_to_cb)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_cb(p, q):
    result = _kl_to_cb(p, q)
    outside = (p.high >= 1.0) | (p.low <= 0.0)
    return E.where(outside, E.full_like(result, math.inf), result)


# supports that leave the divergence infinite everywhere (PyTorch's registry)
register_kl(ContinuousBernoulli, Pareto)(_infinite("probs"))
for _p, _param in (
    (Exponential, "rate"),
    (Gamma, "concentration"),
    (Gumbel, "loc"),
    (Laplace, "loc"),
    (Normal, "loc"),
    (Pareto, "scale"),
):
    register_kl(_p, ContinuousBernoulli)(_infinite(_param))
