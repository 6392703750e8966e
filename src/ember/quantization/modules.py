"""The layers a quantized model is made of.

* `QuantizedLinear`, `QuantizedConv2d` (static, from `quantize`): the input is quantized per
  tensor to uint8 with the scale and zero point calibration chose, multiplied with int8 weights
  (per-channel or per-tensor symmetric scales) in int32 (ops/quantized.py; AVX512-VNNI C where
  present), and the result dequantized to float32 with the bias and, where a ReLU followed,
  the ReLU. Between layers values are float32: each quantized layer is a quantize / integer
  compute / dequantize group (what ONNX calls QDQ), so pooling, flattening and anything else
  between layers runs unchanged. Where only max pooling, flattening or identities separate a
  layer from the next quantized one, `quantize` has the first requantize its result to the
  next one's uint8 parameters (``out_scale``) and the next take the uint8 values as they
  are: the same numbers (quantization is monotone, so it commutes with max pooling, and the
  float32 value requantized is the one the next layer would have quantized), with 8-bit
  traffic between the layers, and an ONNX graph where onnxruntime sees DQ -> Conv -> Q.
* `DynamicQuantizedLinear`, `DynamicQuantizedLSTM` (from `quantize_dynamic`): int8 weights;
  each call quantizes its input symmetrically to int8 with ``scale = max|x| / 127`` computed
  from the input itself (in ember ops, so a captured graph computes it per call too), takes the
  int32 sums and scales them by ``scale * w_scale``.
* `Float8Linear`, `Float8Conv2d` (``weight_dtype="fp8_e4m3" | "fp8_e5m2"``): the weight kept as
  float8 bytes (ml_dtypes' ``float8_e4m3fn`` / ``float8_e5m2``) with one float32 scale per
  output channel (its ``max|w|`` onto the format's largest finite value), decoded at each use
  through a 256-entry table, then a float32 linear / convolution.

The integer weights, scales and biases are buffers (state_dict holds them); the activation
parameters are plain attributes fixed by calibration.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import QuantizationError
from ..nn import functional as F
from ..nn.module import Module
from ..ops import api as E
from ..ops._registry import apply
from ..ops.quantize import QUANTIZE_PER_TENSOR
from ..ops.quantized import QUANTIZED_CONV2D, QUANTIZED_LINEAR
from ..tensor import Tensor
from .observers import symmetric_scales

__all__ = [
    "DynamicQuantizedLSTM",
    "DynamicQuantizedLinear",
    "Float8Conv2d",
    "Float8Linear",
    "QuantizedConv2d",
    "QuantizedLinear",
    "quantize_weight",
]

_FP8 = {"fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}


def quantize_weight(w: np.ndarray, per_channel: bool = True):
    """(int8 weights, float32 scales per output channel): symmetric, in [-127, 127]."""
    scales = symmetric_scales(w, per_channel)
    shape = (-1,) + (1,) * (w.ndim - 1)
    q = np.clip(np.rint(w.astype(np.float32) / scales.reshape(shape)), -127, 127)
    return q.astype(np.int8), scales


def _bias(module, channels: int) -> np.ndarray:
    b = getattr(module, "bias", None)
    return (
        np.zeros(channels, np.float32) if b is None else np.asarray(b.numpy(force=True), np.float32)
    )


class _Quantized(Module):
    def _set(self, weight, bias, per_channel, x_scale, x_zero_point, relu):
        q, scales = quantize_weight(np.asarray(weight, np.float32), per_channel)
        self.register_buffer("weight", Tensor(q))
        self.register_buffer("w_scale", Tensor(scales))
        self.register_buffer("bias", Tensor(np.asarray(bias, np.float32)))
        self.x_scale = float(x_scale)
        self.x_zero_point = int(x_zero_point)
        self.relu = bool(relu)
        self.out_scale = None  # set by `quantize` where the next layer reads uint8 directly
        self.out_zero_point = 0

    def _input(self, x):
        if x.dtype is dt.uint8:  # already quantized, with this layer's parameters
            return x
        if not x.dtype.is_floating_point:
            raise QuantizationError(f"expected a float or uint8 input, got {x.dtype}",
                                    op=self._op)  # fmt: skip
        return apply(QUANTIZE_PER_TENSOR, x, scale=self.x_scale, zero_point=self.x_zero_point,
                     dtype=dt.uint8)  # fmt: skip

    def _out(self):
        if self.out_scale is not None:
            return {"relu": self.relu, "out_dtype": "uint8", "out_scale": self.out_scale,
                    "out_zero_point": self.out_zero_point}  # fmt: skip
        return {"relu": self.relu, "out_dtype": "float32", "out_scale": None,
                "out_zero_point": 0}  # fmt: skip

    def extra_repr(self) -> str:
        out = "" if self.out_scale is None else f", out_scale={self.out_scale:.4g}"
        return (f"weight={tuple(self.weight.shape)}, x_scale={self.x_scale:.4g}, "
                f"x_zero_point={self.x_zero_point}, relu={self.relu}{out}")  # fmt: skip


class QuantizedLinear(_Quantized):
    """A `Linear` run in int8 (see the module); ``relu`` fuses a following ReLU."""

    _op = "QuantizedLinear"

    def __init__(self, linear, x_scale: float, x_zero_point: int, *, per_channel=True,
                 relu=False) -> None:  # fmt: skip
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self._set(linear.weight.numpy(force=True), _bias(linear, linear.out_features), per_channel,
                  x_scale, x_zero_point, relu)  # fmt: skip

    def forward(self, x):
        return apply(QUANTIZED_LINEAR, self._input(x), self.weight, self.w_scale, self.bias,
                     x_scale=self.x_scale, x_zero_point=self.x_zero_point,
                     **self._out())  # fmt: skip


def conv_padding(conv) -> tuple:
    """A Conv2d's padding as (ph, pw), or QuantizationError where it is not symmetric zeros."""
    if getattr(conv, "padding_mode", "zeros") != "zeros":
        raise QuantizationError(
            f"padding_mode {conv.padding_mode!r}: only zero padding is quantized", op="quantize"
        )
    pads = conv._explicit_padding()  # (left, right, top, bottom)
    if pads[0] != pads[1] or pads[2] != pads[3]:
        raise QuantizationError("asymmetric 'same' padding is not quantized", op="quantize")
    return (int(pads[2]), int(pads[0]))


class QuantizedConv2d(_Quantized):
    """A `Conv2d` (BatchNorm folded in, if any) run in int8; ``relu`` fuses a following ReLU."""

    _op = "QuantizedConv2d"

    def __init__(self, conv, x_scale: float, x_zero_point: int, *, per_channel=True,
                 relu=False, weight=None, bias=None) -> None:  # fmt: skip
        super().__init__()
        self.stride = tuple(int(s) for s in conv.stride)
        self.padding = conv_padding(conv)
        self.dilation = tuple(int(d) for d in conv.dilation)
        self.groups = int(conv.groups)
        w = conv.weight.numpy(force=True) if weight is None else weight
        b = _bias(conv, w.shape[0]) if bias is None else bias
        self._set(w, b, per_channel, x_scale, x_zero_point, relu)

    def forward(self, x):
        return apply(QUANTIZED_CONV2D, self._input(x), self.weight, self.w_scale, self.bias,
                     x_scale=self.x_scale, x_zero_point=self.x_zero_point, stride=self.stride,
                     padding=self.padding, dilation=self.dilation, groups=self.groups,
                     **self._out())  # fmt: skip


# ------------------------------------------------------------------------------- dynamic


def dynamic_linear(x, weight, w_scale, bias):
    """``x @ dequantized(weight).T + bias`` with x quantized per call to int8 (see the
    module); ``x`` (..., K) float, ``weight`` (N, K) int8."""
    eps = float(np.finfo(np.float32).eps)
    s = E.maximum(E.amax(E.abs(x)) / 127.0, eps)
    q = E.cast(E.clamp(E.round(x / s), -127.0, 127.0), dt.int8)
    acc = apply(QUANTIZED_LINEAR, q, weight, w_scale, E.zeros_like(w_scale), x_scale=1.0,
                x_zero_point=0, relu=False, out_dtype="int32", out_scale=None,
                out_zero_point=0)  # fmt: skip
    y = E.cast(acc, dt.float32) * (E.cast(s, dt.float32) * w_scale)
    return y if bias is None else y + bias


class DynamicQuantizedLinear(Module):
    """A `Linear` with int8 weights and inputs quantized per call."""

    def __init__(self, linear, per_channel: bool = True) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        q, scales = quantize_weight(linear.weight.numpy(force=True), per_channel)
        self.register_buffer("weight", Tensor(q))
        self.register_buffer("w_scale", Tensor(scales))
        b = getattr(linear, "bias", None)
        self.register_buffer("bias", None if b is None else Tensor(_bias(linear, q.shape[0])))

    def forward(self, x):
        return dynamic_linear(x, self.weight, self.w_scale, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8"


class DynamicQuantizedLSTM(Module):
    """An `LSTM` (unidirectional, no projection) whose input and recurrent products are
    dynamic int8 linears; gates as PyTorch's: i, f, g, o."""

    def __init__(self, lstm, per_channel: bool = True) -> None:
        super().__init__()
        if lstm.bidirectional or lstm.proj_size:
            raise QuantizationError(
                "quantize_dynamic handles unidirectional LSTMs without projections",
                op="quantize_dynamic",
            )
        self.hidden_size, self.num_layers = lstm.hidden_size, lstm.num_layers
        self.batch_first = lstm.batch_first
        for layer in range(self.num_layers):
            w_ih, w_hh, b_ih, b_hh, _ = lstm._weights(layer, 0)
            for name, w in (("ih", w_ih), ("hh", w_hh)):
                q, scales = quantize_weight(w.numpy(force=True), per_channel)
                self.register_buffer(f"weight_{name}_l{layer}", Tensor(q))
                self.register_buffer(f"w_scale_{name}_l{layer}", Tensor(scales))
            bias = np.zeros(w_ih.shape[0], np.float32)
            if b_ih is not None:
                bias = b_ih.numpy(force=True).astype(np.float32) + b_hh.numpy(force=True).astype(
                    np.float32
                )
            self.register_buffer(f"bias_l{layer}", Tensor(bias))

    def forward(self, x, hx=None):
        if self.batch_first:
            x = E.transpose(x, 0, 1)
        steps, n = x.shape[0], x.shape[1]
        h_all, c_all = [], []
        for layer in range(self.num_layers):
            g = lambda name: getattr(self, f"{name}_l{layer}")  # noqa: E731
            if hx is None:
                h = E.zeros((n, self.hidden_size), dtype=x.dtype)
                c = E.zeros((n, self.hidden_size), dtype=x.dtype)
            else:
                h, c = hx[0][layer], hx[1][layer]
            outputs = []
            for t in range(steps):
                gates = dynamic_linear(x[t], g("weight_ih"), g("w_scale_ih"), g("bias"))
                gates = gates + dynamic_linear(h, g("weight_hh"), g("w_scale_hh"), None)
                i, f, gg, o = E.chunk(gates, 4, 1)
                c = E.sigmoid(f) * c + E.sigmoid(i) * E.tanh(gg)
                h = E.sigmoid(o) * E.tanh(c)
                outputs.append(h)
            x = E.stack(outputs, 0)
            h_all.append(h)
            c_all.append(c)
        out = E.transpose(x, 0, 1) if self.batch_first else x
        return out, (E.stack(h_all, 0), E.stack(c_all, 0))


# --------------------------------------------------------------------------------- float8


def _fp8_type(weight_dtype: str):
    import ml_dtypes

    return np.dtype(getattr(ml_dtypes, _FP8[weight_dtype]))


class _Float8(Module):
    def _set(self, weight, bias, weight_dtype):
        if weight_dtype not in _FP8:
            raise QuantizationError(
                f"weight_dtype {weight_dtype!r}: expected 'int8', {', '.join(map(repr, _FP8))}",
                op="quantize",
            )
        import ml_dtypes

        f8 = _fp8_type(weight_dtype)
        top = float(ml_dtypes.finfo(f8).max)
        w = np.asarray(weight, np.float32)
        # one scale per output channel (row): folded BatchNorm leaves channels of very
        # different magnitudes, and one scale for all would push the small ones into float8's
        # subnormals
        axes = tuple(range(1, w.ndim))
        amax = np.abs(w).max(axis=axes, keepdims=True, initial=0.0)
        scale = (np.maximum(amax, 1e-30) / top).astype(np.float32)
        stored = np.clip(w / scale, -top, top).astype(f8)
        self.weight_dtype = weight_dtype
        self.register_buffer("weight_bits", Tensor(stored.view(np.uint8)))
        self.register_buffer("w_scale", Tensor(np.asarray(scale, np.float32)))
        table = np.arange(256, dtype=np.uint8).view(f8).astype(np.float32)
        self.register_buffer("table", Tensor(np.nan_to_num(table, nan=0.0)))
        self.register_buffer("bias", None if bias is None else Tensor(bias))

    def weight(self):
        """The float32 weight: the float8 values decoded, times the scale."""
        codes = E.cast(self.weight_bits, dt.int64)
        return E.reshape(E.take(self.table, codes), tuple(self.weight_bits.shape)) * self.w_scale


class Float8Linear(_Float8):
    """A `Linear` whose weight is stored as float8 with one scale."""

    def __init__(self, linear, weight_dtype: str = "fp8_e4m3") -> None:
        super().__init__()
        b = getattr(linear, "bias", None)
        self._set(
            linear.weight.numpy(force=True), None if b is None else _bias(linear, 0), weight_dtype
        )

    def forward(self, x):
        return F.linear(x, self.weight(), self.bias)


class Float8Conv2d(_Float8):
    """A `Conv2d` (BatchNorm folded in, if any) whose weight is stored as float8."""

    def __init__(self, conv, weight_dtype: str = "fp8_e4m3", weight=None, bias=None) -> None:
        super().__init__()
        self.stride, self.padding = tuple(conv.stride), conv_padding(conv)
        self.dilation, self.groups = tuple(conv.dilation), int(conv.groups)
        w = conv.weight.numpy(force=True) if weight is None else weight
        if bias is None and getattr(conv, "bias", None) is not None:
            bias = _bias(conv, w.shape[0])
        self._set(w, bias, weight_dtype)

    def forward(self, x):
        return F.conv2d(x, self.weight(), self.bias, self.stride, self.padding, self.dilation,
                        self.groups)  # fmt: skip
