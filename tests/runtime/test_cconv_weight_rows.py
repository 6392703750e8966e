"""The channels-last weight gradient with a kernel row's offsets side by side in the product's
columns (kernels/cconv_weight.py `cl_layout`, issue 20): few input channels (16 of a 3-wide
row: 48 values in two tiles of 32, where one offset at a time pads each to a tile).

The same sums as the per-offset layout, bit for bit; against the NumPy kernel of
ops/_conv_kernels.py within rounding (a sum of L products in another order: 2 * L * eps times
the sum of the products' magnitudes, the NumPy kernel on the operands' absolute values) and
against PyTorch; half precision is the float32 sums rounded once."""

import math

import numpy as np
import pytest

from ember.kernels import ccompile, cconv, cconv_weight
from ember.kernels.conv_plan import conv_out_size, plan
from ember.ops import _conv_kernels as K

torch = pytest.importorskip("torch")

needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")

# (x shape, cout, kernel, stride, padding, dilation)
CASES = [
    ((6, 16, 17, 16), 24, (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1)),  # few channels, stride 2
    ((3, 48, 12, 13), 16, (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1)),  # 48: 160 values, not 192
    ((4, 12, 19), 8, (5,), (2,), ((2, 2),), (1,)),  # 1-d: the whole kernel one row
    ((2, 16, 9, 10), 12, (3, 3), (2, 2), ((1, 1), (1, 1)), (2, 1)),  # dilated rows
]


def _operands(x_shape, cout, kernel, stride, padding, dilation, dtype, seed):
    rng = np.random.default_rng(seed)
    out = conv_out_size(x_shape[2:], kernel, stride, padding, dilation)
    x = rng.standard_normal(x_shape).astype(dtype)
    gy = rng.standard_normal((x_shape[0], cout) + out).astype(dtype)
    c = x_shape[1]
    p = plan(x_shape[2:], kernel, stride, padding, dilation, c * math.prod(kernel), cout)
    return x, gy, p


def _per_offset(cg, p, itemsize):
    wide = 2 * (64 // itemsize)
    padded = -(-cg // wide) * wide
    return cconv_weight.ClLayout(padded, padded, False, math.prod(p.kernel))


@needs_cc
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_layout_is_the_per_offset_sums(case, dtype, monkeypatch):
    x, gy, p = _operands(*case, dtype, seed=len(case[0]))
    layout = cconv_weight.cl_layout(x.shape[1], p, np.dtype(dtype).itemsize)
    got = cconv_weight.conv_weight_grad(x, gy, p, 1)
    assert got is not None
    want = K.conv_weight_grad(x, gy, p, 1)
    bound = K.conv_weight_grad(np.abs(x), np.abs(gy), p, 1)
    terms = x.shape[0] * math.prod(p.out_size)
    limit = 2 * terms * np.finfo(dtype).eps * bound + np.finfo(dtype).tiny
    assert np.all(np.abs(got - want) <= limit)
    tw = torch.empty((gy.shape[1], x.shape[1]) + p.kernel, dtype=torch.from_numpy(x).dtype)
    pads = [lo for lo, _ in case[4]]
    ref = torch.ops.aten.convolution_backward(
        torch.from_numpy(gy), torch.from_numpy(x), tw, None, list(case[3]), pads, list(case[5]),
        False, [0] * len(pads), 1, [False, True, False],
    )[1].numpy()  # fmt: skip
    np.testing.assert_allclose(got, ref, rtol=0, atol=float(np.max(limit)) * 2)
    if case[5][-1] != 1:  # a dilated row's offsets are not adjacent: one at a time
        assert layout is None or not layout.rows
        return
    # (float64's tiles are 16 values: 16 channels fill one, no row to share)
    assert layout is not None and (layout.rows or dtype == np.float64)
    monkeypatch.setattr(cconv_weight, "cl_layout", _per_offset)
    np.testing.assert_array_equal(cconv_weight.conv_weight_grad(x, gy, p, 1), got)


@needs_cc
def test_rows_layout_runs_only_strided_where_one_offset_at_a_time_would_not():
    """At stride 1 with 16 channels the extended grid runs (it reads x in place), at stride 2
    the rows layout instead of the phases."""
    p1 = plan((16, 16), (3, 3), (1, 1), ((1, 1),) * 2, (1, 1), 16 * 9, 16)
    p2 = plan((16, 16), (3, 3), (2, 2), ((1, 1),) * 2, (1, 1), 16 * 9, 16)
    assert cconv_weight.cl_layout(16, p1, 4) is None
    assert cconv_weight.cl_layout(16, p2, 4) == cconv_weight.ClLayout(16, 64, True, 3)
    assert cconv_weight.cl_layout(64, p1, 4) == cconv_weight.ClLayout(64, 64, False, 9)
    assert cconv_weight.cl_layout(3, p2, 4) is None  # 32 values for 9 of them


@needs_cc
@pytest.mark.parametrize("half", [np.float16, "bfloat16"])
def test_half_precision_rows_layout_rounds_the_float32_sums_once(half):
    from ember import dtypes as dt

    dtype = np.dtype(np.float16) if half == np.float16 else np.dtype(dt.bfloat16.np)
    x, gy, p = _operands(*CASES[0], np.float32, seed=5)
    x16, gy16 = x.astype(dtype), gy.astype(dtype)
    assert cconv_weight.reads_half(x.shape, gy.shape[1], p, 1)
    got = cconv_weight.conv_weight_grad(x16, gy16, p, 1)
    assert got is not None and got.dtype == dtype
    wide = cconv_weight.conv_weight_grad(x16.astype(np.float32), gy16.astype(np.float32), p, 1)
    if cconv.pairs(dtype):  # (AVX512_BF16 sums pairs of products: another order)
        want = K.conv_weight_grad(x16.astype(np.float32), gy16.astype(np.float32), p, 1)
        bound = K.conv_weight_grad(
            np.abs(x16.astype(np.float32)), np.abs(gy16.astype(np.float32)), p, 1
        )
        limit = 2 * x.shape[0] * math.prod(p.out_size) * np.finfo(np.float32).eps * bound
        rounding = np.abs(want) * 2.0**-7
        assert np.all(np.abs(got.astype(np.float32) - want) <= limit + rounding)
    else:
        np.testing.assert_array_equal(got, wide.astype(dtype))


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_channels_last_copy_by_tiles_is_numpys_transpose(dtype):
    """The C copy into the channels-last scratch transposes tiles of a vector's channels by a
    vector's positions in registers (rows of 16 or 32 positions; a shorter row's tile reads
    whole vectors, but not past the input's end), the channels past the last whole tile one
    element at a time."""
    from ember.kernels.conv_plan import interior, source_region

    rng = np.random.default_rng(4)
    for c, size, cp in [(40, (5, 32), 40), (16, (3, 48), 16), (24, (4, 17), 32), (32, (6, 8), 32)]:
        x = rng.standard_normal((3, c) + size).astype(dtype)
        p = plan(size, (3, 3), (2, 2), ((1, 1),) * 2, (1, 1), c * 9, 8)
        got = np.full((3, math.prod(p.padded), cp), -1.0, dtype)
        assert cconv_weight._to_channels_last(x, got, p, cp)
        want = np.full_like(got, -1.0)
        planes = want.reshape((3,) + p.padded + (cp,))
        planes[(slice(None),) + interior(p) + (slice(0, c),)] = np.moveaxis(
            x[source_region(p)], 1, -1
        )
        np.testing.assert_array_equal(got, want)
