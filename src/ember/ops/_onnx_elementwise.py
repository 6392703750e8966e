"""The ONNX forms (``onnx`` rules, ops/_rules.py) of ops/elementwise.py's and ops/binary.py's ops
that are more than one ONNX node or depend on the dtype: written through the exporter's emitter
``e`` (onnx/export_emit.py), never importing ``onnx``; kept beside the ops' definitions' module
so each rule is read against the kernel it must match (NaN, integer and bool behaviour)."""

from __future__ import annotations

from .. import dtypes as dt
from . import _onnx


def onnx_float(op_type):
    """``op_type`` on floats; integers (and bools) pass through unchanged (floor, ceil, ...)."""

    def rule(e):
        if e.in_types[0].dtype.is_floating_point:
            return e.node(op_type, e.inputs)
        return e.node("Identity", e.inputs)

    return rule


def onnx_sign(e):
    dtype = e.in_types[0].dtype
    if dtype is dt.bool_:
        return e.node("Identity", e.inputs)
    sign = e.node("Sign", e.inputs)
    if not dtype.is_floating_point:
        return sign
    # the kernel gives 0 at NaN (PyTorch's); ONNX's Sign passes NaN on
    return e.node("Where", [e.node("IsNaN", e.inputs), _onnx.scalar(e, 0, dtype), sign])


def onnx_log1p(e, x):
    return _onnx.log1p(e, x, e.in_types[0].dtype)


def onnx_expm1(e, x):
    return _onnx.expm1(e, x, e.in_types[0].dtype)


def onnx_rsqrt(e, x):
    return e.node("Reciprocal", [e.node("Sqrt", [x])])


def onnx_trunc(e, x):
    if not e.in_types[0].dtype.is_floating_point:
        return e.node("Identity", [x])
    negative = e.node("Less", [x, _onnx.scalar(e, 0, e.in_types[0].dtype)])
    return e.node("Where", [negative, e.node("Ceil", [x]), e.node("Floor", [x])])


def onnx_relu(e, x):
    if e.in_types[0].dtype.is_floating_point:
        return e.node("Relu", [x])  # NaN stays NaN, as in the kernel
    return e.node("Max", [x, _onnx.scalar(e, 0, e.in_types[0].dtype)])


def onnx_logic(op_type, bool_type):
    """``op_type``; on bools (which ONNX's arithmetic refuses) the logical ``bool_type``."""

    def rule(e):
        if e.in_types[0].dtype is dt.bool_:
            if bool_type is None:
                e.unsupported("on bool tensors")
            return e.node(bool_type, e.inputs)
        return e.node(op_type, e.inputs)

    return rule


def onnx_floor_div(e, x, y):
    if e.in_types[0].dtype.is_floating_point:
        return e.node("Floor", [e.node("Div", [x, y])])
    # ONNX's integer Div truncates; x - mod(x, y) (Python's mod) is an exact multiple of y
    return e.node("Div", [e.node("Sub", [x, e.node("Mod", [x, y], fmod=0)]), y])


def onnx_mod(e, x, y):
    dtype = e.in_types[0].dtype
    if not dtype.is_floating_point:
        return e.node("Mod", [x, y], fmod=0)  # the sign of the divisor, as np.mod
    # np.mod on floats: fmod, moved by y where it is non-zero and its sign differs from y's
    r = e.node("Mod", [x, y], fmod=1)
    zero = _onnx.scalar(e, 0, dtype)
    differ = e.node("Xor", [e.node("Less", [r, zero]), e.node("Less", [y, zero])])
    move = e.node("And", [differ, e.node("Not", [e.node("Equal", [r, zero])])])
    return e.node("Where", [move, e.node("Add", [r, y]), r])


def onnx_pow(e, x, y):
    dtype = e.in_types[0].dtype
    if dtype is dt.bool_:
        e.unsupported("on bool tensors")
    if dtype.is_floating_point:
        return e.node("Pow", [x, y])
    # the kernel's integer powers: a negative exponent gives 1 / x truncated
    zero, one = _onnx.scalar(e, 0, dtype), _onnx.scalar(e, 1, dtype)
    minus = _onnx.scalar(e, -1, dtype)
    negative = e.node("Less", [y, zero])
    power = e.node("Pow", [x, e.node("Max", [y, zero])])
    odd = e.node("Equal", [e.node("Mod", [y, _onnx.scalar(e, 2, dtype)], fmod=0), one])
    sign = e.node("Where", [odd, minus, one])
    inverse = e.node(
        "Where",
        [
            e.node("Equal", [x, one]),
            one,
            e.node("Where", [e.node("Equal", [x, minus]), sign, zero]),
        ],
    )
    return e.node("Where", [negative, inverse, power])


def onnx_extreme(op_type, bool_type):
    """Max / Min with NumPy's NaN propagation from either side."""

    def rule(e):
        x, y = e.inputs
        dtype = e.in_types[0].dtype
        if dtype is dt.bool_:
            return e.node(bool_type, [x, y])
        out = e.node(op_type, [x, y])
        if not dtype.is_floating_point:
            return out
        nan = e.node("Or", [e.node("IsNaN", [x]), e.node("IsNaN", [y])])
        return e.node("Where", [nan, e.node("Add", [x, y]), out])

    return rule
