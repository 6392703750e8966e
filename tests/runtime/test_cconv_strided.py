"""The C convolution kernels where issue 20 extended them: strided gradients phase by phase
(kernels/cconv_phases.py), the input gradient whose padding exceeds the kernel's reach, the
channels-last weight gradient over the real output positions, the pointwise weight gradient as
one GEMM per sample, the strided forward's packing.

Each is checked against the NumPy kernels of ops/_conv_kernels.py (the specification) with a
tolerance from the numerics: a sum of L products computed in another order differs by at most
about ``L * eps`` times the sum of the products' magnitudes, which the NumPy kernel itself
gives when run on the operands' absolute values. Then against PyTorch (values and gradients
through the public functions and modules, float64), under ember.function, at batch 1 and with
non-finite values."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember.kernels import ccompile, cconv, cconv_weight
from ember.kernels.conv_plan import conv_out_size, plan
from ember.ops import _conv_kernels as K

torch = pytest.importorskip("torch")

needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _assert_within_rounding(got, want, bound, terms):
    """|got - want| <= 2 * terms * eps * bound elementwise (``bound``: the reference kernel on
    the operands' magnitudes, so the sum of |products| per element)."""
    assert got is not None
    assert got.shape == want.shape and got.dtype == want.dtype
    eps = np.finfo(want.dtype).eps
    limit = 2 * terms * eps * bound + np.finfo(want.dtype).tiny
    assert np.all(np.abs(got - want) <= limit), float(np.max(np.abs(got - want) - limit))


@st.composite
def strided(draw):
    nd = draw(st.sampled_from([1, 2, 2, 3]))
    groups = draw(st.sampled_from([1, 1, 1, 2, 3]))
    many = draw(st.booleans())  # enough channels for the channels-last weight gradient
    cg = draw(st.integers(20, 40)) if many and groups == 1 else draw(st.integers(1, 5))
    cin = groups * cg
    cout = groups * draw(st.integers(1, 12))
    kernel = tuple(draw(st.integers(1, 4)) for _ in range(nd))
    stride = tuple(draw(st.sampled_from([1, 2, 2, 3])) for _ in range(nd))
    dilation = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    padding = tuple((draw(st.integers(0, 4)), draw(st.integers(-1, 3))) for _ in range(nd))
    size = tuple(
        draw(st.integers(max(1, d * (k - 1) - 2), d * (k - 1) + 9))
        for k, d in zip(kernel, dilation)
    )
    n = draw(st.integers(1, 3))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    return n, cin, cout, groups, size, kernel, stride, padding, dilation, dtype


@needs_cc
@settings(max_examples=80, deadline=None)
@given(strided(), st.integers(0, 2**31))
def test_gradients_equal_the_numpy_kernels_within_rounding(case, seed):
    n, cin, cout, groups, size, kernel, stride, padding, dilation, dtype = case
    if any(o < 1 for o in conv_out_size(size, kernel, stride, padding, dilation)):
        return
    nd = len(size)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin) + size).astype(dtype)
    w = rng.standard_normal((cout, cin // groups) + kernel).astype(dtype)
    p = plan(size, kernel, stride, padding, dilation, w[0].size, cout // groups)
    gy = rng.standard_normal((n, cout) + p.out_size).astype(dtype)
    y = cconv.conv_forward(x, w, p, groups)
    _assert_within_rounding(
        y, K.conv_forward(x, w, p, groups), K.conv_forward(abs(x), abs(w), p, groups), w[0].size
    )
    # (half the cases with a bias, a transposed convolution's: phases no offset reaches too)
    bias = rng.standard_normal(cin).astype(dtype) if seed % 2 else None
    gx = cconv.conv_input_grad(gy, w, p, groups, bias)  # always runs: strides, wide paddings
    shift = 0 if bias is None else bias.reshape((1, -1) + (1,) * nd)
    _assert_within_rounding(
        gx,
        K.conv_input_grad(gy, w, p, groups) + shift,
        K.conv_input_grad(abs(gy), abs(w), p, groups) + abs(shift),
        cout // groups * math.prod(kernel) + 1,
    )
    gw = cconv_weight.conv_weight_grad(x, gy, p, groups)
    if gw is not None:  # (the dot-product kernel declines an extended grid over twice the output)
        _assert_within_rounding(
            gw,
            K.conv_weight_grad(x, gy, p, groups),
            K.conv_weight_grad(abs(x), abs(gy), p, groups),
            n * math.prod(p.out_size),
        )
    else:  # the channels-last kernel (many channels, one group) runs over any grid
        wide = 128 // np.dtype(dtype).itemsize
        assert groups > 1 or -(-cin // wide) * wide > 1.5 * cin


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "x_shape, w_shape, stride, padding",
    [
        ((4, 64, 16, 16), (128, 64, 3, 3), 2, 1),  # a ResNet stage's first convolution
        ((4, 64, 16, 16), (128, 64, 1, 1), 2, 0),  # its shortcut
        ((3, 48, 4, 4), (40, 48, 3, 3), 1, 1),  # small planes, many channels
        ((2, 40, 9, 7), (24, 40, 2, 2), 2, 0),  # U-Net's 2x2 stride 2, odd sizes
        ((8, 48, 16, 16), (24, 48, 1, 1), 1, 0),  # pointwise: one GEMM per sample (dw)
    ],
)
def test_layer_sized_strided_convolutions_with_threads(x_shape, w_shape, stride, padding, dtype):
    rng = np.random.default_rng(5)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    pad = ((padding, padding),) * 2
    p = plan(x_shape[2:], w_shape[2:], (stride,) * 2, pad, (1, 1), w[0].size, w_shape[0])
    gy = rng.standard_normal((x_shape[0], w_shape[0]) + p.out_size).astype(dtype)
    kk = math.prod(w_shape[2:])
    _assert_within_rounding(
        cconv.conv_input_grad(gy, w, p, 1),
        K.conv_input_grad(gy, w, p, 1),
        K.conv_input_grad(abs(gy), abs(w), p, 1),
        w_shape[0] * kk,
    )
    _assert_within_rounding(
        cconv_weight.conv_weight_grad(x, gy, p, 1),
        K.conv_weight_grad(x, gy, p, 1),
        K.conv_weight_grad(abs(x), abs(gy), p, 1),
        x_shape[0] * math.prod(p.out_size),
    )


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "x_shape, kernel",
    [
        ((4, 3, 32, 32), (4, 4)),  # a ViT's or ConvNeXt's patch embedding
        ((2, 3, 30, 29), (4, 4)),  # positions past the last patch (never read)
        ((3, 5, 16, 12), (4, 2)),  # non-square patches
        ((2, 4, 17), (4,)),  # 1-d
        ((2, 2, 6, 8, 4), (2, 4, 2)),  # 3-d
    ],
)
def test_patch_embeddings_weight_gradient_is_one_product(x_shape, kernel, dtype):
    """kernel == stride, no padding: the patches' product (cconv_weight._patch_weight_grad)
    instead of one 1x1 convolution per kernel offset."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal(x_shape).astype(dtype)
    cout = 6
    nd = len(kernel)
    p = plan(
        x_shape[2:], kernel, kernel, ((0, 0),) * nd, (1,) * nd, x_shape[1] * math.prod(kernel), cout
    )
    assert cconv_weight._patches(p)
    gy = rng.standard_normal((x_shape[0], cout) + p.out_size).astype(dtype)
    _assert_within_rounding(
        cconv_weight.conv_weight_grad(x, gy, p, 1),
        K.conv_weight_grad(x, gy, p, 1),
        K.conv_weight_grad(abs(x), abs(gy), p, 1),
        x_shape[0] * math.prod(p.out_size),
    )
    # overlapping windows, padding or dilation: not patches
    for other in (
        plan(x_shape[2:], kernel, (1,) * nd, ((0, 0),) * nd, (1,) * nd),
        plan(x_shape[2:], kernel, kernel, ((1, 1),) * nd, (1,) * nd),
    ):
        assert not cconv_weight._patches(other)


@needs_cc
def test_non_finite_values_reach_the_same_gradients():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 24, 9, 9))
    w = rng.standard_normal((8, 24, 3, 3))
    p = plan((9, 9), (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1), w[0].size, 8)
    gy = rng.standard_normal((2, 8) + p.out_size)
    gy[0, 3, 1, 2] = np.nan
    gy[1, 0, 3, 3] = np.inf
    got = cconv.conv_input_grad(gy, w, p, 1)
    want = K.conv_input_grad(gy, w, p, 1)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-12, atol=1e-12)
    x[1, 5, 4, 4] = np.nan
    gw = cconv_weight.conv_weight_grad(x, gy, p, 1)
    if gw is not None:  # (declined where non-finite: NumPy computes it)
        np.testing.assert_array_equal(np.isnan(gw), np.isnan(K.conv_weight_grad(x, gy, p, 1)))
    # a non-finite weight is declined: times the zero border it would give NaN where the
    # NumPy kernel adds nothing
    w[0, 0, 0, 0] = np.inf
    assert cconv.conv_input_grad(gy, w, p, 1) is None


def _torch_pair(shape, rng):
    a = rng.standard_normal(shape)
    return ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


@pytest.mark.parametrize(
    "cin, cout, size, kernel, stride, padding, dilation, groups",
    [
        (6, 8, 11, 3, 2, 1, 1, 1),
        (6, 9, 10, 3, 3, 2, 2, 3),
        (4, 4, 8, 1, 2, 0, 1, 1),
        (5, 7, 9, (3, 2), (2, 3), (0, 1), (1, 2), 1),
        (32, 16, 7, 3, 2, 1, 1, 1),
    ],
)
@pytest.mark.parametrize("batch", [1, 3])
def test_strided_conv2d_and_its_gradients_match_torch(
    cin, cout, size, kernel, stride, padding, dilation, groups, batch
):
    rng = np.random.default_rng(11)
    kernel = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    ex, tx = _torch_pair((batch, cin, size, size + 1), rng)
    ew, tw = _torch_pair((cout, cin // groups) + kernel, rng)
    args = dict(stride=stride, padding=padding, dilation=dilation, groups=groups)
    ey, ty = F.conv2d(ex, ew, **args), torch.nn.functional.conv2d(tx, tw, **args)
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-10)
    g = rng.standard_normal(ty.shape)
    ey.backward(ember.tensor(g))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ew.grad.numpy(), tw.grad.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize(
    "cin, cout, size, kernel, stride, padding, output_padding, dilation, groups",
    [
        (16, 8, 6, 2, 2, 0, 0, 1, 1),  # U-Net's up-convolution
        (6, 4, 5, 3, 2, 1, 1, 1, 2),
        (4, 6, 4, 3, 3, 0, 2, 2, 1),
    ],
)
def test_conv_transpose2d_and_its_gradients_match_torch(
    cin, cout, size, kernel, stride, padding, output_padding, dilation, groups
):
    rng = np.random.default_rng(13)
    ex, tx = _torch_pair((2, cin, size, size), rng)
    ew, tw = _torch_pair((cin, cout // groups, kernel, kernel), rng)
    args = dict(stride=stride, padding=padding, output_padding=output_padding)
    args.update(dilation=dilation, groups=groups)
    ey = F.conv_transpose2d(ex, ew, **args)
    ty = torch.nn.functional.conv_transpose2d(tx, tw, **args)
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-10)
    g = rng.standard_normal(ty.shape)
    ey.backward(ember.tensor(g))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ew.grad.numpy(), tw.grad.numpy(), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
def test_strided_conv_modules_with_padding_modes_match_torch(padding_mode):
    rng = np.random.default_rng(17)
    ours = nn.Conv2d(8, 12, 3, stride=2, padding=1, padding_mode=padding_mode).double()
    theirs = torch.nn.Conv2d(8, 12, 3, stride=2, padding=1, padding_mode=padding_mode).double()
    with torch.no_grad():
        theirs.weight.copy_(torch.tensor(ours.weight.detach().numpy()))
        theirs.bias.copy_(torch.tensor(ours.bias.detach().numpy()))
    ex, tx = _torch_pair((2, 8, 9, 10), rng)
    ey, ty = ours(ex), theirs(tx)
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-10)
    ey.sum().backward()
    ty.sum().backward()
    np.testing.assert_allclose(
        ex.grad.detach().numpy(), tx.grad.detach().numpy(), rtol=1e-10, atol=1e-10
    )
    np.testing.assert_allclose(
        ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-10, atol=1e-10
    )


def test_a_strided_network_under_function_matches_eager():
    rng = np.random.default_rng(19)
    ember.manual_seed(0)
    net = nn.Sequential(
        nn.Conv2d(3, 32, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 32, 1, stride=2),
        nn.ConvTranspose2d(32, 8, 2, stride=2),
    )
    x = ember.tensor(rng.standard_normal((2, 3, 12, 12)).astype(np.float32))

    def loss(x):
        return (net(x) ** 2).mean()

    def grads(fn):
        for q in net.parameters():
            q.grad = None
        fn(x).backward()
        return [q.grad.numpy().copy() for q in net.parameters()]

    eager = grads(loss)
    compiled = grads(ember.function(loss))
    for a, b in zip(eager, compiled):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
