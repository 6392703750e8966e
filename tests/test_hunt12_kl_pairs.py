"""Every KL pair of PyTorch's registry that ember registers, against PyTorch on the same
parameters (float64: the formulas are closed forms, so agreement to a few ulps of the terms)."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

_rng = np.random.default_rng(12)


def _pos(n=3):
    return 0.5 + 2 * _rng.random(n)


# one parameterisation per family, as numpy arrays (both libraries build from the same values)
_PARAMS = {
    "Normal": lambda: (_rng.standard_normal(3), _pos()),
    "Laplace": lambda: (_rng.standard_normal(3), _pos()),
    "Gumbel": lambda: (_rng.standard_normal(3), _pos()),
    "Cauchy": lambda: (_rng.standard_normal(3), _pos()),
    "HalfNormal": lambda: (_pos(),),
    "Exponential": lambda: (_pos(),),
    "Gamma": lambda: (_pos(), _pos()),
    "Beta": lambda: (_pos(), _pos()),
    "Uniform": lambda: (0.1 * _rng.random(3), 0.5 + 0.4 * _rng.random(3)),
    "Pareto": lambda: (_pos(), 2.5 + _rng.random(3)),
    "Geometric": lambda: (0.1 + 0.8 * _rng.random(3),),
    "Poisson": lambda: (_pos(),),
    "Bernoulli": lambda: (0.1 + 0.8 * _rng.random(3),),
    "Binomial": lambda: (np.array([5.0, 5.0, 5.0]), 0.1 + 0.8 * _rng.random(3)),
}


def _make(lib, name, arrays):
    D = lib.distributions
    ts = [lib.tensor(a) for a in arrays]
    if name in ("Geometric", "Bernoulli"):
        return getattr(D, name)(probs=ts[0])
    if name == "Binomial":
        return D.Binomial(ts[0], probs=ts[1])
    return getattr(D, name)(*ts)


_PAIRS = sorted(
    (p.__name__, q.__name__)
    for p, q in torch.distributions.kl._KL_REGISTRY
    if p.__name__ in _PARAMS and q.__name__ in _PARAMS
)


def test_every_pair_agrees_with_pytorch():
    checked = 0
    for p_name, q_name in _PAIRS:
        pa, qa = _PARAMS[p_name](), _PARAMS[q_name]()
        expected = torch.distributions.kl_divergence(
            _make(torch, p_name, pa), _make(torch, q_name, qa)
        ).numpy()
        actual = ember.distributions.kl_divergence(
            _make(ember, p_name, pa), _make(ember, q_name, qa)
        ).numpy()
        np.testing.assert_allclose(actual, expected, rtol=1e-10, err_msg=f"{p_name} {q_name}")
        checked += 1
    assert checked >= 60


def test_transformed_pairs_and_gradients():
    loc = np.array([0.2, -0.4])

    def kl(lib):
        D = lib.distributions
        m = lib.tensor(loc, requires_grad=True)
        p = D.LogNormal(m, lib.tensor([1.0, 2.0], dtype=lib.float64))
        q = D.LogNormal(lib.zeros(2, dtype=lib.float64), lib.ones(2, dtype=lib.float64))
        u = D.Uniform(lib.zeros(2, dtype=lib.float64), lib.ones(2, dtype=lib.float64) * 2)
        k = D.kl_divergence(p, q) + D.kl_divergence(u, D.Normal(m, 1.5))
        k.sum().backward()
        return k.detach().numpy(), m.grad.numpy()

    for e, a in zip(kl(torch), kl(ember)):
        np.testing.assert_allclose(a, e, rtol=1e-12)
