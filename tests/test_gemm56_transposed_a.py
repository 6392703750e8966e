"""ember's own GEMM packs a transposed A (a weight gradient's ``x.T @ dy``) in groups of rows of
``a`` sized from the L1 cache: the groups' edges must never change a value. Sums run in the order
of k whatever the layout, so a transposed A gives the bits of its contiguous copy."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from ember.kernels import cgemm

pytestmark = pytest.mark.skipif(not cgemm.available(np.float32), reason="no C compiler")

_EDGES = (1, 7, 15, 16, 17, 31, 33, 63, 65, 127, 129)


def _own(a, b):
    functions = cgemm._functions(np.dtype(a.dtype))
    return cgemm._blocked(functions, a, b, None, (), blas=False, threaded=False)


def _transposed(x):
    """The same values stored column-major (what ``x.T`` of a row-major array hands BLAS)."""
    return np.asfortranarray(x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_transposed_a_gives_the_bits_of_its_contiguous_copy(dtype):
    rng = np.random.default_rng(56)
    shapes = [(m, k, n) for m in _EDGES for k, n in ((m + 2, 33), (200, 7), (17, 129))]
    shapes += [(1024, 40, 50), (300, 1, 64), (9, 1000, 20)]
    for m, k, n in shapes:
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        want = _own(a, b)
        for left in (_transposed(a), np.ascontiguousarray(np.pad(a.T, ((0, 3), (0, 5))))[:k, :m].T):
            _own(np.full_like(a, np.nan), b)  # (no stale panel left in the scratch)
            got = _own(left, b)
            np.testing.assert_array_equal(got, want, err_msg=f"{m}x{k}x{n}")
        exact = a.astype(np.float64) @ b.astype(np.float64)
        tol = 1e-5 if dtype == np.float32 else 1e-13
        np.testing.assert_allclose(want, exact, rtol=tol, atol=tol * np.sqrt(k) * 4)


def test_integer_sums_are_exact_for_a_weight_gradients_shape():
    """Exact small-integer sums: a value dealt to the wrong panel or step shows as an error, not
    as rounding (a weight gradient's x.T @ dy, x 1024 x 1024)."""
    rng = np.random.default_rng(3)
    x = rng.integers(-4, 4, (1024, 1031)).astype(np.float32)
    dy = rng.integers(-4, 4, (1024, 65)).astype(np.float32)
    got = _own(x.T, dy)
    np.testing.assert_array_equal(got, (x.T.astype(np.float64) @ dy).astype(np.float32))


_PRODUCTS = """
import numpy as np
from ember.kernels import cgemm
def products():
    r = np.random.default_rng(5)
    out = []
    for m, k, n in ((129, 77, 50), (1031, 33, 17), (16, 301, 96)):
        a = r.standard_normal((k, m)).astype(np.float32)
        b = r.standard_normal((k, n)).astype(np.float32)
        f = cgemm._functions(np.dtype(np.float32))
        out.append(cgemm._blocked(f, a.T, b, None, (), blas=False, threaded=False).tobytes().hex())
    return out
"""
_PROBE = (
    """
import sys
from ember.kernels import cache_sizes
cache_sizes.l1_data_bytes = lambda: int(sys.argv[1])  # (before the kernels are built)
"""
    + _PRODUCTS
    + """
print(" ".join(products()))
"""
)


def test_the_row_groups_follow_the_l1_cache_and_never_change_a_product():
    """A tiny L1 makes every group two rows (the floor), a large one a group of all of k: the
    same bits as this CPU's groups. (The cache key holds the source, which holds the L1 size,
    so each size builds its own kernel.)"""
    scope: dict = {}
    exec(_PRODUCTS, scope)
    here = scope["products"]()
    for l1 in (1 << 10, 64 << 20):
        there = subprocess.run(
            [sys.executable, "-c", _PROBE, str(l1)],
            env=dict(os.environ, EMBER_GEMM="own"),
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        ).stdout.split()
        assert there == here, l1
