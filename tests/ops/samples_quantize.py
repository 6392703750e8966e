"""Conformance samples for the quantization ops (ops/quantize.py, ops/quantized.py).

Quantize / dequantize compare with PyTorch's quantized tensors (``int_repr()`` and
``dequantize()``); the inputs keep ``x / scale`` at least 0.05 away from a half, where PyTorch's
multiply-by-inverse and ember's (ONNX's) divide could round apart. The fake quantizers' gradient
is PyTorch's straight-through estimator, not the derivative (zero almost everywhere), so it is
compared with PyTorch rather than finite differences; ``fake_quantize_backward``, linear in the
incoming gradient, is checked by finite differences. The integer layers have no PyTorch
function to call (PyTorch's take packed weights); tests/quantization checks them against
float computations on the dequantized values and the C kernels bit for bit."""

import numpy as np

import ember
from ember.ops._registry import apply
from ember.ops.quantize import FAKE_QUANTIZE_BACKWARD
from ember.quantization import quantized_conv2d, quantized_linear

from .harness import Sample, rng

r = rng(41)


def _off_ties(x, scale, zero_point=0):
    """x with x / scale (and the range's ends) kept 0.05 from a half-integer."""
    v = x / scale
    frac = v - np.floor(v)
    v = np.where(np.abs(frac - 0.5) < 0.05, np.floor(v) + 0.3, v)
    return v * scale


S, Z = 0.05, 100
X = _off_ties(r.standard_normal((4, 6)) * 3, S)  # some beyond the range: clamped
SC = np.array([0.02, 0.05, 0.1, 0.3], np.float32)
ZC = np.array([0, 7, 128, 250], np.int64)
XC = _off_ties(r.standard_normal((3, 4, 5)) * 2, SC.reshape(1, 4, 1).astype(np.float64))
Q8 = r.integers(0, 256, (3, 4, 5)).astype(np.uint8)
QS = r.integers(-128, 128, (3, 4, 5)).astype(np.int8)
ZQ = np.array([-100, -3, 28, 127])


def _torch():
    return __import__("torch")


def _tq(x, s, z, dtype):
    t = _torch()
    return t.quantize_per_tensor(x.float(), s, z, getattr(t, dtype)).int_repr()


def _tqc(x, s, z, dtype):
    t = _torch()
    return t.quantize_per_channel(x.float(), s.float(), z, 1, getattr(t, dtype)).int_repr()


SAMPLES = [
    Sample("quantize_per_tensor/uint8",
           lambda x: ember.quantize_per_tensor(x, S, Z, ember.uint8), (X,),
           torch_fn=lambda x: _tq(x, S, Z, "quint8"), grad=False),
    Sample("quantize_per_tensor/int8",
           lambda x: ember.quantize_per_tensor(x, S, -3, ember.int8), (X,),
           torch_fn=lambda x: _tq(x, S, -3, "qint8"), grad=False),
    Sample("quantize_per_channel/uint8",
           lambda x, s, z: ember.quantize_per_channel(x, s, z, 1, ember.uint8), (XC, SC, ZC),
           torch_fn=lambda x, s, z: _tqc(x, s, z, "quint8"), grad=False),
    Sample("dequantize/per_tensor",
           lambda q: ember.dequantize(q, 0.25, 3), (Q8,),
           torch_fn=lambda q: _torch()._make_per_tensor_quantized_tensor(q, 0.25, 3).dequantize(),
           grad=False),
    Sample("dequantize/per_channel_int8",
           lambda q, s, z: ember.dequantize(q, s, z, axis=1), (QS, SC, ZQ),
           torch_fn=lambda q, s, z: _torch()._make_per_channel_quantized_tensor(
               q, s.double(), z, 1).dequantize(),
           grad=False),
    Sample("fake_quantize/per_tensor",
           lambda x: ember.fake_quantize_per_tensor_affine(x, S, Z, 0, 255), (X,),
           torch_fn=lambda x: _torch().fake_quantize_per_tensor_affine(x, S, Z, 0, 255),
           fd=False, float32=True),
    Sample("fake_quantize/per_tensor_tensor_qparams",
           lambda x, s, z: ember.fake_quantize_per_tensor_affine(x, s, z, 0, 255),
           (X, np.array(S, np.float32), np.array([Z], np.int32)), nondiff=(1, 2), fd=False,
           torch_fn=lambda x, s, z: _torch().fake_quantize_per_tensor_affine(x, s, z, 0, 255)),
    Sample("fake_quantize/per_channel",
           lambda x, s, z: ember.fake_quantize_per_channel_affine(x, s, z, 1, 0, 255),
           (XC, SC, ZC), nondiff=(1,), fd=False,
           torch_fn=lambda x, s, z: _torch().fake_quantize_per_channel_affine(
               x, s.float(), z.int(), 1, 0, 255)),
    Sample("fake_quantize_backward",
           lambda g, x: apply(FAKE_QUANTIZE_BACKWARD, g, x, scale=S, zero_point=Z,
                              quant_min=0, quant_max=255),
           (r.standard_normal((4, 6)), X), torch_grad=False),
]  # fmt: skip

XL = r.integers(0, 256, (5, 12)).astype(np.uint8)
WL = r.integers(-127, 128, (7, 12)).astype(np.int8)
WS7 = (r.random(7) * 0.01 + 0.001).astype(np.float32)
B7 = r.standard_normal(7).astype(np.float32)
XV = r.integers(-128, 128, (2, 4, 6, 5)).astype(np.int8)
WV = r.integers(-127, 128, (6, 2, 3, 3)).astype(np.int8)
WS6, B6 = WS7[:6].copy(), B7[:6].copy()

SAMPLES += [
    Sample("quantized_linear/float",
           lambda x, w, s, b: quantized_linear(x, w, s, b, 0.02, 9, relu=True),
           (XL, WL, WS7, B7), grad=False),
    Sample("quantized_linear/requantized",
           lambda x, w, s, b: quantized_linear(x, w, s, b, 0.02, 9, out_dtype="int8",
                                               out_scale=0.05, out_zero_point=-2),
           (XL, WL, WS7, B7), grad=False),
    Sample("quantized_conv2d/groups",
           lambda x, w, s, b: quantized_conv2d(x, w, s, b, 0.1, -4, stride=(2, 1), padding=1,
                                               groups=2, out_dtype="uint8", out_scale=0.3,
                                               out_zero_point=5),
           (XV, WV, WS6, B6), grad=False),
    Sample("quantized_conv2d/int32",
           lambda x, w, s, b: quantized_conv2d(x, w, s, b, 0.1, 3, dilation=2, groups=2,
                                               out_dtype="int32"),
           (XV, WV, WS6, B6), grad=False),
]  # fmt: skip
