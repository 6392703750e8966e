"""kernels/chalf.py: casts between float32, bfloat16 and float16 in C equal NumPy's (ml_dtypes'
for bfloat16) bit for bit, NaN as NaN, on every 16-bit pattern and on random float32 bit
patterns."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import dtypes as dt
from ember.kernels import ccompile, chalf

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")

BF16, F16, F32 = np.dtype(dt.bfloat16.np), np.dtype(np.float16), np.dtype(np.float32)


def _same(got, want):
    """Equal bit for bit, except that any NaN matches any NaN (payloads are not specified)."""
    assert got is not None and got.dtype == want.dtype and got.shape == want.shape
    with np.errstate(invalid="ignore"):
        g, w = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(w)
    np.testing.assert_array_equal(np.isnan(g), nan)
    bits = np.uint16 if want.itemsize == 2 else np.uint32
    np.testing.assert_array_equal(got.view(bits)[~nan], want.view(bits)[~nan])


def _float32_patterns():
    """Random float32 bit patterns (every exponent, NaNs, subnormals) and the boundaries of
    both half types: their largest values, the ties that round to infinity, subnormals."""
    r = np.random.default_rng(0)
    bits = r.integers(0, 1 << 32, size=1 << 18, dtype=np.uint64).astype(np.uint32)
    edges = [65504, 65519.99, 65520, 65536, 2.0**-24, 1.5 * 2.0**-24, 2.0**-25, 2.0**-26]
    edges += [3.3895e38, 3.39e38, 1e-40, 9.2e-41, -0.0, 0.0, np.inf, -np.inf, np.nan]
    edges = np.array(edges + [-e for e in edges], np.float32)
    return np.concatenate([bits.view(np.float32), edges])


@pytest.mark.parametrize("half", [BF16, F16], ids=["bfloat16", "float16"])
def test_widening_every_pattern(half):
    x = np.arange(1 << 16, dtype=np.uint16).view(half)
    _same(chalf.cast(x, F32), x.astype(F32))


@pytest.mark.parametrize("half", [BF16, F16], ids=["bfloat16", "float16"])
def test_narrowing_rounds_to_nearest_even(half):
    x = _float32_patterns()
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(half)
    _same(chalf.cast(x, half), want)


@pytest.mark.parametrize("pair", [(BF16, F16), (F16, BF16)], ids=["bf16-f16", "f16-bf16"])
def test_between_half_types_rounds_once(pair):
    source, target = pair
    x = np.arange(1 << 16, dtype=np.uint16).view(source)
    with np.errstate(over="ignore", invalid="ignore"):
        want = x.astype(F32).astype(target)  # (widening is exact: one rounding)
    _same(chalf.cast(x, target), want)


@pytest.mark.parametrize("shape", [(0,), (3, 0, 2), (1,), (7, 5), (3, 1000)])
def test_shapes_and_non_contiguous(shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    for half in (BF16, F16):
        _same(chalf.cast(x, half), x.astype(half))
        if x.ndim == 2 and x.size:
            view = x[:, ::2].T  # strided and transposed
            _same(chalf.cast(view, half), view.astype(half))
            h = x.astype(half)[::-1]
            _same(chalf.cast(h, F32), h.astype(F32))


def test_large_arrays_share_the_pool_and_write_into_out():
    x = np.random.default_rng(2).standard_normal(chalf.PARALLEL_MIN + 77).astype(np.float32)
    out = np.empty(x.shape, BF16)
    assert chalf.cast(x, BF16, out) is out
    _same(out, x.astype(BF16))
    assert chalf.cast(x, BF16, np.empty(x.shape, F16)) is None  # (out of another dtype)
    assert chalf.cast(x, np.float64) is None and chalf.cast(x, F32) is None


def test_tensor_to_runs_the_c_cast_and_matches_numpy():
    x = np.random.default_rng(3).standard_normal((64, 33)).astype(np.float32)
    for d in (ember.bfloat16, ember.float16):
        t = ember.tensor(x).to(d)
        _same(t.numpy(), x.astype(d.np))
        _same(t.to(ember.float32).numpy(), x.astype(d.np).astype(F32))


@pytest.mark.parametrize("shape", [(), (1,), (2, 3)])
def test_numpy_fallbacks_keep_the_shape(shape, monkeypatch):
    # without a compiler (cast declines) the conversions are NumPy's, 0-d arrays included
    monkeypatch.setattr(chalf, "cast", lambda *a, **k: None)
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    for half in (dt.bfloat16.np, dt.float16.np):
        narrow = chalf.from_float32(x, half)
        wide = chalf.to_float32(narrow)
        assert narrow.shape == wide.shape == shape and wide.dtype == np.float32
        np.testing.assert_array_equal(wide, x)
