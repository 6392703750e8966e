"""ContinuousBernoulli, FisherSnedecor, GeneralizedPareto, LogisticNormal,
OneHotCategoricalStraightThrough, Wishart and LKJCholesky against torch.distributions:
log_prob, cdf/icdf, entropy and moments (values and the parameters' gradients), shapes of
samples, batch/event shapes and expand, sample statistics, and PyTorch's module paths."""

import warnings

import numpy as np
import pytest
import torch
import torch.distributions as TD

import ember
import ember.distributions as ED

R = np.random.default_rng(21)


def _pair(arrays, dtype="float64"):
    e = [ember.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
    t = [torch.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
    return e, t


def _compare(e_val, t_val, e_params, t_params, rtol, lower_only=()):
    np.testing.assert_allclose(e_val.detach().numpy(), t_val.detach().numpy(), rtol=rtol,
                               atol=rtol)  # fmt: skip
    w = R.standard_normal(tuple(t_val.shape))
    e_g = ember.autograd.grad((e_val * ember.tensor(w, dtype=e_val.dtype)).sum(), e_params,
                              allow_unused=True, retain_graph=True)  # fmt: skip
    t_g = torch.autograd.grad((t_val * torch.tensor(w, dtype=t_val.dtype)).sum(), t_params,
                              allow_unused=True, retain_graph=True)  # fmt: skip
    for k, (a, b) in enumerate(zip(e_g, t_g)):
        if b is None:
            continue
        a, b = a.numpy(), b.numpy()
        if k in lower_only:
            # a Cholesky factor: only its lower triangle is read (PyTorch's formula also
            # reports a gradient for the upper one, which no value depends on)
            a, b = np.tril(a), np.tril(b)
        np.testing.assert_allclose(a, b, rtol=rtol * 100, atol=rtol * 100)


CB_PROBS = np.array([[0.05, 0.3, 0.4995, 0.5, 0.7], [0.9, 0.2, 0.6, 0.51, 0.45]])
CB_VALUES = np.array([[0.2, 0.7, 0.5, 0.1, 0.95], [0.01, 0.99, 0.3, 0.6, 0.5]])


@pytest.mark.parametrize("param", ["probs", "logits"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_continuous_bernoulli(param, dtype):
    probs = CB_PROBS.copy()
    if dtype == "float32":  # (just outside lims the closed forms cancel: float32 loses digits)
        probs[probs == 0.51], probs[probs == 0.45] = 0.8, 0.15
    arr = probs if param == "probs" else np.log(probs / (1 - probs))
    (ep,), (tp,) = _pair([arr], dtype)
    e, t = ED.ContinuousBernoulli(**{param: ep}), TD.ContinuousBernoulli(**{param: tp})
    rtol = 2e-5 if dtype == "float32" else 1e-9
    v = CB_VALUES.astype(dtype)
    for name in ("log_prob", "cdf", "icdf"):
        _compare(getattr(e, name)(ember.tensor(v)), getattr(t, name)(torch.tensor(v)),
                 [ep], [tp], rtol)  # fmt: skip
    for name in ("mean", "variance", "stddev"):
        _compare(getattr(e, name), getattr(t, name), [ep], [tp], rtol)
    _compare(e.entropy(), t.entropy(), [ep], [tp], rtol)
    s = e.rsample((4000,))
    assert tuple(s.shape) == (4000, 2, 5) and e.has_rsample
    np.testing.assert_allclose(s.detach().numpy().mean(0), t.mean.detach().numpy(), atol=0.03)
    assert tuple(e.expand((3, 2, 5)).sample().shape) == (3, 2, 5)


def test_fisher_snedecor():
    (d1, d2), (t1, t2) = _pair([np.array([1.0, 3.0, 10.0]), np.array([2.5, 5.0, 20.0])])
    e, t = ED.FisherSnedecor(d1, d2), TD.FisherSnedecor(t1, t2)
    x = np.array([0.5, 1.0, 2.0])
    _compare(e.log_prob(ember.tensor(x)), t.log_prob(torch.tensor(x)), [d1, d2], [t1, t2], 1e-10)
    for name in ("mean", "variance", "mode"):
        np.testing.assert_allclose(
            getattr(e, name).detach().numpy(), getattr(t, name).detach().numpy(), rtol=1e-12
        )
    e = ED.FisherSnedecor(ember.tensor([5.0, 12.0]), ember.tensor([30.0, 40.0]))
    s = e.sample((40000,))
    assert tuple(s.shape) == (40000, 2) and e.has_rsample
    np.testing.assert_allclose(s.numpy().mean(0), e.mean.numpy(), rtol=0.03)


def test_generalized_pareto():
    # float32: PyTorch 2.13's own isclose against a float32 zero refuses float64 parameters
    arrays = [np.array([0.0, 1.0, -1.0]), np.array([1.0, 2.0, 0.5]), np.array([0.0, 0.3, -0.2])]
    (el, es, ec), (tl, ts, tc) = _pair(arrays, "float32")
    e, t = ED.GeneralizedPareto(el, es, ec), TD.GeneralizedPareto(tl, ts, tc)
    x = np.array([0.5, 1.5, -0.5], np.float32)
    for name in ("log_prob", "cdf", "log_cdf", "log_survival_function"):
        _compare(getattr(e, name)(ember.tensor(x)), getattr(t, name)(torch.tensor(x)),
                 [el, es, ec], [tl, ts, tc], 2e-6)  # fmt: skip
    u = np.array([0.1, 0.5, 0.9], np.float32)
    _compare(e.icdf(ember.tensor(u)), t.icdf(torch.tensor(u)), [el, es, ec], [tl, ts, tc], 2e-6)
    _compare(e.entropy(), t.entropy(), [el, es, ec], [tl, ts, tc], 2e-6)
    for name in ("mean", "variance", "mode"):
        np.testing.assert_allclose(
            getattr(e, name).detach().numpy(), getattr(t, name).detach().numpy(), rtol=1e-6
        )
    s = e.rsample((20000,))
    assert tuple(s.shape) == (20000, 3)
    np.testing.assert_allclose(s.detach().numpy().mean(0), t.mean.detach().numpy(), rtol=0.05)


def test_logistic_normal():
    (loc, scale), (tloc, tscale) = _pair(
        [R.standard_normal((2, 3)), np.abs(R.standard_normal((2, 3))) + 0.5]
    )
    e, t = ED.LogisticNormal(loc, scale), TD.LogisticNormal(tloc, tscale)
    assert e.batch_shape == tuple(t.batch_shape) and e.event_shape == tuple(t.event_shape)
    v = t.sample((3,)).detach().numpy()
    _compare(
        e.log_prob(ember.tensor(v)), t.log_prob(torch.tensor(v)), [loc, scale], [tloc, tscale], 1e-9
    )
    s = e.rsample((5,))
    assert tuple(s.shape) == (5, 2, 4)
    np.testing.assert_allclose(s.detach().numpy().sum(-1), 1.0, rtol=1e-12)
    assert e.expand((4, 2)).batch_shape == (4, 2)
    scalar = ED.LogisticNormal(ember.zeros(3), ember.ones(3))
    assert scalar.event_shape == (4,) and tuple(scalar.sample().shape) == (4,)


def test_one_hot_categorical_straight_through():
    probs = np.array([0.2, 0.5, 0.3])
    ep = ember.tensor(probs, requires_grad=True)
    tp = torch.tensor(probs, requires_grad=True)
    e, t = (
        ED.OneHotCategoricalStraightThrough(probs=ep),
        TD.OneHotCategoricalStraightThrough(probs=tp),
    )
    s = e.rsample((1000,))
    assert e.has_rsample and tuple(s.shape) == (1000, 3)
    np.testing.assert_allclose(s.detach().numpy().mean(0), probs, atol=0.06)
    w = np.array([1.0, -2.0, 0.5])
    (g,) = ember.autograd.grad((s * ember.tensor(w)).sum(), [ep])
    ts = t.rsample((1000,))
    (tg,) = torch.autograd.grad((ts * torch.tensor(w)).sum(), [tp])
    # the straight-through gradient: 1000 * w through probs' normalization, as PyTorch's
    np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-10)


def _spd(p, rng):
    a = rng.standard_normal((p, p))
    return a @ a.T + p * np.eye(p)


@pytest.mark.parametrize("param", ["covariance_matrix", "precision_matrix", "scale_tril"])
def test_wishart(param):
    cov = _spd(3, R)
    m = np.linalg.cholesky(cov) if param == "scale_tril" else cov
    (em, edf), (tm, tdf) = _pair([m, np.array([4.5, 7.0])])
    lower = (0,) if param == "scale_tril" else ()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e, t = ED.Wishart(edf, **{param: em}), TD.Wishart(tdf, **{param: tm})
    assert e.batch_shape == tuple(t.batch_shape) and e.event_shape == tuple(t.event_shape)
    v = t.sample((4,)).detach().numpy()
    _compare(e.log_prob(ember.tensor(v)), t.log_prob(torch.tensor(v)), [em, edf], [tm, tdf], 1e-9,
             lower)  # fmt: skip
    _compare(e.entropy(), t.entropy(), [em, edf], [tm, tdf], 1e-9, lower)
    for name in ("mean", "variance", "covariance_matrix", "precision_matrix", "scale_tril"):
        np.testing.assert_allclose(
            getattr(e, name).detach().numpy(), getattr(t, name).detach().numpy(), rtol=1e-9,
            atol=1e-12, err_msg=name,
        )  # fmt: skip
    s = e.sample((20000,))
    assert tuple(s.shape) == (20000, 2, 3, 3)
    np.testing.assert_allclose(s.numpy().mean(0), t.mean.detach().numpy(), rtol=0.06, atol=0.2)
    assert tuple(e.expand((5, 2)).sample().shape) == (5, 2, 3, 3)


@pytest.mark.parametrize("dim", [2, 4])
@pytest.mark.parametrize("concentration", [0.5, 1.0, 3.0])
def test_lkj_cholesky(dim, concentration):
    (ec,), (tc,) = _pair([np.array([concentration, concentration + 1.0])])
    e, t = ED.LKJCholesky(dim, ec), TD.LKJCholesky(dim, tc)
    assert e.batch_shape == tuple(t.batch_shape) and e.event_shape == tuple(t.event_shape)
    v = t.sample((3,)).detach().numpy()
    _compare(e.log_prob(ember.tensor(v)), t.log_prob(torch.tensor(v)), [ec], [tc], 1e-10)
    s = e.sample((6000,))
    assert tuple(s.shape) == (6000, 2, dim, dim)
    assert bool(ED.constraints.corr_cholesky.check(s).all())
    corr = (s @ s.transpose(-2, -1)).numpy()[..., 1, 0]
    # the off-diagonal correlation's variance: 1 / (2 eta + dim - 1) for the LKJ marginal
    np.testing.assert_allclose(
        corr.var(0),
        1 / (2 * (np.array([concentration, concentration + 1.0]) + (dim - 2) / 2) + 1),
        rtol=0.1,
    )


def test_module_paths_and_errors():
    from ember.distributions.continuous_bernoulli import ContinuousBernoulli
    from ember.distributions.lkj_cholesky import LKJCholesky
    from ember.distributions.one_hot_categorical import OneHotCategoricalStraightThrough
    from ember.distributions.wishart import Wishart

    assert ContinuousBernoulli is ED.ContinuousBernoulli and Wishart is ED.Wishart
    assert LKJCholesky is ED.LKJCholesky
    assert OneHotCategoricalStraightThrough is ED.OneHotCategoricalStraightThrough
    with pytest.raises(ValueError):
        ED.LKJCholesky(1)
    with pytest.raises(ValueError):
        ED.ContinuousBernoulli()
    with pytest.raises(ValueError):
        ED.Wishart(1.0, covariance_matrix=ember.eye(3))
    with pytest.raises(ValueError):
        ED.FisherSnedecor(ember.tensor([-1.0]), ember.tensor([1.0]))
