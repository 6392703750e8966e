"""trapezoid/trapz with a constant spacing take PyTorch's one-pass form,
``(sum(y) - (y[0] + y[-1]) / 2) * dx``: its values (within the sum's rounding), its NaN where
an end is infinite, its float result for integer samples, and its gradient."""

import math

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")


@pytest.mark.parametrize(
    "shape, dim, dx",
    [((64, 300), -1, 0.3), ((7, 5, 9), 1, None), ((200,), 0, 2), ((3, 1), 1, 0.1), ((4, 0), 0, 1)],
    ids=str,
)
def test_values_and_gradients_follow_pytorch(shape, dim, dx):
    y = np.random.default_rng(0).standard_normal(shape)
    kwargs = {} if dx is None else {"dx": dx}
    ty = torch.tensor(y, requires_grad=True)
    ey = ember.tensor(y, requires_grad=True)
    want, got = torch.trapezoid(ty, dim=dim, **kwargs), ember.trapezoid(ey, dim=dim, **kwargs)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12, atol=1e-12)
    want.sum().backward()
    got.sum().backward()
    np.testing.assert_allclose(ey.grad.numpy(), ty.grad.numpy(), rtol=0, atol=0)
    assert ember.trapz(ey, dim=dim, **kwargs).shape == tuple(want.shape)


def test_infinite_ends_and_integer_samples():
    for values in ([1.0, math.inf, 2.0], [math.inf, 1.0, 2.0], [-math.inf, 0.0, math.inf]):
        want = torch.trapezoid(torch.tensor(values)).item()
        got = ember.trapezoid(ember.tensor(values)).item()
        assert (math.isnan(want) and math.isnan(got)) or want == got, values
    for dx in (1, 2, 0.5):
        want = torch.trapezoid(torch.arange(5), dx=dx)
        got = ember.trapezoid(ember.arange(5), dx=dx)
        assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
        assert got.item() == want.item()
