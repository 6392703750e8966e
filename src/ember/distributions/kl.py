"""``kl_divergence(p, q)`` and ``register_kl`` (``torch.distributions.kl``).

Implementations are looked up by the types of ``p`` and ``q``: the registered pair whose types
are the most specific ancestors of theirs (nearest in ``p``'s method resolution order, then in
``q``'s); an unregistered pair raises ``NotImplementedError`` as in PyTorch."""

from __future__ import annotations

import numpy as np

from ..errors import ArgumentTypeError, EmberError
from ._util import (
    E,
    batch_mahalanobis,
    diagonal,
    digamma,
    is_eager,
    lgamma,
    solve_lower,
    sum_rightmost,
)
from .continuous import Beta, Exponential, Gamma, Laplace, Normal, Uniform
from .discrete import Bernoulli, Binomial, Categorical, OneHotCategorical, Poisson, _softplus
from .exp_family import ExponentialFamily, kl_expfamily_expfamily
from .extra import Pareto
from .mixture import Cauchy, Dirichlet
from .multivariate import Independent, MultivariateNormal
from .relaxed import Geometric, Gumbel, HalfNormal
from .transforms import TransformedDistribution

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY: dict = {}
_KL_MEMO: dict = {}


def register_kl(type_p, type_q):
    """Decorator registering ``fn(p, q)`` as the KL divergence of the pair of types."""
    if not isinstance(type_p, type) or not isinstance(type_q, type):
        raise ArgumentTypeError("register_kl: expects two Distribution subclasses")

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


register_kl(ExponentialFamily, ExponentialFamily)(kl_expfamily_expfamily)


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


# ---- the remaining pairs of PyTorch's registry (torch/distributions/kl.py), same formulas ----

_EULER = 0.57721566490153286060


def _inf_where(mask, result):
    return E.where(E.broadcast_to(mask, result.shape), _inf_like(result), result)


def _x_log_x(x):
    return E.xlogy(x, x)


def _infinite(param_name):
    def kl(p, q):
        return _inf_like(getattr(p, param_name))

    return kl


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    return t1 - (4 * p.scale * q.scale).log()


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    ct1, ct2, ct3 = p.scale / q.scale, q.loc / q.scale, p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t3 = (ct2 + lgamma(1 + ct1) - ct3).exp()
    return t1 + ct1 * _EULER + t3 - (1 + _EULER)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    return _kl_normal_normal(p._normal, q._normal)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    scale_ratio, alpha_ratio = p.scale / q.scale, q.alpha / p.alpha
    result = q.alpha * scale_ratio.log() - alpha_ratio.log() + alpha_ratio - 1
    return _inf_where(p.scale < q.scale, result)


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    n_p, n_q = E.as_tensor(p.total_count), E.as_tensor(q.total_count)
    if is_eager(n_p, n_q) and bool((n_p < n_q).any()):
        raise NotImplementedError(
            "KL between Binomials where q.total_count > p.total_count is not implemented"
        )
    kl = n_p * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    return _inf_where(n_p > n_q, kl)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    if p.transforms != q.transforms or p.event_shape != q.event_shape:
        raise NotImplementedError(
            "KL(TransformedDistribution || TransformedDistribution) needs equal transforms "
            "and event shapes"
        )
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Beta, Exponential)
def _kl_beta_exponential(p, q):
    mean = p.concentration1 / (p.concentration1 + p.concentration0)
    return -p.entropy() - q.rate.log() + q.rate * mean


@register_kl(Beta, Gamma)
def _kl_beta_gamma(p, q):
    total = p.concentration1 + p.concentration0
    t2 = lgamma(q.concentration) - q.concentration * q.rate.log()
    t3 = (q.concentration - 1) * (digamma(p.concentration1) - digamma(total))
    return -p.entropy() + t2 - t3 + q.rate * p.concentration1 / total


@register_kl(Beta, Normal)
def _kl_beta_normal(p, q):
    total = p.concentration1 + p.concentration0
    mean = p.concentration1 / total
    var_normal = q.scale.pow(2)
    t2 = 0.5 * (var_normal * 2 * np.pi).log()
    t3 = (mean * (1 - mean) / (total + 1) + mean.pow(2)) * 0.5
    return -p.entropy() + t2 + (t3 - q.loc * mean + q.loc.pow(2) * 0.5) / var_normal


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    result = -p.entropy() + (q.high - q.low).log()
    return _inf_where((q.low > 0) | (q.high < 1), result)


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    ratio = q.rate / p.rate
    t1 = -q.concentration * ratio.log()
    return t1 + ratio + lgamma(q.concentration) + q.concentration * _EULER - (1 + _EULER)


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p, q):
    prod = p.rate * q.scale
    loc_scale = q.loc / q.scale
    t2 = loc_scale.exp() * prod / (prod + 1)
    return prod.log() - 1 - loc_scale + t2 + prod.reciprocal()


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    var_normal = q.scale.pow(2)
    rate_sqr = p.rate.pow(2)
    t1 = 0.5 * (rate_sqr * var_normal * 2 * np.pi).log()
    return t1 - 1 + (rate_sqr.reciprocal() - q.loc / p.rate + q.loc.pow(2) * 0.5) / var_normal


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - q.rate.log() + q.rate * p.concentration / p.rate


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p, q):
    a = p.concentration
    prod = p.rate * q.scale
    loc_scale = q.loc / q.scale
    t1 = (a - 1) * digamma(a) - lgamma(a) - a
    t2 = prod.log() + a / prod
    t3 = loc_scale.exp() * (1 + prod.reciprocal()).pow(-a) - loc_scale
    return t1 + t2 + t3


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    a = p.concentration
    var_normal = q.scale.pow(2)
    beta_sqr = p.rate.pow(2)
    t1 = 0.5 * (beta_sqr * var_normal * 2 * np.pi).log() - a - lgamma(a)
    t2 = 0.5 * (a.pow(2) + a) / beta_sqr
    t3 = q.loc * a / p.rate
    return t1 + (a - 1) * digamma(a) + (t2 - t3 + 0.5 * q.loc.pow(2)) / var_normal


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p, q):
    ratio = p.scale / q.scale
    t1 = (ratio / np.sqrt(2 * np.pi)).log()
    t2 = (np.pi * ratio * 0.5).pow(2) / 3
    t3 = ((p.loc + p.scale * _EULER - q.loc) / q.scale).pow(2) * 0.5
    return -t1 + t2 + t3 - (_EULER + 1)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    var_normal = q.scale.pow(2)
    ratio = p.scale.pow(2) / var_normal
    t1 = 0.5 * (2 * ratio / np.pi).log()
    t2 = 0.5 * p.loc.pow(2) - p.loc * q.loc + 0.5 * q.loc.pow(2)
    return -t1 + ratio + t2 / var_normal - 1


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p, q):
    mean_scale = p.loc / q.scale
    var_ratio = (p.scale / q.scale).pow(2)
    loc_scale = q.loc / q.scale
    t3 = (-mean_scale + 0.5 * var_ratio + loc_scale).exp()
    return -0.5 * var_ratio.log() + mean_scale - loc_scale + t3 - 0.5 * (1 + np.log(2 * np.pi))


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    diff = p.loc - q.loc
    t1 = (p.scale / q.scale).log()
    t2 = np.sqrt(2 / np.pi) * p.scale * (-0.5 * (diff / p.scale).pow(2)).exp()
    t3 = diff * E.erf(np.sqrt(0.5) * diff / p.scale)
    return -t1 + (t2 + t3) / q.scale - 0.5 * (1 + np.log(0.5 * np.pi))


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p, q):
    prod = p.scale * q.rate
    result = (p.alpha / prod).log() - p.alpha.reciprocal() + p.alpha * prod / (p.alpha - 1) - 1
    return _inf_where(p.alpha <= 1, result)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p, q):
    common = p.scale.log() + p.alpha.reciprocal()
    t1 = p.alpha.log() - common
    t2 = lgamma(q.concentration) - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * common
    t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    return _inf_where(p.alpha <= 1, t1 + t2 + t3 + t4 - 1)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p, q):
    var_normal = 2 * q.scale.pow(2)
    common = p.scale / (p.alpha - 1)
    t1 = (np.sqrt(2 * np.pi) * q.scale * p.alpha / p.scale).log()
    t3 = p.alpha * common.pow(2) / (p.alpha - 2)
    t4 = (p.alpha * common - q.loc).pow(2)
    result = t1 - p.alpha.reciprocal() + (t3 + t4) / var_normal - 1
    return _inf_where(p.alpha <= 2, result)


@register_kl(Uniform, Beta)
def _kl_uniform_beta(p, q):
    width = p.high - p.low
    t2 = (q.concentration1 - 1) * (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    t3 = (q.concentration0 - 1) * (_x_log_x(1 - p.high) - _x_log_x(1 - p.low) + width) / width
    t4 = (
        lgamma(q.concentration1)
        + lgamma(q.concentration0)
        - lgamma(q.concentration1 + q.concentration0)
    )
    result = t3 + t4 - width.log() - t2
    return _inf_where((p.high > 1) | (p.low < 0), result)


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    result = q.rate * (p.high + p.low) / 2 - ((p.high - p.low) * q.rate).log()
    return _inf_where(p.low < 0, result)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    width = p.high - p.low
    t2 = lgamma(q.concentration) - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    t4 = q.rate * (p.high + p.low) / 2
    return _inf_where(p.low < 0, -width.log() + t2 + t3 + t4)


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p, q):
    common = q.scale / (p.high - p.low)
    high = (p.high - q.loc) / q.scale
    low = (p.low - q.loc) / q.scale
    t1 = common.log() + 0.5 * (high + low)
    return t1 - common * ((-high).exp() - (-low).exp())


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    width = p.high - p.low
    t1 = (np.sqrt(np.pi * 2) * q.scale / width).log()
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (width.pow(2) / 12 + t3) / q.scale.pow(2)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p, q):
    width = p.high - p.low
    t1 = (q.alpha * q.scale.pow(q.alpha) * width).log()
    t2 = (_x_log_x(p.high) - _x_log_x(p.low) - width) / width
    return _inf_where(p.low < q.scale, t2 * (q.alpha + 1) - t1)


# pairs whose supports make the divergence infinite everywhere (PyTorch's registry)
for _p, _qs, _param in (
    (Beta, (Pareto,), "concentration1"),
    (Exponential, (Beta, Pareto, Uniform), "rate"),
    (Gamma, (Beta, Pareto, Uniform), "concentration"),
    (Gumbel, (Beta, Exponential, Gamma, Pareto, Uniform), "loc"),
    (Laplace, (Beta, Exponential, Gamma, Pareto, Uniform), "loc"),
    (Normal, (Beta, Exponential, Gamma, Pareto, Uniform), "loc"),
    (Pareto, (Beta, Uniform), "scale"),
    (Poisson, (Bernoulli, Binomial), "rate"),
):
    for _q in _qs:
        register_kl(_p, _q)(_infinite(_param))
