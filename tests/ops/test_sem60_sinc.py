"""sinc's gradient is PyTorch's sinc_backward: 0 where ``pi x^2`` underflows (a composite's
autodiff gave -inf at 1e-300 in float64 and NaN at 1e-40 in float32), and its double backward
and complex gradient agree with PyTorch's."""

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch", reason="PyTorch (the reference) is not installed")

TINY = [
    1e-300,
    -1e-300,
    1e-200,
    1e-40,
    1e-30,
    1e-20,
    -1e-20,
    1e-10,
    1e-5,
    0.0,
    -0.0,
    0.3,
    -2.5,
    1.0,
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gradient_at_tiny_x_is_pytorchs(dtype):
    x = np.array(TINY).astype(dtype)
    ours = ember.tensor(x, requires_grad=True)
    ember.sinc(ours).sum().backward()
    ref = torch.tensor(x, requires_grad=True)
    torch.sinc(ref).sum().backward()
    np.testing.assert_array_equal(
        ember.sinc(ember.tensor(x)).numpy(), torch.sinc(torch.tensor(x)).numpy()
    )
    assert np.isfinite(ours.grad.numpy()).all()
    # (the same formula, op for op: equal but for the last bits of the library's sin/cos)
    np.testing.assert_allclose(
        ours.grad.numpy(), ref.grad.numpy(), rtol=1e-5 if dtype == "float32" else 1e-12, atol=0
    )


def test_double_backward_and_complex_match_pytorch():
    r = np.random.default_rng(0)
    x = r.uniform(-2, 2, 7)
    ours = ember.tensor(x, requires_grad=True)
    (g,) = ember.autograd.grad(ember.sinc(ours).sum(), ours, create_graph=True)
    (gg,) = ember.autograd.grad(g.sum(), ours)
    ref = torch.tensor(x, requires_grad=True)
    (tg,) = torch.autograd.grad(torch.sinc(ref).sum(), ref, create_graph=True)
    (tgg,) = torch.autograd.grad(tg.sum(), ref)
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-10, atol=1e-12)
    z = x[:6].reshape(3, 2) @ np.array([1.0, 1j])
    zo = ember.tensor(z, requires_grad=True)
    ember.sinc(zo).abs().sum().backward()
    zt = torch.tensor(z, requires_grad=True)
    torch.sinc(zt).abs().sum().backward()
    np.testing.assert_allclose(zo.grad.numpy(), zt.grad.numpy(), rtol=1e-12, atol=1e-14)
