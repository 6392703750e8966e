"""Elementwise ONNX operators: arithmetic, comparisons, logic, activations, Cast, Clip, Where."""

from __future__ import annotations

import math

import numpy as np

from ...errors import OnnxError
from .._convert import converter, ember_dtype, is_static, supported_dtype
from ._common import E, F, dtype_np, np_dtype


def _same_dtype(ctx, out, like):
    want = dtype_np(like)
    if dtype_np(out) != want:
        out = E.cast(out, ember_dtype(want, ctx.label))
    return out


# ---------------------------------------------------------------------------------------------
# arithmetic


def _binary(fn):
    def convert(ctx, a, b):
        return fn(ctx.tensor(a), ctx.tensor(b))

    return convert


for _name, _fn in (
    ("Add", E.add),
    ("Sub", E.sub),
    ("Mul", E.mul),
    ("Equal", E.eq),
    ("Less", E.lt),
    ("Greater", E.gt),
    ("LessOrEqual", E.le),
    ("GreaterOrEqual", E.ge),
    ("And", E.logical_and),
    ("Or", E.logical_or),
    ("Xor", E.logical_xor),
):
    converter(_name, 1)(_binary(_fn))


@converter("Div", 1)
def _div(ctx, a, b):
    a, b = ctx.tensor(a), ctx.tensor(b)
    if a.dtype.is_floating_point:
        return E.div(a, b)
    return _same_dtype(ctx, E.div(a, b, rounding_mode="trunc"), a)


@converter("Mod", 10)
def _mod(ctx, a, b):
    a, b = ctx.tensor(a), ctx.tensor(b)
    if ctx.attr("fmod", 0) or a.dtype.is_floating_point:
        return E.fmod(a, b)
    return E.remainder(a, b)


@converter("Pow", 1)
def _pow(ctx, a, b):
    a, b = ctx.tensor(a), ctx.tensor(b)
    if not a.dtype.is_floating_point and b.dtype.is_floating_point:
        return _same_dtype(ctx, E.pow(E.cast(a, b.dtype), b), a)
    if a.dtype != b.dtype:
        b = E.cast(b, a.dtype)
    return _same_dtype(ctx, E.pow(a, b), a)


def _variadic(fn):
    def convert(ctx, *xs):
        xs = [ctx.tensor(x) for x in xs if x is not None]
        if not xs:
            raise ctx.error("needs at least one input")
        out = xs[0]
        for x in xs[1:]:
            out = fn(out, x)
        return out if len(xs) > 1 else E.clone(out)

    return convert


converter("Sum", 1)(_variadic(E.add))
converter("Max", 1)(_variadic(E.maximum))
converter("Min", 1)(_variadic(E.minimum))


@converter("Mean", 1)
def _mean(ctx, *xs):
    xs = [x for x in xs if x is not None]
    return E.div(_variadic(E.add)(ctx, *xs), float(len(xs)))


@converter("Not", 1)
def _not(ctx, x):
    return E.logical_not(ctx.tensor(x))


@converter("Where", 9)
def _where(ctx, c, a, b):
    return E.where(ctx.tensor(c), ctx.tensor(a), ctx.tensor(b))


# ---------------------------------------------------------------------------------------------
# unary math


def _unary(fn):
    def convert(ctx, x):
        return fn(ctx.tensor(x))

    return convert


for _name, _fn in (
    ("Abs", E.abs),
    ("Neg", E.neg),
    ("Exp", E.exp),
    ("Log", E.log),
    ("Sqrt", E.sqrt),
    ("Reciprocal", E.reciprocal),
    ("Floor", E.floor),
    ("Ceil", E.ceil),
    ("Round", E.round),
    ("Sign", E.sign),
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
    return cast_value(ctx, x, target, bool(ctx.attr("saturate", 1)))


@converter("CastLike", 15)
def _cast_like(ctx, x, like):
    return cast_value(ctx, x, dtype_np(like), bool(ctx.attr("saturate", 1)))


def cast_value(ctx, x, target: np.dtype, saturate: bool = True):
    """``x`` converted to ``target`` with ONNX's rules: floats to integers truncate, to bool test
    for non-zero; a static value converts in NumPy (every ONNX element type, float8 included)."""
    if is_static(x) or not supported_dtype(target):
        # a type ember's tensors lack (float8, int4, strings): converted in NumPy, which needs
        # the data (a captured model then runs eagerly)
        return _cast_array(ctx, ctx.static(x, "Cast's input"), target, saturate)
    return E.cast(x, ember_dtype(target, ctx.label))


def _cast_array(ctx, x: np.ndarray, target: np.dtype, saturate: bool) -> np.ndarray:
    if target.kind in "OSU" or x.dtype.kind in "OSU":
        if target.kind in "OSU":
            return np.array([_to_string(v) for v in x.reshape(-1)], dtype=object).reshape(x.shape)
        return np.array([float(v) for v in x.reshape(-1)]).astype(target).reshape(x.shape)
    if target.itemsize == 1 and target.kind == "V" or "float8" in target.name:
        info_max = float(_finite_max(target))
        values = x.astype(np.float32)
        if saturate:
            values = np.where(
                np.isinf(values) | (np.abs(values) <= info_max), values, np.sign(values) * info_max
            )
            if "fn" in target.name or "e8m0" in target.name:
                values = np.where(np.isinf(values), np.sign(values) * info_max, values)
        return values.astype(target)
    with np.errstate(invalid="ignore", over="ignore"):
        return x.astype(target)


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
