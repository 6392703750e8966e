"""Quantization operators: QuantizeLinear, DequantizeLinear (per tensor, per axis, blocked),
DynamicQuantizeLinear, QLinearMatMul, QLinearConv, MatMulInteger and ConvInteger.

Values of types ember has tensors for (int8, uint8, int16, int32 and the float scales) are
computed with ember's ops, so a quantized model captures: integer products in int32 matmuls,
convolutions in float64 (exact for these magnitudes: sums of products of 8-bit values stay far
below 2**53), rounding half to even as ONNX's ``rint``. The types ember lacks (uint16, int4,
uint4, int2, uint2, the float8/float6/float4 formats, a float8e8m0 scale) are computed in NumPy
from the data (``ctx.static``: a captured model with such a value runs eagerly).
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as _dtypes
from .._convert import converter, ember_dtype, supported_dtype
from ._common import E, F, dtype_np, given, np_dtype
from ._common import axis as norm_axis

_SMALL_INTS = {"int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1), "uint2": (0, 3)}


def _int_range(dtype: np.dtype):
    """(min, max) of an integer quantized type, or None for the float formats."""
    if dtype.name in _SMALL_INTS:
        return _SMALL_INTS[dtype.name]
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return int(info.min), int(info.max)
    return None


def saturated(v, low: float, high: float):
    """``v`` clamped to [low, high], NaN to ``low``: onnxruntime's MLAS clamps with max/min
    before converting, which send a NaN (0 / 0, inf / inf: a scale of inf that a calibration
    over -inf gave) to the lowest value of the type."""
    return E.where(E.isnan(v), float(low), E.clamp(v, float(low), float(high)))


def _lacks(*values) -> bool:
    return any(given(v) and not supported_dtype(dtype_np(v)) for v in values)


# ---------------------------------------------------------------------------------------------
# a scale or zero point brought to broadcast against x


def _param_shape(ctx, p_shape, x_shape, axis, block_size):
    """How a scale / zero point of shape ``p_shape`` lines up with x: ("scalar",), ("axis",
    dims) or ("block", axis)."""
    rank = len(x_shape)
    size = int(np.prod(p_shape)) if len(p_shape) else 1
    if len(p_shape) == 0 or (size == 1 and not block_size and len(p_shape) <= 1):
        return ("scalar",)
    a = norm_axis(axis, rank, ctx)
    if not block_size:
        if len(p_shape) != 1 or p_shape[0] != x_shape[a]:
            raise ctx.error(
                f"a per-axis scale / zero point must be 1-D with x.shape[{a}] = {x_shape[a]} "
                f"elements, got shape {tuple(p_shape)}"
            )
        dims = [1] * rank
        dims[a] = int(p_shape[0])
        return ("axis", dims)
    if block_size < 0:
        raise ctx.error(f"block_size must be positive, got {block_size}")
    blocks = -(-int(x_shape[a]) // block_size)
    want = tuple(blocks if i == a else int(d) for i, d in enumerate(x_shape))
    if tuple(int(d) for d in p_shape) != want:
        raise ctx.error(
            f"a blocked scale / zero point (block_size {block_size}, axis {a}) must have shape "
            f"{want}, got {tuple(p_shape)}"
        )
    return ("block", a)


def _shape_tensor(ctx, p, x_shape, axis, block_size):
    how = _param_shape(ctx, tuple(p.shape), tuple(x_shape), axis, block_size)
    if how[0] == "scalar":
        return E.reshape(p, ())
    if how[0] == "axis":
        return E.reshape(p, tuple(how[1]))
    a = how[1]
    p = E.repeat_interleave(p, block_size, dim=a)
    return E.narrow(p, a, 0, int(x_shape[a]))


def _shape_array(ctx, p, x_shape, axis, block_size):
    how = _param_shape(ctx, tuple(p.shape), tuple(x_shape), axis, block_size)
    if how[0] == "scalar":
        return p.reshape(())
    if how[0] == "axis":
        return p.reshape(how[1])
    a = how[1]
    return np.repeat(p, block_size, axis=a).take(np.arange(x_shape[a]), axis=a)


def _as_float_array(value: np.ndarray) -> np.ndarray:
    return value.astype(np.float32) if value.dtype.kind not in "f" else value


# ---------------------------------------------------------------------------------------------
# QuantizeLinear


def _quant_target(ctx, zero_point):
    output_dtype = ctx.attr("output_dtype", 0)
    if given(zero_point):
        target = dtype_np(zero_point)
        if output_dtype and np_dtype(output_dtype, ctx.label) != target:
            raise ctx.error(
                f"output_dtype {np_dtype(output_dtype, ctx.label).name} differs from the zero "
                f"point's type {target.name}"
            )
        return target
    return np_dtype(output_dtype, ctx.label) if output_dtype else np.dtype(np.uint8)


@converter("QuantizeLinear", 10)
def _quantize_linear(ctx, x, scale, zero_point=None):
    target = _quant_target(ctx, zero_point)
    axis = ctx.attr("axis", 1)
    block_size = ctx.attr("block_size", 0)
    saturate = bool(ctx.attr("saturate", 1))
    precision = ctx.attr("precision", 0)
    if _lacks(x, scale, zero_point) or not supported_dtype(target):
        return _quantize_numpy(ctx, x, scale, zero_point, target, axis, block_size, saturate)
    x = ctx.tensor(x)
    scale = _shape_tensor(ctx, ctx.tensor(scale), x.shape, axis, block_size)
    if precision:
        compute = ember_dtype(np_dtype(precision, ctx.label), ctx.label)
    elif x.dtype.is_floating_point:
        compute = _dtypes.result_type(x, scale)
    else:
        compute = ember_dtype(np.float64, ctx.label)  # int32 x: exact
    v = E.round(E.div(E.cast(x, compute), E.cast(scale, compute)))
    # the rounded values, the zero point and the clamp in a type holding the integer range
    wide = compute if compute.itemsize >= 4 else ember_dtype(np.float32, ctx.label)
    v = E.cast(v, wide)
    if given(zero_point):
        zp = _shape_tensor(ctx, ctx.tensor(zero_point), x.shape, axis, block_size)
        v = v + E.cast(zp, wide)
    low, high = _int_range(target)
    return E.cast(saturated(v, low, high), ember_dtype(target, ctx.label))


def _quantize_numpy(ctx, x, scale, zero_point, target, axis, block_size, saturate):
    x = ctx.static(x, "x")
    scale = _as_float_array(
        _shape_array(ctx, ctx.static(scale, "y_scale"), x.shape, axis, block_size)
    )
    zp = None
    if given(zero_point):
        zp = _shape_array(ctx, ctx.static(zero_point, "y_zero_point"), x.shape, axis, block_size)
    precision = ctx.attr("precision", 0)
    with np.errstate(all="ignore"):
        if precision:
            want = np_dtype(precision, ctx.label)
            v = x.astype(want) / scale.astype(want)
        else:
            v = x / scale
        limits = _int_range(target)
        if limits is not None:
            q = np.rint(v).astype(np.float64)
            if zp is not None:
                q = q + zp.astype(np.float64)
            return np.where(np.isnan(q), limits[0], np.clip(q, *limits)).astype(target)
        if "float8" in target.name:
            # ONNX: the float8 formats ignore the zero point (it must be 0)
            v = v.astype(np.float32)
            if saturate:
                import ml_dtypes

                top = float(ml_dtypes.finfo(target).max)
                v = np.clip(v, -top, top)
            return v.astype(target)
        if zp is not None:
            v = v + zp.astype(np.float32)
        return v.astype(np.float32).astype(target)  # float4/float6: the cast saturates


# ---------------------------------------------------------------------------------------------
# DequantizeLinear


@converter("DequantizeLinear", 10)
def _dequantize_linear(ctx, x, scale, zero_point=None):
    axis = ctx.attr("axis", 1)
    block_size = ctx.attr("block_size", 0)
    output_dtype = ctx.attr("output_dtype", 0)
    if _lacks(x, scale, zero_point):
        return _dequantize_numpy(ctx, x, scale, zero_point, axis, block_size, output_dtype)
    x = ctx.tensor(x)
    scale = _shape_tensor(ctx, ctx.tensor(scale), x.shape, axis, block_size)
    out = ember_dtype(np_dtype(output_dtype, ctx.label), ctx.label) if output_dtype else scale.dtype
    # int32 values (a bias) are not exact in float32: float64 there, float32 for 8/16 bits
    compute = ember_dtype(np.float64 if x.dtype.itemsize >= 4 else np.float32, ctx.label)
    v = E.cast(x, compute)
    if given(zero_point):
        zp = _shape_tensor(ctx, ctx.tensor(zero_point), x.shape, axis, block_size)
        v = v - E.cast(zp, compute)
    return E.cast(v * E.cast(scale, compute), out)


def _dequantize_numpy(ctx, x, scale, zero_point, axis, block_size, output_dtype):
    x = ctx.static(x, "x")
    scale = ctx.static(scale, "x_scale")
    out = np_dtype(output_dtype, ctx.label) if output_dtype else scale.dtype
    if not supported_dtype(out) and "e8m0" in out.name:
        out = np.dtype(np.float32)
    scale = _as_float_array(_shape_array(ctx, scale, x.shape, axis, block_size))
    v = x.astype(np.float64 if x.dtype.itemsize >= 4 and x.dtype.kind in "iu" else np.float32)
    if given(zero_point) and _int_range(x.dtype) is not None:
        zp = _shape_array(ctx, ctx.static(zero_point, "x_zero_point"), x.shape, axis, block_size)
        v = v - zp.astype(v.dtype)
    elif given(zero_point) and "float4" not in x.dtype.name:
        zp = ctx.static(zero_point, "x_zero_point")
        if np.any(zp.astype(np.float32) != 0):
            raise ctx.error(f"a {x.dtype.name} zero point must be 0")
    with np.errstate(all="ignore"):
        return (v * scale).astype(out)


# ---------------------------------------------------------------------------------------------
# DynamicQuantizeLinear


@converter("DynamicQuantizeLinear", 11)
def _dynamic_quantize_linear(ctx, x):
    x = ctx.tensor(x)
    f32 = ember_dtype(np.float32, ctx.label)
    xf = E.cast(x, f32)
    zero = E.zeros((), dtype=f32)
    high = E.maximum(E.amax(xf) if _size(x) else zero, zero)
    low = E.minimum(E.amin(xf) if _size(x) else zero, zero)
    scale = E.where(high == low, E.ones((), dtype=f32), high - low) / 255.0
    zp = E.round(E.clamp(-low / scale, 0.0, 255.0))
    y = E.clamp(E.round(xf / scale) + zp, 0.0, 255.0)
    u8 = ember_dtype(np.uint8, ctx.label)
    return E.cast(y, u8), E.cast(scale, x.dtype), E.cast(zp, u8)


def _size(t) -> int:
    n = 1
    for d in t.shape:
        n *= int(d)
    return n


# ---------------------------------------------------------------------------------------------
# integer matmul and convolution


def _centered(ctx, v, zero_point, dtype, zp_shape=None):
    """``v - zero_point`` in ``dtype`` (an ember dtype), the zero point reshaped by
    ``zp_shape(zp)`` (per row / per channel) when it has several values."""
    v = E.cast(ctx.tensor(v), dtype)
    if not given(zero_point):
        return v
    zp = E.cast(ctx.tensor(zero_point), dtype)
    if _size(zp) > 1 and zp_shape is not None:
        zp = E.reshape(zp, zp_shape(zp))
    elif _size(zp) == 1:
        zp = E.reshape(zp, ())
    return v - zp


def _row_shape(a_rank):
    # a per-row zero point / scale of A (M values): one per row of the last two dims
    return lambda p: (*([1] * max(a_rank - 2, 0)), _size(p), 1)[-max(a_rank, 2) :]


def _per_channel(rank):
    return lambda p: (_size(p),) + (1,) * (rank - 1)


def _int_matmul(ctx, a, b, a_zp, b_zp):
    i32 = ember_dtype(np.int32, ctx.label)
    a_rank = len(ctx.tensor(a).shape)
    A = _centered(ctx, a, a_zp, i32, _row_shape(a_rank) if a_rank >= 2 else None)
    B = _centered(ctx, b, b_zp, i32, lambda p: (_size(p),))
    return E.matmul(A, B)


@converter("MatMulInteger", 10)
def _matmul_integer(ctx, a, b, a_zero_point=None, b_zero_point=None):
    if _lacks(a, b, a_zero_point, b_zero_point):
        raise ctx.error("MatMulInteger takes int8/uint8 operands")
    return _int_matmul(ctx, a, b, a_zero_point, b_zero_point)


def _requantize(ctx, acc, multiplier, y_zero_point, fallback_dtype):
    """ONNX's requantization: rint(acc * multiplier + y_zero_point), saturated to the output
    type (the zero point's, else ``fallback_dtype``); in float64."""
    f64 = ember_dtype(np.float64, ctx.label)
    d = E.cast(acc, f64) * E.cast(multiplier, f64)
    if given(y_zero_point):
        target = dtype_np(y_zero_point)
        d = d + E.cast(E.reshape(ctx.tensor(y_zero_point), ()), f64)
    else:
        target = fallback_dtype
    low, high = _int_range(target)
    return E.cast(saturated(E.round(d), low, high), ember_dtype(target, ctx.label))


def _scalar_or(ctx, scale, shape_fn):
    s = ctx.tensor(scale)
    if _size(s) == 1:
        return E.reshape(s, ())
    return E.reshape(s, shape_fn(s))


@converter("QLinearMatMul", 10)
def _qlinear_matmul(ctx, a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp=None):
    if _lacks(a, b, a_zp, b_zp, y_zp, a_scale, b_scale, y_scale):
        return _qlinear_matmul_numpy(ctx, a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp)
    acc = _int_matmul(ctx, a, b, a_zp, b_zp)
    a_rank = len(ctx.tensor(a).shape)
    sa = _scalar_or(ctx, a_scale, _row_shape(a_rank))
    sb = _scalar_or(ctx, b_scale, lambda p: (_size(p),))
    multiplier = (sa * sb) / E.reshape(ctx.tensor(y_scale), ())
    return _requantize(ctx, acc, multiplier, y_zp, dtype_np(a))


def _qlinear_matmul_numpy(ctx, a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp):
    """The float8 forms (opset 21): dequantize, multiply, quantize, in NumPy."""

    def deq(v, s, zp, row):
        v = ctx.static(v, "an operand").astype(np.float32)
        s = ctx.static(s, "a scale").astype(np.float32)
        if given(zp) and _int_range(dtype_np(zp)) is not None:
            v = v - ctx.static(zp, "a zero point").astype(np.float32).reshape(
                (-1, 1) if row and np.size(zp) > 1 else (-1,) if np.size(zp) > 1 else ()
            )
        return v * s.reshape((-1, 1) if row and s.size > 1 else (-1,) if s.size > 1 else ())

    prod = np.matmul(deq(a, a_scale, a_zp, True), deq(b, b_scale, b_zp, False))
    target = dtype_np(y_zp) if given(y_zp) else dtype_np(a)
    ys = ctx.static(y_scale, "y_scale").astype(np.float32).reshape(())
    v = prod / ys
    limits = _int_range(target)
    if limits is not None:
        zp = ctx.static(y_zp, "y_zero_point").astype(np.float64).reshape(()) if given(y_zp) else 0
        return np.clip(np.rint(v) + zp, *limits).astype(target)
    import ml_dtypes

    top = float(ml_dtypes.finfo(target).max)
    return np.clip(v, -top, top).astype(target)


def _conv(ctx, x, w, bias=None):
    """ONNX's Conv (auto_pad, pads, strides, dilations, group) over ember tensors ``x`` and
    ``w`` of one floating type."""
    spatial = len(x.shape) - 2
    if spatial not in (1, 2, 3):
        raise ctx.error(f"convolution over {spatial} spatial dims is not supported")
    kernel = [int(k) for k in w.shape[2:]]
    strides = list(ctx.attr("strides", [1] * spatial))
    dilations = list(ctx.attr("dilations", [1] * spatial))
    group = int(ctx.attr("group", 1))
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for i in range(spatial):
            size = int(x.shape[2 + i])
            out = -(-size // strides[i])
            total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - size)
            small, big = total // 2, total - total // 2
            begin.append(small if auto_pad == "SAME_UPPER" else big)
            end.append(big if auto_pad == "SAME_UPPER" else small)
    elif auto_pad == "VALID":
        begin = end = [0] * spatial
    else:
        pads = list(ctx.attr("pads", [0] * (2 * spatial)))
        begin, end = pads[:spatial], pads[spatial:]
    if begin != end:
        flat = []
        for i in reversed(range(spatial)):  # F.pad: the last dim first
            flat += [int(begin[i]), int(end[i])]
        x = F.pad(x, flat)
        padding = 0
    else:
        padding = tuple(int(p) for p in begin)
    conv = (F.conv1d, F.conv2d, F.conv3d)[spatial - 1]
    return conv(x, w, bias, tuple(strides), padding, tuple(dilations), group)


def _int_conv(ctx, x, w, x_zp, w_zp):
    """The exact integer convolution of ``x - x_zp`` and ``w - w_zp`` (per output channel),
    computed in float64, as int32."""
    f64 = ember_dtype(np.float64, ctx.label)
    rank = len(ctx.tensor(w).shape)
    X = _centered(ctx, x, x_zp, f64)
    W = _centered(ctx, w, w_zp, f64, _per_channel(rank))
    return _conv(ctx, X, W)


@converter("ConvInteger", 10)
def _conv_integer(ctx, x, w, x_zero_point=None, w_zero_point=None):
    if _lacks(x, w, x_zero_point, w_zero_point):
        raise ctx.error("ConvInteger takes int8/uint8 operands")
    return E.cast(_int_conv(ctx, x, w, x_zero_point, w_zero_point), ember_dtype(np.int32, ""))


@converter("QLinearConv", 10)
def _qlinear_conv(ctx, x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp=None, bias=None):
    if _lacks(x, w, x_zp, w_zp, y_zp):
        raise ctx.error("QLinearConv takes int8/uint8 operands")
    acc = _int_conv(ctx, x, w, x_zp, w_zp)
    rank = len(acc.shape)
    channel = lambda p: (1, _size(p)) + (1,) * (rank - 2)  # noqa: E731
    if given(bias):
        acc = acc + E.reshape(E.cast(ctx.tensor(bias), acc.dtype), channel(ctx.tensor(bias)))
    sx = _scalar_or(ctx, x_scale, channel)
    sw = _scalar_or(ctx, w_scale, channel)
    multiplier = (sx * sw) / E.reshape(ctx.tensor(y_scale), ())
    return _requantize(ctx, acc, multiplier, y_zp, dtype_np(x))
