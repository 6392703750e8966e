"""Quantized models exported as ONNX QDQ graphs and run by onnxruntime, against ember.

The quantize / dequantize ops are QuantizeLinear / DequantizeLinear with ember's arithmetic
(divide by the float32 scale, round half to even, saturate): bit for bit. A quantized layer is
DequantizeLinear (input, per-channel weight), the float Conv / MatMul, bias, Relu and, where it
hands uint8 values on, QuantizeLinear; onnxruntime fuses DQ -> Conv -> Q into QLinearConv (and
a MatMul into QGemm), an int8 run of its own. Its integer sums are ember's, but it requantizes
differently (the float bias rounded to an int32 bias at scale sx * sw, one float32 multiplier
sx * sw / sy), so a result whose exact value lies next to a rounding boundary can land one step
away: at most one step, and rarely. A layer whose output stays float runs in float32 on the
dequantized values: within float32's rounding of the sum of its products."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import nn
from ember.quantization import quantize, quantize_dynamic

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

F32_EPS = 2.0**-24


def _run(path, *arrays):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, arrays)))


def test_quantize_and_dequantize_export_bit_for_bit(tmp_path):
    r = np.random.default_rng(0)
    x = (r.standard_normal((4, 3, 5)) * 3).astype(np.float32)
    scales = ember.tensor(np.array([0.02, 0.05, 0.3], np.float32))
    zps = ember.tensor(np.array([0, 100, 255]))

    def f(x):
        a = ember.quantize_per_tensor(x, 0.037, 128, ember.uint8)
        b = ember.quantize_per_channel(x, scales, zps, 1, ember.uint8)
        c = ember.quantize_per_tensor(x, 0.05, -3, ember.int8)
        fake = ember.fake_quantize_per_tensor_affine(x, 0.05, 7, 0, 255)
        fake_c = ember.fake_quantize_per_channel_affine(x, scales, zps, 1, 0, 255)
        amax = x.abs().amax()  # the tensor-qparams form, its scale computed by the graph
        fake_t = ember.fake_quantize_per_tensor_affine(
            x, amax / 127, ember.zeros((), dtype=ember.int32), -128, 127
        )
        dq = ember.dequantize(b, scales, zps, axis=1)
        return a, b, ember.dequantize(c, 0.05, -3), dq, fake, fake_c, fake_t

    ember.onnx.export(f, tmp_path / "q.onnx", ember.tensor(x))
    for got, want in zip(_run(tmp_path / "q.onnx", x), f(ember.tensor(x))):
        assert got.dtype == want.numpy().dtype
        np.testing.assert_array_equal(got, want.numpy())


def _cnn():
    ember.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(16 * 4 * 4, 10),
    ).eval()


def _data(n=64, seed=1):
    return np.random.default_rng(seed).random((n, 1, 8, 8)).astype(np.float32)


def test_a_requantizing_layer_is_within_one_step_of_onnxruntimes_int8_run(tmp_path):
    q = quantize(_cnn(), [_data()])
    layer = q[3]  # conv -> uint8 for the linear layer
    assert layer.out_scale is not None
    x8 = ember.quantize_per_tensor(ember.tensor(_data(32, 2)[:, :1].repeat(8, 1)),
                                   layer.x_scale, layer.x_zero_point, ember.uint8)  # fmt: skip
    want = layer(x8).numpy()
    ember.onnx.export(layer, tmp_path / "conv.onnx", x8)
    (got,) = _run(tmp_path / "conv.onnx", x8.numpy())
    assert got.dtype == np.uint8
    steps = np.abs(got.astype(int) - want.astype(int))
    assert steps.max() <= 1
    assert (steps > 0).mean() < 0.01, f"{(steps > 0).mean():.2%} of the values differ"


def test_a_float_output_layer_is_within_float_rounding(tmp_path):
    q = quantize(_cnn(), [_data()])
    layer = q[7]  # the final linear: float32 out
    assert layer.out_scale is None
    x = ember.tensor(np.random.default_rng(3).random((16, 256)).astype(np.float32))
    want = layer(x).numpy().astype(np.float64)
    ember.onnx.export(layer, tmp_path / "linear.onnx", x)
    (got,) = _run(tmp_path / "linear.onnx", x.numpy())
    xq = ember.quantize_per_tensor(x, layer.x_scale, layer.x_zero_point, ember.uint8).numpy()
    xf = (xq.astype(np.float64) - layer.x_zero_point) * np.float32(layer.x_scale)
    wf = layer.weight.numpy() * layer.w_scale.numpy()[:, None].astype(np.float64)
    terms = np.abs(xf) @ np.abs(wf).T + np.abs(layer.bias.numpy())
    bound = (256 + 4) * F32_EPS * terms  # a float32 sum of 256 products, both sides
    assert (np.abs(got - want) <= bound).all()


def test_the_whole_model_runs_in_onnxruntime_and_agrees(tmp_path):
    model = _cnn()
    q = quantize(model, [_data()])
    x = ember.tensor(_data(256, 4))
    want = q(x).numpy()
    ember.onnx.export(q, tmp_path / "cnn.onnx", x)
    (got,) = _run(tmp_path / "cnn.onnx", x.numpy())
    # one-step differences inside move the logits a little, and the prediction almost never
    assert (got.argmax(1) == want.argmax(1)).mean() >= 0.98
    assert np.abs(got - want).max() <= 0.05 * np.abs(want).max()


def test_dynamic_linear_exports_as_integer_matmul(tmp_path):
    ember.manual_seed(2)
    q = quantize_dynamic(nn.Linear(20, 6))
    x = ember.tensor(np.random.default_rng(5).standard_normal((3, 20)).astype(np.float32))
    ember.onnx.export(q, tmp_path / "dyn.onnx", x)
    try:
        (got,) = _run(tmp_path / "dyn.onnx", x.numpy())
    except Exception as exc:  # an onnxruntime without int8 x int8 MatMulInteger
        pytest.skip(f"onnxruntime refuses the model: {exc}")
    # the same int32 sums and the same float32 scaling: equal up to float32 rounding
    np.testing.assert_allclose(got, q(x).numpy(), rtol=4 * F32_EPS * 20, atol=1e-6)
