"""The quantization ops: their definitions against independent computations (the quantized
layers against float arithmetic on the dequantized values; quantize against PyTorch on ties'
neighbourhoods) and their errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import ember
from ember.errors import QuantizationError
from ember.quantization import quantized_conv2d, quantized_linear

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

F32_EPS = 2.0**-24  # float32's unit roundoff


def test_quantize_matches_pytorch_everywhere_but_next_to_a_half():
    """PyTorch rounds x * (1 / scale), ember (as ONNX) x / scale: equal but where the two
    products straddle a half, and there at most one step apart."""
    if torch is None:
        pytest.skip("needs torch")
    r = np.random.default_rng(0)
    x = (r.standard_normal(20000) * 3).astype(np.float32)
    for dtype, tdtype, zp in ((ember.uint8, torch.quint8, 128), (ember.int8, torch.qint8, -3)):
        got = ember.quantize_per_tensor(ember.tensor(x), 0.037, zp, dtype).numpy().astype(int)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = torch.quantize_per_tensor(torch.tensor(x), 0.037, zp, tdtype)
        want = want.int_repr().numpy().astype(int)
        v = x.astype(np.float64) / np.float64(np.float32(0.037))
        near_half = np.abs(v - np.floor(v) - 0.5) < 1e-5
        np.testing.assert_array_equal(got[~near_half], want[~near_half])
        assert np.abs(got - want).max() <= 1


def test_quantize_rounds_half_to_even_and_saturates():
    x = ember.tensor(np.array([0.5, 1.5, 2.5, -0.5, 1000.0, -1000.0, np.nan], np.float32))
    np.testing.assert_array_equal(
        ember.quantize_per_tensor(x, 1.0, 10, ember.uint8).numpy(),
        [10, 12, 12, 10, 255, 0, 10],
    )


def test_dequantize_inverts_quantize_within_half_a_step():
    r = np.random.default_rng(1)
    x = r.uniform(-2, 2, (50,)).astype(np.float32)
    scale = 4.0 / 255
    q = ember.quantize_per_tensor(ember.tensor(x), scale, 128, ember.uint8)
    back = ember.dequantize(q, scale, 128).numpy()
    assert np.abs(back - x).max() <= scale / 2 * (1 + 1e-5)


def test_bad_parameters_are_refused():
    x = ember.ones(3)
    with pytest.raises(QuantizationError, match="scale"):
        ember.quantize_per_tensor(x, 0.0, 0, ember.uint8)
    with pytest.raises(QuantizationError, match="scale"):
        ember.quantize_per_tensor(x, float("nan"), 0, ember.uint8)
    with pytest.raises(QuantizationError, match="zero_point"):
        ember.quantize_per_tensor(x, 0.1, 300, ember.uint8)
    with pytest.raises(ember.DTypeError, match="uint8 or int8"):
        ember.quantize_per_tensor(x, 0.1, 0, ember.int32)
    with pytest.raises(ember.ShapeError, match="scales"):
        ember.quantize_per_channel(
            ember.ones((2, 3)), ember.ones(2), ember.zeros(3, dtype=ember.int64), 1, ember.uint8
        )
    with pytest.raises(QuantizationError, match="quant_min"):
        ember.fake_quantize_per_tensor_affine(x, 0.1, 0, 5, 4)


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
def test_fake_quantize_with_tensor_qparams_matches_pytorch(dtype):
    """PyTorch's tensor-qparams form (the scale and zero point one-element tensors, an
    observer's output): the float form's values, gradient only to the input, and in a
    captured graph the parameters are read at each call."""
    if torch is None:
        pytest.skip("needs torch")
    r = np.random.default_rng(3)
    x = (r.standard_normal((3, 7)) * 3).astype(np.float32)
    for scale, zp, lo, hi in ((0.0137, 3, -128, 127), (0.05, 100, 0, 255)):
        got_x = ember.tensor(x).to(getattr(ember, dtype)).requires_grad_()
        want_x = torch.tensor(x).to(getattr(torch, dtype)).requires_grad_()
        for s_shape in ((), (1,)):
            s_e = ember.tensor(np.full(s_shape, scale, np.float32))
            z_e = ember.tensor(np.full(s_shape, zp, np.int32))
            got = ember.fake_quantize_per_tensor_affine(got_x, s_e, z_e, lo, hi)
            want = torch.fake_quantize_per_tensor_affine(
                want_x, torch.tensor(np.full(s_shape, scale, np.float32)),
                torch.tensor(np.full(s_shape, zp, np.int32)), lo, hi)  # fmt: skip
            assert str(got.dtype).split(".")[-1] == str(want.dtype).split(".")[-1]
            np.testing.assert_array_equal(got.float().detach().numpy(),
                                          want.float().detach().numpy())  # fmt: skip
            np.testing.assert_array_equal(
                got.float().detach().numpy(),
                ember.fake_quantize_per_tensor_affine(got_x, scale, zp, lo, hi).float().detach()
                .numpy(),
            )  # fmt: skip
            got.sum().backward()
            want.sum().backward()
            np.testing.assert_array_equal(got_x.grad.float().numpy(), want_x.grad.float().numpy())
    f = ember.function(
        lambda x, s: ember.fake_quantize_per_tensor_affine(x, s, ember.tensor(1), 0, 255)
    )
    for scale in (0.05, 0.1):
        want = ember.fake_quantize_per_tensor_affine(ember.tensor(x), scale, 1, 0, 255)
        got = f(ember.tensor(x), ember.tensor(scale))
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    with pytest.raises(ember.ShapeError, match="one element"):
        ember.fake_quantize_per_tensor_affine(ember.tensor(x), ember.ones(2), ember.tensor(0), 0, 9)


def _dequantized(q, scale, zp):
    return (q.astype(np.float64) - zp) * scale


@pytest.mark.parametrize("xdtype,zp", [(np.uint8, 7), (np.int8, -3)])
def test_quantized_linear_is_the_dequantized_float_product(xdtype, zp):
    """(x - zp) sx @ (w sw).T + b computed in float64 from the dequantized values: the op
    differs by its float32 rounding of the scale product and of the result only."""
    r = np.random.default_rng(2)
    info = np.iinfo(xdtype)
    x = r.integers(info.min, info.max + 1, (2, 3, 40)).astype(xdtype)
    w = r.integers(-127, 128, (9, 40)).astype(np.int8)
    ws = (r.random(9) * 0.01 + 1e-3).astype(np.float32)
    b = r.standard_normal(9).astype(np.float32)
    got = quantized_linear(ember.tensor(x), ember.tensor(w), ember.tensor(ws), ember.tensor(b),
                           0.02, zp).numpy()  # fmt: skip
    xf = _dequantized(x, np.float64(np.float32(0.02)), zp)
    want = xf @ (w.astype(np.float64) * ws.astype(np.float64)[:, None]).T + b
    terms = np.abs(xf) @ (np.abs(w) * ws.astype(np.float64)[:, None]).T
    # the scale product sx * sw[c] rounded to float32 (one relative eps on every term), the
    # result rounded once (and the sum with the bias in double)
    bound = F32_EPS * terms + F32_EPS * np.abs(want) + 1e-12
    assert got.shape == (2, 3, 9)
    assert (np.abs(got - want) <= bound).all()


def test_quantized_conv2d_is_the_dequantized_float_convolution():
    if torch is None:
        pytest.skip("needs torch")
    r = np.random.default_rng(3)
    x = r.integers(0, 256, (2, 4, 9, 8)).astype(np.uint8)
    w = r.integers(-127, 128, (6, 2, 3, 3)).astype(np.int8)
    ws = (r.random(6) * 0.01 + 1e-3).astype(np.float32)
    b = r.standard_normal(6).astype(np.float32)
    got = quantized_conv2d(
        ember.tensor(x),
        ember.tensor(w),
        ember.tensor(ws),
        ember.tensor(b),
        0.05,
        100,
        stride=(2, 1),
        padding=1,
        groups=2,
        relu=True,
    ).numpy()
    sx = np.float64(np.float32(0.05))
    xf = torch.tensor(_dequantized(x, sx, 100))
    wf = torch.tensor(w.astype(np.float64) * ws.astype(np.float64)[:, None, None, None])
    conv = torch.nn.functional.conv2d
    want = conv(xf, wf, torch.tensor(b, dtype=torch.float64), (2, 1), 1, 1, 2).numpy()
    terms = conv(xf.abs(), wf.abs(), None, (2, 1), 1, 1, 2).numpy()
    bound = F32_EPS * terms + F32_EPS * np.abs(want) + 1e-12
    assert (np.abs(got - np.maximum(want, 0)) <= bound).all()


def test_requantized_output_is_the_float_output_quantized():
    r = np.random.default_rng(4)
    x = ember.tensor(r.integers(0, 256, (5, 16)).astype(np.uint8))
    w = ember.tensor(r.integers(-127, 128, (4, 16)).astype(np.int8))
    ws, b = ember.tensor(np.full(4, 0.003, np.float32)), ember.tensor(np.zeros(4, np.float32))
    y = quantized_linear(x, w, ws, b, 0.1, 3)
    q = quantized_linear(x, w, ws, b, 0.1, 3, out_dtype="uint8", out_scale=0.02,
                         out_zero_point=60)  # fmt: skip
    want = ember.quantize_per_tensor(y, 0.02, 60, ember.uint8)
    np.testing.assert_array_equal(q.numpy(), want.numpy())


def test_the_layers_capture_and_equal_eager():
    r = np.random.default_rng(6)
    x = ember.tensor(r.integers(0, 256, (2, 3, 6, 6)).astype(np.uint8))
    w = ember.tensor(r.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8))
    ws, b = ember.tensor(np.full(4, 0.01, np.float32)), ember.tensor(np.ones(4, np.float32))

    def f(x):
        return quantized_conv2d(x, w, ws, b, 0.1, 5, padding=1, relu=True)

    np.testing.assert_array_equal(ember.function(f)(x).numpy(), f(x).numpy())
    graph = ember.trace(f, x).graph
    np.testing.assert_array_equal(ember.trace(f, x)(x).numpy(), f(x).numpy())
    assert "quantized_conv2d" in str(graph)


def test_layer_errors_name_the_op():
    x8 = ember.tensor(np.zeros((2, 5), np.uint8))
    w = ember.tensor(np.zeros((3, 5), np.int8))
    ws, b = ember.tensor(np.ones(3, np.float32)), ember.tensor(np.zeros(3, np.float32))
    with pytest.raises(ember.DTypeError, match="quantized_linear"):
        quantized_linear(ember.zeros((2, 5)), w, ws, b, 0.1, 0)
    with pytest.raises(ember.ShapeError, match="quantized_linear"):
        quantized_linear(x8, ember.tensor(np.zeros((3, 4), np.int8)), ws, b, 0.1, 0)
    with pytest.raises(ember.ShapeError, match="w_scale"):
        quantized_linear(x8, w, ember.ones(2), b, 0.1, 0)
    with pytest.raises(QuantizationError, match="quantized_linear: scale"):
        quantized_linear(x8, w, ws, b, 0.1, 0, out_dtype="uint8")  # no out_scale


def test_observers_give_pytorchs_affine_parameters():
    """MinMaxObserver / PerChannelMinMaxObserver against torch.ao's (quint8, affine): the
    scale (max - min) / 255 over a range holding 0, the zero point rint(-min / scale)."""
    if torch is None:
        pytest.skip("needs torch")
    from torch.ao.quantization import observer as tobs

    from ember.quantization import MinMaxObserver, PerChannelMinMaxObserver

    r = np.random.default_rng(8)
    batches = [(r.standard_normal((4, 3, 5)) * 2 + 0.7).astype(np.float32) for _ in range(3)]
    ours, theirs = MinMaxObserver(), tobs.MinMaxObserver(dtype=torch.quint8)
    ours_c = PerChannelMinMaxObserver(ch_axis=1)
    theirs_c = tobs.PerChannelMinMaxObserver(ch_axis=1, dtype=torch.quint8,
                                             qscheme=torch.per_channel_affine)  # fmt: skip
    for b in batches:
        ours(b), theirs(torch.tensor(b)), ours_c(b), theirs_c(torch.tensor(b))
    scale, zp = ours.calculate_qparams()
    t_scale, t_zp = theirs.calculate_qparams()
    np.testing.assert_allclose(scale, float(t_scale), rtol=2**-23)
    assert zp == int(t_zp)
    scales, zps = ours_c.calculate_qparams()
    t_scales, t_zps = theirs_c.calculate_qparams()
    np.testing.assert_allclose(scales, t_scales.numpy(), rtol=2**-23)
    np.testing.assert_array_equal(zps, t_zps.numpy())
