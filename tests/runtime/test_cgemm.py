"""kernels/cgemm.py: products split over ember's pool equal NumPy's, in every layout it takes."""

from __future__ import annotations

import numpy as np
import pytest

from ember.kernels import blas_threads, cgemm, cpool, gemm_tune

pytestmark = pytest.mark.skipif(not cgemm.available(np.float32), reason="no C compiler")


def _close(got, want):
    assert got is not None
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = 1e-4 if want.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def _transposed(x):
    """The same matrix values, stored column-major (what ``weight.T`` hands BLAS)."""
    return np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)


def _tuned(monkeypatch, wake_s: float, few=(gemm_tune.SKINNY,) * 6) -> None:
    """Make `matmul` follow a given tuning instead of this machine's: ``wake_s`` 0 shares every
    product over the pool, a huge one none; ``few`` the kernels of products of few rows."""
    tuning = gemm_tune.GemmTuning(
        "test", wake_s, 1e10, 1e10, {}, dict.fromkeys(gemm_tune.DTYPES, few)
    )
    monkeypatch.setattr(cgemm, "tuning", lambda: tuning)


def _has_blas() -> bool:
    return cgemm._functions(np.dtype(np.float32))[1] is not None


@pytest.fixture(params=["own", "blas"])
def kernel(request, monkeypatch):
    """ember's own GEMM, or the BLAS's called single-threaded (``EMBER_GEMM``)."""
    if request.param == "blas" and not _has_blas():
        pytest.skip("NumPy's BLAS is not an OpenBLAS ember can call")
    monkeypatch.setenv("EMBER_GEMM", request.param)
    return request.param


@pytest.fixture(params=["one thread", "split"])
def split(request, monkeypatch, kernel):
    monkeypatch.setattr(cgemm, "BLAS_ONE_THREAD", 0)  # every product takes the compiled path
    _tuned(monkeypatch, 1e9 if request.param == "one thread" else 0.0)
    return request.param


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "m,k,n",
    # edges of the own kernel's blocks: 8 rows, 48 (float32) or 24 columns, 192 deep
    [(1, 1, 1), (3, 5, 7), (1, 64, 1), (130, 70, 33), (17, 300, 500), (500, 40, 9), (9, 193, 49)]
    + [(200, 300, 1), (150, 1, 90)],
)
def test_two_dimensional_products_in_every_layout(m, k, n, dtype, split):
    rng = np.random.default_rng(m * k * n)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    want = a @ b
    if cgemm.vector_shaped(n, k):  # (a matrix by a vector, an outer product: NumPy's BLAS)
        assert cgemm.matmul(a, b) is None and cgemm.matmul(_transposed(a), b) is None
        return
    for x in (a, _transposed(a)):
        for y in (b, _transposed(b)):
            _close(cgemm.matmul(x, y), want)
    # rows of a larger array (a leading dimension wider than the matrix)
    wide = rng.standard_normal((m, k + 5)).astype(dtype)
    _close(cgemm.matmul(wide[:, :k], b), wide[:, :k] @ b)
    # a read down the columns of a wider array (a weight gradient's x.T of a slice)
    tall = rng.standard_normal((k, m + 3)).astype(dtype)[:, :m]
    _close(cgemm.matmul(tall.T, b), tall.T @ b)


def test_batched_and_broadcast_products(split):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 40, 24)).astype(np.float32)
    b = rng.standard_normal((2, 3, 24, 56)).astype(np.float32)
    _close(cgemm.matmul(a, b), a @ b)
    _close(cgemm.matmul(a, _transposed(b)), a @ b)
    _close(cgemm.matmul(a, b[0, 0]), a @ b[0, 0])  # one matrix for the whole batch
    _close(cgemm.matmul(a[0, :1], b[0]), a[0, :1] @ b[0])  # a batch of one broadcast
    # batches whose matrices are not one stride apart (gathered into one array first)
    _close(cgemm.matmul(a[:, ::2], b[:, ::2]), a[:, ::2] @ b[:, ::2])
    at, bt = a.transpose(1, 0, 2, 3), b.transpose(1, 0, 2, 3)
    _close(cgemm.matmul(at, bt), at @ bt)
    # batch dimensions that broadcast only in part are left to NumPy
    assert cgemm.matmul(a[:1], b[:, :1]) is None


def test_writes_into_a_given_array_and_refuses_what_it_cannot_take(split):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((32, 48)).astype(np.float32)
    out = np.full((64, 48), np.nan, np.float32)
    assert cgemm.matmul(a, b, out) is out
    _close(out, a @ b)
    assert cgemm.matmul(a, b, np.empty((64, 48), np.float64)) is None  # another dtype
    assert cgemm.matmul(a, b, np.empty((48, 64), np.float32).T) is None  # not C-contiguous
    assert cgemm.matmul(a, a[:, :32].copy(), a[:, :32]) is None  # overlaps an operand
    assert cgemm.matmul(a.astype(np.int64), b.astype(np.int64)) is None
    assert cgemm.matmul(a, b.astype(np.float64)) is None
    assert cgemm.matmul(a[:, ::2], b[::2]) is None  # no unit stride: not BLAS's layout
    assert cgemm.matmul(a[:0], b) is None  # empty: NumPy's


def test_small_products_are_left_to_numpy():
    a = np.ones((8, 8), np.float32)
    assert cgemm.matmul(a, a) is None  # OpenBLAS runs these on one thread itself


def test_an_empty_inner_dimension_is_left_to_numpy_and_gives_zeros(split):
    import ember

    a, b = np.ones((40, 0), np.float32), np.ones((0, 30), np.float32)
    assert cgemm.matmul(a, b) is None
    got = (ember.tensor(a) @ ember.tensor(b)).numpy()
    assert got.shape == (40, 30) and not got.any()


def test_nan_and_inf_propagate_as_in_numpy(split):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((20, 30)).astype(np.float32)
    b = rng.standard_normal((30, 50)).astype(np.float32)
    a[3, 4], b[7, 9] = np.nan, np.inf
    got, want = cgemm.matmul(a, b), a @ b
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-4)


def test_the_calling_threads_blas_setting_is_restored(split):
    if not _has_blas():
        pytest.skip("NumPy's BLAS is not an OpenBLAS ember can call")
    setter = blas_threads._setter()
    previous = setter(2)
    try:
        a = np.ones((256, 256), np.float32)
        _close(cgemm.matmul(a, a), a @ a)
        assert setter(2) == 2  # what it was before the product, not the product's one thread
    finally:
        setter(previous)


def test_the_matmul_op_equals_numpy_whatever_the_thread_count():
    import ember

    rng = np.random.default_rng(2)
    a = rng.standard_normal((300, 200)).astype(np.float32)
    b = rng.standard_normal((200, 100)).astype(np.float32)
    want = a @ b
    before = cpool.get_num_threads()
    try:
        for threads in (1, 2, 3):
            cpool.set_num_threads(threads)
            _close((ember.tensor(a) @ ember.tensor(b)).numpy(), want)
    finally:
        cpool.set_num_threads(before)


# ------------------------------------------------------------------------ few rows of A
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_products_of_few_rows_equal_numpy(dtype, transposed, threads, monkeypatch):
    """Every row count of `skinny` (1 to 8: whole and partial blocks of four), inner sizes off
    the vector width, column counts off its blocks, on one thread and shared over the pool."""
    _tuned(monkeypatch, 0.0 if threads == 2 else 1e9)
    rng = np.random.default_rng(threads)
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        for m in list(range(1, 9)) + [31]:
            for k, n in ((1, 1), (17, 5), (64, 70), (100, 33), (35, 131)):
                a = rng.standard_normal((m, k)).astype(dtype)
                b = rng.standard_normal((k, n)).astype(dtype)
                b = _transposed(b) if transposed else b
                want = a.astype(np.float64) @ b.astype(np.float64)
                _close(cgemm.skinny(a, b), want.astype(dtype))
                # a read down its columns, and both inside wider arrays (leading dimensions)
                _close(cgemm.skinny(_transposed(a), b), want.astype(dtype))
                wide_a = np.zeros((m, k + 3), dtype)
                wide_a[:, :k] = a
                wide_b = np.zeros((n + 2, k) if transposed else (k, n + 2), dtype)
                if transposed:
                    wide_b[:n] = b.T
                    inner = wide_b[:n].T
                else:
                    wide_b[:, :n] = b
                    inner = wide_b[:, :n]
                _close(cgemm.skinny(wide_a[:, :k], inner), want.astype(dtype))
                out = np.empty((m, n), dtype)
                assert cgemm.skinny(a, b, out) is out
                _close(out, want.astype(dtype))
    finally:
        cpool.set_num_threads(before)


def test_skinny_declines_what_it_does_not_take(monkeypatch):
    _tuned(monkeypatch, 1e9, (gemm_tune.SKINNY,) * 2 + (gemm_tune.OWN,) * 4)
    assert cgemm.skinny_rows(np.float32) == 2
    a = np.ones((3, 4), np.float32)
    b = np.ones((4, 3), np.float32)
    assert cgemm.skinny(a, b) is None  # too many rows
    assert cgemm.skinny(np.ones((2, 8), np.float32)[:, ::2], b) is None  # a strided both ways
    assert cgemm.skinny(a[:2], np.ones((8, 6), np.float32)[::2, ::2]) is None  # b too
    assert cgemm.skinny(a[:2], b.astype(np.float64)) is None  # mixed dtypes
    assert cgemm.skinny(a[:2], b, np.empty((2, 3), np.float64)) is None  # out of another dtype


def test_a_matrix_vector_product_takes_the_skinny_path(monkeypatch):
    _tuned(monkeypatch, 1e9)
    calls = []
    original = cgemm._skinny
    monkeypatch.setattr(cgemm, "_skinny", lambda *a, **k: calls.append(1) or original(*a, **k))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 784)).astype(np.float32)
    w = rng.standard_normal((512, 784)).astype(np.float32)
    _close(cgemm.matmul(x, w.T), (x.astype(np.float64) @ w.T.astype(np.float64)).astype(np.float32))
    assert calls == [1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_own_gemm_is_exact_on_small_integers_at_every_tile_and_packing_edge(dtype):
    """Integer-valued operands make every sum exact whatever its order, so a panel packed
    wrong (the sixteen-step transposition of A's rows and of a transposed B's, the tiles summed
    in the result, the partial tiles and panels, K past one packed block) shows as a wrong
    value, not as rounding."""
    rng = np.random.default_rng(11)
    functions = cgemm._functions(np.dtype(dtype))
    # (the rows past the last full panel of eight: one to seven of them, by two or three
    # vectors of columns, over one or several blocks of K)
    shapes = [(8, 16, 48), (9, 17, 32), (16, 33, 50), (40, 200, 96), (23, 31, 130)]
    shapes += [(65, 200, 100), (13, 400, 64), (3, 50, 48), (6, 20, 33), (34, 9, 130)]
    for m, k, n in shapes:
        a = rng.integers(-8, 8, (m, k)).astype(dtype)
        w = rng.integers(-8, 8, (n, k)).astype(dtype)
        wide = np.zeros((m, k + 5), dtype)  # (A's rows further apart than its length)
        wide[:, :k] = a
        for left in (a, wide[:, :k], np.asfortranarray(a)):
            for right in (w.T, np.ascontiguousarray(w.T)):
                got = cgemm._blocked(functions, left, right, None, (), blas=False, threaded=False)
                want = a.astype(np.float64) @ w.T.astype(np.float64)
                np.testing.assert_array_equal(got, want.astype(dtype))


# the products compared under two block depths (this process's, and a subprocess's other one)
_KC_PRODUCTS = """
import numpy as np
import ember
from ember.kernels import cgemm, cmicro
r = np.random.default_rng(7)
out = [cmicro.KC]
for dtype in (np.float32, np.float64):
    a = r.standard_normal((100, 700)).astype(dtype)
    b = r.standard_normal((700, 96)).astype(dtype)
    out.append(cgemm.matmul(a, b).tobytes().hex())
x = ember.tensor(r.standard_normal((64, 700)), dtype=ember.bfloat16)
w = ember.tensor(r.standard_normal((700, 80)), dtype=ember.bfloat16)
out.append((x @ w).float().numpy().tobytes().hex())
"""
_KC_PROBE = (
    """
import sys
from ember.kernels import cache_sizes
# (before the kernels read it: KC is derived when cmicro is imported)
cache_sizes.l1_data_bytes = lambda: int(sys.argv[1])
"""
    + _KC_PRODUCTS
    + """
print(" ".join(map(str, out)))
"""
)


def test_the_block_depth_follows_the_l1_cache_and_never_changes_a_product(monkeypatch):
    import os
    import subprocess
    import sys

    from ember.kernels import cmicro

    assert cmicro.block_depth(48 << 10) == 192 and cmicro.block_depth(32 << 10) == 128
    assert cmicro.block_depth(1 << 30) == 512 and cmicro.block_depth(1 << 10) == 64
    monkeypatch.setenv("EMBER_GEMM", "own")
    scope: dict = {}
    exec(_KC_PRODUCTS, scope)  # (this process's depth: its kernels are built already)
    here = [str(v) for v in scope["out"]]
    other = 48 << 10 if int(here[0]) == 128 else 32 << 10  # (a depth other than this CPU's)
    there = subprocess.run(
        [sys.executable, "-c", _KC_PROBE, str(other)],
        env=dict(os.environ, EMBER_GEMM="own"),
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout.split()
    assert int(there[0]) == cmicro.block_depth(other) != int(here[0])
    assert here[1:] == there[1:]  # the same bits: blocks continue each other's sums
