"""ember.quantization: int8 post-training quantization (and float8 weight storage).

* `quantize(model, calibration_data, per_channel=True, method="minmax" | "percentile" |
  "entropy")`: BatchNorm folded into the convolutions, activation ranges calibrated on the data
  (observers.py), Conv2d and Linear replaced by layers that quantize their input to uint8 and
  multiply with int8 weights in int32 on ember's C kernels (AVX512-VNNI where present);
  ``weight_dtype="fp8_e4m3" | "fp8_e5m2"`` keeps float8 weights instead (convert.py).
* `quantize_dynamic(model, {nn.Linear, nn.LSTM}, dtype=ember.int8)`: int8 weights, inputs
  quantized per call.
* The ops underneath (ops/quantize.py, ops/quantized.py): ``ember.quantize_per_tensor``,
  ``ember.quantize_per_channel``, ``ember.dequantize``, ``ember.fake_quantize_per_*_affine``,
  and `quantized_linear` / `quantized_conv2d` here.

ember has no quantized tensor type: quantized values are uint8/int8 tensors whose scale and
zero point their layer keeps (ops/quantize.py). A quantized model runs eagerly, captured with
``ember.function``, and exports to ONNX as QuantizeLinear / DequantizeLinear around float ops
(QDQ), which onnxruntime runs.
"""

from __future__ import annotations

from ..ops._registry import apply
from ..ops.promotion import to_tensor
from ..ops.quantized import QUANTIZED_CONV2D, QUANTIZED_LINEAR
from .convert import fold_batch_norm, quantize, quantize_dynamic
from .modules import (
    DynamicQuantizedLinear,
    DynamicQuantizedLSTM,
    Float8Conv2d,
    Float8Linear,
    QuantizedConv2d,
    QuantizedLinear,
)
from .observers import HistogramObserver, MinMaxObserver, PerChannelMinMaxObserver

__all__ = [
    "DynamicQuantizedLSTM",
    "DynamicQuantizedLinear",
    "Float8Conv2d",
    "Float8Linear",
    "HistogramObserver",
    "MinMaxObserver",
    "PerChannelMinMaxObserver",
    "QuantizedConv2d",
    "QuantizedLinear",
    "fold_batch_norm",
    "quantize",
    "quantize_dynamic",
    "quantized_conv2d",
    "quantized_linear",
]


def _out(relu, out_dtype, out_scale, out_zero_point):
    name = out_dtype if isinstance(out_dtype, str) else out_dtype.name  # (a name or an ember dtype)
    return {"relu": bool(relu), "out_dtype": name,
            "out_scale": None if out_scale is None else float(out_scale),
            "out_zero_point": int(out_zero_point)}  # fmt: skip


def quantized_linear(x, weight, w_scale, bias, x_scale, x_zero_point, *, relu=False,
                     out_dtype="float32", out_scale=None, out_zero_point=0):  # fmt: skip
    """``(x - x_zero_point) @ weight.T`` summed in int32 (x uint8/int8, weight int8), times
    ``x_scale * w_scale`` plus ``bias`` (float32), ReLU'd with ``relu``; float32, or
    requantized (``out_dtype`` uint8/int8 with ``out_scale``, ``out_zero_point``), or the
    int32 sums (``out_dtype="int32"``). See ops/quantized.py."""
    return apply(QUANTIZED_LINEAR, to_tensor(x), to_tensor(weight), to_tensor(w_scale),
                 to_tensor(bias), x_scale=float(x_scale), x_zero_point=int(x_zero_point),
                 **_out(relu, out_dtype, out_scale, out_zero_point))  # fmt: skip


def quantized_conv2d(x, weight, w_scale, bias, x_scale, x_zero_point, stride=1, padding=0,
                     dilation=1, groups=1, *, relu=False, out_dtype="float32", out_scale=None,
                     out_zero_point=0):  # fmt: skip
    """The convolution of `quantized_linear` (NCHW, weight (O, C / groups, kh, kw) int8)."""

    def pair(v):
        return (int(v), int(v)) if isinstance(v, int) else tuple(int(a) for a in v)

    geometry = {"stride": pair(stride), "padding": pair(padding), "dilation": pair(dilation)}
    return apply(QUANTIZED_CONV2D, to_tensor(x), to_tensor(weight), to_tensor(w_scale),
                 to_tensor(bias), x_scale=float(x_scale), x_zero_point=int(x_zero_point),
                 groups=int(groups), **geometry,
                 **_out(relu, out_dtype, out_scale, out_zero_point))  # fmt: skip
