"""kernels/cgemm.py's products against NumPy's float64 over sizes at every edge of the
micro-kernel's tiles (8 rows, 48 float32 / 24 float64 columns, blocks of KC steps), in every
layout BLAS reads in place, with ember's own GEMM and the BLAS's, on one thread and split over
the pool; NaN and infinities where they fall; bfloat16 products (kernels/chgemm.py) likewise
against float64 sums of the same bfloat16 values."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

from ember.kernels import cgemm, chgemm, cmicro, gemm_tune

pytestmark = pytest.mark.skipif(not cgemm.available(np.float32), reason="no C compiler")

_EDGES = (1, 7, 15, 16, 17, 31, 33, 63, 65, 127, 129)


def _shapes(count: int, seed: int):
    """``count`` (m, k, n) drawn from the edges, plus tall-skinny, wide and deep ones."""
    rng = np.random.default_rng(seed)
    shapes = [tuple(int(x) for x in rng.choice(_EDGES, 3)) for _ in range(count)]
    return shapes + [(1031, 9, 17), (5, 13, 1100), (33, 2 * cmicro.KC + 1, 49), (200, 64, 1)]


def _layouts(x):
    """``x`` as BLAS reads it in place: row-major, column-major, rows further apart than
    their length, and columns further apart."""
    m, k = x.shape
    padded = np.zeros((m, k + 3), x.dtype)
    padded[:, :k] = x
    padded_t = np.zeros((k, m + 5), x.dtype)
    padded_t[:, :m] = x.T
    return x, np.asfortranarray(x), padded[:, :k], padded_t[:, :m].T


@pytest.fixture(params=["own", "blas"])
def kernel(request, monkeypatch):
    if request.param == "blas" and cgemm._functions(np.dtype(np.float32))[1] is None:
        pytest.skip("NumPy's BLAS is not an OpenBLAS ember can call")
    monkeypatch.setenv("EMBER_GEMM", request.param)
    monkeypatch.setattr(cgemm, "BLAS_ONE_THREAD", 0)  # every product takes the compiled path
    return request.param


def _tuned(monkeypatch, split: bool) -> None:
    tuning = gemm_tune.GemmTuning(
        "test", 0.0 if split else 1e9, 1e10, 1e10, {}, dict.fromkeys(gemm_tune.DTYPES, ())
    )
    monkeypatch.setattr(cgemm, "tuning", lambda: tuning)


@pytest.mark.parametrize("split", [False, True], ids=["one thread", "split"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_edge_sizes_in_every_layout_equal_float64_products(kernel, split, dtype, monkeypatch):
    _tuned(monkeypatch, split)
    rng = np.random.default_rng(56)
    eps = np.finfo(dtype).eps
    for m, k, n in _shapes(14, seed=int(split) + 2 * (dtype == np.float64)):
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        exact = a.astype(np.float64) @ b.astype(np.float64)
        # (a sum of k rounded products: |error| <= k eps sum |a||b|, of order sqrt(k) here)
        bound = 2 * k * eps * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
        for left, right in itertools.product(_layouts(a), _layouts(b.T.copy())):
            right = right.T  # (b's values in b's layouts, transposed or not)
            got = cgemm.matmul(left, right)
            if got is None:  # (a vector-shaped product: NumPy's gemv, by design)
                assert cgemm.vector_shaped(n, k)
                continue
            assert got.shape == (m, n) and got.dtype == dtype
            assert np.all(np.abs(got - exact) <= bound), (m, k, n, kernel)


@pytest.mark.filterwarnings("ignore:invalid value encountered in matmul:RuntimeWarning")
@pytest.mark.parametrize("split", [False, True], ids=["one thread", "split"])
def test_nan_and_infinities_reach_exactly_the_results_they_touch(kernel, split, monkeypatch):
    _tuned(monkeypatch, split)
    rng = np.random.default_rng(5)
    m, k, n = 65, 2 * cmicro.KC + 3, 129
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    a[3, 7] = np.nan  # row 3 all NaN
    a[40, k - 1] = np.inf  # row 40: +-inf by b's last row's signs
    b[k - 1, 5] = 0.0  # ...but inf * 0 = NaN in column 5
    b[cmicro.KC, 100] = -np.inf  # column 100: -+inf by a's column KC's signs
    got = cgemm.matmul(a, b)
    with np.errstate(invalid="ignore", over="ignore"):
        want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
    assert np.isnan(got[3]).all() and np.isnan(got[40, 5]) and np.isinf(got[41, 100])


@pytest.mark.skipif(not chgemm.available(ml_dtypes.bfloat16), reason="no bfloat16 GEMM")
def test_bfloat16_products_at_the_edges_round_float32_sums_once():
    rng = np.random.default_rng(7)
    bf16 = ml_dtypes.bfloat16
    ran = 0
    for m, k, n in _shapes(10, seed=9):
        a = rng.standard_normal((m, k)).astype(bf16)
        b = rng.standard_normal((k, n)).astype(bf16)
        exact = a.astype(np.float64) @ b.astype(np.float64)
        scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
        for left in (a, np.asfortranarray(a)):
            got = chgemm.matmul(left, b)
            if got is None:
                continue
            ran += 1
            assert got.dtype == bf16 and got.shape == (m, n)
            # float32 sums (2 k 2^-24 of the scale), one rounding to bfloat16 (2^-8 relative)
            err = np.abs(got.astype(np.float64) - exact)
            assert np.all(err <= 2 * k * 2.0**-24 * scale + 2.0**-8 * np.abs(exact) + 1e-30)
    assert ran >= 20
