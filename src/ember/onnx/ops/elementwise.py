"""Elementwise ONNX operators: arithmetic, comparisons, logic, activations, Cast, Clip, Where."""

from __future__ import annotations

import functools
import math

import numpy as np

from ...errors import OnnxError
from .._convert import EMPTY, converter, ember_dtype, is_static, supported_dtype
from ._common import E, F, dtype_np, np_dtype

# ---------------------------------------------------------------------------------------------
# element types ember has no tensors for (uint16/32/64, float8, int4, strings): such a value is
# always a NumPy array (the importer and `to_tensor` never make ember tensors of them), and an
# op on it is computed in NumPy with ONNX's semantics. That needs every input's data
# (`ctx.static`): inside a captured model a symbolic operand makes the model run eagerly.


def lacks_dtype(*values) -> bool:
    """Whether any of ``values`` has an element type ember has no tensors for."""
    return any(is_static(v) and not supported_dtype(v.dtype) for v in values)


def numpy_op(ctx, fn, *values, like=None):
    """``fn`` over the NumPy data of ``values`` (omitted ones stay None); with ``like`` given,
    the result takes that input's dtype (ONNX's ops keep their operands' type)."""
    arrays = [
        None if v is None else ctx.static(v, "an input of a type ember lacks") for v in values
    ]
    with np.errstate(all="ignore"):
        out = np.asarray(fn(*arrays))
    if like is not None:
        out = out.astype(arrays[like].dtype, copy=False)
    return out


def _np_div(a, b):
    if a.dtype.kind in "iu":  # ONNX's integer division truncates (floor for unsigned ones)
        q = np.floor_divide(a, np.where(b == 0, 1, b))
        if a.dtype.kind == "i":
            q = np.where((q < 0) & (q * b != a), q + 1, q)
        return np.where(b == 0, 0, q)
    return np.true_divide(a, b)


def _np_mod(fmod):
    def mod(a, b):
        if fmod or a.dtype.kind == "f":
            return np.fmod(a, b)
        return np.where(b == 0, 0, np.remainder(a, np.where(b == 0, 1, b)))

    return mod


def _same_dtype(ctx, out, like):
    want = dtype_np(like)
    if dtype_np(out) != want:
        out = E.cast(out, ember_dtype(want, ctx.label))
    return out


# ---------------------------------------------------------------------------------------------
# arithmetic


def _binary(fn, np_fn, keep):
    def convert(ctx, a, b):
        if lacks_dtype(a, b):
            return numpy_op(ctx, np_fn, a, b, like=0 if keep else None)
        return fn(ctx.tensor(a), ctx.tensor(b))

    return convert


for _name, _fn, _np_fn, _keep in (
    ("Add", E.add, np.add, True),
    ("Sub", E.sub, np.subtract, True),
    ("Mul", E.mul, np.multiply, True),
    ("Equal", E.eq, np.equal, False),
    ("Less", E.lt, np.less, False),
    ("Greater", E.gt, np.greater, False),
    ("LessOrEqual", E.le, np.less_equal, False),
    ("GreaterOrEqual", E.ge, np.greater_equal, False),
    ("And", E.logical_and, np.logical_and, False),
    ("Or", E.logical_or, np.logical_or, False),
    ("Xor", E.logical_xor, np.logical_xor, False),
):
    converter(_name, 1)(_binary(_fn, _np_fn, _keep))


@converter("Div", 1)
def _div(ctx, a, b):
    if lacks_dtype(a, b):
        return numpy_op(ctx, _np_div, a, b, like=0)
    a, b = ctx.tensor(a), ctx.tensor(b)
    if a.dtype.is_floating_point:
        return E.div(a, b)
    return _same_dtype(ctx, E.div(a, b, rounding_mode="trunc"), a)


@converter("Mod", 10)
def _mod(ctx, a, b):
    if lacks_dtype(a, b):
        return numpy_op(ctx, _np_mod(ctx.attr("fmod", 0)), a, b, like=0)
    a, b = ctx.tensor(a), ctx.tensor(b)
    # fmod=1: the sign of the dividend (C's fmod); fmod=0: the sign of the divisor (Python's
    # %), which the spec reserves for integers but its cases and runtimes apply to floats too
    if ctx.attr("fmod", 0):
        return E.fmod(a, b)
    return E.remainder(a, b)


@converter("Pow", 1)
def _pow(ctx, a, b):
    if lacks_dtype(a, b):
        return numpy_op(ctx, np.power, a, b, like=0)
    a, b = ctx.tensor(a), ctx.tensor(b)
    if not a.dtype.is_floating_point and b.dtype.is_floating_point:
        return _same_dtype(ctx, E.pow(E.cast(a, b.dtype), b), a)
    if a.dtype != b.dtype:
        b = E.cast(b, a.dtype)
    return _same_dtype(ctx, E.pow(a, b), a)


def _variadic(fn, np_fn):
    def convert(ctx, *xs):
        if lacks_dtype(*xs):
            xs = [x for x in xs if x is not None]
            return numpy_op(ctx, lambda *a: functools.reduce(np_fn, a), *xs, like=0)
        xs = [ctx.tensor(x) for x in xs if x is not None]
        if not xs:
            raise ctx.error("needs at least one input")
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return out if len(xs) > 1 else E.clone(out)

    return convert


converter("Sum", 1)(_variadic(E.add, np.add))
converter("Max", 1)(_variadic(E.maximum, np.maximum))
converter("Min", 1)(_variadic(E.minimum, np.minimum))


@converter("Mean", 1)
def _mean(ctx, *xs):
    xs = [x for x in xs if x is not None]
    if lacks_dtype(*xs):
        return numpy_op(ctx, lambda *a: functools.reduce(np.add, a) / len(a), *xs, like=0)
    return E.div(_variadic(E.add, np.add)(ctx, *xs), float(len(xs)))


@converter("Not", 1)
def _not(ctx, x):
    if lacks_dtype(x):
        return numpy_op(ctx, np.logical_not, x)
    return E.logical_not(ctx.tensor(x))


@converter("Where", 9)
def _where(ctx, c, a, b):
    if lacks_dtype(a, b):
        return numpy_op(ctx, np.where, c, a, b, like=1)
    return E.where(ctx.tensor(c), ctx.tensor(a), ctx.tensor(b))


# ---------------------------------------------------------------------------------------------
# unary math


def _unary(fn, np_fn=None):
    def convert(ctx, x):
        if np_fn is not None and lacks_dtype(x):
            return numpy_op(ctx, np_fn, x, like=0)
        return fn(ctx.tensor(x))

    return convert


# the unary ops ONNX defines on unsigned integers too
for _name, _fn, _np_fn in (
    ("Abs", E.abs, np.abs),
    ("Neg", E.neg, np.negative),
):
    converter(_name, 1)(_unary(_fn, _np_fn))


@converter("Sign", 1)
def _sign(ctx, x):
    if lacks_dtype(x):
        return numpy_op(ctx, np.sign, x, like=0)
    x = ctx.tensor(x)
    if not x.dtype.is_floating_point:
        return E.sign(x)
    # ONNX's Sign of NaN is NaN (its reference is np.sign), where PyTorch's gives 0
    return E.where(E.isnan(x), x, E.sign(x))


for _name, _fn in (
    ("Exp", E.exp),
    ("Log", E.log),
    ("Sqrt", E.sqrt),
    ("Reciprocal", E.reciprocal),
    ("Floor", E.floor),
    ("Ceil", E.ceil),
    ("Round", E.round),
    ("Sin", E.sin),
    ("Cos", E.cos),
    ("Tan", E.tan),
    ("Asin", E.asin),
    ("Acos", E.acos),
    ("Atan", E.atan),
    ("Sinh", E.sinh),
    ("Cosh", E.cosh),
    ("Asinh", E.asinh),
    ("Acosh", E.acosh),
    ("Atanh", E.atanh),
    ("Erf", E.erf),
    ("Sigmoid", E.sigmoid),
    ("Tanh", E.tanh),
    ("Relu", E.relu),
    ("IsNaN", E.isnan),
    ("Softsign", F.softsign),
    ("Mish", F.mish),
):
    converter(_name, 1)(_unary(_fn))


@converter("IsInf", 10)
def _isinf(ctx, x):
    x = ctx.tensor(x)
    neg, pos = ctx.attr("detect_negative", 1), ctx.attr("detect_positive", 1)
    if neg and pos:
        return E.isinf(x)
    if pos:
        return E.isposinf(x)
    if neg:
        return E.isneginf(x)
    return E.zeros_like(x, dtype=ember_dtype(np.bool_, ctx.label))


# ---------------------------------------------------------------------------------------------
# activations with attributes


@converter("Softplus", 1)
def _softplus(ctx, x):
    x = ctx.tensor(x)
    # ONNX's Softplus is log(exp(x) + 1) without PyTorch's linear threshold
    return E.logaddexp(x, E.zeros_like(x))


@converter("LeakyRelu", 1)
def _leaky_relu(ctx, x):
    return F.leaky_relu(ctx.tensor(x), ctx.attr("alpha", 0.01))


@converter("Elu", 1)
def _elu(ctx, x):
    return F.elu(ctx.tensor(x), ctx.attr("alpha", 1.0))


@converter("Celu", 12)
def _celu(ctx, x):
    return F.celu(ctx.tensor(x), ctx.attr("alpha", 1.0))


@converter("Selu", 1)
def _selu(ctx, x):
    x = ctx.tensor(x)
    alpha = ctx.attr("alpha", 1.67326319217681884765625)
    gamma = ctx.attr("gamma", 1.05070102214813232421875)
    return E.where(x > 0, x * gamma, (E.exp(x) - 1.0) * (alpha * gamma))


@converter("ThresholdedRelu", 10)
def _thresholded_relu(ctx, x):
    x = ctx.tensor(x)
    return E.where(x > ctx.attr("alpha", 1.0), x, E.zeros_like(x))


@converter("HardSigmoid", 1)
def _hard_sigmoid(ctx, x):
    x = ctx.tensor(x)
    return E.clamp(x * ctx.attr("alpha", 0.2) + ctx.attr("beta", 0.5), 0.0, 1.0)


@converter("HardSwish", 14)
def _hard_swish(ctx, x):
    return F.hardswish(ctx.tensor(x))


@converter("Swish", 24)
def _swish(ctx, x):
    x = ctx.tensor(x)
    return x * E.sigmoid(x * ctx.attr("alpha", 1.0))


@converter("Gelu", 20)
def _gelu(ctx, x):
    return F.gelu(ctx.tensor(x), approximate=ctx.attr("approximate", "none"))


@converter("PRelu", 1)
def _prelu(ctx, x, slope):
    x, slope = ctx.tensor(x), ctx.tensor(slope)
    if ctx.opset < 7 and slope.ndim == 1 and x.ndim >= 2 and slope.shape[0] == x.shape[1] > 1:
        # before opset 7 a slope of C values ran along the channels (dimension 1), as
        # PyTorch's PReLU exported it, not NumPy-style along the last dimension
        slope = E.reshape(slope, (slope.shape[0],) + (1,) * (x.ndim - 2))
    return E.where(x < 0, x * slope, x)


@converter("Shrink", 9)
def _shrink(ctx, x):
    x = ctx.tensor(x)
    lambd, bias = ctx.attr("lambd", 0.5), ctx.attr("bias", 0.0)
    zero = E.zeros_like(x)
    out = E.where(x < -lambd, x + bias, E.where(x > lambd, x - bias, zero))
    return _same_dtype(ctx, out, x)


@converter("Clip", 1)
def _clip(ctx, x, low=None, high=None):
    if lacks_dtype(x):
        if ctx.opset < 11:
            low, high = ctx.attr("min", None), ctx.attr("max", None)
        low = None if low is None or low is EMPTY else low
        high = None if high is None or high is EMPTY else high
        return numpy_op(ctx, _np_clip, x, low, high, like=0)
    x = ctx.tensor(x)
    if ctx.opset < 11:
        low, high = ctx.attr("min", None), ctx.attr("max", None)
    else:
        low = None if low is None else ctx.tensor(low, x.dtype)
        high = None if high is None else ctx.tensor(high, x.dtype)
    if low is None and high is None:
        return E.clone(x)
    if low is not None and not isinstance(low, float):
        x = E.maximum(x, low)
        low = None
    if high is not None and not isinstance(high, float):
        x = E.minimum(x, high)
        high = None
    if low is None and high is None:
        return x
    return E.clamp(x, low, high)


def _np_clip(x, low, high):
    if low is not None:
        x = np.maximum(x, np.asarray(low).astype(x.dtype))
    if high is not None:
        x = np.minimum(x, np.asarray(high).astype(x.dtype))
    return x


# ---------------------------------------------------------------------------------------------
# identity and casts


@converter("Identity", 1)
def _identity(ctx, x):
    if is_static(x) or isinstance(x, list):
        return x
    return x


@converter("Cast", 1)
def _cast(ctx, x):
    to = ctx.attr("to")
    if isinstance(to, str):  # opset 1 spelled the type's name
        to = getattr(__import__("onnx").TensorProto, to.upper())
    target = np_dtype(to, ctx.label)
    return cast_value(ctx, x, target, bool(ctx.attr("saturate", 1)), ctx.attr("round_mode", "up"))


@converter("CastLike", 15)
def _cast_like(ctx, x, like):
    saturate, round_mode = bool(ctx.attr("saturate", 1)), ctx.attr("round_mode", "up")
    return cast_value(ctx, x, dtype_np(like), saturate, round_mode)


def cast_value(ctx, x, target: np.dtype, saturate: bool = True, round_mode: str = "up"):
    """``x`` converted to ``target`` with ONNX's rules: floats to integers truncate, to bool test
    for non-zero; a static value converts in NumPy (every ONNX element type, float8 included)."""
    if is_static(x) or not supported_dtype(target):
        # a type ember's tensors do not compute (float8, int4, strings): converted in NumPy,
        # which needs the data (a captured model then runs eagerly)
        return _cast_array(ctx, ctx.static(x, "Cast's input"), target, saturate, round_mode)
    return E.cast(x, ember_dtype(target, ctx.label))


def _cast_array(
    ctx, x: np.ndarray, target: np.dtype, saturate: bool, round_mode: str = "up"
) -> np.ndarray:
    if target.kind in "OSU" or x.dtype.kind in "OSU":
        if target.kind in "OSU":
            return np.array([_to_string(v) for v in x.reshape(-1)], dtype=object).reshape(x.shape)
        return np.array([float(v) for v in x.reshape(-1)]).astype(target).reshape(x.shape)
    if "e8m0" in target.name:
        return _to_e8m0(ctx, x, saturate, round_mode).view(target)
    if "float8" in target.name:
        values = x.astype(np.float32)
        if saturate:  # ONNX's table: infinities and values beyond the range become +-FLT_MAX
            info_max = float(_finite_max(target))
            values = np.clip(values, -info_max, info_max)
        return values.astype(target)
    with np.errstate(invalid="ignore", over="ignore"):
        return x.astype(target)


def _to_e8m0(ctx, x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """float8e8m0's bytes: a float32's exponent, rounded by ``round_mode`` ("up": any fraction
    rounds up, "down": truncates, "nearest": to nearest on the guard bit); saturated, the
    largest exponent never rounds past E8M0_MAX into NaN, and infinities become E8M0_MAX."""
    if round_mode not in ("up", "down", "nearest"):
        raise ctx.error(f"unknown round_mode {round_mode!r}")
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.uint16)
    special = exponent == 0xFF
    if round_mode == "up":
        increment = (bits & 0x7FFFFF) > 0
    elif round_mode == "nearest":
        guard, rest = (bits & 0x400000) > 0, (bits & 0x3FFFFF) > 0
        increment = guard & (rest | (exponent > 0))
    else:
        increment = np.zeros(bits.shape, bool)
    increment &= ~special
    if saturate:
        increment &= exponent != 0xFE
    exponent = exponent + increment.astype(np.uint16)
    if saturate:
        exponent = np.where(np.isinf(x), 0xFE, exponent)
    return np.minimum(exponent, 0xFF).astype(np.uint8)


def _finite_max(dtype: np.dtype):
    import ml_dtypes

    try:
        return ml_dtypes.finfo(dtype).max
    except (ValueError, TypeError):
        return np.finfo(np.float32).max


def _to_string(value) -> str:
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "INF" if value > 0 else "-INF"
        return repr(float(np.float32(value))) if isinstance(value, np.float32) else repr(value)
    return str(value)


@converter("Constant", 1)
def _constant(ctx):
    for key in ("value", "sparse_value"):
        if ctx.has_attr(key):
            return np.asarray(ctx.attr(key))
    if ctx.has_attr("value_float"):
        return np.asarray(ctx.attr("value_float"), dtype=np.float32)
    if ctx.has_attr("value_floats"):
        return np.asarray(ctx.attr("value_floats"), dtype=np.float32)
    if ctx.has_attr("value_int"):
        return np.asarray(ctx.attr("value_int"), dtype=np.int64)
    if ctx.has_attr("value_ints"):
        return np.asarray(ctx.attr("value_ints"), dtype=np.int64)
    if ctx.has_attr("value_string"):
        return np.asarray(ctx.attr("value_string"), dtype=object)
    if ctx.has_attr("value_strings"):
        return np.asarray(ctx.attr("value_strings"), dtype=object)
    raise OnnxError(f"{ctx.label}: Constant has no value attribute")
