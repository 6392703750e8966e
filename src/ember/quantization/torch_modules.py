"""PyTorch's quantized modules (``torch.ao.nn.quantized`` and ``.dynamic``, ``.intrinsic``),
computing as its x86 engine does (torch_fbgemm.py): `Quantize`/`DeQuantize`, static `Linear`,
`LinearReLU`, `Conv2d`, `ConvReLU2d` on quint8 tensors with qint8 weights (per tensor or per
channel) and a float bias, requantized to their observed output parameters; the dynamic
`Linear` (float in and out, its input quantized per call, reduce_range); and the quantized
adaptive average pooling PyTorch's QuantizedCPU backend runs on a quantized input. ``weight()``
gives the quantized weight tensor (``int_repr()``, ``q_scale()``, ...), as PyTorch's.

Class names are PyTorch's (``type(m).__name__`` is ``"Linear"``, ``"ConvReLU2d"``)."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import QuantizationError
from ..nn import AdaptiveAvgPool2d, Module
from ..ops import qtensor as Q
from ..ops._registry import eager_constant
from ..tensor import Tensor
from . import torch_fbgemm as fbgemm

_F = np.float32


def _pair(v):
    return (int(v), int(v)) if isinstance(v, int) else tuple(int(a) for a in v)


def _qtensor(ints: np.ndarray, scale: float, zero_point: int, name: str = "quint8"):
    p = Q.QParams(name, float(scale), int(zero_point))
    return eager_constant(Q.make_array(ints.astype(np.uint8 if name == "quint8" else np.int8), p))


def _input(op: str, x):
    """The integers and (scale, zero point) of a per-tensor quint8 input."""
    if not Q.is_quantized(x) or x.dtype is not dt.quint8 or Q.params(x._data).per_channel:
        raise QuantizationError(
            f"expects a per-tensor quint8 quantized input (QuantStub's output), got "
            f"{getattr(x, 'dtype', type(x).__name__)}",
            op=op,
        )
    p = Q.params(x._data)
    return Q.ints_of(x._data, p).astype(np.int64), p.scale, p.zero_point


def quantize_weight(w: np.ndarray, scales: np.ndarray, zero_points: np.ndarray, per_channel: bool):
    """A float weight as PyTorch's qint8 quantized tensor (per channel along axis 0)."""
    if per_channel:
        scales, zero_points = (
            Tensor(scales.astype(np.float64)),
            Tensor(zero_points.astype(np.int64)),
        )
        return Q.quantize_per_channel(Tensor(w), scales, zero_points, 0, dt.qint8)
    return Q.quantize_per_tensor(Tensor(w), float(scales[0]), int(zero_points[0]), dt.qint8)


def _weight_parts(qw):
    p = Q.params(qw._data)
    ints = Q.ints_of(qw._data, p).astype(np.int64)
    if p.per_channel:
        return ints, p.scales.astype(_F), p.zero_points
    return ints, np.full(ints.shape[0], p.scale, _F), np.full(ints.shape[0], p.zero_point)


class Quantize(Module):
    """``quantize_per_tensor(x, scale, zero_point, dtype)``: QuantStub after convert."""

    def __init__(self, scale, zero_point, dtype=dt.quint8):
        super().__init__()
        self.scale, self.zero_point, self.dtype = float(scale), int(zero_point), dtype

    def forward(self, x):
        return Q.quantize_per_tensor(x, self.scale, self.zero_point, self.dtype)

    def extra_repr(self):
        return f"scale={self.scale}, zero_point={self.zero_point}, dtype={self.dtype}"


class DeQuantize(Module):
    """``x.dequantize()``: DeQuantStub after convert."""

    def forward(self, x):
        return Q.dequantize(x)


class _Static(Module):
    """A layer with a quantized weight, a float bias and output parameters."""

    _relu = False

    def _set(self, qweight, bias, scale: float, zero_point: int) -> None:
        self._qweight = qweight
        self.bias_ = None if bias is None else np.asarray(bias, _F)
        self.scale, self.zero_point = float(scale), int(zero_point)
        ints, scales, zps = _weight_parts(qweight)
        if np.any(zps != 0):
            raise QuantizationError("fbgemm takes symmetric weights (zero points 0)", op="convert")
        self._ints, self._scales = ints, scales

    def weight(self):
        return self._qweight

    def bias(self):
        return None if self.bias_ is None else Tensor(self.bias_.copy())

    def extra_repr(self):
        return f"scale={self.scale}, zero_point={self.zero_point}"

    def _out(self, sums, x_scale, axis):
        q = fbgemm.requantize(sums, x_scale, self._scales, self.bias_, self.scale,
                              self.zero_point, self._relu, axis)  # fmt: skip
        return _qtensor(q, self.scale, self.zero_point)


class Linear(_Static):
    """PyTorch's quantized Linear (``torch.ao.nn.quantized.Linear``)."""

    def __init__(self, qweight, bias, scale, zero_point):
        super().__init__()
        self._set(qweight, bias, scale, zero_point)
        self.out_features, self.in_features = self._ints.shape

    def forward(self, x):
        xq, xs, xz = _input(type(self).__name__, x)
        return self._out(fbgemm.linear_sums(xq, xz, self._ints), xs, -1)


class LinearReLU(Linear):
    _relu = True


class Conv2d(_Static):
    """PyTorch's quantized Conv2d (zero padding)."""

    def __init__(self, qweight, bias, scale, zero_point, stride, padding, dilation, groups):
        super().__init__()
        self._set(qweight, bias, scale, zero_point)
        self.stride, self.padding = _pair(stride), _pair(padding)
        self.dilation, self.groups = _pair(dilation), int(groups)

    def forward(self, x):
        xq, xs, xz = _input(type(self).__name__, x)
        sums = fbgemm.conv2d_sums(xq, xz, self._ints, self.stride, self.padding, self.dilation,
                                  self.groups)  # fmt: skip
        return self._out(sums, xs, 1)


class ConvReLU2d(Conv2d):
    _relu = True


class DynamicLinear(Module):
    """PyTorch's dynamic quantized Linear (``torch.ao.nn.quantized.dynamic.Linear``): qint8
    weights; each call quantizes its float input to quint8 over the input's own range
    (reduce_range: [0, 127]) and returns float32."""

    def __init__(self, qweight, bias, reduce_range: bool = True):
        super().__init__()
        self._qweight = qweight
        self.bias_ = None if bias is None else np.asarray(bias, _F)
        self._ints, self._scales, zps = _weight_parts(qweight)
        if np.any(zps != 0):
            raise QuantizationError("fbgemm takes symmetric weights (zero points 0)",
                                    op="quantize_dynamic")  # fmt: skip
        self._run = fbgemm.DynamicWeights(self._ints, self._scales, self.bias_, reduce_range)
        self.out_features, self.in_features = self._ints.shape

    def weight(self):
        return self._qweight

    def bias(self):
        return None if self.bias_ is None else Tensor(self.bias_.copy())

    def forward(self, x):
        a = np.asarray(x.detach().numpy(), _F)
        if a.shape[-1] != self.in_features:
            raise QuantizationError(f"input of shape {a.shape} for {self.in_features} features",
                                    op="Linear")  # fmt: skip
        return Tensor(self._run(a))

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, dtype=qint8"


DynamicLinear.__name__ = DynamicLinear.__qualname__ = "Linear"


class QuantizedAdaptiveAvgPool2d(AdaptiveAvgPool2d):
    """nn.AdaptiveAvgPool2d taking quantized inputs as PyTorch's QuantizedCPU kernel: each
    window's integers summed, ``nearbyint(zp + (sum - zp * size) * (1 / size))``, clamped, the
    input's parameters kept; float inputs as the float module."""

    def forward(self, x):
        if not Q.is_quantized(x):
            return super().forward(x)
        xq, xs, xz = _input("adaptive_avg_pool2d", x)
        oh, ow = _pair(self.output_size) if self.output_size is not None else xq.shape[-2:]
        h, w = xq.shape[-2:]
        out = np.empty(xq.shape[:-2] + (oh, ow), np.int64)
        for i in range(oh):
            h0, h1 = (i * h) // oh, -(-((i + 1) * h) // oh)
            for j in range(ow):
                w0, w1 = (j * w) // ow, -(-((j + 1) * w) // ow)
                size = (h1 - h0) * (w1 - w0)
                acc = xq[..., h0:h1, w0:w1].sum(axis=(-2, -1)) - xz * size
                multiplier = _F(1) / _F(size)
                out[..., i, j] = fbgemm.quantize(acc.astype(_F), float(_F(1) / multiplier), xz)
        return _qtensor(out, xs, xz)
