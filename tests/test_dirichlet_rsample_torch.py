"""Beta's and Dirichlet's rsample follow PyTorch's: the same draws for a seed, and PyTorch's
gradient estimator (distributions/_dirichlet_rsample.py), whose per-draw gradients PyTorch
approximates to about 1e-3 relative where ember computes them to float64 accuracy."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

_RTOL = 3e-3  # PyTorch's fitted approximations of the Beta derivative


def _close(got, want):
    scale = np.maximum(np.abs(want), 1e-6)
    assert np.max(np.abs(got - want) / scale) < _RTOL


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("a0, b0", [(0.7, 2.5), (5.0, 0.4), (0.05, 0.05), (30.0, 50.0)])
def test_beta(dtype, a0, b0):
    torch.manual_seed(3)
    ember.manual_seed(3)
    tdt, edt = getattr(torch, dtype), getattr(ember, dtype)
    a = torch.full((40,), a0, dtype=tdt, requires_grad=True)
    b = torch.full((40,), b0, dtype=tdt, requires_grad=True)
    ea = ember.full((40,), a0, dtype=edt, requires_grad=True)
    eb = ember.full((40,), b0, dtype=edt, requires_grad=True)
    x = torch.distributions.Beta(a, b).rsample((3,))
    ex = ember.distributions.Beta(ea, eb).rsample((3,))
    np.testing.assert_array_equal(ex.detach().numpy(), x.detach().numpy())
    w = np.linspace(-1, 2, 40)
    (x * torch.tensor(w, dtype=tdt)).sum().backward()
    (ex * ember.tensor(w, dtype=edt)).sum().backward()
    _close(ea.grad.numpy(), a.grad.numpy())
    _close(eb.grad.numpy(), b.grad.numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dirichlet(dtype):
    torch.manual_seed(5)
    ember.manual_seed(5)
    c = np.array([[0.3, 1.5, 4.0, 0.9], [2.0, 0.2, 0.7, 8.0]] * 10)
    tc = torch.tensor(c, dtype=getattr(torch, dtype), requires_grad=True)
    ec = ember.tensor(c, dtype=getattr(ember, dtype), requires_grad=True)
    y = torch.distributions.Dirichlet(tc).rsample()
    ey = ember.distributions.Dirichlet(ec).rsample()
    np.testing.assert_array_equal(ey.detach().numpy(), y.detach().numpy())
    w = np.random.default_rng(0).standard_normal(c.shape)
    (y * torch.tensor(w, dtype=y.dtype)).sum().backward()
    (ey * ember.tensor(w, dtype=ey.dtype)).sum().backward()
    _close(ec.grad.numpy(), tc.grad.numpy())


def test_one_part_dirichlet_has_zero_gradient():
    c = ember.tensor([[2.0], [0.5]], requires_grad=True)
    y = ember.distributions.Dirichlet(c).rsample()
    assert (
        y.tolist() == torch.distributions.Dirichlet(torch.tensor([[2.0], [0.5]])).rsample().tolist()
    )
    y.sum().backward()
    assert c.grad.tolist() == [[0.0], [0.0]]
