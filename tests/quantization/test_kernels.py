"""The int8 C kernels (kernels/cq8.py) against the NumPy reference kernels of the ops
(ops/quantized.py), bit for bit: the int32 sums are exact integer arithmetic, and the float
epilogue is specified operation by operation (double product and sum, one rounding to
float32, then float32 requantization), so both compute the same bits. Both C paths run on
every machine: AVX512-VNNI where the compiler targets it, and the portable loops (forced)."""

from __future__ import annotations

import numpy as np
import pytest

from ember.kernels import ccompile, cq8
from ember.ops import quantized as Q

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")
PATHS = [False, True]  # VNNI where present, forced portable


def _cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def test_the_vnni_path_is_built_where_the_cpu_has_it():
    flags = _cpu_flags()
    if not {"avx512_vnni", "avx512bw", "avx512vl"} <= flags:
        pytest.skip("this CPU has no AVX512-VNNI")
    assert cq8.has_vnni() and not cq8.has_vnni(portable=True)


def _ints(r, dtype, shape):
    info = np.iinfo(dtype)
    return r.integers(info.min, info.max + 1, shape).astype(dtype)


MODES = ("int32", "float32", "uint8", "int8")


@pytest.mark.parametrize("portable", PATHS)
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (5, 9, 7), (67, 130, 13), (130, 64, 70)])
@pytest.mark.parametrize("xdtype,zp", [(np.uint8, 3), (np.int8, -5), (np.uint8, 255)])
def test_linear_equals_the_reference(portable, m, k, n, xdtype, zp):
    r = np.random.default_rng(m * 1000 + k)
    x = _ints(r, xdtype, (m, k))
    w = r.integers(-128, 128, (n, k)).astype(np.int8)  # -128 too: the extreme products
    s = (r.random(n) * 0.01).astype(np.float32)
    b = r.standard_normal(n).astype(np.float32)
    acc = Q.linear_acc(x, w, zp)
    for mode in MODES:
        for relu in (False, True):
            got = cq8.linear(x, w, s, b, x_zero_point=zp, out_dtype=mode, relu=relu,
                             out_scale=0.05, out_zero_point=7, portable=portable)  # fmt: skip
            want = Q.epilogue(acc, s, b, relu=relu, out_dtype=mode, out_scale=0.05,
                              out_zero_point=7, axis=1)  # fmt: skip
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want, err_msg=f"{mode} relu={relu}")


CONVS = [
    # n, c, h, w, o, kh, kw, stride, padding, dilation, groups
    (2, 1, 28, 28, 8, 3, 3, (1, 1), (1, 1), (1, 1), 1),
    (1, 6, 9, 11, 4, 3, 2, (2, 1), (1, 2), (1, 2), 2),
    (3, 8, 7, 7, 8, 3, 3, (1, 1), (1, 1), (1, 1), 8),  # depthwise
    (1, 16, 5, 5, 70, 1, 1, (1, 1), (0, 0), (1, 1), 1),  # 1x1, rows beyond one tile
    (1, 3, 17, 19, 5, 5, 5, (3, 2), (2, 0), (1, 1), 1),
]


@pytest.mark.parametrize("portable", PATHS)
@pytest.mark.parametrize("geometry", CONVS)
@pytest.mark.parametrize("xdtype,zp", [(np.uint8, 3), (np.int8, -5)])
def test_conv2d_equals_the_reference(portable, geometry, xdtype, zp):
    n, c, h, wd, o, kh, kw, stride, padding, dilation, groups = geometry
    r = np.random.default_rng(c * 100 + h)
    x = _ints(r, xdtype, (n, c, h, wd))
    w = r.integers(-128, 128, (o, c // groups, kh, kw)).astype(np.int8)
    s = (r.random(o) * 0.01).astype(np.float32)
    b = r.standard_normal(o).astype(np.float32)
    acc = Q.conv_acc(x, w, zp, stride, padding, dilation, groups)
    for mode in MODES:
        got = cq8.conv2d(x, w, s, b, x_zero_point=zp, stride=stride, padding=padding,
                         dilation=dilation, groups=groups, out_dtype=mode, relu=True,
                         out_scale=0.05, out_zero_point=7, portable=portable)  # fmt: skip
        want = Q.epilogue(acc, s, b, relu=True, out_dtype=mode, out_scale=0.05,
                          out_zero_point=7, axis=1)  # fmt: skip
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want, err_msg=mode)


def test_the_reference_sums_equal_integer_arithmetic():
    """linear_acc / conv_acc sum in float64 (exact below 2**53): equal to int64 sums."""
    r = np.random.default_rng(5)
    x = r.integers(0, 256, (4, 300)).astype(np.uint8)
    w = r.integers(-128, 128, (6, 300)).astype(np.int8)
    exact = (x.astype(np.int64) - 17) @ w.astype(np.int64).T
    np.testing.assert_array_equal(Q.linear_acc(x, w, 17), exact)
    xc = r.integers(0, 256, (1, 2, 4, 4)).astype(np.uint8)
    wc = r.integers(-128, 128, (3, 2, 3, 3)).astype(np.int8)
    pad = np.pad(xc.astype(np.int64) - 9, ((0, 0), (0, 0), (1, 1), (1, 1)))
    direct = np.zeros((1, 3, 4, 4), np.int64)
    for i in range(4):
        for j in range(4):
            direct[0, :, i, j] = (pad[0, :, i : i + 3, j : j + 3] * wc).sum(axis=(1, 2, 3))
    np.testing.assert_array_equal(Q.conv_acc(xc, wc, 9, (1, 1), (1, 1), (1, 1), 1), direct)


def test_the_kernels_decline_what_they_do_not_handle():
    w = np.zeros((2, 3), np.int8)
    s, b = np.ones(2, np.float32), np.zeros(2, np.float32)
    assert cq8.linear(np.zeros((2, 3), np.float32), w, s, b) is None
    assert cq8.linear(np.zeros((2, cq8.MAX_K + 1), np.uint8),
                      np.zeros((2, cq8.MAX_K + 1), np.int8), s, b) is None  # fmt: skip


@pytest.mark.parametrize("portable", PATHS)
def test_quantize_equals_the_reference(portable):
    from ember.ops.quantize import quantize_array

    x = (np.random.default_rng(9).standard_normal(200003) * 3).astype(np.float32)
    x[::1000], x[1::1000], x[2::1000] = np.nan, np.inf, -np.inf
    x[3:8] = [0.005, 0.015, -0.005, 2.555, 1e30]  # halves of the step, far beyond the range
    for out, zp in (("uint8", 128), ("int8", -3)):
        lo, hi = (0, 255) if out == "uint8" else (-128, 127)
        got = cq8.quantize(x, 0.01, zp, out, portable=portable)
        want = quantize_array(x, np.float32(0.01), zp, lo, hi, np.dtype(out))
        np.testing.assert_array_equal(got, want)
    assert cq8.quantize(x.astype(np.float64), 0.01, 0, "uint8") is None
