"""kernels/cconv.py: the compiled convolution kernels equal the NumPy kernels of
ops/_conv_kernels.py (the specification) within float rounding, on random geometries (1-3
spatial dimensions, strides, asymmetric and cropping padding, dilation, groups), float32 and
float64, non-contiguous inputs, non-finite values; they decline (return None) what they do not
run, and the ops fall back to NumPy then and without a compiler."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
import ember.nn.functional as F
from ember.kernels import ccompile, cconv, cconv_weight
from ember.kernels.conv_plan import conv_out_size, plan
from ember.ops import _conv_kernels as K
from ember.ops import conv as conv_ops

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _close(got, want):
    assert got is not None
    assert got.shape == want.shape and got.dtype == want.dtype
    tol = 1e-4 if want.dtype == np.float32 else 1e-11
    scale = float(np.abs(want).max()) if want.size else 0.0
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)


@st.composite
def geometries(draw):
    nd = draw(st.sampled_from([1, 2, 2, 3]))
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cin = groups * draw(st.integers(1, 5))
    cout = groups * draw(st.integers(1, 11))
    kernel = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    stride = tuple(draw(st.sampled_from([1, 1, 2, 3])) for _ in range(nd))
    dilation = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    padding = tuple((draw(st.integers(0, 2)), draw(st.integers(-1, 2))) for _ in range(nd))
    size = tuple(
        draw(st.integers(d * (k - 1) + 2, d * (k - 1) + 9)) for k, d in zip(kernel, dilation)
    )
    n = draw(st.integers(1, 3))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    return n, cin, cout, groups, size, kernel, stride, padding, dilation, dtype


@settings(max_examples=60, deadline=None)
@given(geometries(), st.integers(0, 2**31))
def test_the_three_kernels_equal_the_numpy_kernels(case, seed):
    n, cin, cout, groups, size, kernel, stride, padding, dilation, dtype = case
    if any(o < 1 for o in conv_out_size(size, kernel, stride, padding, dilation)):
        return
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin) + size).astype(dtype)
    w = rng.standard_normal((cout, cin // groups) + kernel).astype(dtype)
    p = plan(size, kernel, stride, padding, dilation, w[0].size, cout // groups)
    y = K.conv_forward(x, w, p, groups)
    gy = rng.standard_normal(y.shape).astype(dtype)
    bias = rng.standard_normal(cout).astype(dtype)
    _close(cconv.conv_forward(x, w, p, groups), y)
    _close(cconv.conv_forward(x, w, p, groups, bias), y + bias.reshape((1, -1) + (1,) * len(size)))
    relu = np.maximum(y + bias.reshape((1, -1) + (1,) * len(size)), 0)
    _close(cconv.conv_forward(x, w, p, groups, bias, relu=True), relu)
    # strided gradients (and an input gradient whose padding exceeds the kernel's reach) run
    # phase by phase (kernels/cconv_phases.py)
    _close(cconv.conv_input_grad(gy, w, p, groups), K.conv_input_grad(gy, w, p, groups))
    gw = cconv_weight.conv_weight_grad(x, gy, p, groups)
    if gw is not None:  # (an extended grid over twice the output is declined)
        _close(gw, K.conv_weight_grad(x, gy, p, groups))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "x_shape, w_shape, padding",
    [
        ((8, 32, 14, 14), (64, 32, 3, 3), 1),  # the CNN's second layer: channels-last gradient
        ((4, 24, 9, 11), (20, 24, 3, 3), 1),  # channels and rows that fill no tile exactly
        ((3, 48, 6, 7), (5, 48, 1, 3), 0),
        ((2, 24, 4, 5, 6), (7, 24, 3, 3, 3), 1),  # 3-d
    ],
)
def test_layer_sized_convolutions_with_threads(x_shape, w_shape, padding, dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    nd = len(x_shape) - 2
    pad = ((padding, padding),) * nd
    p = plan(x_shape[2:], w_shape[2:], (1,) * nd, pad, (1,) * nd, w[0].size, w_shape[0])
    y = K.conv_forward(x, w, p, 1)
    gy = rng.standard_normal(y.shape).astype(dtype)
    _close(cconv.conv_forward(x, w, p, 1), y)
    _close(cconv.conv_input_grad(gy, w, p, 1), K.conv_input_grad(gy, w, p, 1))
    _close(cconv_weight.conv_weight_grad(x, gy, p, 1), K.conv_weight_grad(x, gy, p, 1))


def test_non_contiguous_inputs():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 6, 9, 7)).astype(np.float32).transpose(1, 0, 3, 2)[:, :, ::2]
    w = rng.standard_normal((3, 20, 3, 3)).astype(np.float32).transpose(1, 0, 2, 3)
    p = plan(x.shape[2:], (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 27, 20)
    y = K.conv_forward(np.ascontiguousarray(x), np.ascontiguousarray(w), p, 1)
    _close(cconv.conv_forward(x, w, p, 1), y)
    gy = rng.standard_normal(y.shape).astype(np.float32)[..., ::-1]
    _close(cconv.conv_input_grad(gy, w, p, 1), K.conv_input_grad(np.ascontiguousarray(gy), w, p, 1))
    _close(
        cconv_weight.conv_weight_grad(x, gy, p, 1),
        K.conv_weight_grad(x, np.ascontiguousarray(gy), p, 1),
    )


def test_declines_what_it_does_not_run(monkeypatch):
    p = plan((5, 5), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 18, 4)
    empty = np.zeros((0, 2, 5, 5), np.float32)
    w = np.ones((4, 2, 3, 3), np.float32)
    assert cconv.conv_forward(empty, w, p, 1) is None
    ints = np.ones((1, 2, 5, 5), np.int64)
    assert cconv.conv_forward(ints, w.astype(np.int64), p, 1) is None
    w[0, 0, 0, 0] = np.inf  # times the zero border: NaN where NumPy's col2im adds nothing
    gy = np.ones((1, 4, 5, 5), np.float32)
    # (the counted way, the padded forward: kernels/cconv_dx_choice.py may measure the
    # product and col2im faster here, which multiply no padding and give NumPy's values)
    monkeypatch.setenv("EMBER_CONV_LAYOUT", "count")
    assert cconv.conv_input_grad(gy, w, p, 1) is None
    monkeypatch.setattr(cconv, "col2im_runs", lambda *args: True)
    got, want = cconv.conv_input_grad(gy, w, p, 1), K.conv_input_grad(gy, w, p, 1)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(want)], want[~np.isnan(want)])


def test_non_finite_values_stay_in_their_windows():
    """A column outside the output reads real inputs: an inf there must not reach the weight
    gradient (it is recomputed by NumPy), nor the forward output."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 16, 6, 6)).astype(np.float32)
    x[0, 3, 2, 5] = np.inf
    x[1, 0, 0, 0] = np.nan
    w = rng.standard_normal((8, 16, 3, 3)).astype(np.float32)
    p = plan((6, 6), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 144, 8)
    y = K.conv_forward(x, w, p, 1)
    got = cconv.conv_forward(x, w, p, 1)
    np.testing.assert_array_equal(np.isfinite(got), np.isfinite(y))
    finite = np.isfinite(y)
    np.testing.assert_allclose(got[finite], y[finite], rtol=1e-4, atol=1e-4)
    gy = rng.standard_normal(y.shape).astype(np.float32)
    gw = conv_ops.CONV_WEIGHT_GRAD.kernel(
        x,
        gy,
        kernel_size=(3, 3),
        stride=(1, 1),
        padding=((1, 1), (1, 1)),
        dilation=(1, 1),
        groups=1,
    )
    want = K.conv_weight_grad(x, gy, p, 1)
    np.testing.assert_array_equal(np.isnan(gw), np.isnan(want))


def test_ops_fall_back_to_numpy_without_the_kernels(monkeypatch):
    rng = np.random.default_rng(4)
    x = ember.tensor(rng.standard_normal((2, 8, 7, 7)), requires_grad=True)
    w = ember.tensor(rng.standard_normal((6, 8, 3, 3)), requires_grad=True)
    calls = []
    fast = cconv_weight.conv_weight_grad
    monkeypatch.setattr(cconv_weight, "conv_weight_grad", lambda *a: calls.append(1) or fast(*a))
    y = F.conv2d(x, w, padding=1)
    (y * y).sum().backward()
    assert calls  # the compiled kernels ran
    compiled = x.grad.numpy(), w.grad.numpy()
    x.grad = w.grad = None
    monkeypatch.setattr(cconv, "_functions", lambda dtype: None)
    y = F.conv2d(x, w, padding=1)
    (y * y).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), compiled[0], rtol=1e-10)
    np.testing.assert_allclose(w.grad.numpy(), compiled[1], rtol=1e-10)


def test_a_dimension_read_only_in_its_padding_copies_nothing():
    """A negative high padding can crop the padded extent below the low padding: every window
    then reads padding only (zeros). The C kernel copied a negative number of elements there,
    writing outside its scratch (found by the property test above)."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 5, 5, 2)).astype(np.float32)
    w = rng.standard_normal((4, 5, 1, 1)).astype(np.float32)
    p = plan((5, 2), (1, 1), (1, 3), ((0, -1), (2, -1)), (2, 1), 5, 4)
    assert p.lo[1] > p.padded[1]
    want = K.conv_forward(x, w, p, 1)
    assert not want.any()
    for _ in range(3):  # (corrupted memory showed up on a later allocation)
        got = cconv.conv_forward(x, w, p, 1)
        np.testing.assert_array_equal(got, want)


def test_data_address_is_the_arrays_first_element():
    # the kernels' operand addresses (kernels/cstep.py's data_address, the array's data field
    # read) are ndarray.ctypes.data's for every array: contiguous, views at an offset, strided
    # and Fortran-ordered, read-only (tests/runtime/test_data_address.py: the other paths)
    from ember.kernels.cstep import data_address

    a = np.arange(24.0).reshape(4, 6)
    read_only = a.copy()
    read_only.flags.writeable = False
    views = (a, a[1:], a[:, 1:], a.T, np.asfortranarray(a), read_only, a[::2], a.view(np.int64))
    for v in (*views, np.ones(3, bool), np.zeros((2, 3), np.float32)[1]):
        assert data_address(v) == v.ctypes.data
