"""PyTorch's complex-number API on real tensors (ops/real_complex.py, tensor_api.py): the
answers PyTorch gives for a real tensor, checked against torch, and the backend flags."""

from __future__ import annotations

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

VALUES = [-2.0, -0.0, 0.0, 3.0, float("nan"), float("inf"), -float("inf")]


def test_a_real_tensor_is_its_own_conjugate_and_real_part():
    x = ember.tensor([1.0, -2.0])
    for name in ("conj", "conj_physical", "resolve_conj", "resolve_neg"):
        assert getattr(x, name)() is x and getattr(ember, name)(x) is x
    assert ember.real(x) is x and x.real is x
    assert x.is_conj() is False and x.is_neg() is False
    assert ember.is_conj(x) is False
    with pytest.raises(RuntimeError, match="non-complex"):
        _ = x.imag
    with pytest.raises(RuntimeError, match="non-complex"):
        ember.imag(x)
    for flag in ("is_nested", "is_mkldnn", "is_xpu", "is_xla", "is_sparse_csr", "is_vulkan"):
        assert getattr(x, flag) is False and getattr(torch.tensor([1.0]), flag) is False


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_angle_of_real_values_and_its_gradient_equal_torchs(dtype):
    values = VALUES if dtype != "int64" else [-3, 0, 5]
    want = torch.angle(torch.tensor(values, dtype=getattr(torch, dtype)))
    got = ember.angle(ember.tensor(values, dtype=getattr(ember, dtype)))
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    if dtype != "int64":
        x = ember.tensor(values, dtype=getattr(ember, dtype), requires_grad=True)
        x.angle().sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.zeros(len(values)))


def test_mvlgamma_equals_torchs():
    values = np.array([2.5, 3.0, 7.25])
    np.testing.assert_allclose(
        ember.tensor(values).mvlgamma(3).numpy(),
        torch.tensor(values).mvlgamma(3).numpy(),
        rtol=1e-12,
    )
