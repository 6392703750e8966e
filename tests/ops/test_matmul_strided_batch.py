"""A batched left operand that is not C-contiguous (a batch-first sequence seen sequence-first,
as MultiheadAttention's projections read it) times a matrix: both matmul kernels fold it into
one product and agree with NumPy's float64 product and with torch."""

from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.ops._matmul_kernels import matmul_fast, matmul_kernel

torch = pytest.importorskip("torch")


def _tol(dtype, k: int, scale: float) -> float:
    # k rounding errors of one unit at most, summed at random: eps * sqrt(k) * scale, x 8
    return 8 * np.finfo(dtype).eps * np.sqrt(k) * scale


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", [matmul_kernel, matmul_fast])
@pytest.mark.parametrize(
    "shape, perm",
    [((8, 128, 256), (1, 0, 2)), ((3, 5, 7, 33), (2, 0, 1, 3)), ((4, 70, 64), (1, 0, 2))],
)
def test_strided_batch_times_matrix(kernel, dtype, shape, perm):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape).astype(dtype).transpose(perm)
    n = 96
    w = rng.standard_normal((n, shape[-1])).astype(dtype)
    assert not a.flags.c_contiguous
    want = a.astype(np.float64) @ w.T.astype(np.float64)
    got = kernel(a, w.T)
    assert got.shape == want.shape and got.dtype == dtype
    scale = float(np.abs(a).max() * np.abs(w).max() * shape[-1] ** 0.5)
    np.testing.assert_allclose(got, want, rtol=0, atol=_tol(dtype, shape[-1], scale))
    # into a given result (an arena slot)
    out = np.empty(want.shape, dtype)
    assert kernel(a, w.T, out) is out
    np.testing.assert_allclose(out, want, rtol=0, atol=_tol(dtype, shape[-1], scale))


def test_batch_first_attention_matches_torch_in_inference():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 128, 64)).astype(np.float32)
    em = ember.nn.MultiheadAttention(64, 4, batch_first=True).eval()
    tm = torch.nn.MultiheadAttention(64, 4, batch_first=True).eval()
    with torch.no_grad():
        for name, p in tm.named_parameters():
            p.copy_(torch.from_numpy(dict(em.named_parameters())[name].detach().numpy()))
    ex, tx = ember.tensor(x), torch.from_numpy(x)
    with ember.no_grad():
        got = em(ex, ex, ex, need_weights=False)[0].detach().numpy()
        fn = ember.function(lambda t: em(t, t, t, need_weights=False)[0])
        got_fn = fn(ex).numpy()
    with torch.no_grad():
        want = tm(tx, tx, tx, need_weights=False)[0].numpy()
    tol = _tol(np.float32, 64, float(np.abs(want).max()) * 8)
    np.testing.assert_allclose(got, want, rtol=0, atol=tol)
    np.testing.assert_allclose(got_fn, want, rtol=0, atol=tol)


def test_linear_on_a_transposed_view():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((6, 40, 32)).astype(np.float32)
    w, b = rng.standard_normal((48, 32)).astype(np.float32), rng.standard_normal(48)
    b = b.astype(np.float32)
    with ember.no_grad():
        got = F.linear(ember.tensor(x).transpose(0, 1), ember.tensor(w), ember.tensor(b))
    want = torch.nn.functional.linear(
        torch.from_numpy(x).transpose(0, 1), torch.from_numpy(w), torch.from_numpy(b)
    ).numpy()
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=_tol(np.float32, 32, 64.0))


def test_strided_batch_runs_as_one_product():
    """The fold itself: the product is called once, on a 2-d first operand (not once per batch
    entry of 8 rows, each packing the whole weight again)."""
    from ember.ops import _matmul_kernels

    calls = []

    def product(a, b, out=None):
        calls.append(a.shape)
        return np.matmul(a, b, out=out)

    a = np.ones((8, 128, 16), np.float32).transpose(1, 0, 2)
    w = np.ones((24, 16), np.float32)
    got = _matmul_kernels._matmul(a, w.T, None, product)
    assert calls == [(1024, 16)]
    assert got.shape == (128, 8, 24) and np.all(got == 16)
