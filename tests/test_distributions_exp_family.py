"""``ExponentialFamily`` as PyTorch's: the same members, the entropy by the Bregman divergence of
the log normalizer (equal to each member's closed form and to PyTorch's), and the KL between
two members of one family registered for the base (used for a family without its own rule)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.distributions as TD

import ember
import ember.distributions as ED

PARAMS = {
    "Normal": ([0.3, -1.0], [0.5, 2.0]),
    "Exponential": ([0.7, 3.0],),
    "Gamma": ([0.8, 2.5], [1.5, 0.3]),
    "Beta": ([0.8, 2.5], [1.5, 0.3]),
    "Bernoulli": ([0.2, 0.9],),
    "Dirichlet": ([[0.5, 1.5, 2.0], [3.0, 1.0, 0.7]],),
}
OTHER = {
    "Normal": ([1.0, 0.0], [1.5, 0.5]),
    "Exponential": ([2.0, 0.5],),
    "Gamma": ([2.0, 1.0], [0.5, 1.0]),
    "Beta": ([1.0, 1.5], [0.5, 2.0]),
    "Bernoulli": ([0.6, 0.5],),
    "Dirichlet": ([[1.0, 1.0, 1.0], [0.5, 2.0, 2.0]],),
}


def _make(lib, name, params):
    mod = ED if lib is ember else TD
    return getattr(mod, name)(*(lib.tensor(np.array(p, dtype=np.float64)) for p in params))


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_bregman_entropy_and_kl_match_pytorch_and_the_closed_forms(name):
    e, t = _make(ember, name, PARAMS[name]), _make(torch, name, PARAMS[name])
    assert isinstance(e, ED.ExponentialFamily) and isinstance(t, TD.ExponentialFamily)
    if name in ("Beta", "Dirichlet"):  # (their carrier measure is not given, as PyTorch's)
        for base, d in ((ED.ExponentialFamily, e), (TD.ExponentialFamily, t)):
            with pytest.raises(NotImplementedError):
                base.entropy(d)
    else:
        bregman = ED.ExponentialFamily.entropy(e).detach().numpy()
        expected = TD.ExponentialFamily.entropy(t).detach().numpy()
        np.testing.assert_allclose(bregman, expected, rtol=1e-10)
        np.testing.assert_allclose(bregman, t.entropy().numpy(), rtol=1e-10, atol=1e-12)
    eq, tq = _make(ember, name, OTHER[name]), _make(torch, name, OTHER[name])
    generic = ED.kl.kl_expfamily_expfamily(e, eq).detach().numpy()
    np.testing.assert_allclose(generic, TD.kl_divergence(t, tq).numpy(), rtol=1e-9, atol=1e-12)


def test_a_family_without_its_own_kl_rule_uses_the_bregman_one():
    class Scaled(ED.ExponentialFamily):  # a user's member: Exponential by its natural form
        arg_constraints = {}

        def __init__(self, rate):
            self.rate = rate
            super().__init__(tuple(rate.shape), validate_args=False)

        @property
        def _natural_params(self):
            return (-self.rate,)

        def _log_normalizer(self, x):
            return -ember.log(-x)

        _mean_carrier_measure = 0

    p, q = Scaled(ember.tensor([0.7, 3.0])), Scaled(ember.tensor([2.0, 0.5]))
    expected = TD.kl_divergence(
        TD.Exponential(torch.tensor([0.7, 3.0])), TD.Exponential(torch.tensor([2.0, 0.5]))
    )
    np.testing.assert_allclose(
        ED.kl_divergence(p, q).detach().numpy(), expected.detach().numpy(), rtol=1e-5
    )
    np.testing.assert_allclose(
        p.entropy().detach().numpy(),
        TD.Exponential(torch.tensor([0.7, 3.0])).entropy().detach().numpy(),
        rtol=1e-5,
    )
    with pytest.raises(NotImplementedError):
        ED.kl_divergence(p, ED.Exponential(ember.tensor([1.0, 1.0])))
