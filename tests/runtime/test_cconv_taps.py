"""kernels/cconv_taps.py: the channels-wide forward over blocks of samples that skips the taps
reading the padding, forced on random padded geometries (both float dtypes, both register
blockings; batches below, at and past a block; channel counts below, at and past a panel;
strides, dilation, asymmetric padding; bias, residual, ReLU and mask) on one and two threads:
bit for bit the column panels' results (the layouts sum each output in one order) and within
rounding of PyTorch's; a weight holding an infinity or NaN runs the padding's taps, as the
other layouts do; the eager input gradient of a 4x4 plane, which measures the layouts, matches
PyTorch's."""

import zlib

import numpy as np
import pytest

import ember
from ember.kernels import ccompile, cconv, cconv_taps, cpool
from ember.kernels.conv_plan import conv_out_size, plan
from ember.kernels.cstep import STEP_CALL, function_address

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _cases():
    rng = np.random.default_rng(57)
    cases = []
    for _ in range(24):
        n = int(rng.choice([4, 6, 7, 8, 13, 17]))
        cin = int(rng.choice([1, 5, 16, 40]))
        cout = int(rng.choice([3, 48, 49, 64, 70]))
        kernel = tuple(int(rng.choice([2, 3, 5])) for _ in range(2))
        stride = tuple(int(rng.choice([1, 1, 2])) for _ in range(2))
        dilation = tuple(int(rng.choice([1, 1, 2])) for _ in range(2))
        padding = tuple((int(rng.integers(0, 3)), int(rng.integers(0, 3))) for _ in range(2))
        size = tuple(int(rng.choice([3, 4, 6, 9])) for _ in range(2))
        dtype = rng.choice([np.float32, np.float64])
        cases.append((n, cin, cout, size, kernel, stride, padding, dilation, dtype))
    return cases


def _run(x, w, p, relu, bias, mask, residual, wide, split):
    made = cconv.forward_step(x.shape, w.shape, p, x.dtype, relu, wide=wide, split=split)
    if made is None:
        return None
    step, args, _keep = made
    out = np.full((x.shape[0], w.shape[0]) + p.out_size, np.nan, x.dtype)
    args[0], args[1], args[3] = x.ctypes.data, w.ctypes.data, out.ctypes.data
    args[2] = 0 if bias is None else bias.ctypes.data
    args[4] = 0 if mask is None else mask.ctypes.data
    if residual is not None:
        args[cconv.residual_slot(made, x.dtype)] = residual.ctypes.data
    STEP_CALL(function_address(step))(args.ctypes.data)
    return out


def _torch_conv(x, w, p, padding, bias=None):
    # (PyTorch pads symmetrically: asymmetric padding is applied to x first)
    tx = torch.nn.functional.pad(
        torch.from_numpy(x), (padding[1][0], padding[1][1], padding[0][0], padding[0][1])
    )
    tb = None if bias is None else torch.from_numpy(bias)
    return torch.nn.functional.conv2d(
        tx, torch.from_numpy(w), tb, stride=p.stride, dilation=p.dilation
    ).numpy()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", _cases(), ids=str)
def test_taps_layout_equals_the_column_panels_bit_for_bit(case, threads):
    n, cin, cout, size, kernel, stride, padding, dilation, dtype = case
    if any(o < 1 for o in conv_out_size(size, kernel, stride, padding, dilation)):
        pytest.skip("no output")
    p = plan(size, kernel, stride, padding, dilation, cin * kernel[0] * kernel[1], cout)
    if not cconv_taps.applies((n, cin) + size, (cout, cin) + kernel, p, dtype):
        pytest.skip("no window reads the padding")
    before = cpool.get_num_threads()
    cpool.set_num_threads(threads)
    try:
        rng = np.random.default_rng(zlib.crc32(str(case).encode()))
        x = rng.standard_normal((n, cin) + size).astype(dtype)
        w = rng.standard_normal((cout, cin) + kernel).astype(dtype)
        bias = rng.standard_normal(cout).astype(dtype)
        residual = rng.standard_normal((n, cout) + p.out_size).astype(dtype)
        for relu, b, res in ((False, None, None), (True, bias, None), (True, bias, residual)):
            masks = [np.zeros((n, cout) + p.out_size, np.bool_) for _ in range(2)]
            want = _run(x, w, p, relu, b, masks[0], res, False, False)
            got = _run(x, w, p, relu, b, masks[1], res, True, True)
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(masks[1], masks[0])
        ref = _torch_conv(x, w, p, padding, bias)
        got = _run(x, w, p, False, bias, None, None, True, True)
        eps = np.finfo(dtype).eps
        bound = _torch_conv(abs(x), abs(w), p, padding, abs(bias))
        assert np.all(abs(got - ref) <= 4 * (cin * kernel[0] * kernel[1] + 1) * eps * bound)
    finally:
        cpool.set_num_threads(before)


@pytest.mark.parametrize("cout", [48, 64, 32])  # (each register blocking)
def test_a_non_finite_weight_multiplies_the_padding_as_the_other_layouts(cout):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((9, 4, 4, 4)).astype(np.float32)
    x[3, 1, 2, 2] = np.nan
    w = rng.standard_normal((cout, 4, 3, 3)).astype(np.float32)
    w[7, 2, 0, 0] = np.inf
    w[30, 0, 2, 1] = -np.inf
    p = plan((4, 4), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 36, cout)
    want = _run(x, w, p, False, None, None, None, False, False)
    assert np.isnan(want[:, 7, 0, 0]).all()  # (the padding's zero times the infinity)
    np.testing.assert_array_equal(_run(x, w, p, False, None, None, None, True, True), want)
    w[np.isinf(w)] = 1.0  # (finite again: the same step skips the padding once more)
    want = _run(x, w, p, False, None, None, None, False, False)
    np.testing.assert_array_equal(_run(x, w, p, False, None, None, None, True, True), want)


def test_blocking_fills_the_panels():
    assert cconv_taps.variant(64, 64, 4) == (8, 2)
    assert cconv_taps.variant(66, 64, 4) == (6, 4)  # (eight-sample blocks would pad 66 to 72)
    assert cconv_taps.variant(64, 512, 4) == (8, 2)  # (48-channel panels would pad 512 to 528)
    assert cconv_taps.variant(64, 96, 4) == (8, 3)  # (a tie with 8 x 2: the shared panels)
    assert cconv_taps.variant(12, 32, 4) == (12, 2)
    assert cconv_taps.variant(64, 48, 8) == (8, 3)
    assert cconv_taps.variant(9, 64, 4) == (6, 4)  # (a tie with 12 x 2: the first)


@pytest.mark.parametrize("blocking", cconv_taps.VARIANTS, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_blocking_equals_the_column_panels_bit_for_bit(blocking, dtype, monkeypatch):
    # (each blocking forced: the counted choice picks one per geometry; a batch past two
    # blocks, a panel and a half of channels, slices of input channels ending part way)
    monkeypatch.setattr(cconv_taps, "variant", lambda n, cout, itemsize: blocking)
    rng = np.random.default_rng(sum(blocking))
    n, cin = 2 * blocking[0] + 3, 37
    cout = 3 * blocking[1] * 64 // np.dtype(dtype).itemsize // 2 + 5
    x = rng.standard_normal((n, cin, 5, 4)).astype(dtype)
    w = rng.standard_normal((cout, cin, 3, 3)).astype(dtype)
    bias = rng.standard_normal(cout).astype(dtype)
    p = plan((5, 4), (3, 3), (1, 1), ((1, 1), (2, 0)), (1, 1), cin * 9, cout)
    masks = [np.zeros((n, cout) + p.out_size, np.bool_) for _ in range(2)]
    want = _run(x, w, p, True, bias, masks[0], None, False, False)
    got = _run(x, w, p, True, bias, masks[1], None, True, True)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(masks[1], masks[0])
    w[1, 2, 0, 0] = np.inf  # (the padding's taps run: NaN where the zeros meet the infinity)
    want = _run(x, w, p, False, None, None, None, False, False)
    assert np.isnan(want).any()
    np.testing.assert_array_equal(_run(x, w, p, False, None, None, None, True, True), want)


def test_applies_only_where_a_window_reads_the_padding():
    padded = plan((4, 4), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1))
    unpadded = plan((4, 4), (3, 3), (1, 1), ((0, 0), (0, 0)), (1, 1))
    assert cconv_taps.applies((8, 16, 4, 4), (32, 16, 3, 3), padded, np.float32)
    assert not cconv_taps.applies((8, 16, 4, 4), (32, 16, 3, 3), unpadded, np.float32)
    assert not cconv_taps.applies((2, 16, 4, 4), (32, 16, 3, 3), padded, np.float32)
    assert not cconv_taps.applies((8, 16, 4, 4), (32, 16, 3, 3), padded, np.float16)


def test_small_plane_input_gradient_matches_pytorch(monkeypatch):
    monkeypatch.delenv("EMBER_CONV_LAYOUT", raising=False)
    before = cpool.get_num_threads()
    cpool.set_num_threads(1)
    try:
        rng = np.random.default_rng(11)
        x = rng.standard_normal((16, 64, 4, 4)).astype(np.float32)
        w = rng.standard_normal((64, 64, 3, 3)).astype(np.float32) * 0.1
        xe = ember.tensor(x, requires_grad=True)
        we = ember.tensor(w, requires_grad=True)
        ye = ember.nn.functional.conv2d(xe, we, padding=1)
        xt = torch.tensor(x, requires_grad=True)
        wt = torch.tensor(w, requires_grad=True)
        yt = torch.nn.functional.conv2d(xt, wt, padding=1)
        g = rng.standard_normal(yt.shape).astype(np.float32)
        ye.backward(ember.tensor(g))
        yt.backward(torch.from_numpy(g))
        np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(we.grad.numpy(), wt.grad.numpy(), rtol=1e-4, atol=2e-4)
    finally:
        cpool.set_num_threads(before)


@pytest.mark.parametrize(
    "gy_shape, w_shape, in_size, padding, taps",
    [
        ((64, 128, 4, 4), (128, 128, 3, 3), 4, 1, True),  # ResNet's 4x4 stage: 'same' padding
        ((64, 256, 8, 8), (256, 256, 3, 3), 8, 1, True),
        ((32, 64, 1, 1), (64, 128, 4, 4), 4, 0, False),  # DCGAN: one tap in sixteen inside
        ((2, 128, 4, 4), (128, 128, 3, 3), 4, 1, False),  # too few samples for a block
    ],
)
def test_input_gradient_runs_the_padded_forward_where_skipping_counts_less(
    gy_shape, w_shape, in_size, padding, taps
):
    k = w_shape[2]
    p = plan((in_size,) * 2, (k, k), (1, 1), ((padding, padding),) * 2, (1, 1))
    assert p.out_size == gy_shape[2:]
    assert cconv.taps_win(gy_shape, w_shape, p, 1, np.float32) is taps


@pytest.mark.parametrize("cout", [48, 64, 32])  # (the blocking sharing the wide panels; own)
def test_a_constant_weight_is_packed_once_and_repacked_for_another_array(cout):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((8, 16, 4, 4)).astype(np.float32)
    w1 = rng.standard_normal((cout, 16, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((cout, 16, 3, 3)).astype(np.float32)
    p = plan((4, 4), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 144, cout)
    made = cconv.forward_step(x.shape, w1.shape, p, x.dtype, False, True, wide=True, split=True)
    step, args, _keep = made
    for w in (w1, w1, w2, w1):
        out = np.empty((8, cout, 4, 4), np.float32)
        args[0], args[1], args[3] = x.ctypes.data, w.ctypes.data, out.ctypes.data
        STEP_CALL(function_address(step))(args.ctypes.data)
        np.testing.assert_array_equal(out, _run(x, w, p, False, None, None, None, False, False))
