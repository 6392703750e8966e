"""kernels/cscan.py: cumsum's C scan equals ops/cumulative.py's NumPy kernel bit for bit (the
same sequential sums in the same accumulator, each rounded once) along every axis of random
shapes, in float32/float64/bfloat16/float16, with NaN, infinities and a leading -0.0, on one
thread and two; integers and bools stay NumPy's; without a compiler it declines."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ember
from ember.kernels import ccompile, cpool, cscan
from ember.ops.cumulative import _cumsum_fast, _cumsum_kernel

needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")
DTYPES = [np.float32, np.float64, ml_dtypes.bfloat16, np.float16]


@needs_cc
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("seed", range(8))
def test_scans_equal_numpy_bit_for_bit(seed, dtype, threads):
    rng = np.random.default_rng(seed)
    shape = tuple(int(s) for s in rng.integers(1, 9, size=int(rng.integers(1, 5))))
    if seed == 0:
        shape = (300, 1000)  # (enough work for the pool)
    axis = int(rng.integers(0, len(shape)))
    x = (rng.standard_normal(shape) * 10).astype(dtype)
    flat = x.reshape(-1)
    flat[0] = -0.0  # (a running sum starts at the first value: -0.0 stays)
    if flat.size > 4:
        flat[1:4] = np.array([np.nan, np.inf, -np.inf]).astype(dtype)
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        got = _cumsum_fast(x, axis=axis)
    finally:
        cpool.set_num_threads(before)
    want = _cumsum_kernel(x, axis=axis)
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
        assert _cumsum_fast(x, axis=1) is None
        np.testing.assert_array_equal(ember.cumsum(ember.tensor(x), 1).numpy(), np.cumsum(x, 1))


def test_without_a_compiler_the_scan_declines(monkeypatch):
    monkeypatch.setattr(ccompile, "compiler_available", lambda: False)
    cscan._function.cache_clear()
    try:
        assert cscan.cumsum(np.ones((2, 3), np.float32), 1) is None
    finally:
        cscan._function.cache_clear()
