"""onnxruntime's quantized contrib operators (``com.microsoft``), as onnxruntime.quantization
writes them: QGemm (``quantize_static`` in the QOperator format, and the QDQ format once
optimized), DynamicQuantizeMatMul and MatMulIntegerToFloat (``quantize_dynamic`` once
optimized), and the QLinear elementwise forms QLinearAdd, QLinearMul, QLinearSigmoid and
QLinearLeakyRelu.

Integer products are exact int32 matmuls (onnx/ops/quant.py's), dequantized in float32; the
QLinear elementwise forms dequantize, compute in float32 and quantize back (rint, saturated),
as onnxruntime's reference does.
"""

from __future__ import annotations

import numpy as np

from .._convert import converter, ember_dtype
from ._common import E, dtype_np, given
from .quant import _dynamic_quantize_linear, _int_matmul, _int_range, _size

_MS = "com.microsoft"


def _f32(ctx):
    return ember_dtype(np.float32, ctx.label)


def _scalar(ctx, v):
    t = E.cast(ctx.tensor(v), _f32(ctx))
    return E.reshape(t, ()) if _size(t) == 1 else t


def _dequantize(ctx, x, scale, zero_point):
    x = E.cast(ctx.tensor(x), _f32(ctx))
    if given(zero_point):
        x = x - _scalar(ctx, zero_point)
    return x * _scalar(ctx, scale)


def _quantize(ctx, v, scale, zero_point, fallback):
    """rint(v / scale) + zero_point, saturated to the zero point's type (else ``fallback``)."""
    target = dtype_np(zero_point) if given(zero_point) else np.dtype(fallback)
    q = E.round(v / _scalar(ctx, scale))
    if given(zero_point):
        q = q + _scalar(ctx, zero_point)
    low, high = _int_range(target)
    return E.cast(E.clamp(q, float(low), float(high)), ember_dtype(target, ctx.label))


def _transposed(ctx, v, flag: bool):
    t = ctx.tensor(v)
    return E.transpose(t, 0, 1) if flag else t


@converter("QGemm", 1, domain=_MS)
def _qgemm(ctx, a, a_scale, a_zp, b, b_scale, b_zp, c=None, y_scale=None, y_zp=None):
    """alpha * (A - a_zp)(B - b_zp) * a_scale * b_scale (+ C, int32 at that scale), float or
    quantized with y_scale / y_zero_point."""
    a = _transposed(ctx, a, bool(ctx.attr("transA", 0)))
    b = _transposed(ctx, b, bool(ctx.attr("transB", 0)))
    acc = _int_matmul(ctx, a, b, a_zp, b_zp)
    if given(c):
        acc = acc + E.cast(ctx.tensor(c), acc.dtype)
    y = E.cast(acc, _f32(ctx)) * (_scalar(ctx, a_scale) * _scalar(ctx, b_scale))
    alpha = float(ctx.attr("alpha", 1.0))
    if alpha != 1.0:
        y = y * alpha
    if not given(y_scale):
        return y
    return _quantize(ctx, y, y_scale, y_zp, dtype_np(a))


def _float_matmul(ctx, a, b, a_scale, b_scale, a_zp, b_zp, bias):
    acc = _int_matmul(ctx, a, b, a_zp, b_zp)
    y = E.cast(acc, _f32(ctx)) * (_scalar(ctx, a_scale) * _scalar(ctx, b_scale))
    return y if not given(bias) else y + E.cast(ctx.tensor(bias), y.dtype)


@converter("MatMulIntegerToFloat", 1, domain=_MS)
def _matmul_integer_to_float(ctx, a, b, a_scale, b_scale, a_zp=None, b_zp=None, bias=None):
    return _float_matmul(ctx, a, b, a_scale, b_scale, a_zp, b_zp, bias)


@converter("DynamicQuantizeMatMul", 1, domain=_MS)
def _dynamic_quantize_matmul(ctx, a, b, b_scale, b_zp=None, bias=None):
    """A quantized to uint8 as DynamicQuantizeLinear does, then MatMulIntegerToFloat."""
    qa, a_scale, a_zp = _dynamic_quantize_linear(ctx, a)
    return _float_matmul(ctx, qa, b, a_scale, b_scale, a_zp, b_zp, bias)


def _qlinear_binary(fn):
    def convert(ctx, a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp=None):
        y = fn(_dequantize(ctx, a, a_scale, a_zp), _dequantize(ctx, b, b_scale, b_zp))
        return _quantize(ctx, y, c_scale, c_zp, dtype_np(a))

    return convert


converter("QLinearAdd", 1, domain=_MS)(_qlinear_binary(lambda x, y: x + y))
converter("QLinearMul", 1, domain=_MS)(_qlinear_binary(lambda x, y: x * y))


def _qlinear_unary(fn):
    def convert(ctx, x, x_scale, x_zp, y_scale, y_zp=None):
        y = fn(ctx, _dequantize(ctx, x, x_scale, x_zp))
        return _quantize(ctx, y, y_scale, y_zp, dtype_np(x))

    return convert


converter("QLinearSigmoid", 1, domain=_MS)(_qlinear_unary(lambda ctx, v: E.sigmoid(v)))
converter("QLinearLeakyRelu", 1, domain=_MS)(
    _qlinear_unary(lambda ctx, v: E.where(v < 0, v * float(ctx.attr("alpha", 0.01)), v))
)
