"""onnxruntime's ``com.microsoft.QLinearAdd`` and ``QLinearMul`` (``quantize_static`` in the
QOperator format), rounded as onnxruntime's x86 kernels round them.

Dequantizing, adding in float32 and quantizing again (the operator's definition) lands on the
other side of a rounding midpoint from onnxruntime now and then: one step of the output type,
which after a LayerNormalization of a quantized BERT's residual sum is a difference of 2e-2.
onnxruntime's kernel (MLAS, AVX2) computes with the ratios ``ra = sa / sc`` and ``rb = sb / sc``
in float32 and a fixed part ``zc - (za * ra + zb * rb)`` (the first product fused into the sum),
then each element as ``fma(a, ra, fma(b, rb, fixed))``. An operand that is one value along the
innermost span of the broadcast (a scalar, or ``(.., 1)`` against ``(.., n)``) is handed to the
kernel second, so A alone swaps the roles; its fused product is taken once per span, the same
arithmetic. Float32 fused multiply-adds are computed in float64: the products of an 8-bit
integer and a float32 ratio, and their sums with the fixed part, are exact there, so one
rounding to float32 gives the fused result.

QLinearMul's kernel multiplies the integers' differences from their zero points exactly, then
in float32 by ``sa * sb / sc`` and adds ``zc`` (two roundings, unfused) before rounding to the
nearest even; the definition's ``(sa * (a - za)) * (sb * (b - zb)) / sc`` rounds otherwise now
and then.
"""

from __future__ import annotations

import numpy as np

from .._convert import converter, ember_dtype, is_static
from ._common import E, dtype_np, given
from .contrib_quant import _dequantize, _quantize
from .quant import _int_range, saturated

_MS = "com.microsoft"
_F32, _F64 = np.float32, np.float64


def _number(ctx, value, what: str):
    """A scale or zero point's one value as a NumPy scalar; None where it is not static."""
    if value is None or not given(value):
        return np.int32(0) if what == "zero point" else None
    if not is_static(value):
        return None
    array = np.asarray(value).reshape(-1)
    if array.size != 1:
        return None
    return array[0]


def _fused(x, y, z) -> _F32:
    """float32 fma(x, y, z) of float32 numbers (x * y + z rounded once)."""
    return _F32(_F64(x) * _F64(y) + _F64(z))


def _innermost_roles(a_shape, b_shape) -> str:
    """'a' or 'b' when that operand is one value along the innermost span of the broadcast
    (as onnxruntime's broadcast loop hands it to the kernel), else 'both'."""
    if int(np.prod(a_shape)) == 1:
        return "a"
    if int(np.prod(b_shape)) == 1:
        return "b"
    rank = max(len(a_shape), len(b_shape))
    a_dims = (1,) * (rank - len(a_shape)) + tuple(int(d) for d in a_shape)
    b_dims = (1,) * (rank - len(b_shape)) + tuple(int(d) for d in b_shape)
    for da, db in zip(reversed(a_dims), reversed(b_dims)):
        if max(da, db) > 1:
            return "both" if da == db else ("a" if da == 1 else "b")
    return "both"


@converter("QLinearAdd", 1, domain=_MS)
def _qlinear_add(ctx, a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp=None):
    target = dtype_np(c_zp) if given(c_zp) else dtype_np(a)
    numbers = [
        _number(ctx, a_scale, "scale"),
        _number(ctx, a_zp, "zero point"),
        _number(ctx, b_scale, "scale"),
        _number(ctx, b_zp, "zero point"),
        _number(ctx, c_scale, "scale"),
        _number(ctx, c_zp, "zero point"),
    ]
    range_ = _int_range(np.dtype(target))
    if any(n is None for n in numbers) or range_ is None or np.dtype(target).itemsize > 1:
        # (scales given as tensors, or wider types than onnxruntime's kernel takes: the
        # operator's definition)
        y = _dequantize(ctx, a, a_scale, a_zp) + _dequantize(ctx, b, b_scale, b_zp)
        return _quantize(ctx, y, c_scale, c_zp, dtype_np(a))
    sa, za, sb, zb, sc, zc = numbers
    ra, rb = _F32(sa) / _F32(sc), _F32(sb) / _F32(sc)
    f32, f64 = ember_dtype(_F32, ctx.label), ember_dtype(_F64, ctx.label)
    ta, tb = ctx.tensor(a), ctx.tensor(b)
    low, high = range_
    role = _innermost_roles(ta.shape, tb.shape)
    # onnxruntime hands its kernel the operand that spans first: with A alone along the span,
    # B is the kernel's first operand
    (span, span_ratio, span_zp), (other, other_ratio, other_zp) = (
        ((tb, rb, zb), (ta, ra, za)) if role == "a" else ((ta, ra, za), (tb, rb, zb))
    )
    fixed = _F32(_F32(zc) - _fused(_F32(span_zp), span_ratio, _F32(other_ratio * _F32(other_zp))))
    # fma(span, r, fma(other, r', fixed)): the inner one once per element, or once per span
    # where the other operand is one value along it (the same arithmetic)
    inner = E.cast(E.cast(E.cast(other, f64) * float(other_ratio) + float(fixed), f32), f64)
    value = E.cast(E.cast(span, f64) * float(span_ratio) + inner, f32)
    return E.cast(saturated(E.round(value), low, high), ember_dtype(np.dtype(target), ctx.label))


@converter("QLinearMul", 1, domain=_MS)
def _qlinear_mul(ctx, a, a_scale, a_zp, b, b_scale, b_zp, c_scale, c_zp=None):
    target = dtype_np(c_zp) if given(c_zp) else dtype_np(a)
    numbers = [
        _number(ctx, v, what)
        for v, what in (
            (a_scale, "scale"),
            (a_zp, "zero point"),
            (b_scale, "scale"),
            (b_zp, "zero point"),
            (c_scale, "scale"),
            (c_zp, "zero point"),
        )
    ]
    range_ = _int_range(np.dtype(target))
    if any(n is None for n in numbers) or range_ is None or np.dtype(target).itemsize > 1:
        y = _dequantize(ctx, a, a_scale, a_zp) * _dequantize(ctx, b, b_scale, b_zp)
        return _quantize(ctx, y, c_scale, c_zp, dtype_np(a))
    sa, za, sb, zb, sc, zc = numbers
    ratio = _F32(_F32(_F32(sa) * _F32(sb)) / _F32(sc))
    i32, f32 = ember_dtype(np.int32, ctx.label), ember_dtype(_F32, ctx.label)
    product = (E.cast(ctx.tensor(a), i32) - int(za)) * (E.cast(ctx.tensor(b), i32) - int(zb))
    value = E.cast(product, f32) * float(ratio) + float(_F32(zc))
    low, high = range_
    return E.cast(saturated(E.round(value), low, high), ember_dtype(np.dtype(target), ctx.label))
