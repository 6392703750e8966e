"""kernels/chgemm.py: half-precision products (16-bit operands, float32 sums, one rounding)
agree with the NumPy reference kernel (a float32 product rounded once) within the rounding of
both, in every layout, shape and batch it takes, on AVX512_BF16's dot products and on the
portable kernel, on one thread and over the pool."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import dtypes as dt
from ember.kernels import ccompile, cgemm, chgemm
from ember.ops._matmul_kernels import matmul_fast, matmul_kernel

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")

HALF = [np.dtype(dt.bfloat16.np), np.dtype(np.float16)]


@pytest.fixture(params=["dot pairs", "portable"])
def kernel(request, monkeypatch):
    """bfloat16 on AVX512_BF16's dot products (where this CPU has them) or on float32 panels."""
    monkeypatch.setenv("EMBER_BF16_DOT", "1" if request.param == "dot pairs" else "0")
    return request.param


@pytest.fixture(params=["one thread", "pool"])
def threads(request, monkeypatch):
    monkeypatch.setattr(
        cgemm, "split_flops", lambda: 10**18 if request.param == "one thread" else 0
    )
    return request.param


def _tolerance(a, b, want):
    """Per element: one rounding of the result apart (a float32 sum on either side of a tie:
    eps of the half type at the result's magnitude; a bias joins the float32 sums before that
    rounding, as in PyTorch), plus a float32 sum's reordering, k eps32 of sum |a||b|."""
    eps = float(ml_dtypes.finfo(want.dtype).eps)  # (bfloat16: 2**-7, the ulp at 1)
    k = a.shape[-1]
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    magnitude = np.abs(want.astype(np.float64))
    return eps * (magnitude + eps * scale) + 2 * k * 2.0**-24 * scale


def _check(got, a, b, bias=None):
    if bias is None:
        want = matmul_kernel(a, b)
    else:  # the bias added to the float32 sums, one rounding
        wide = np.matmul(a.astype(np.float32), b.astype(np.float32)) + bias.astype(np.float32)
        want = wide.astype(a.dtype)
    assert got is not None and got.shape == want.shape and got.dtype == want.dtype
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    tol = _tolerance(a, b, want)
    assert (err <= tol).all(), f"max error {err.max()} (allowed {tol.flat[err.argmax()]})"


def _operand(r, shape, dtype, transposed=False):
    x = r.standard_normal(shape).astype(dtype)
    return np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2) if transposed else x


# (m, k, n): fewer rows than the micro-kernel's 8 (run unpacked), odd sizes, K past one block
SHAPES = [(1, 1, 1), (7, 5, 3), (5, 300, 200), (8, 192, 48), (9, 193, 49), (33, 385, 97)]
SHAPES += [(100, 64, 300)]


@pytest.mark.parametrize("dtype", HALF, ids=["bfloat16", "float16"])
@pytest.mark.parametrize("mkn", SHAPES, ids=str)
@pytest.mark.parametrize("ta", [False, True], ids=["A", "At"])
@pytest.mark.parametrize("tb", [False, True], ids=["B", "Bt"])
def test_products_in_every_layout(dtype, mkn, ta, tb, kernel, threads):
    m, k, n = mkn
    r = np.random.default_rng(m * 1000 + k + n)
    a, b = _operand(r, (m, k), dtype, ta), _operand(r, (k, n), dtype, tb)
    _check(chgemm.matmul(a, b), a, b)
    bias = r.standard_normal(n).astype(dtype)
    _check(chgemm.matmul(a, b, None, bias), a, b, bias)


@pytest.mark.parametrize("dtype", HALF, ids=["bfloat16", "float16"])
def test_batches_broadcast_and_strided_operands(dtype, kernel, threads):
    r = np.random.default_rng(5)
    a = r.standard_normal((3, 4, 17, 40)).astype(dtype)
    b = r.standard_normal((4, 40, 23)).astype(dtype)
    _check(chgemm.matmul(a, b), a, b)
    strided = r.standard_normal((6, 17, 80)).astype(dtype)[::2, :, ::2]  # not one stride apart
    _check(chgemm.matmul(strided, b[:1]), strided, b[:1])
    rows = r.standard_normal((2, 5, 40)).astype(dtype)
    out = np.empty((2, 5, 23), dtype)
    assert chgemm.matmul(rows, b[0], out) is out
    _check(out, rows, b[0])


def test_what_it_declines():
    r = np.random.default_rng(6)
    a = r.standard_normal((4, 0)).astype(HALF[0])
    assert chgemm.matmul(a, np.zeros((0, 3), HALF[0])) is None  # empty: NumPy's zeros
    assert chgemm.matmul(a, np.zeros((0, 3), HALF[1])) is None  # mixed dtypes
    f = np.zeros((2, 2), np.float32)
    assert chgemm.matmul(f, f) is None
    got = matmul_fast(a, np.zeros((0, 3), HALF[0]))  # (the fast rule still answers)
    assert got.shape == (4, 3) and not got.astype(np.float32).any()


def test_special_values_propagate(kernel):
    dtype = HALF[0]
    a = np.ones((9, 6), dtype)
    b = np.ones((6, 50), dtype)
    a[2, 3] = np.nan
    b[1, 7] = np.inf
    got = chgemm.matmul(a, b).astype(np.float32)
    want = matmul_kernel(a, b).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(want)], want[~np.isnan(want)])


def test_the_portable_kernel_is_forced_and_the_pairs_follow_the_cpu(monkeypatch):
    monkeypatch.setenv("EMBER_BF16_DOT", "0")
    assert not chgemm.uses_pairs(HALF[0])
    monkeypatch.setenv("EMBER_BF16_DOT", "1")
    with open("/proc/cpuinfo") as f:
        has = " avx512_bf16" in f.read()
    assert chgemm.uses_pairs(HALF[0]) == has  # (-march=native targets this CPU)
    assert not chgemm.uses_pairs(HALF[1])


@pytest.mark.parametrize("d", [ember.bfloat16, ember.float16], ids=["bfloat16", "float16"])
def test_ops_run_it_eagerly(d, kernel):
    r = np.random.default_rng(7)
    x = r.standard_normal((2, 9, 70)).astype(d.np)
    w = r.standard_normal((33, 70)).astype(d.np)
    bias = r.standard_normal(33).astype(d.np)
    got = F.linear(ember.tensor(x), ember.tensor(w), ember.tensor(bias)).numpy()
    _check(got, x, w.T, bias)
    got = (ember.tensor(x) @ ember.tensor(w.T)).numpy()
    _check(got, x, w.T)
    m1 = x[0]
    got = ember.addmm(ember.tensor(bias), ember.tensor(m1), ember.tensor(w.T)).numpy()
    _check(got, m1, w.T, bias)
    got = ember.bmm(ember.tensor(x), ember.tensor(np.stack([w.T, w.T]))).numpy()
    _check(got, x, np.stack([w.T, w.T]))
