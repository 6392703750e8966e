"""More elementwise math primitives, PyTorch's names: tan, asin, acos, atan, sinh, cosh, log2,
log10, square, atan2, fmod and copysign, plus the top-level spellings ``remainder`` and
``floor_divide`` of ops/binary.py's ``mod`` and ``floor_div``.

Each is one registered op built by elementwise.py's `_unary` / binary.py's `_binary` (shape
rule, NumPy kernel, VJP in ember ops, C expression for fused loops), so they fuse and
differentiate like the ops there. The float functions promote integer and bool tensors to the
default float dtype first, as PyTorch does."""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from . import _onnx
from . import api as E
from ._created_nan import negative_domain, positive_created_nan
from ._registry import PUBLIC, apply, export
from ._rules import Complex
from .binary import _binary, _check_divisor, _reduce_to
from .elementwise import _unary
from .promotion import to_tensor

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


def _quiet(ufunc):
    """``ufunc`` without NumPy's warnings for the domain edges (asin(2), log2(0)): the IEEE
    result (NaN, -inf) is the answer, as PyTorch gives it silently."""

    def kernel(*arrays):
        with np.errstate(all="ignore"):
            return ufunc(*arrays)

    kernel.__name__ = ufunc.__name__
    return kernel


def _onnx_scaled_log(scale):
    """log2 / log10: ONNX's Log divided by the base's logarithm."""

    def rule(e):
        return e.node("Div", [e.node("Log", e.inputs), _onnx.scalar(e, scale, e.in_types[0].dtype)])

    return rule


def _onnx_atan2(e, y, x):
    # atan(y / x) moved into the right half-plane's quadrant; x == 0 gives +-pi/2 (or 0 at 0)
    dtype = e.in_types[0].dtype
    zero, pi = _onnx.scalar(e, 0, dtype), _onnx.scalar(e, math.pi, dtype)
    half = _onnx.scalar(e, math.pi / 2, dtype)
    base = e.node("Atan", [e.node("Div", [y, x])])
    shift = e.node("Where", [e.node("Less", [y, zero]), e.node("Neg", [pi]), pi])
    left = e.node("Add", [base, shift])
    on_axis = e.node("Mul", [e.node("Sign", [y]), half])
    out = e.node("Where", [e.node("Less", [x, zero]), left, base])
    return e.node("Where", [e.node("Equal", [x, zero]), on_axis, out])


# ------------------------------------------------------------------------------- unary

_unary(
    "tan",
    _quiet(np.tan),
    lambda c, g: (g * E.conj(c.outputs[0] * c.outputs[0] + 1),),
    save="output",
    c="tan{f}({0})",
    complex=Complex.GRADIENT,
    onnx=_onnx.node("Tan"),
)
_unary(
    "asin",
    _quiet(np.arcsin),
    lambda c, g: (g * E.conj(E.rsqrt(1 - c.inputs[0] * c.inputs[0])),),
    method=("asin", "arcsin"),
    complex=Complex.GRADIENT,
    c="asin{f}({0})",
    onnx=_onnx.node("Asin"),
)
_unary(
    "acos",
    _quiet(np.arccos),
    lambda c, g: (-g * E.conj(E.rsqrt(1 - c.inputs[0] * c.inputs[0])),),
    method=("acos", "arccos"),
    complex=Complex.GRADIENT,
    c="acos{f}({0})",
    onnx=_onnx.node("Acos"),
)
_unary(
    "atan",
    np.arctan,
    lambda c, g: (g / E.conj(c.inputs[0] * c.inputs[0] + 1),),
    method=("atan", "arctan"),
    complex=Complex.GRADIENT,
    c="atan{f}({0})",
    onnx=_onnx.node("Atan"),
)
_unary(
    "sinh",
    _quiet(np.sinh),
    lambda c, g: (g * E.conj(E.cosh(c.inputs[0])),),
    complex=Complex.GRADIENT,
    c="sinh{f}({0})",
    onnx=_onnx.node("Sinh"),
)
_unary(
    "cosh",
    _quiet(np.cosh),
    lambda c, g: (g * E.conj(E.sinh(c.inputs[0])),),
    complex=Complex.GRADIENT,
    c="cosh{f}({0})",
    onnx=_onnx.node("Cosh"),
)
_unary(
    "log2",
    positive_created_nan(np.log2),
    lambda c, g: (g / E.conj(c.inputs[0] * _LN2),),
    complex=Complex.GRADIENT,
    c=negative_domain("log2{f}({0})"),
    onnx=_onnx_scaled_log(_LN2),
)
_unary(
    "log10",
    positive_created_nan(np.log10),
    lambda c, g: (g / E.conj(c.inputs[0] * _LN10),),
    complex=Complex.GRADIENT,
    c=negative_domain("log10{f}({0})"),
    onnx=_onnx_scaled_log(_LN10),
)
for _name in ("asin", "acos", "atan"):
    export(PUBLIC[_name], name="arc" + _name[1:])

# square keeps integer dtypes; the op refuses bool, which the public function turns into
# int64 first (PyTorch's square of a bool tensor is its pow(2), an int64 tensor)
_SQUARE = _unary(
    "square",
    np.square,
    lambda c, g: (g * E.conj(c.inputs[0]) * 2,),
    float_only=False,
    method=False,
    toplevel=False,
    c="({0} * {0})",
    complex=Complex.GRADIENT,
    onnx=_onnx.composite(lambda e, x: e.node("Mul", [x, x])),
    grad_fn="PowBackward0",
)


def square(x):
    """Elementwise ``x * x``, in x's dtype; a bool tensor gives int64, as in PyTorch."""
    x = to_tensor(x)
    if x.dtype is dt.bool_:
        x = E.cast(x, dt.int64)
    return apply(_SQUARE, x)


square.ufunc = np.square  # (x.square_() may run the ufunc into x's memory: Tensor._inplace)
square.ufunc_float_only = False
export(square, method=True, inplace=True)


# ------------------------------------------------------------------------------ binary


def _atan2_vjp(c, g):
    y, x = c.inputs  # atan2(input, other): input is the ordinate
    ny, nx = c.needs_input_grad
    # PyTorch's: 1 / (y^2 + x^2), 0 where that is infinite (the origin, and where the sum
    # underflows), so atan2(0, 0) has the gradient 0 (was NaN)
    with np.errstate(divide="ignore", over="ignore"):  # (silent, as PyTorch, when eager)
        recip = E.reciprocal(y * y + x * x)
    recip = E.where(E.isinf(recip), 0.0, recip)
    return (
        _reduce_to(g * x * recip, c.in_types[0]) if ny else None,
        _reduce_to(g * -y * recip, c.in_types[1]) if nx else None,
    )


_binary(
    "atan2",
    _quiet(np.arctan2),
    _atan2_vjp,
    floating=True,
    method=("atan2", "arctan2"),
    c="atan2{f}({0}, {1})",
    doc="atan2(input, other): the angle of the point (other, input), in (-pi, pi], with "
    "broadcasting; integer and bool tensors promote to the default float dtype. Unlike "
    "torch.atan2, either operand may be a Python scalar (a weak operand).",
    onnx=_onnx.composite(_onnx_atan2),
)
export(PUBLIC["atan2"], name="arctan2")


def _fmod_kernel(x, y):
    _check_divisor("fmod", x, y)
    with np.errstate(all="ignore"):
        return np.fmod(x, y)


def _fmod_vjp(c, g):
    x, y = c.inputs
    nx, ny = c.needs_input_grad
    # d/dy (x - trunc(x / y) * y) = -trunc(x / y), PyTorch's
    return (
        _reduce_to(g, c.in_types[0]) if nx else None,
        _reduce_to(-g * E.trunc(x / y), c.in_types[1]) if ny else None,
    )


_binary(
    "fmod",
    _fmod_kernel,
    _fmod_vjp,
    bools=False,
    c="fmod{f}({0}, {1})",
    doc="fmod(input, other): the remainder of the division rounded toward zero (C's fmod), "
    "so it has the sign of input; ``remainder`` (Python's %) has the sign of other. Integer "
    "division by zero raises DivisionByZeroError.",
    onnx=_onnx.node("Mod", fmod=1),
)


def _copysign_kernel(x, y):
    return np.copysign(x, y)


def _copysign_vjp(c, g):
    x = c.inputs[0]
    nx, ny = c.needs_input_grad
    # PyTorch's copysign_tensor_self_backward, op for op: ``result / input`` with zeros where
    # input is zero (NaN where it is NaN or infinite), spelled in the result and the input, not
    # their sign bits, so a second-order gradient reaches both operands as PyTorch's does: zeros
    # up to rounding, and NaN at input's zeros (the mask's zero gradient times 1 / 0 in the
    # division's). The result is the saved output, not recomputed from other: PyTorch saves
    # self and the result only, so other may be written in place before backward
    # (``v.copysign_(v)``)
    ratio = E.where(x == 0, 0.0, c.outputs[0] / x)
    return (
        _reduce_to(g * ratio, c.in_types[0]) if nx else None,
        _reduce_to(E.zeros_like(g), c.in_types[1]) if ny else None,
    )


_COPYSIGN = _binary(
    "copysign",
    _copysign_kernel,
    _copysign_vjp,
    save=(0,),
    floating=True,
    c="copysign{f}({0}, {1})",
    doc="copysign(input, other): |input| with the sign of other (its sign bit: -0.0 and a "
    "negative NaN count as negative), a float result; integer and bool tensors promote to the "
    "default float dtype. The gradient for input is the result over input (0 at zeros, NaN at "
    "NaN and infinities), for other zeros, as PyTorch's.",
)
_COPYSIGN.save_outputs = (0,)  # (the VJP reads the input and the result, never other)

# the top-level spellings PyTorch has for elementwise.py's ops (their methods exist there)
export(PUBLIC["mod"], name="remainder")
export(PUBLIC["floor_div"], name="floor_divide")
