"""onnxruntime's quantized contrib operators (``com.microsoft``), as onnxruntime.quantization
writes them: QGemm (``quantize_static`` in the QOperator format, and the QDQ format once
optimized), DynamicQuantizeMatMul and MatMulIntegerToFloat (``quantize_dynamic`` once
optimized), the QLinear forms QLinearSigmoid, QLinearLeakyRelu, QLinearConcat,
QLinearSoftmax, QLinearAveragePool, QLinearGlobalAveragePool, QLinearWhere and
QLinearReduceMean (``quantize_static`` in the QOperator format; QLinearAdd and QLinearMul,
rounded as onnxruntime's kernels round them, are contrib_qlinear_arith.py's), and
DynamicQuantizeLSTM (``quantize_dynamic`` of an LSTM).

Integer products are exact int32 matmuls (onnx/ops/quant.py's), dequantized in float32; the
QLinear elementwise forms dequantize, compute in float32 and quantize back (rint, saturated),
as onnxruntime's reference does.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from .._convert import converter, ember_dtype
from ._common import E, axis, dtype_np, given
from .nn import spatial_input
from .nn_pool import _average_pool, _max_pool, _window, _window_sums
from .nn_softmax import _along
from .quant import (
    _dynamic_quantize_linear,
    _int_matmul,
    _int_range,
    _qlinear_conv,
    _size,
    saturated,
)
from .recurrent import _bias_parts, _Layer, _run_direction_lstm, _sum

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
    return E.cast(saturated(q, low, high), ember_dtype(target, ctx.label))


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


def _qlinear_unary(fn):
    def convert(ctx, x, x_scale, x_zp, y_scale, y_zp=None):
        y = fn(ctx, _dequantize(ctx, x, x_scale, x_zp))
        return _quantize(ctx, y, y_scale, y_zp, dtype_np(x))

    return convert


converter("QLinearSigmoid", 1, domain=_MS)(_qlinear_unary(lambda ctx, v: E.sigmoid(v)))
converter("QLinearLeakyRelu", 1, domain=_MS)(
    _qlinear_unary(lambda ctx, v: E.where(v < 0, v * float(ctx.attr("alpha", 0.01)), v))
)


def _with_opset(ctx, opset: int):
    """The node's context with the standard operator's version ``opset`` (the contrib forms
    take the attributes of the operator's current version)."""
    plain = copy.copy(ctx)
    plain.opset = opset
    return plain


def _nchw(x, channels_last: bool):
    return E.permute(x, (0, x.ndim - 1, *range(1, x.ndim - 1))) if channels_last else x


def _nhwc(y, channels_last: bool):
    return E.permute(y, (0, *range(2, y.ndim), 1)) if channels_last else y


@converter("QLinearConcat", 1, domain=_MS)
def _qlinear_concat(ctx, y_scale, y_zp, *triples):
    """Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input: each dequantized,
    concatenated along ``axis``, quantized to Y's scale."""
    if not triples or len(triples) % 3:
        raise ctx.error(f"expects (X, scale, zero point) triples after Y's, got {len(triples)}")
    parts = [_dequantize(ctx, *triples[i : i + 3]) for i in range(0, len(triples), 3)]
    rank = parts[0].ndim
    y = E.cat(parts, axis(ctx.attr("axis"), rank, ctx))
    return _quantize(ctx, y, y_scale, y_zp, dtype_np(triples[0]))


@converter("QLinearSoftmax", 1, domain=_MS)
def _qlinear_softmax(ctx, x, x_scale, x_zp, y_scale, y_zp=None):
    """Softmax along ``axis`` as the node's ``opset`` attribute reads it (before 13: the
    dimensions from ``axis`` on, flattened), in onnxruntime's arithmetic: from the integer
    differences d to the row's maximum, e = float32(exp((d + shift) * x_scale)) in double
    (shift = max(0, log(FLT_MAX / D) - 5) / x_scale keeps the sum finite), the sum in float32,
    and y = rint(e * floor(1 / y_scale) / sum) + y_zero_point. A scale of inf (a calibration
    over an additive -inf mask gives it) makes onnxruntime's sums NaN, and it writes zeros:
    so does ember."""
    f32, f64 = _f32(ctx), ember_dtype(np.float64, ctx.label)
    q = E.cast(ctx.tensor(x), f64)
    scale = E.cast(_scalar(ctx, x_scale), f64)
    inverse = E.floor(1.0 / _scalar(ctx, y_scale))  # float32, as onnxruntime

    def softmax(t, dim):
        width = np.float32(np.finfo(np.float32).max) / np.float32(max(int(t.shape[dim]), 1))
        shift = max(0.0, float(np.log(np.float64(width))) - 5.0) / scale
        arg = (t - E.amax(t, dim, keepdim=True) + shift) * scale
        e = E.cast(E.exp(E.where(E.isnan(arg), 0.0, arg)), f32)
        return E.round(e * inverse / E.sum(e, dim, keepdim=True))

    v = _along(_with_opset(ctx, int(ctx.attr("opset", 13))), q, softmax)
    target = dtype_np(y_zp) if given(y_zp) else dtype_np(x)
    if given(y_zp):
        v = v + _scalar(ctx, y_zp)
    low, high = _int_range(target)
    v = E.where(E.isinf(scale), 0.0, saturated(v, low, high))
    return E.cast(v, ember_dtype(target, ctx.label))


@converter("QLinearAveragePool", 1, domain=_MS)
def _qlinear_average_pool(ctx, x, x_scale, x_zp, y_scale, y_zp=None):
    """AveragePool of the dequantized input; with ``count_include_pad`` onnxruntime divides
    every window by the whole kernel's size, a ``ceil_mode`` window hanging past the padding
    too (its float AveragePool, as ONNX, counts only the padding)."""
    last = bool(ctx.attr("channels_last", 0))
    plain = _with_opset(ctx, 19)
    v = _nchw(_dequantize(ctx, x, x_scale, x_zp), last)
    if ctx.attr("count_include_pad", 0):
        v = spatial_input(plain, v)
        kernel, strides, dilations, pads, out, _ = _window(plain, v)
        sums = _window_sums(plain, v, kernel, strides, dilations, pads, out)
        y = sums / float(math.prod(kernel))
    else:
        y = _average_pool(plain, v)
    return _quantize(ctx, _nhwc(y, last), y_scale, y_zp, dtype_np(x))


@converter("QLinearGlobalAveragePool", 1, domain=_MS)
def _qlinear_global_average_pool(ctx, x, x_scale, x_zp, y_scale, y_zp=None):
    last = bool(ctx.attr("channels_last", 0))
    v = _nchw(_dequantize(ctx, x, x_scale, x_zp), last)
    if v.ndim < 3:
        raise ctx.error(f"expects an input of rank 3 or more, got shape {tuple(v.shape)}")
    y = _nhwc(E.mean(v, tuple(range(2, v.ndim)), keepdim=True), last)
    return _quantize(ctx, y, y_scale, y_zp, dtype_np(x))


@converter("QLinearWhere", 1, domain=_MS)
def _qlinear_where(ctx, cond, x, x_scale, x_zp, y, y_scale, y_zp, z_scale, z_zp):
    a, b = _dequantize(ctx, x, x_scale, x_zp), _dequantize(ctx, y, y_scale, y_zp)
    picked = E.where(E.cast(ctx.tensor(cond), ember_dtype(np.bool_, ctx.label)), a, b)
    return _quantize(ctx, picked, z_scale, z_zp, dtype_np(x))


@converter("QLinearReduceMean", 1, domain=_MS)
def _qlinear_reduce_mean(ctx, x, x_scale, x_zp, y_scale, y_zp=None):
    v = _dequantize(ctx, x, x_scale, x_zp)
    axes = [axis(a, v.ndim, ctx) for a in ctx.attr("axes")]
    y = E.mean(v, tuple(sorted(set(axes))), keepdim=bool(ctx.attr("keepdims", 1)))
    return _quantize(ctx, y, y_scale, y_zp, dtype_np(x))


def _dequantized_weights(ctx, w, scale, zero_point, what: str):
    """DynamicQuantizeLSTM's [directions, in, 4 * hidden] integer weights as ONNX LSTM's float
    [directions, 4 * hidden, in]: per direction (scale [directions]) or per output column
    (scale [directions, 4 * hidden])."""
    w = ctx.tensor(w)
    if w.ndim != 3:
        raise ctx.error(f"{what} must have rank 3, got shape {tuple(w.shape)}")
    s, z = E.cast(ctx.tensor(scale), _f32(ctx)), E.cast(ctx.tensor(zero_point), _f32(ctx))
    if tuple(s.shape) not in ((w.shape[0],), (w.shape[0], w.shape[2])) or s.shape != z.shape:
        raise ctx.error(
            f"{what}'s scale {tuple(s.shape)} and zero point {tuple(z.shape)} do not fit "
            f"weights of shape {tuple(w.shape)}"
        )
    if s.ndim == 1:
        s, z = E.reshape(s, (-1, 1, 1)), E.reshape(z, (-1, 1, 1))
    else:
        s, z = E.reshape(s, (s.shape[0], 1, -1)), E.reshape(z, (z.shape[0], 1, -1))
    return E.transpose((E.cast(w, _f32(ctx)) - z) * s, 1, 2)


def _row_quantized(ctx, rows):
    """DynamicQuantizeLinear's rule applied to each row of a matrix on its own."""
    f32 = _f32(ctx)
    high = E.maximum(E.amax(rows, 1, keepdim=True), 0.0)
    low = E.minimum(E.amin(rows, 1, keepdim=True), 0.0)
    scale = E.where(high == low, E.ones((), dtype=f32), high - low) / 255.0
    zp = E.round(E.clamp(-low / scale, 0.0, 255.0))
    q = E.clamp(E.round(rows / scale) + zp, 0.0, 255.0)
    u8 = ember_dtype(np.uint8, ctx.label)
    return E.cast(q, u8), scale, E.reshape(E.cast(zp, u8), (-1,))


def _dynamic_product(ctx, a, wq, w_zp, w_scale, per_row=False):
    """onnxruntime's product of a float ``a`` (..., K) and integer weights ``wq`` (K, N): ``a``
    quantized to uint8 over all its values (DynamicQuantizeLinear's rule), an exact int32
    product, scaled by a_scale * w_scale (per column where w_scale has N values)."""
    rows = E.reshape(a, (-1, a.shape[-1]))
    if per_row:
        qa, a_scale, a_zp = _row_quantized(ctx, rows)
    else:
        qa, a_scale, a_zp = _dynamic_quantize_linear(ctx, rows)
    acc = _int_matmul(ctx, qa, wq, a_zp, w_zp)
    y = E.cast(acc, _f32(ctx)) * (a_scale * w_scale)
    return E.reshape(y, (*a.shape[:-1], wq.shape[-1]))


@converter("DynamicQuantizeLSTM", 1, domain=_MS)
def _dynamic_quantize_lstm(
    ctx, x, w, r, b=None, lens=None, h0=None, c0=None, p=None,
    w_scale=None, w_zp=None, r_scale=None, r_zp=None,
):  # fmt: skip
    """quantize_dynamic's LSTM: W [directions, in, 4 * hidden] and R [directions, hidden,
    4 * hidden] integers with their scales and zero points (per direction, or per output
    column). As onnxruntime: the input, over all its steps, and each step's hidden state are
    quantized to uint8 before their integer products, the rest is the float32 LSTM. onnxruntime
    quantizes the hidden state per block of rows its threads share out (ceil(batch / threads));
    ember per row, which is onnxruntime's result wherever it has a thread per row."""
    if not all(given(v) for v in (w_scale, w_zp, r_scale, r_zp)):
        raise ctx.error("W_scale, W_zero_point, R_scale and R_zero_point are required")
    wf = _dequantized_weights(ctx, w, w_scale, w_zp, "W")  # checks the shapes too
    rf = _dequantized_weights(ctx, r, r_scale, r_zp, "R")
    layer = _Layer(ctx, "LSTM", x, wf, rf, b, lens, h0, c0, p)
    wq, rq = ctx.tensor(w), ctx.tensor(r)
    params = [E.cast(ctx.tensor(v), _f32(ctx)) for v in (w_scale, r_scale)]
    zeros = [ctx.tensor(v) for v in (w_zp, r_zp)]
    ys, hs, cs = [], [], []
    for d in range(layer.dirs):
        wb, rb = _bias_parts(layer, d, 4)

        def project(xs, bias, d=d):
            y = _dynamic_product(ctx, xs, wq[d], zeros[0][d], params[0][d])
            return y if bias is None else y + bias

        def recur(h, d=d):
            return _dynamic_product(ctx, h, rq[d], zeros[1][d], params[1][d], per_row=True)

        forget = bool(ctx.attr("input_forget", 0))
        y, (h, c) = _run_direction_lstm(layer, d, _sum(wb, rb), forget, project, recur)
        ys.append(y)
        hs.append(h)
        cs.append(c)
    return layer.outputs(ys, hs, cs)


# onnxruntime's NHWC transformer (ORT_ENABLE_ALL) rewrites quantized convolutions and
# poolings to take channels last, with Transposes around them


@converter("QLinearConv", 1, domain=_MS)
def _qlinear_conv_nhwc(ctx, x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp=None, bias=None):
    """ONNX's QLinearConv; ``channels_last``: X and Y are (N, *spatial, C), W stays OIHW."""
    last = bool(ctx.attr("channels_last", 0))
    x = _nchw(ctx.tensor(x), last)
    y = _qlinear_conv(ctx, x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, bias)
    return _nhwc(y, last)


@converter("NhwcMaxPool", 1, domain=_MS)
def _nhwc_max_pool(ctx, x):
    """MaxPool (opset 12's attributes) over an (N, *spatial, C) integer tensor."""
    return _nhwc(_max_pool(_with_opset(ctx, 12), _nchw(ctx.tensor(x), True)), True)
