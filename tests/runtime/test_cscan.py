"""kernels/cscan.py: cumsum's and cumprod's C scans equal ops/cumulative.py's NumPy kernels bit
for bit (the same sequential sums or products in the same accumulator, each rounded once) along
every axis of random shapes, in float32/float64/bfloat16/float16, with NaN, infinities, zeros
and a leading -0.0, on one thread and two; integers and bools stay NumPy's; without a compiler
they decline."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.kernels import ccompile, cpool, cscan
from ember.ops.cumulative import _CUMPROD, _CUMSUM, _cumsum_kernel

_cumsum_fast = _CUMSUM.fast

needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")
DTYPES = [np.float32, np.float64, ml_dtypes.bfloat16, np.float16]


@needs_cc
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("op", [_CUMSUM, _CUMPROD], ids=lambda op: op.name)
def test_scans_equal_numpy_bit_for_bit(op, seed, dtype, threads):
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 9, size=int(rng.integers(1, 5))))
    if seed == 0:
        shape = (300, 1000)  # (enough work for the pool)
    axis = int(rng.integers(0, len(shape)))
    # (products of values near 1 stay finite along a thousand terms; some zeros in them)
    scale, offset = (10, 0) if op is _CUMSUM else (0.05, 1)
    x = (rng.standard_normal(shape) * scale + offset).astype(dtype)
    if op is _CUMPROD:
        x[rng.random(shape) < 0.01] = 0
    flat = x.reshape(-1)
    flat[0] = -0.0  # (a running sum starts at the first value: -0.0 stays)
    if flat.size > 4:
        flat[1:4] = np.array([np.nan, np.inf, -np.inf]).astype(dtype)
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        got = op.fast(x, axis=axis)
    finally:
        cpool.set_num_threads(before)
    want = op.kernel(x, axis=axis)
    assert got is not None and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@needs_cc
def test_strided_inputs_and_the_public_function():
    x = np.random.default_rng(3).standard_normal((6, 40)).astype(np.float32)[:, ::3]
    np.testing.assert_array_equal(_cumsum_fast(x, axis=1), _cumsum_kernel(x, axis=1))
    t = ember.tensor(x, requires_grad=True)
    y = ember.cumsum(t, 1)
    np.testing.assert_array_equal(y.detach().numpy(), _cumsum_kernel(x, axis=1))
    y.backward(ember.ones_like(y))
    np.testing.assert_allclose(t.grad.numpy(), np.arange(x.shape[1], 0, -1) * np.ones((6, 1)))


def test_integers_and_bools_stay_numpys():
    for x in (np.arange(12).reshape(3, 4), np.ones((2, 3), bool)):
        assert _cumsum_fast(x, axis=1) is None and _CUMPROD.fast(x, axis=1) is None
        np.testing.assert_array_equal(ember.cumsum(ember.tensor(x), 1).numpy(), np.cumsum(x, 1))
        np.testing.assert_array_equal(ember.cumprod(ember.tensor(x), 1).numpy(), np.cumprod(x, 1))


def test_without_a_compiler_the_scan_declines(monkeypatch):
    monkeypatch.setattr(ccompile, "compiler_available", lambda: False)
    cscan._function.cache_clear()
    try:
        assert cscan.cumsum(np.ones((2, 3), np.float32), 1) is None
        assert cscan.cumprod(np.ones((2, 3), np.float32), 1) is None
    finally:
        cscan._function.cache_clear()


@pytest.mark.parametrize("seed", range(4))
def test_cumprod_gradients_eager_and_captured_match_pytorch(seed):
    # eagerly an input without zeros takes the plain formula; a captured graph (no values
    # known) the one exact at zeros: both PyTorch's gradient, and zeros too
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 7, size=int(rng.integers(1, 4))))
    axis = int(rng.integers(0, len(shape)))
    g = rng.standard_normal(shape)
    for x in (rng.standard_normal(shape) * 0.5 + 1, np.where(rng.random(shape) < 0.3, 0, g)):
        t = torch.tensor(x, requires_grad=True)
        t.cumprod(axis).backward(torch.tensor(g))
        e = ember.tensor(x, requires_grad=True)
        e.cumprod(axis).backward(ember.tensor(g))
        np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)

        @ember.function
        def grad(v, w):
            return ember.autograd.grad(ember.cumprod(v, axis), v, w)[0]

        np.testing.assert_allclose(
            grad(ember.tensor(x), ember.tensor(g)).numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12
        )
