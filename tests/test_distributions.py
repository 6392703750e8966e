"""ember.distributions against torch.distributions (float64 values and gradients on random
parameters), statistical checks of sampling, shapes, KL, and RL / VAE style training steps."""

from __future__ import annotations

import math

import numpy as np
import pytest

import ember
import ember.distributions as D
from ember.distributions import ConstraintError

torch = pytest.importorskip("torch")
TD = torch.distributions

RNG = np.random.default_rng(1234)
B = (3, 4)


def _pos(*shape):
    return RNG.uniform(0.5, 2.0, shape)


def _real(*shape):
    return RNG.standard_normal(shape)


def _simplex(*shape):
    p = RNG.uniform(0.1, 1.0, shape)
    return p / p.sum(-1, keepdims=True)


def _spd(n, batch=()):
    a = RNG.standard_normal((*batch, n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _tril(n, batch=()):
    lower = np.tril(RNG.standard_normal((*batch, n, n)), -1)
    return lower + np.eye(n) * RNG.uniform(0.5, 1.5, (*batch, n))


# name -> (class name, keyword parameters (numpy), value)
CASES = {
    "normal": ("Normal", {"loc": _real(*B), "scale": _pos(*B)}, _real(2, *B)),
    "uniform": ("Uniform", {"low": -_pos(*B), "high": _pos(*B)}, RNG.uniform(-0.4, 0.4, B)),
    "laplace": ("Laplace", {"loc": _real(*B), "scale": _pos(*B)}, _real(*B)),
    "exponential": ("Exponential", {"rate": _pos(*B)}, _pos(2, *B)),
    "gamma": ("Gamma", {"concentration": _pos(*B) * 2, "rate": _pos(*B)}, _pos(*B)),
    "gamma_small": (
        "Gamma",
        {"concentration": RNG.uniform(0.05, 0.5, B), "rate": _pos(*B)},
        _pos(*B),
    ),
    "beta": (
        "Beta",
        {"concentration1": _pos(*B), "concentration0": _pos(*B)},
        RNG.uniform(0.1, 0.9, B),
    ),
    "bernoulli_probs": (
        "Bernoulli",
        {"probs": RNG.uniform(0.1, 0.9, B)},
        RNG.integers(0, 2, B) * 1.0,
    ),
    "bernoulli_logits": ("Bernoulli", {"logits": _real(*B) * 3}, RNG.integers(0, 2, (2, *B)) * 1.0),
    "categorical_probs": ("Categorical", {"probs": _simplex(*B, 5) * 3}, RNG.integers(0, 5, B)),
    "categorical_logits": ("Categorical", {"logits": _real(*B, 5)}, RNG.integers(0, 5, (2, *B))),
    "onehot": ("OneHotCategorical", {"logits": _real(*B, 5)}, np.eye(5)[RNG.integers(0, 5, B)]),
    "poisson": ("Poisson", {"rate": _pos(*B) * 3}, RNG.integers(0, 8, B) * 1.0),
    "binomial": (
        "Binomial",
        {"total_count": 7.0, "probs": RNG.uniform(0.1, 0.9, B)},
        RNG.integers(0, 8, B) * 1.0,
    ),
    "binomial_logits": (
        "Binomial",
        {"total_count": 5.0, "logits": _real(*B)},
        RNG.integers(0, 6, B) * 1.0,
    ),
    "mvn_cov": (
        "MultivariateNormal",
        {"loc": _real(3, 4), "covariance_matrix": _spd(4, (3,))},
        _real(2, 3, 4),
    ),
    "mvn_tril": ("MultivariateNormal", {"loc": _real(3, 4), "scale_tril": _tril(4)}, _real(3, 4)),
    "mvn_precision": (
        "MultivariateNormal",
        {"loc": _real(4), "precision_matrix": _spd(4, (3,))},
        _real(3, 4),
    ),
    "dirichlet": ("Dirichlet", {"concentration": _pos(3, 5)}, _simplex(2, 3, 5)),
    "cauchy": ("Cauchy", {"loc": _real(*B), "scale": _pos(*B)}, _real(*B) * 3),
    "gumbel": ("Gumbel", {"loc": _real(*B), "scale": _pos(*B)}, _real(*B)),
    "halfnormal": ("HalfNormal", {"scale": _pos(*B)}, _pos(*B)),
    "geometric": ("Geometric", {"probs": RNG.uniform(0.1, 0.9, B)}, RNG.integers(0, 6, B) * 1.0),
    "geometric_logits": ("Geometric", {"logits": _real(*B)}, RNG.integers(0, 6, B) * 1.0),
    "studentt": ("StudentT", {"df": _pos(*B) * 3, "loc": _real(*B), "scale": _pos(*B)}, _real(*B)),
    "lognormal": ("LogNormal", {"loc": _real(*B) * 0.3, "scale": _pos(*B)}, _pos(*B)),
}

# parameters that are data, not differentiated (torch's Binomial takes total_count as a count)
NO_GRAD = {"total_count"}


def _build(lib, name, params, grad=True):
    cls_name, kwargs, _ = CASES[name]
    tensors = {}
    for k, v in kwargs.items():
        if isinstance(v, float):
            tensors[k] = v
            continue
        t = lib.tensor(np.asarray(v, dtype=np.float64))
        if grad and k not in NO_GRAD:
            t.requires_grad_(True)
        tensors[k] = t
    module = D if lib is ember else TD
    return getattr(module, cls_name)(**tensors), tensors


def _value(lib, name):
    value = CASES[name][2]
    if CASES[name][0] == "Categorical":
        return lib.tensor(np.asarray(value, dtype=np.int64))
    return lib.tensor(np.asarray(value, dtype=np.float64))


def _np(t):
    return np.asarray(t.detach().numpy(), dtype=np.float64)


@pytest.mark.parametrize("name", sorted(CASES))
def test_log_prob_entropy_moments_and_gradients_match_torch(name):
    de, pe = _build(ember, name, CASES[name][1])
    dt, pt = _build(torch, name, CASES[name][1])
    assert de.batch_shape == tuple(dt.batch_shape)
    assert de.event_shape == tuple(dt.event_shape)
    le, lt = de.log_prob(_value(ember, name)), dt.log_prob(_value(torch, name))
    np.testing.assert_allclose(_np(le), _np(lt), rtol=1e-10, atol=1e-10)
    total_e, total_t = le.sum(), lt.sum()
    if name != "poisson":  # torch's Poisson has no entropy
        ee, et = de.entropy(), dt.entropy()
        np.testing.assert_allclose(_np(ee), _np(et), rtol=1e-9, atol=1e-10)
        total_e, total_t = total_e + ee.sum(), total_t + et.sum()
    for stat in ("mean", "variance", "stddev", "mode") if name != "cauchy" else ("mode",):
        np.testing.assert_allclose(
            _np(getattr(de, stat)), _np(getattr(dt, stat)), rtol=1e-10, atol=1e-12, err_msg=stat
        )
        if stat != "mode" and name not in ("categorical_probs", "categorical_logits"):
            total_e = total_e + getattr(de, stat).sum()
            total_t = total_t + getattr(dt, stat).sum()
    total_e.backward()
    total_t.backward()
    for k, t in pe.items():
        if isinstance(t, float) or k in NO_GRAD:
            continue
        np.testing.assert_allclose(_np(t.grad), _np(pt[k].grad), rtol=1e-8, atol=1e-10, err_msg=k)


def test_derived_parameters_match_torch():
    for name in ("bernoulli_probs", "bernoulli_logits", "categorical_probs", "categorical_logits"):
        de, _ = _build(ember, name, CASES[name][1], grad=False)
        dt, _ = _build(torch, name, CASES[name][1], grad=False)
        np.testing.assert_allclose(_np(de.probs), _np(dt.probs), rtol=1e-12)
        np.testing.assert_allclose(_np(de.logits), _np(dt.logits), rtol=1e-10, atol=1e-12)
    for name in ("mvn_cov", "mvn_tril", "mvn_precision"):
        de, _ = _build(ember, name, CASES[name][1], grad=False)
        dt, _ = _build(torch, name, CASES[name][1], grad=False)
        for attr in ("scale_tril", "covariance_matrix", "precision_matrix"):
            np.testing.assert_allclose(
                _np(getattr(de, attr)), _np(getattr(dt, attr)), rtol=1e-9, atol=1e-10
            )


def test_cdf_icdf_match_torch():
    for name in (
        "normal",
        "laplace",
        "exponential",
        "uniform",
        "halfnormal",
        "lognormal",
        "cauchy",
    ):
        de, pe = _build(ember, name, CASES[name][1])
        dt, pt = _build(torch, name, CASES[name][1])
        v = CASES[name][2]
        np.testing.assert_allclose(
            _np(de.cdf(ember.tensor(v))), _np(dt.cdf(torch.tensor(v))), rtol=1e-10, atol=1e-12
        )
        q = RNG.uniform(1e-6, 1 - 1e-6, v.shape)
        ie, it = de.icdf(ember.tensor(q)), dt.icdf(torch.tensor(q))
        np.testing.assert_allclose(_np(ie), _np(it), rtol=1e-10, atol=1e-12)
        ie.sum().backward()
        it.sum().backward()
        for k, t in pe.items():
            np.testing.assert_allclose(_np(t.grad), _np(pt[k].grad), rtol=1e-8, err_msg=k)
    # erfinv's gradient (through the Newton steps) against its closed form
    y = ember.tensor(np.linspace(-0.999, 0.999, 9), requires_grad=True)
    from ember.distributions._util import erfinv

    x = erfinv(y)
    x.sum().backward()
    exact = math.sqrt(math.pi) / 2 * np.exp(x.detach().numpy() ** 2)
    np.testing.assert_allclose(y.grad.numpy(), exact, rtol=1e-9)


# ---------------------------------------------------------------------- KL divergence

KL_PAIRS = [
    "normal",
    "categorical_logits",
    "categorical_probs",
    "onehot",
    "bernoulli_probs",
    "bernoulli_logits",
    "laplace",
    "exponential",
    "gamma",
    "beta",
    "poisson",
    "mvn_cov",
    "mvn_tril",
    "dirichlet",
]


def _perturbed(name):
    cls_name, kwargs, _ = CASES[name]
    out = {}
    for k, v in kwargs.items():
        if isinstance(v, float):
            out[k] = v
        elif k in ("covariance_matrix", "precision_matrix"):
            out[k] = _spd(v.shape[-1], v.shape[:-2])
        elif k == "scale_tril":
            out[k] = _tril(v.shape[-1], v.shape[:-2])
        elif k == "probs" and cls_name in ("Categorical", "OneHotCategorical", "Dirichlet"):
            out[k] = _simplex(*v.shape)
        elif k == "probs":
            out[k] = RNG.uniform(0.1, 0.9, v.shape)
        elif k in ("loc", "logits"):
            out[k] = v + RNG.standard_normal(v.shape)
        else:
            out[k] = v * RNG.uniform(0.5, 2.0, v.shape)
    return out


@pytest.mark.parametrize("name", KL_PAIRS)
def test_kl_divergence_matches_torch(name):
    other = _perturbed(name)
    saved = CASES[name]
    pe, params_e = _build(ember, name, saved[1])
    pt, params_t = _build(torch, name, saved[1])
    CASES[name] = (saved[0], other, saved[2])
    try:
        qe, _ = _build(ember, name, other, grad=False)
        qt, _ = _build(torch, name, other, grad=False)
    finally:
        CASES[name] = saved
    ke, kt = D.kl_divergence(pe, qe), TD.kl_divergence(pt, qt)
    np.testing.assert_allclose(_np(ke), _np(kt), rtol=1e-9, atol=1e-11)
    ke.sum().backward()
    kt.sum().backward()
    for k, t in params_e.items():
        if not isinstance(t, float) and k not in NO_GRAD:
            # a gradient element is a difference of terms as large as the largest element
            # (digammas, in Beta's): its error is relative to that scale, not to itself
            want = _np(params_t[k].grad)
            scale = float(np.abs(want).max(initial=0.0))
            np.testing.assert_allclose(_np(t.grad), want, rtol=1e-8, atol=1e-10 + 1e-8 * scale)


def test_kl_independent_uniform_and_registration():
    loc, scale = _real(3, 4), _pos(3, 4)
    pe = D.Independent(D.Normal(ember.tensor(loc), ember.tensor(scale)), 1)
    qe = D.Independent(D.Normal(ember.tensor(loc + 1), ember.tensor(scale * 2)), 1)
    pt = TD.Independent(TD.Normal(torch.tensor(loc), torch.tensor(scale)), 1)
    qt = TD.Independent(TD.Normal(torch.tensor(loc + 1), torch.tensor(scale * 2)), 1)
    np.testing.assert_allclose(_np(D.kl_divergence(pe, qe)), _np(TD.kl_divergence(pt, qt)))
    lo, hi = -_pos(4), _pos(4)
    for q_lo, q_hi in ((lo * 2, hi * 2), (lo * 0.5, hi * 2)):
        ke = D.kl_divergence(
            D.Uniform(ember.tensor(lo), ember.tensor(hi)),
            D.Uniform(ember.tensor(q_lo), ember.tensor(q_hi)),
        )
        kt = TD.kl_divergence(
            TD.Uniform(torch.tensor(lo), torch.tensor(hi)),
            TD.Uniform(torch.tensor(q_lo), torch.tensor(q_hi)),
        )
        np.testing.assert_array_equal(_np(ke), _np(kt))

    class MyNormal(D.Normal):
        pass

    # the Normal-Normal rule applies to subclasses; a more specific registration wins
    p = MyNormal(ember.tensor(0.0), ember.tensor(1.0))
    assert float(D.kl_divergence(p, p).item()) == 0.0

    @D.register_kl(MyNormal, D.Normal)
    def _mine(p, q):
        return ember.tensor(42.0)

    assert float(D.kl_divergence(p, p).item()) == 42.0
    with pytest.raises(NotImplementedError, match="Cauchy"):
        D.kl_divergence(p, D.Cauchy(0.0, 1.0))


# ---------------------------------------------------------------------- sampling

SAMPLED = [
    ("Normal", {"loc": [0.5, -1.0], "scale": [1.0, 2.0]}, True),
    ("Uniform", {"low": [0.0, -2.0], "high": [1.0, 3.0]}, True),
    ("Laplace", {"loc": [0.5, -1.0], "scale": [1.0, 0.5]}, True),
    ("Exponential", {"rate": [0.5, 2.0]}, True),
    ("Gamma", {"concentration": [0.7, 3.0], "rate": [1.0, 2.0]}, True),
    ("Beta", {"concentration1": [0.7, 3.0], "concentration0": [2.0, 1.0]}, True),
    ("Bernoulli", {"probs": [0.2, 0.7]}, False),
    ("Categorical", {"probs": [[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]]}, False),
    ("Poisson", {"rate": [0.5, 4.0]}, False),
    ("Binomial", {"total_count": 9.0, "probs": [0.2, 0.7]}, False),
    ("LogNormal", {"loc": [0.0, 0.3], "scale": [0.3, 0.5]}, True),
    ("Dirichlet", {"concentration": [[0.7, 3.0, 1.0], [2.0, 1.0, 5.0]]}, True),
    ("Gumbel", {"loc": [0.5, -1.0], "scale": [1.0, 2.0]}, True),
    ("HalfNormal", {"scale": [1.0, 2.0]}, True),
    ("Geometric", {"probs": [0.3, 0.8]}, False),
    ("StudentT", {"df": [9.0, 12.0], "loc": [0.5, -1.0], "scale": [1.0, 2.0]}, True),
]


@pytest.mark.parametrize("cls_name, kwargs, reparameterized", SAMPLED, ids=[s[0] for s in SAMPLED])
def test_sample_moments_within_bounds(cls_name, kwargs, reparameterized):
    ember.manual_seed(7)
    params = {
        k: v if isinstance(v, float) else ember.tensor(v, dtype=ember.float64)
        for k, v in kwargs.items()
    }
    d = getattr(D, cls_name)(**params)
    n = 40000
    x = d.sample((n,))
    assert tuple(x.shape) == (n, *d.batch_shape, *d.event_shape)
    assert not x.requires_grad
    assert d.has_rsample == reparameterized
    if cls_name == "Categorical":
        freq = np.stack([(x.numpy() == k).mean(0) for k in range(3)], -1)
        np.testing.assert_allclose(freq, np.asarray(kwargs["probs"]), atol=5 * 0.5 / math.sqrt(n))
        return
    xs = x.numpy()
    mean, var = d.mean.numpy(), d.variance.numpy()
    # the sample mean is within 5 standard errors
    assert np.all(np.abs(xs.mean(0) - mean) < 5 * np.sqrt(var / n)), (xs.mean(0), mean)
    # the sample variance within 5 standard errors (fourth moment estimated from the sample)
    m4 = ((xs - mean) ** 4).mean(0)
    assert np.all(np.abs(xs.var(0) - var) < 5 * np.sqrt((m4 - var**2) / n) + 1e-12)
    # the same seed reproduces the draws
    ember.manual_seed(7)
    np.testing.assert_array_equal(getattr(D, cls_name)(**params).sample((n,)).numpy(), xs)


def test_mvn_and_onehot_sampling():
    ember.manual_seed(3)
    cov = _spd(3)
    d = D.MultivariateNormal(ember.tensor(_real(3)), covariance_matrix=ember.tensor(cov))
    x = d.sample((50000,)).numpy()
    assert x.shape == (50000, 3)
    np.testing.assert_allclose(np.cov(x.T), cov, rtol=0.05, atol=0.05 * np.abs(cov).max())
    np.testing.assert_allclose(
        x.mean(0), d.mean.numpy(), atol=5 * np.sqrt(cov.diagonal().max() / 50000)
    )
    oh = D.OneHotCategorical(probs=ember.tensor([0.1, 0.6, 0.3], dtype=ember.float64)).sample(
        (20000,)
    )
    assert tuple(oh.shape) == (20000, 3) and set(np.unique(oh.numpy().sum(-1))) == {1.0}
    np.testing.assert_allclose(oh.numpy().mean(0), [0.1, 0.6, 0.3], atol=0.02)


def test_mixture_same_family_matches_torch():
    lg, mu, sd = _real(3, 5), _real(3, 5, 2), _pos(3, 5, 2)
    x = _real(7, 3, 2)
    params = []
    results = []
    for lib, dist in ((ember, D), (torch, TD)):
        p = [lib.tensor(a, requires_grad=True) for a in (lg, mu, sd)]
        mix = dist.MixtureSameFamily(
            dist.Categorical(logits=p[0]), dist.Independent(dist.Normal(p[1], p[2]), 1)
        )
        assert tuple(mix.batch_shape) == (3,) and tuple(mix.event_shape) == (2,)
        out = [mix.log_prob(lib.tensor(x)), mix.mean, mix.variance]
        sum(o.sum() for o in out).backward()
        params.append(p)
        results.append(out)
    for e, t in zip(*results):
        np.testing.assert_allclose(_np(e), _np(t), rtol=1e-10, atol=1e-12)
    for e, t in zip(*params):
        np.testing.assert_allclose(_np(e.grad), _np(t.grad), rtol=1e-9, atol=1e-12)
    ember.manual_seed(2)
    mix = D.MixtureSameFamily(
        D.Categorical(logits=ember.tensor(lg)),
        D.Independent(D.Normal(ember.tensor(mu), ember.tensor(sd)), 1),
    )
    s = mix.sample((20000,)).numpy()
    assert s.shape == (20000, 3, 2)
    se = np.sqrt(mix.variance.numpy() / 20000)
    assert np.all(np.abs(s.mean(0) - mix.mean.numpy()) < 5 * se)


def test_mixture_same_family_cdf_matches_torch():
    lg, mu, sd = _real(3, 4), _real(3, 4), _pos(3, 4)
    x = _real(5, 3)
    results, params = [], []
    for lib, dist in ((ember, D), (torch, TD)):
        p = [lib.tensor(a, requires_grad=True) for a in (lg, mu, sd)]
        mix = dist.MixtureSameFamily(dist.Categorical(logits=p[0]), dist.Normal(p[1], p[2]))
        out = mix.cdf(lib.tensor(x))
        out.sum().backward()
        results.append(out)
        params.append(p)
    np.testing.assert_allclose(_np(results[0]), _np(results[1]), rtol=1e-10, atol=1e-12)
    for e, t in zip(*params):
        np.testing.assert_allclose(_np(e.grad), _np(t.grad), rtol=1e-9, atol=1e-12)


def test_relaxed_distributions_match_torch():
    logits, temp = _real(3, 4), 0.7
    v_cat = _simplex(2, 3, 4)
    v_bern = RNG.uniform(0.1, 0.9, (3, 4))
    results, params = [], []
    for lib, dist in ((ember, D), (torch, TD)):
        lg = lib.tensor(logits, requires_grad=True)
        t = lib.tensor(temp, dtype=lib.float64)
        cat = dist.RelaxedOneHotCategorical(t, logits=lg)
        bern = dist.RelaxedBernoulli(t, logits=lg)
        assert tuple(cat.event_shape) == (4,) and tuple(bern.batch_shape) == (3, 4)
        out = [cat.log_prob(lib.tensor(v_cat)), bern.log_prob(lib.tensor(v_bern))]
        sum(o.sum() for o in out).backward()
        results.append(out)
        params.append(lg)
    for e, t in zip(*results):
        np.testing.assert_allclose(_np(e), _np(t), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(_np(params[0].grad), _np(params[1].grad), rtol=1e-9, atol=1e-10)
    ember.manual_seed(4)
    lg = ember.tensor(logits, requires_grad=True)
    s = D.RelaxedOneHotCategorical(ember.tensor(0.5, dtype=ember.float64), logits=lg).rsample((50,))
    assert tuple(s.shape) == (50, 3, 4)
    np.testing.assert_allclose(s.detach().numpy().sum(-1), 1.0, rtol=1e-12)
    (s[..., 0]).sum().backward()
    assert lg.grad is not None and np.isfinite(lg.grad.numpy()).all()


def test_rsample_gradients_are_analytic():
    ember.manual_seed(11)
    loc = ember.tensor([0.3, -0.2], dtype=ember.float64, requires_grad=True)
    scale = ember.tensor([1.5, 0.5], dtype=ember.float64, requires_grad=True)
    x = D.Normal(loc, scale).rsample((5,))
    x.sum().backward()
    ember.manual_seed(11)
    eps = ember.randn(5, 2, dtype=ember.float64).numpy()  # the same draws
    np.testing.assert_allclose(loc.grad.numpy(), [5.0, 5.0])
    np.testing.assert_allclose(scale.grad.numpy(), eps.sum(0))
    np.testing.assert_allclose(x.detach().numpy(), 0 + np.array([0.3, -0.2]) + eps * [1.5, 0.5])
    rate = ember.tensor([2.0], dtype=ember.float64, requires_grad=True)
    y = D.Exponential(rate).rsample((4,))
    y.sum().backward()  # y = e / rate: dy/drate = -y / rate
    np.testing.assert_allclose(rate.grad.numpy(), [-(y.detach().numpy() / 2.0).sum()])
    tril = ember.tensor(_tril(3), requires_grad=True)
    z = D.MultivariateNormal(ember.zeros(3, dtype=ember.float64), scale_tril=tril).rsample((6,))
    (z * z).sum().backward()
    assert tril.grad is not None and tuple(tril.grad.shape) == (3, 3)


def test_shapes_expand_and_independent():
    d = D.Normal(ember.zeros(3, 1, dtype=ember.float64), ember.ones(4, dtype=ember.float64))
    assert d.batch_shape == (3, 4) and d.event_shape == ()
    assert tuple(d.rsample((2, 5)).shape) == (2, 5, 3, 4)
    e = d.expand((2, 3, 4))
    assert e.batch_shape == (2, 3, 4) and tuple(e.sample().shape) == (2, 3, 4)
    ind = D.Independent(d, 1)
    assert ind.batch_shape == (3,) and ind.event_shape == (4,)
    assert tuple(ind.log_prob(ember.zeros(3, 4, dtype=ember.float64)).shape) == (3,)
    assert tuple(ind.entropy().shape) == (3,)
    c = D.Categorical(logits=ember.zeros(2, 5))
    assert tuple(c.sample((7,)).shape) == (7, 2) and c.sample().dtype == ember.int64
    assert tuple(c.enumerate_support().shape) == (5, 2)
    assert tuple(c.expand((3, 2)).log_prob(ember.tensor([1, 2])).shape) == (3, 2)
    mvn = D.MultivariateNormal(ember.zeros(2, 3), scale_tril=ember.eye(3))
    assert mvn.batch_shape == (2,) and mvn.event_shape == (3,)
    assert tuple(mvn.expand((4, 2)).rsample((5,)).shape) == (5, 4, 2, 3)


def test_transformed_distributions_match_torch():
    loc, scale = _real(4), _pos(4)
    x = RNG.uniform(-0.9, 0.9, 4)
    te = [D.TanhTransform(), D.AffineTransform(0.5, 2.0)]
    tt = [TD.transforms.TanhTransform(), TD.transforms.AffineTransform(0.5, 2.0)]
    de = D.TransformedDistribution(D.Normal(ember.tensor(loc), ember.tensor(scale)), te)
    dt = TD.TransformedDistribution(TD.Normal(torch.tensor(loc), torch.tensor(scale)), tt)
    v = 0.5 + 2.0 * x
    np.testing.assert_allclose(_np(de.log_prob(ember.tensor(v))), _np(dt.log_prob(torch.tensor(v))))
    se = D.TransformedDistribution(
        D.Normal(ember.tensor(loc), ember.tensor(scale)), D.SigmoidTransform()
    )
    st = TD.TransformedDistribution(
        TD.Normal(torch.tensor(loc), torch.tensor(scale)), TD.transforms.SigmoidTransform()
    )
    u = RNG.uniform(0.1, 0.9, 4)
    np.testing.assert_allclose(_np(se.log_prob(ember.tensor(u))), _np(st.log_prob(torch.tensor(u))))
    ember.manual_seed(0)
    s = de.rsample((1000,))
    assert tuple(s.shape) == (1000, 4) and de.has_rsample
    assert np.all(np.abs(s.detach().numpy() - 0.5) <= 2.0)


def test_validation_errors():
    with pytest.raises(ConstraintError, match="scale of Normal"):
        D.Normal(ember.tensor([0.0]), ember.tensor([-1.0]))
    with pytest.raises(ValueError):  # ConstraintError is a ValueError, as PyTorch raises
        D.Bernoulli(probs=ember.tensor([1.5]))
    with pytest.raises(ConstraintError, match="exactly one of probs and logits"):
        D.Categorical()
    with pytest.raises(ConstraintError, match="outside the support"):
        D.Exponential(ember.tensor([1.0])).log_prob(ember.tensor([-1.0]))
    with pytest.raises(ConstraintError, match="outside the support"):
        D.Categorical(logits=ember.zeros(3)).log_prob(ember.tensor(3))
    with pytest.raises(ember.ShapeError, match="batch shape"):
        D.Normal(ember.zeros(3), ember.ones(3)).log_prob(ember.zeros(4))
    with pytest.raises(ConstraintError, match="covariance_matrix"):
        D.MultivariateNormal(
            ember.zeros(2), covariance_matrix=ember.tensor([[1.0, 2.0], [2.0, 1.0]])
        )
    with pytest.raises(NotImplementedError, match="Poisson has no reparameterized"):
        D.Poisson(1.0).rsample()
    # validate_args=False lets it through, as in PyTorch
    assert float(D.Normal(0.0, -1.0, validate_args=False).scale.item()) == -1.0


# ---------------------------------------------------------------------- training steps


def test_reinforce_step_matches_torch():
    """Categorical log_prob(actions) * advantage through a small policy: the same gradients."""
    obs, w0 = _real(6, 4), _real(4, 3) * 0.5
    actions = RNG.integers(0, 3, 6)
    advantage = _real(6)
    grads = []
    for lib, dist in ((ember, D), (torch, TD)):
        w = lib.tensor(w0, requires_grad=True)
        logits = lib.tensor(obs) @ w
        pi = dist.Categorical(logits=logits)
        loss = -(pi.log_prob(lib.tensor(actions)) * lib.tensor(advantage)).mean()
        loss = loss - 0.01 * pi.entropy().mean()
        loss.backward()
        grads.append(_np(w.grad))
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-10)


def test_vae_step_matches_torch_given_the_same_noise():
    """A reparameterized step: the same noise (ember's draws fed to torch) gives the same
    gradients of reconstruction + KL(q(z|x) || N(0, 1))."""
    x0, we0, wd0 = _real(5, 6), _real(6, 4) * 0.3, _real(2, 6) * 0.3
    ember.manual_seed(5)
    eps = ember.randn(5, 2, dtype=ember.float64).numpy()
    grads = []
    for lib, dist in ((ember, D), (torch, TD)):
        if lib is ember:
            ember.manual_seed(5)
        we, wd = lib.tensor(we0, requires_grad=True), lib.tensor(wd0, requires_grad=True)
        h = lib.tensor(x0) @ we
        mu, log_sigma = h[:, :2], h[:, 2:]
        q = dist.Normal(mu, log_sigma.exp())
        z = q.rsample() if lib is ember else mu + log_sigma.exp() * lib.tensor(eps)
        recon = ((z @ wd - lib.tensor(x0)) ** 2).sum()
        prior = dist.Normal(lib.zeros(5, 2, dtype=lib.float64), lib.ones(5, 2, dtype=lib.float64))
        loss = recon + dist.kl_divergence(q, prior).sum() - q.log_prob(z).sum() * 0.1
        loss.backward()
        grads.append((_np(we.grad), _np(wd.grad)))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-10)


def test_log_prob_and_kl_under_capture():
    loc, scale, v = _real(4), _pos(4), _real(4)

    def f(loc, scale, value):
        p = D.Normal(loc, scale)
        q = D.Normal(loc * 0 + 1.0, scale * 2)
        c = D.Categorical(logits=value.unsqueeze(0) * loc)
        return p.log_prob(value).sum() + D.kl_divergence(p, q).sum() + c.entropy().sum()

    args = [ember.tensor(a) for a in (loc, scale, v)]
    eager = f(*args).item()
    captured = ember.function(f)(*args).item()
    assert math.isclose(eager, captured, rel_tol=1e-12)
    g = ember.grad(lambda a, b, c: f(a, b, c))(*args)
    loc_t = ember.tensor(loc, requires_grad=True)
    f(loc_t, args[1], args[2]).backward()
    np.testing.assert_allclose(
        g.numpy() if hasattr(g, "numpy") else g[0].numpy(), loc_t.grad.numpy()
    )


def test_mvn_and_sampling_under_capture():
    loc, cov, v = _real(3), _spd(3), _real(2, 3)

    def f(loc, cov, value):
        m = D.MultivariateNormal(loc, covariance_matrix=cov)
        return m.log_prob(value).sum() + m.entropy()

    args = [ember.tensor(a) for a in (loc, cov, v)]
    assert math.isclose(f(*args).item(), ember.function(f)(*args).item(), rel_tol=1e-12)

    def g(logits, mu):
        a = D.Categorical(logits=logits).sample()
        return a, D.Normal(mu, 1.0).rsample((2,))

    actions, z = ember.function(g)(ember.zeros(4, 3), ember.zeros(5))
    assert actions.dtype == ember.int64 and tuple(actions.shape) == (4,)
    assert tuple(z.shape) == (2, 5)


def test_torch_import_paths():
    from ember.distributions.categorical import Categorical
    from ember.distributions.multivariate_normal import MultivariateNormal
    from ember.distributions.normal import Normal

    from ember.distributions.kl import kl_divergence
    from ember.distributions.transforms import TanhTransform
    from ember.distributions.utils import probs_to_logits

    assert Categorical is D.Categorical and Normal is D.Normal
    assert MultivariateNormal is D.MultivariateNormal and kl_divergence is D.kl_divergence
    assert TanhTransform is D.TanhTransform and callable(probs_to_logits)
    previous = D.Distribution._validate_args
    D.Distribution.set_default_validate_args(False)
    try:
        assert float(D.Normal(0.0, -1.0).scale.item()) == -1.0
    finally:
        D.Distribution.set_default_validate_args(previous)


def test_categorical_never_samples_zero_probability_categories():
    ember.manual_seed(9)
    probs = ember.tensor([[0.0, 0.3, 0.0, 0.7, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0, 0.0, 0.0]])
    s = D.Categorical(probs=probs).sample((50000,)).numpy()
    counts = [np.bincount(s[:, i], minlength=6) for i in range(2)]
    assert counts[0][[0, 2, 4, 5]].sum() == 0 and counts[1][2:].sum() == 0
    np.testing.assert_allclose(counts[0][3] / 50000, 0.7, atol=5 * math.sqrt(0.21 / 50000))
