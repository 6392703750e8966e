"""Focused regressions of the bugs the hunt13 programs found, each against PyTorch."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


def _both(fn):
    return [fn(torch), fn(ember)]


def test_unpad_sequence_transposes_a_time_major_input_in_place():
    def run(L):
        R = L.nn.utils.rnn
        padded = R.pad_sequence([L.arange(1.0, n + 1) for n in (2, 4, 1)])
        parts = R.unpad_sequence(padded, L.tensor([2, 4, 1]))
        return tuple(padded.shape), [p.tolist() for p in parts]

    expected, actual = _both(run)
    assert actual == expected


def test_captured_functions_set_the_training_flags_they_change_on_every_run():
    def run(L, wrap):
        m = L.nn.Sequential(L.nn.Linear(2, 2), L.nn.Dropout(0.5))

        def evaluate(x):
            m.eval()
            return m(x)

        def train(x):
            m.train()
            return m(x).sum()

        evaluate, train = wrap(evaluate), wrap(train)
        flags = []
        for _ in range(3):
            train(L.ones(3, 2))
            flags.append((m.training, m[1].training))
            evaluate(L.ones(3, 2))
            flags.append((m.training, m[1].training))
        return flags

    assert run(ember, ember.function) == run(torch, lambda f: f)


def test_the_first_operand_of_gammainc_has_no_gradient_and_says_so():
    for L in (torch, ember):
        a = L.tensor([1.5, 2.0], requires_grad=True)
        x = L.tensor([0.5, 1.0], requires_grad=True)
        with pytest.raises(NotImplementedError):
            L.special.gammainc(a, x).sum().backward()
    grads = []
    for L in (torch, ember):
        x = L.tensor([0.5, 1.0], requires_grad=True)
        L.special.gammaincc(L.tensor([1.5, 2.0]), x).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-5)


def test_distribution_cdfs_icdfs_and_kl_pairs_match_pytorch():
    def run(L):
        D = L.distributions

        def t(a):
            return L.tensor(np.asarray(a, np.float32))

        x = t([0.2, 0.7, 2.4]).requires_grad_()
        rate = t([1.0, 2.0, 3.0]).requires_grad_()
        u = t([0.1, 0.5, 0.9])
        out = [
            D.Gamma(t([2.0, 0.5, 1.5]), rate).cdf(x),
            D.Chi2(t([1.0, 2.0, 3.0])).cdf(x),
            D.InverseGamma(t([2.0, 0.5, 1.5]), rate).cdf(x),
            D.Gumbel(x, rate).icdf(u),
            D.Kumaraswamy(t([2.0, 0.5, 1.5]), rate).cdf(x.sigmoid()),
            D.Kumaraswamy(t([2.0, 0.5, 1.5]), rate).icdf(u),
        ]
        cov = t([[2.0, 0.5, 0.1], [0.5, 1.0, 0.2], [0.1, 0.2, 0.7]])
        W = t([[1.0, 0.2], [0.5, -0.3], [0.2, 0.1]]).requires_grad_()
        lr1 = D.LowRankMultivariateNormal(t([0.0, 1.0, 0.0]), W, t([1.0, 0.5, 2.0]))
        lr2 = D.LowRankMultivariateNormal(t([1.0, 0.0, 0.5]), W[:, :1] * 2, t([0.3, 0.5, 1.0]))
        mvn = D.MultivariateNormal(t([0.5, 0.0, 0.0]), cov)
        cb1 = D.ContinuousBernoulli(probs=t([0.2, 0.6, 0.45]))
        cb2 = D.ContinuousBernoulli(logits=t([1.0, -0.5, 0.3]))
        out += [
            D.kl_divergence(lr1, lr2),
            D.kl_divergence(lr1, mvn),
            D.kl_divergence(mvn, lr2),
            D.kl_divergence(cb1, cb2),
            D.kl_divergence(cb1, D.Exponential(rate)),
            D.kl_divergence(cb1, D.Normal(x, rate)),
            D.kl_divergence(cb1, D.Uniform(t([-0.5, 0.0, -1.0]), t([1.5, 2.0, 0.8]))),
            D.kl_divergence(D.Beta(t([2.0, 3.0, 1.0]), t([1.0, 2.0, 5.0])), cb2),
            D.kl_divergence(D.Uniform(t([0.1, 0.0, 0.3]), t([0.5, 0.9, 1.2])), cb2),
            D.kl_divergence(D.Normal(x, rate), cb2),
            D.kl_divergence(cb1, D.Pareto(rate, rate)),
        ]
        sum(o.sum() for o in out if bool(o.isfinite().all())).backward()
        return [o.detach().numpy() for o in out] + [
            x.grad.numpy(),
            rate.grad.numpy(),
            W.grad.numpy(),
        ]

    expected, actual = _both(run)
    for e, a in zip(expected, actual):
        np.testing.assert_allclose(a, e, rtol=2e-4, atol=1e-5)


def test_replace_all_batch_norm_modules_drops_the_running_statistics():
    def run(L):
        L.manual_seed(0)
        m = L.nn.Sequential(
            L.nn.Linear(2, 3), L.nn.BatchNorm1d(3), L.nn.BatchNorm1d(3, track_running_stats=False)
        )
        with L.no_grad():
            m[0].weight.copy_(L.tensor([[1.0, 2.0], [0.5, -1.0], [0.0, 1.0]]))
            m[0].bias.zero_()
        same = L.func.replace_all_batch_norm_modules_(m) is m
        m.eval()
        y = m(L.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 3.0]]))
        return same, sorted(m.state_dict()), m[1].track_running_stats, y.detach().numpy()

    (s_t, k_t, f_t, y_t), (s_e, k_e, f_e, y_e) = _both(run)
    assert (s_e, k_e, f_e) == (s_t, k_t, f_t)
    np.testing.assert_allclose(y_e, y_t, rtol=1e-5, atol=1e-6)


def test_implicit_gamma_gradient_matches_high_precision_values():
    mp = pytest.importorskip("mpmath")
    from ember.distributions._gamma_rsample import dx_dalpha

    mp.mp.dps = 30
    a = np.array([0.05, 0.3, 1.0, 2.5, 3.0, 40.0, 150.0])
    x = np.array([1e-6, 0.01, 0.7, 4.0, 25.0, 38.0, 170.0])

    def reference(ai, xi):
        ai, xi = mp.mpf(ai), mp.mpf(xi)
        dp = mp.diff(lambda s: mp.gammainc(s, 0, xi, regularized=True), ai)
        return float(-dp / (xi ** (ai - 1) * mp.e ** (-xi) / mp.gamma(ai)))

    want = [reference(ai, xi) for ai, xi in zip(a, x)]
    np.testing.assert_allclose(dx_dalpha(x, a), want, rtol=1e-7)


def test_gamma_family_rsample_carries_the_reparameterization_gradient():
    # Monte-Carlo means of the draws and of their gradients against the analytic ones (and
    # PyTorch's rsample exists for the same distributions); 20,000 draws: a few percent
    D = ember.distributions
    ember.manual_seed(0)
    c = ember.tensor([0.5, 2.0, 9.0], requires_grad=True)
    r = ember.tensor([1.0, 2.0, 0.5], requires_grad=True)
    s = D.Gamma(c, r).rsample((20000,))
    s.mean(0).sum().backward()
    np.testing.assert_allclose(c.grad.numpy(), 1 / r.detach().numpy(), rtol=0.05)
    np.testing.assert_allclose(r.grad.numpy(), -(c / r**2).detach().numpy(), rtol=0.05)
    a1 = ember.tensor([2.0, 0.7], requires_grad=True)
    a0 = ember.tensor([3.0, 1.5], requires_grad=True)
    D.Beta(a1, a0).rsample((20000,)).mean(0).sum().backward()
    np.testing.assert_allclose(a1.grad.numpy(), (a0 / (a1 + a0) ** 2).detach().numpy(), rtol=0.05)
    alpha = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    D.Dirichlet(alpha).rsample((20000,))[:, 0].mean().backward()
    np.testing.assert_allclose(alpha.grad.numpy(), [5 / 36, -1 / 36, -1 / 36], rtol=0.1)
    loc = ember.tensor(1.0, requires_grad=True)
    t = D.StudentT(ember.tensor(5.0), loc, ember.tensor(2.0)).rsample((20000,))
    t.mean().backward()
    assert loc.grad.item() == pytest.approx(1.0)
    assert t.var().item() == pytest.approx(4 * 5 / 3, rel=0.1)
    for d in (D.Gamma, D.Beta, D.Dirichlet, D.StudentT, D.Chi2, D.InverseGamma, D.FisherSnedecor):
        assert d.has_rsample == getattr(torch.distributions, d.__name__).has_rsample


def test_gamma_family_rsample_shapes_match_pytorch():
    def run(L):
        D = L.distributions
        c = L.tensor([1.0, 2.0], requires_grad=True)
        draws = [
            D.Beta(2.0, 1.0).rsample(),
            D.Gamma(c, 1.0).rsample((3,)),
            D.Chi2(c[0]).rsample(),
            D.Dirichlet(c).rsample((4, 2)),
            D.StudentT(c, 0.0, 1.0).rsample(),
            D.InverseGamma(c, c).rsample((1,)),
            D.FisherSnedecor(c, 3.0).rsample(),
        ]
        return [(tuple(d.shape), d.requires_grad, bool((d > -1e30).all())) for d in draws]

    expected, actual = _both(run)
    assert actual == expected
