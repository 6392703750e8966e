"""ops/_matmul_kernels.py's `small_linear`: a linear layer's product at few rows, NumPy's, with
the bits of the route it shortcuts (`matmul_fast` plus the bias in place), and None elsewhere."""

import numpy as np
import pytest
import torch

import ember
from ember.kernels import cgemm
from ember.ops._matmul_kernels import matmul_fast, small_linear


def _route(x, w, b):
    out = matmul_fast(x, w.T)
    if b is not None:
        out += b
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows,k,n", [(1, 512, 10), (1, 784, 256), (3, 64, 48)])
def test_the_same_bits_as_the_route_it_shortcuts(dtype, rows, k, n):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((n, k)).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    wide = rng.standard_normal((rows, 2 * k)).astype(dtype)
    for x in (wide[:, :k].copy(), wide[:, ::2]):  # contiguous, and strided rows
        for bias in (b, None, b[:1]):
            got = small_linear(x, w, bias)
            assert got is not None and got.dtype == dtype
            assert got.tobytes() == _route(x, w, bias).tobytes()
    want = torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b))
    np.testing.assert_allclose(small_linear(x, w, b), want.numpy(), rtol=1e-5, atol=1e-4)


def test_declines_what_it_does_not_run(monkeypatch):
    w = np.ones((10, 64), np.float32)
    assert small_linear(np.ones((2, 3, 64), np.float32), w, None) is None  # (batched)
    assert small_linear(np.ones((1, 64), np.float64), w, None) is None  # (mixed dtypes)
    half = ember.bfloat16.np
    assert small_linear(np.ones((1, 64), half), w.astype(half), None) is None
    assert small_linear(np.ones((1, 64), np.int64), w.astype(np.int64), None) is None
    big = np.ones((64, 512), np.float32)
    assert small_linear(big, np.ones((512, 512), np.float32), None) is None
    # the threshold is kernels/cgemm.py's, so lowering it sends the product to the pack's route
    monkeypatch.setattr(cgemm, "BLAS_ONE_THREAD", 0)
    assert small_linear(np.ones((1, 64), np.float32), w, None) is None


def test_a_linear_layer_at_batch_one_matches_pytorch():
    ember.manual_seed(0)
    layer = ember.nn.Linear(512, 10)
    twin = torch.nn.Linear(512, 10)
    with torch.no_grad():
        twin.weight.copy_(torch.from_numpy(layer.weight.detach().numpy().copy()))
        twin.bias.copy_(torch.from_numpy(layer.bias.detach().numpy().copy()))
    x = np.random.default_rng(1).standard_normal((1, 512)).astype(np.float32)
    ex = ember.tensor(x, requires_grad=True)
    tx = torch.from_numpy(x).requires_grad_()
    ey, ty = layer(ex), twin(tx)
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    ey.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)
