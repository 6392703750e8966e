"""ember's own GEMM is blocked as GotoBLAS blocks it (kernels/cgemm_source.py), its blocks of A
(MC rows x KC steps) and of B (KC x NC columns) sized from the L2 cache and the last level's
share per core (kernels/cmicro.py `gemm_blocks`). Blocking never changes a product's bits: every
tile's sums run through K in order, each block continuing from what the last one stored. A
subprocess given tiny caches (blocks of 64 rows, 128 steps, a few panels of columns) cuts the
products below into many blocks in every dimension, their edges falling inside tiles and panels;
its bits must be this process's, and both within the rounding bound of float64 sums."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from ember.kernels import cgemm, cmicro

pytestmark = pytest.mark.skipif(not cgemm.available(np.float32), reason="no C compiler")


def test_the_blocks_follow_the_caches():
    # half of L2 holds the block of A, twice as deep as tall (float32: 64 Ki values of 1 MiB)
    assert cmicro.gemm_blocks(4, 1 << 20, 32 << 20, 2) == (256, 512, 4080)
    assert cmicro.gemm_blocks(8, 1 << 20, 32 << 20, 2) == (176, 368, 2832)
    mc, kc, nc = cmicro.gemm_blocks(4, 2 << 20, 256 << 20, 64)
    assert mc * kc * 4 <= 1 << 20 and kc >= mc and mc % 8 == 0 and kc % 16 == 0
    assert nc % 48 == 0 and kc * nc * 4 <= (256 << 20) // 64 // 2
    # (the bounds: tiny caches still give blocks the kernel can run, huge ones bounded blocks)
    assert cmicro.gemm_blocks(4, 1 << 10, 1 << 10, 1) == (32, 64, 48)
    mc, kc, _ = cmicro.gemm_blocks(8, 1 << 40, 1 << 40, 1)
    assert (mc, kc) == (1024, 2048)


_PRODUCTS = """
import numpy as np
from ember.kernels import cgemm
def products():
    r = np.random.default_rng(60)
    out = []
    for dtype in (np.float32, np.float64):
        f = cgemm._functions(np.dtype(dtype))
        for m, k, n in ((203, 700, 1001), (64, 129, 49), (9, 1500, 530), (1031, 260, 17)):
            a = r.standard_normal((m, k)).astype(dtype)
            b = r.standard_normal((k, n)).astype(dtype)
            for left in (a, np.asfortranarray(a)):
                for right in (b, np.asfortranarray(b)):
                    got = cgemm._blocked(f, left, right, None, (), blas=False, threaded=False)
                    out.append(got.tobytes().hex())
    return out
"""
_PROBE = (
    """
import sys
from ember.kernels import cache_sizes
# (before the kernels are built: the blocks are derived when cgemm_source is imported)
cache_sizes.l2_bytes = lambda: int(sys.argv[1])
cache_sizes.last_level_bytes = lambda: int(sys.argv[2])
"""
    + _PRODUCTS
    + """
print(" ".join(products()))
"""
)


def test_blocks_of_every_size_give_the_same_bits():
    scope: dict = {}
    exec(_PRODUCTS, scope)
    here = scope["products"]()
    # (a tiny L2 and last level: float32 blocks of 64 rows by 128 steps, 96-column blocks of B)
    small = subprocess.run(
        [sys.executable, "-c", _PROBE, str(64 << 10), str((os.cpu_count() or 1) << 17)],
        env=dict(os.environ, EMBER_GEMM="own"),
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    assert small.stdout.split() == here


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_across_many_blocks_are_within_the_rounding_bound(dtype):
    """Block edges inside a product (more rows and steps than one block of this machine's,
    none a multiple of a tile, a narrow last panel): within k rounded products' bound of float64
    sums, and exact on small integers (a value dealt to the wrong block shows)."""
    mc, kc, nc = cmicro.gemm_blocks(np.dtype(dtype).itemsize, *_caches())
    m, k, n = mc + 13, kc + 37, min(nc, 600) + 29
    rng = np.random.default_rng(61)
    eps = np.finfo(dtype).eps
    functions = cgemm._functions(np.dtype(dtype))
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    got = cgemm._blocked(functions, a, b, None, (), blas=False, threaded=False)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    bound = k * eps * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    assert np.all(np.abs(got - exact) <= bound)
    ai = rng.integers(-8, 8, (m, k)).astype(dtype)
    bi = rng.integers(-8, 8, (k, n)).astype(dtype)
    got = cgemm._blocked(functions, np.asfortranarray(ai), bi, None, (), blas=False, threaded=False)
    np.testing.assert_array_equal(got, (ai.astype(np.float64) @ bi).astype(dtype))


def _caches():
    from ember.kernels import cache_sizes

    return cache_sizes.l2_bytes(), cache_sizes.last_level_bytes(), os.cpu_count() or 1
