"""The transposed convolution as a product and a col2im (kernels/cconv_col2im.py), which
kernels/cconv.py's input gradient takes where its padded forward would mostly multiply zeros
(small gradient planes under a larger kernel: a DCGAN generator's layers).

Checked against ops/_conv_kernels.py's NumPy kernel (the specification) within the rounding
of a sum in another order (``terms * eps`` times the sum of the products' magnitudes), against
PyTorch through nn.ConvTranspose2d (values and gradients, float64), for the choice `wins` makes,
with non-finite weights, and for the workspace rule the memory planner charges."""

import math
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
from ember.kernels import ccompile, cconv, cconv_col2im, cconv_workspace
from ember.kernels.conv_plan import plan
from ember.ops import _conv_kernels as K

torch = pytest.importorskip("torch")

needs_cc = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _transposed_plan(gy_size, kernel, stride, padding, dilation):
    """The plan of the convolution whose input gradient is a transposed convolution of a
    ``gy_size`` plane (its output: the convolution's input size)."""
    in_size = tuple(
        (g - 1) * s - 2 * p + d * (k - 1) + 1
        for g, k, s, p, d in zip(gy_size, kernel, stride, padding, dilation)
    )
    assert min(in_size) >= 1
    p = plan(in_size, kernel, stride, tuple((q, q) for q in padding), dilation)
    assert p.out_size == tuple(gy_size)
    return p


def _within_rounding(got, want, bound, terms):
    assert got is not None and got.shape == want.shape and got.dtype == want.dtype
    limit = 2 * terms * np.finfo(want.dtype).eps * bound + np.finfo(want.dtype).tiny
    assert np.all(np.abs(got - want) <= limit), float(np.max(np.abs(got - want) - limit))


@st.composite
def geometries(draw):
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cog = draw(st.integers(1, 12))
    cg = draw(st.integers(1, 10))
    kernel = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = tuple(draw(st.integers(0, (k - 1) * d)) for k, d in zip(kernel, dilation))
    gy_size = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    n = draw(st.integers(1, 3))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    return n, groups, cog, cg, gy_size, kernel, stride, padding, dilation, dtype


@needs_cc
@settings(max_examples=120, deadline=None)
@given(geometries(), st.integers(0, 2**31))
def test_the_product_and_col2im_equal_the_numpy_kernel_within_rounding(case, seed):
    n, groups, cog, cg, gy_size, kernel, stride, padding, dilation, dtype = case
    try:
        p = _transposed_plan(gy_size, kernel, stride, padding, dilation)
    except AssertionError:  # (an output size the geometry cannot give)
        return
    rng = np.random.default_rng(seed)
    gy = rng.standard_normal((n, groups * cog) + gy_size).astype(dtype)
    w = rng.standard_normal((groups * cog, cg) + kernel).astype(dtype)
    bias = rng.standard_normal(groups * cg).astype(dtype) if seed % 2 else None
    shift = 0 if bias is None else bias.reshape(1, -1, 1, 1)
    want = K.conv_input_grad(gy, w, p, groups) + shift
    bound = K.conv_input_grad(abs(gy), abs(w), p, groups) + abs(shift)
    terms = cog * math.prod(kernel) + 1
    _within_rounding(cconv_col2im.input_grad(gy, w, p, groups, bias), want, bound, terms)
    _within_rounding(cconv.conv_input_grad(gy, w, p, groups, bias), want, bound, terms)


@needs_cc
@pytest.mark.parametrize(
    "cin, cout, kernel, stride, padding, size, chosen",
    [
        (64, 128, 4, 1, 0, 1, True),  # DCGAN's first layer: a 1x1 input over a 4x4 output
        (128, 64, 3, 1, 0, 8, True),  # stride 1 without padding: 8x8 -> 10x10
        (32, 3, 4, 2, 1, 16, True),  # DCGAN's last layer: three result channels
        (64, 32, 4, 2, 1, 8, False),  # a middle layer: the phases multiply no padding
        (32, 32, 3, 1, 1, 8, False),  # 'same' padding: nothing to save
    ],
)
def test_the_choice_and_conv_transpose2d_against_pytorch(
    cin, cout, kernel, stride, padding, size, chosen
):
    p = _transposed_plan((size, size), (kernel,) * 2, (stride,) * 2, (padding,) * 2, (1, 1))
    assert cconv_col2im.wins((4, cin, size, size), (cin, cout, kernel, kernel), p, 1, 4) is chosen
    torch.manual_seed(0)
    ember.manual_seed(0)
    ours = ember.nn.ConvTranspose2d(cin, cout, kernel, stride, padding).double()
    theirs = torch.nn.ConvTranspose2d(cin, cout, kernel, stride, padding).double()
    x = np.random.default_rng(1).standard_normal((4, cin, size, size))
    ex, tx = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ey, ty = ours(ex), theirs(tx)
    np.testing.assert_allclose(ey.detach().numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-10)
    g = np.random.default_rng(2).standard_normal(ty.shape)
    ey.backward(ember.tensor(g))
    ty.backward(torch.tensor(g))
    np.testing.assert_allclose(ex.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-10)
    for a, b in ((ours.weight, theirs.weight), (ours.bias, theirs.bias)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-10)


@needs_cc
def test_non_finite_weights_give_the_numpy_kernels_values():
    """The product multiplies no padding, so an infinite weight makes NaN or inf exactly where
    the NumPy kernel's real products do."""
    p = _transposed_plan((2, 2), (4, 4), (1, 1), (0, 0), (1, 1))
    rng = np.random.default_rng(3)
    gy = rng.standard_normal((2, 6, 2, 2)).astype(np.float32)
    w = rng.standard_normal((6, 5, 4, 4)).astype(np.float32)
    w[1, 2, 0, 3] = np.inf
    w[4, 0, 2, 2] = np.nan
    got = cconv.conv_input_grad(gy, w, p, 1)
    want = K.conv_input_grad(gy, w, p, 1)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-5)


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_workspace_rule_counts_what_the_kernel_allocates(dtype, bare_executors):
    # (a DCGAN layer's 1x1 planes: the product and col2im, however the padded forward runs)
    p = _transposed_plan((1, 1), (4, 4), (1, 1), (0, 0), (1, 1))
    rng = np.random.default_rng(4)
    gy = rng.standard_normal((8, 48, 1, 1)).astype(dtype)
    w = rng.standard_normal((48, 40, 4, 4)).astype(dtype)
    assert not cconv.taps_win(gy.shape, w.shape, p, 1, dtype)
    cconv.conv_input_grad(gy, w, p, 1)  # (compiled and its GEMM tuned before measuring)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        result = cconv.conv_input_grad(gy, w, p, 1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    measured = peak - before - result.nbytes
    planned = cconv_workspace.temporaries("conv_input_grad", gy.shape, w.shape, p, 1, dtype)
    assert abs(measured - planned) <= 0.05 * planned + 4096, (planned, measured)


@needs_cc
@pytest.mark.parametrize("dtype", [ember.bfloat16, ember.float16])
def test_half_precision_is_the_float32_product_and_col2im_rounded_once(dtype):
    """cconv.py leaves a 16-bit input gradient the col2im would take to ops/conv.py, which
    widens it to float32: the result is the float32 one rounded once, as PyTorch's."""
    p = _transposed_plan((1, 1), (4, 4), (1, 1), (0, 0), (1, 1))
    rng = np.random.default_rng(6)
    gy = rng.standard_normal((4, 24, 1, 1)).astype(np.float32).astype(dtype.np)
    w = rng.standard_normal((24, 16, 4, 4)).astype(np.float32).astype(dtype.np)
    assert cconv.conv_input_grad(gy, w, p, 1) is None
    got = ember.nn.functional.conv_transpose2d(ember.tensor(gy), ember.tensor(w))
    want = cconv.conv_input_grad(gy.astype(np.float32), w.astype(np.float32), p, 1)
    np.testing.assert_array_equal(got.float().numpy(), want.astype(dtype.np).astype(np.float32))
