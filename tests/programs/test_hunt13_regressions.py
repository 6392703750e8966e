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
