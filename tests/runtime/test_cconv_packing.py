"""The C convolution paths changed for small planes and few channels (issue 20): packing runs
of columns a masked vector at a time and stride-2 runs by de-interleaving (rows wider than a
vector, tails of every length, panels across rows and samples), the strided input gradient
stored phase by phase straight into the result (`cconv.forward_into`), the weight gradient's
dot-product kernel, and the channels-last copy made in C (cropped by a negative high padding).

Against the NumPy kernels of ops/_conv_kernels.py within rounding (a sum of L products in
another order: 2 * L * eps times the sum of the products' magnitudes, the NumPy kernel on the
operands' absolute values), and against PyTorch; non-finite values, both float dtypes, one
and two threads."""

import math
import zlib

import numpy as np
import pytest

from ember.kernels import ccompile, cconv, cconv_weight, cpool
from ember.kernels.conv_plan import conv_out_size, plan
from ember.ops import _conv_kernels as K

torch = pytest.importorskip("torch")

needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _within(got, want, bound, terms):
    assert got is not None
    assert got.shape == want.shape and got.dtype == want.dtype
    eps = np.finfo(want.dtype).eps
    limit = 2 * terms * eps * bound + np.finfo(want.dtype).tiny
    assert np.all(np.abs(got - want) <= limit), float(np.max(np.abs(got - want) - limit))


def _cases():
    rng = np.random.default_rng(20)
    cases = []
    for _ in range(40):
        nd = int(rng.choice([2, 2, 2, 3]))
        groups = int(rng.choice([1, 1, 2]))
        cg = int(rng.choice([3, 16, 24, 33])) if groups == 1 else int(rng.integers(1, 6))
        cout = groups * int(rng.choice([1, 5, 8, 16, 20]))
        kernel = tuple(int(rng.integers(1, 4)) for _ in range(nd))
        stride = tuple(int(rng.choice([1, 2, 2, 3])) for _ in range(nd))
        dilation = tuple(int(rng.choice([1, 1, 2])) for _ in range(nd))
        padding = tuple((int(rng.integers(0, 3)), int(rng.integers(-1, 3))) for _ in range(nd))
        # widths around and past one and two vectors (16 floats, 8 doubles), odd ones
        size = tuple(int(rng.choice([3, 4, 7, 9, 17, 23, 33, 40])) for _ in range(nd - 1))
        size += (int(rng.choice([4, 9, 16, 17, 31, 33, 50])),)
        if nd == 3:
            size = (int(rng.integers(2, 6)),) + size[1:]
        n = int(rng.integers(1, 4))
        dtype = rng.choice([np.float32, np.float64])
        cases.append((n, groups * cg, cout, groups, size, kernel, stride, padding, dilation, dtype))
    return cases


@needs_cc
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", _cases())
def test_kernels_equal_numpy_within_rounding(case, threads):
    n, cin, cout, groups, size, kernel, stride, padding, dilation, dtype = case
    if any(o < 1 for o in conv_out_size(size, kernel, stride, padding, dilation)):
        pytest.skip("no output")
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        rng = np.random.default_rng(zlib.crc32(str(case).encode()))
        x = rng.standard_normal((n, cin) + size).astype(dtype)
        w = rng.standard_normal((cout, cin // groups) + kernel).astype(dtype)
        p = plan(size, kernel, stride, padding, dilation, w[0].size, cout // groups)
        gy = rng.standard_normal((n, cout) + p.out_size).astype(dtype)
        _within(
            cconv.conv_forward(x, w, p, groups),
            K.conv_forward(x, w, p, groups),
            K.conv_forward(abs(x), abs(w), p, groups),
            w[0].size,
        )
        _within(
            cconv.conv_input_grad(gy, w, p, groups),
            K.conv_input_grad(gy, w, p, groups),
            K.conv_input_grad(abs(gy), abs(w), p, groups),
            cout // groups * math.prod(kernel),
        )
        gw = cconv_weight.conv_weight_grad(x, gy, p, groups)
        if gw is not None:
            _within(
                gw,
                K.conv_weight_grad(x, gy, p, groups),
                K.conv_weight_grad(abs(x), abs(gy), p, groups),
                n * math.prod(p.out_size),
            )
    finally:
        cpool.set_num_threads(before)


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "x_shape, w_shape, stride, padding",
    [
        ((3, 16, 37, 37), (16, 16, 3, 3), 1, 1),  # few channels: the dot-product weight gradient
        ((2, 16, 45, 45), (32, 16, 3, 3), 2, 1),  # stride 2: packing by de-interleaving
        ((2, 48, 20, 20), (16, 48, 3, 3), 1, 1),  # the channels-last weight gradient
        ((5, 24, 4, 4), (40, 24, 3, 3), 1, 1),  # 4x4 planes: runs of 4 columns
        ((4, 16, 19, 19), (8, 16, 1, 1), 2, 0),  # 1x1 stride 2: phases no offset reaches
    ],
)
def test_layer_shapes_match_torch(x_shape, w_shape, stride, padding, dtype):
    rng = np.random.default_rng(9)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    pad = ((padding, padding),) * 2
    p = plan(x_shape[2:], w_shape[2:], (stride,) * 2, pad, (1, 1), w[0].size, w_shape[0])
    gy = rng.standard_normal((x_shape[0], w_shape[0]) + p.out_size).astype(dtype)
    tx, tw, tg = (torch.from_numpy(a) for a in (x, w, gy))
    kw = dict(stride=stride, padding=padding)
    eps = np.finfo(dtype).eps
    for got, want, bound, terms in [
        (
            cconv.conv_forward(x, w, p, 1),
            torch.nn.functional.conv2d(tx, tw, **kw),
            K.conv_forward(abs(x), abs(w), p, 1),
            w[0].size,
        ),
        (
            cconv.conv_input_grad(gy, w, p, 1),
            torch.nn.grad.conv2d_input(tx.shape, tw, tg, **kw),
            K.conv_input_grad(abs(gy), abs(w), p, 1),
            w_shape[0] * math.prod(w_shape[2:]),
        ),
        (
            cconv_weight.conv_weight_grad(x, gy, p, 1),
            torch.nn.grad.conv2d_weight(tx, tw.shape, tg, **kw),
            K.conv_weight_grad(abs(x), abs(gy), p, 1),
            x_shape[0] * math.prod(p.out_size),
        ),
    ]:
        assert got is not None
        assert np.all(np.abs(got - want.numpy()) <= 4 * terms * eps * bound + 1e-30)


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_non_finite_values_as_numpy(dtype):
    """NaN and infinities in the input and the output gradient (the weight stays finite: the
    input gradient declines a non-finite weight) reach the same non-finite results, in a
    stride-2 layer (de-interleaved packing, phases stored in place) and a stride-1 one."""
    rng = np.random.default_rng(4)
    for stride, cin in ((2, 16), (1, 16), (1, 40)):
        x = rng.standard_normal((2, cin, 21, 21)).astype(dtype)
        w = rng.standard_normal((8, cin, 3, 3)).astype(dtype)
        x[0, 3, 5, 7], x[1, 0, 0, 0], x[1, 2, 20, 19] = np.nan, np.inf, -np.inf
        p = plan((21, 21), (3, 3), (stride,) * 2, ((1, 1),) * 2, (1, 1), w[0].size, 8)
        gy = rng.standard_normal((2, 8) + p.out_size).astype(dtype)
        gy[1, 4, 2, 3] = np.inf
        for got, want in [
            (cconv.conv_forward(x, w, p, 1), K.conv_forward(x, w, p, 1)),
            (cconv.conv_input_grad(gy, w, p, 1), K.conv_input_grad(gy, w, p, 1)),
        ]:
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
            np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
        gw = cconv_weight.conv_weight_grad(x, gy, p, 1)
        if gw is not None:  # (declined where a non-finite x meets a zero of the extended grid)
            want = K.conv_weight_grad(x, gy, p, 1)
            np.testing.assert_array_equal(np.isnan(gw), np.isnan(want))


@needs_cc
def test_forward_into_writes_only_its_phase_and_declines_other_layouts():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 6, 5, 7)).astype(np.float32)
    w = rng.standard_normal((4, 6, 2, 2)).astype(np.float32)
    p = plan((5, 7), (2, 2), (1, 1), ((1, 0), (0, 1)), (1, 1), w[0].size, 4)
    target = np.full((2, 4, 11, 21), 7.0, np.float32)
    assert cconv.forward_into(x, w, p, 1, target, (2, 3), (1, 2)) is target
    want = K.conv_forward(x, w, p, 1)
    assert p.out_size == (5, 7)
    np.testing.assert_allclose(target[:, :, 1::2, 2::3], want, rtol=1e-5, atol=1e-5)
    untouched = np.ones(target.shape, bool)
    untouched[:, :, 1::2, 2::3] = False
    assert (target[untouched] == 7.0).all()
    assert cconv.forward_into(x, w, p, 1, target[:, :, ::2], (1, 1), (0, 0)) is None
    assert cconv.forward_into(x, w, p, 1, target.astype(np.float64), (2, 3), (1, 2)) is None


@needs_cc
def test_channels_last_copy_crops_like_numpy():
    """The C copy into the channels-last scratch, where the padded extent stops early (a
    negative high padding, a stride past the last window) and where it pads."""
    rng = np.random.default_rng(3)
    for size, padding, stride in [
        ((9, 12), ((2, -1), (0, -2)), (1, 1)),
        ((10, 11), ((1, 1),) * 2, (3, 2)),
    ]:
        x = rng.standard_normal((3, 40) + size).astype(np.float32)
        p = plan(size, (3, 3), stride, padding, (1, 1), 40 * 9, 8)
        cp = 64
        got = np.zeros((3, math.prod(p.padded), cp), np.float32)
        assert cconv_weight._to_channels_last(x, got, p, cp)
        want = np.zeros_like(got)
        planes = want.reshape((3,) + p.padded + (cp,))
        from ember.kernels.conv_plan import interior, source_region

        planes[(slice(None),) + interior(p) + (slice(0, 40),)] = np.moveaxis(
            x[source_region(p)], 1, -1
        )
        np.testing.assert_array_equal(got, want)
