"""``kl_divergence(p, q)`` and ``register_kl`` (``torch.distributions.kl``).

Implementations are looked up by the types of ``p`` and ``q``: the registered pair whose types
are the most specific ancestors of theirs (nearest in ``p``'s method resolution order, then in
``q``'s); an unregistered pair raises ``NotImplementedError`` as in PyTorch."""

from __future__ import annotations

import numpy as np

from ..errors import EmberError
from ._util import E, batch_mahalanobis, diagonal, digamma, lgamma, solve_lower, sum_rightmost
from .continuous import Beta, Exponential, Gamma, Laplace, Normal, Uniform
from .discrete import Bernoulli, Categorical, OneHotCategorical, Poisson, _softplus
from .mixture import Dirichlet
from .multivariate import Independent, MultivariateNormal

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY: dict = {}
_KL_MEMO: dict = {}


def register_kl(type_p, type_q):
    """Decorator registering ``fn(p, q)`` as the KL divergence of the pair of types."""
    if not isinstance(type_p, type) or not isinstance(type_q, type):
        raise TypeError("register_kl: expects two Distribution subclasses")

    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        _KL_MEMO.clear()
        return fn

    return decorator


def _dispatch(type_p, type_q):
    best, best_key = None, None
    mro_p, mro_q = type_p.__mro__, type_q.__mro__
    for (tp, tq), fn in _KL_REGISTRY.items():
        if tp in mro_p and tq in mro_q:
            key = (mro_p.index(tp), mro_q.index(tq))
            if best_key is None or key < best_key:
                best, best_key = fn, key
    return best


def kl_divergence(p, q):
    """``KL(p || q)``, batched over the distributions' batch shape."""
    key = (type(p), type(q))
    fn = _KL_MEMO.get(key)
    if fn is None:
        fn = _dispatch(*key)
        if fn is None:
            raise NotImplementedError(
                f"no KL(p || q) is implemented for p = {type(p).__name__}, "
                f"q = {type(q).__name__}; register one with "
                "ember.distributions.register_kl"
            )
        _KL_MEMO[key] = fn
    return fn(p, q)


def _inf_like(x):
    return E.full_like(x, np.inf)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = E.where(E.broadcast_to(q.probs == 0, t.shape), _inf_like(t), t)
    t = E.where(E.broadcast_to(p.probs == 0, t.shape), E.zeros_like(t), t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    t1 = p.probs * (_softplus(-q.logits) - _softplus(-p.logits))
    t1 = E.where(q.probs == 0, _inf_like(t1), t1)
    t1 = E.where(p.probs == 0, E.zeros_like(t1), t1)
    t2 = (1 - p.probs) * (_softplus(q.logits) - _softplus(p.logits))
    t2 = E.where(q.probs == 1, _inf_like(t2), t2)
    t2 = E.where(p.probs == 1, E.zeros_like(t2), t2)
    return t1 + t2


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    if p.event_shape != q.event_shape:
        raise EmberError(
            "KL(MultivariateNormal || MultivariateNormal): the event shapes differ "
            f"({p.event_shape} and {q.event_shape})",
            op="kl_divergence",
        )
    lp, lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = diagonal(lq).log().sum(-1) - diagonal(lp).log().sum(-1)
    n = p.event_shape[0]
    batch = np.broadcast_shapes(tuple(lq.shape[:-2]), tuple(lp.shape[:-2]))
    solved = solve_lower(lq.expand(*batch, n, n), lp.expand(*batch, n, n))
    term2 = solved.pow(2).sum((-2, -1))
    term3 = batch_mahalanobis(lq, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError(
            "KL(Independent || Independent) needs the same reinterpreted_batch_ndims"
        )
    result = kl_divergence(p.base_dist, q.base_dist)
    return sum_rightmost(result, p.reinterpreted_batch_ndims)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    outside = (q.low > p.low) | (q.high < p.high)
    return E.where(outside, _inf_like(result), result)


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * (-loc_abs_diff / p.scale).exp()
    return t1 + t2 + t3 - 1


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    rate_ratio = q.rate / p.rate
    return -rate_ratio.log() + rate_ratio - 1


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (p.rate.log() - q.rate.log()) - (p.rate - q.rate)


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * (p.rate / q.rate).log()
    t2 = lgamma(q.concentration) - lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sum_p = p.concentration1 + p.concentration0
    sum_q = q.concentration1 + q.concentration0
    t1 = lgamma(q.concentration1) + lgamma(q.concentration0) + lgamma(sum_p)
    t2 = lgamma(p.concentration1) + lgamma(p.concentration0) + lgamma(sum_q)
    t3 = (p.concentration1 - q.concentration1) * digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * digamma(p.concentration0)
    t5 = (sum_q - sum_p) * digamma(sum_p)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sum_p = p.concentration.sum(-1)
    sum_q = q.concentration.sum(-1)
    t1 = lgamma(sum_p) - lgamma(sum_q)
    t2 = (lgamma(p.concentration) - lgamma(q.concentration)).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = digamma(p.concentration) - digamma(sum_p).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)
