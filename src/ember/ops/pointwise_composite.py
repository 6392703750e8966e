"""PyTorch's pointwise composites, written in ember's elementwise ops (so they differentiate,
capture and fuse through them): nan_to_num, addcmul, addcdiv, lerp, isclose and allclose.

The dtype rules follow PyTorch's, which are not all plain promotion: lerp and isclose take
operands of one dtype only; addcdiv refuses integer division; addcmul's value takes an integer
result's dtype (truncated). addcmul, addcdiv and lerp compute 16-bit operands (bfloat16,
float16) in float32 and round once, as PyTorch's CPU kernels (a rounding per op would lose
what ``input + value * t1 * t2`` cancels).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from .. import dtypes as dt
from ..errors import (
    ArgumentError,
    ArgumentTypeError,
    AutogradError,
    DTypeError,
    KernelDTypeError,
)
from . import _item_scalars as _items
from . import _pointwise_inplace
from . import api as E
from ._node_names import rename_node, renames
from ._registry import TensorBase, export, is_grad_enabled
from ._saved_operands import needs, saves
from ._util import check_fill_value
from .promotion import promote, to_tensor


def _finite_bounds(dtype) -> tuple[float, float]:
    info = ml_dtypes.finfo(dtype.np)
    return float(info.max), float(-info.max)


@renames("NanToNumBackward0")
def nan_to_num(input, nan: float = 0.0, posinf: float | None = None, neginf: float | None = None):
    """NaN to ``nan``, +inf to ``posinf`` and -inf to ``neginf`` (by default the dtype's
    largest and lowest finite values); integer and bool tensors come back as a copy. The
    gradient passes where the input is finite and is 0 elsewhere, as in PyTorch."""
    x = to_tensor(input)
    if x.dtype.is_complex:  # (PyTorch's: the real and imaginary parts each replaced)
        if x.requires_grad and is_grad_enabled():
            raise AutogradError(
                "nan_to_num does not support automatic differentiation for outputs with "
                f"complex dtype (shape {tuple(x.shape)}, {x.dtype.name}), as in PyTorch",
                op="nan_to_num",
            )
        parts = (nan_to_num(part, nan, posinf, neginf) for part in (E.real(x), E.imag(x)))
        return E.complex(*parts)
    if not x.dtype.is_floating_point:
        return E.clone(x)
    top, bottom = _finite_bounds(x.dtype)

    def number(v, default, field):  # (a traced .item(): its graph value, ops/_item_scalars.py)
        if _items.is_item(v):
            return _items.scalar(v, x.dtype, "nan_to_num", field)
        if v is None:
            return default
        v = float(v)
        if x.dtype is dt.float32 and abs(v) > top and math.isfinite(v):
            # (beyond float32's range: rounded to it (an infinity, mostly), as PyTorch writes
            # it, where the plain where below would refuse it)
            with np.errstate(over="ignore"):
                v = float(np.float32(v))
        return v

    nan = number(nan, 0.0, "nan")
    posinf, neginf = number(posinf, top, "posinf"), number(neginf, bottom, "neginf")
    # (x != x and x == inf are the comparisons a fused loop computes: the chain fuses whole)
    out = E.where(x != x, nan, x)
    out = E.where(x == float("inf"), posinf, out)
    return E.where(x == float("-inf"), neginf, out)


export(nan_to_num, method=True, inplace=True)


def _value(op: str, value, dtype):
    """The ``value=`` multiplier of addcmul / addcdiv in the result dtype: PyTorch truncates
    a float value for an integer result (addcmul(i, i, i, value=2.5) uses 2). A traced
    ``.item()`` is its graph value in that dtype (ops/_item_scalars.py)."""
    if _items.is_item(value):
        return _items.scalar(value, dtype, op, "value", truncate=True)
    if isinstance(value, TensorBase):
        raise ArgumentTypeError(f"{op}: value must be a Python number, got a tensor")
    if dtype.is_complex:
        return complex(value)
    if isinstance(value, complex):
        raise DTypeError(f"a complex value {value!r} for a {dtype} result", op=op)
    # PyTorch converts the value to the result's dtype, or to float32 for a 16-bit float
    # result (its kernels' "opmath" type), refusing a number beyond that type's range
    check_fill_value(op, value, _opmath(dtype))
    if dtype.is_floating_point:
        return float(value)
    return int(value)


def _opmath(dtype):
    """The dtype PyTorch's CPU kernels compute a dtype's pointwise ops in: float32 for the
    16-bit floats, else the dtype itself."""
    return dt.float32 if dtype in (dt.float16, dt.bfloat16) else dtype


def _in_float(dtype, fn, *tensors):
    """``fn(*tensors)``, computed in float32 and rounded once to ``dtype`` where it is a 16-bit
    float (PyTorch's CPU kernels' "opmath" type), as is elsewhere."""
    if dtype is dt.bfloat16 or dtype is dt.float16:
        wide = (E.cast(t, dt.float32) if isinstance(t, TensorBase) else t for t in tensors)
        return E.cast(fn(*wide), dtype)
    return fn(*tensors)


def _is_one(value) -> bool:
    return not isinstance(value, TensorBase) and value == 1


def addcmul(input, tensor1, tensor2, *, value=1):
    """``input + value * tensor1 * tensor2``, broadcasting and promoting the three tensors.
    Bool results are refused, as in PyTorch; for an integer result a float ``value`` is
    truncated to an integer first, as PyTorch does."""
    # (PyTorch's node saves each factor where the other's gradient is wanted)
    saved = (tensor1 if needs(tensor2) else None, tensor2 if needs(tensor1) else None)
    input, tensor1, tensor2 = promote(input, tensor1, tensor2)
    if input.dtype is dt.bool_:
        raise DTypeError("addcmul is not defined for bool tensors (as in PyTorch)", op="addcmul")
    value = _value("addcmul", value, input.dtype)
    one = _is_one(value)

    def compute(x, a, b, v):
        return x + (a * b if one else a * v * b)

    out = _in_float(input.dtype, compute, input, tensor1, tensor2, value)
    return saves(rename_node(out, "AddcmulBackward0"), *saved)


def addcdiv(input, tensor1, tensor2, *, value=1):
    """``input + value * tensor1 / tensor2``, broadcasting and promoting the three tensors.
    As in PyTorch, tensor1 and tensor2 may not both be integer (or bool) tensors: integer
    division is refused, cast one of them to a float dtype first."""
    t1, t2 = to_tensor(tensor1), to_tensor(tensor2)
    if not (t1.dtype.is_floating_point or t1.dtype.is_complex) and not (
        t2.dtype.is_floating_point or t2.dtype.is_complex
    ):
        raise DTypeError(
            f"integer division with addcdiv is not supported (tensor1 {t1.dtype}, tensor2 "
            f"{t2.dtype}); cast tensor1 or tensor2 to a floating dtype",
            op="addcdiv",
        )
    # (PyTorch's node saves the divisor for either factor's gradient, the dividend for the
    # divisor's)
    saved = (t1 if needs(t2) else None, t2 if needs(t1, t2) else None)
    input, t1, t2 = promote(input, t1, t2)
    value = _value("addcdiv", value, input.dtype)
    one = _is_one(value)

    def compute(x, a, b, v):
        return x + (a / b if one else a * v / b)

    out = _in_float(input.dtype, compute, input, t1, t2, value)
    return saves(rename_node(out, "AddcdivBackward0"), *saved)


_ADDC = (addcmul, addcdiv)


def lerp_fused(a, b, w: float):
    """PyTorch's CPU lerp with a number weight on floating tensors (its vectorized
    ``lerp_vec``): one fused multiply-add, ``fma(w, b - a, a)`` for ``|w| < 0.5``, else
    ``fma(w - 1, b - a, b)``, ``w - 1`` computed in the tensors' dtype; add(alpha=)'s single
    rounding (ops/add_alpha.py)."""
    if abs(w) < 0.5:
        return E.add(a, b - a, alpha=w)
    weight = np.asarray(w, dtype=a.dtype.np)
    return E.add(b, b - a, alpha=float(weight - weight.dtype.type(1)))


def lerp(input, end, weight):
    """Linear interpolation ``input + weight * (end - input)``, computed as PyTorch does: for
    ``|weight| >= 0.5`` as ``end - (end - input) * (1 - weight)``, so weight 1 gives ``end``
    exactly. input and end must share one floating (or complex) dtype, as must a tensor weight
    with dimensions (a 0-d tensor or a Python number takes their dtype)."""
    input, end = to_tensor(input), to_tensor(end)
    if input.dtype is not end.dtype:
        raise DTypeError(
            f"input and end must share one dtype, got {input.dtype} and {end.dtype}", op="lerp"
        )
    if not (input.dtype.is_floating_point or input.dtype.is_complex):
        raise KernelDTypeError(f"lerp needs floating tensors, got {input.dtype}", op="lerp")
    if _items.is_item(weight):  # (a traced .item(): a 0-d tensor weight, ops/_item_scalars.py)
        weight = _items.scalar(weight, input.dtype, "lerp", "weight")
    if not isinstance(weight, TensorBase):
        # (|w| < 0.5 picks the form; a complex weight only with complex tensors)
        w = complex(weight) if input.dtype.is_complex else float(weight)
        if not input.dtype.is_complex:  # (PyTorch's conversion of the weight: no overflow)
            check_fill_value("lerp", w, _opmath(input.dtype))
        if input.dtype.is_complex:
            if abs(w) < 0.5:
                out = _in_float(input.dtype, lambda a, b: a + (b - a) * w, input, end)
            else:
                out = _in_float(input.dtype, lambda a, b: b - (b - a) * (1 - w), input, end)
        else:
            out = _in_float(input.dtype, lambda a, b: lerp_fused(a, b, w), input, end)
        return rename_node(out, "LerpBackward0")
    if weight.dtype is not input.dtype:
        if weight.ndim:
            raise DTypeError(
                f"a weight tensor must have input's dtype {input.dtype}, got {weight.dtype}",
                op="lerp",
            )
        weight = E.cast(weight, input.dtype)

    def compute(a, b, w):
        diff = b - a
        return E.where(E.abs(w) < 0.5, a + w * diff, b - diff * (1 - w))

    # (PyTorch's node saves the weight for input's and end's gradients, both ends for the
    # weight's)
    saved = (weight if needs(input, end) else None, *((input, end) if needs(weight) else ()))
    out = _in_float(input.dtype, compute, input, end, weight)
    return saves(rename_node(out, "LerpBackward1"), *saved)


_pointwise_inplace.attach(addcmul, addcdiv, lerp, _value)  # (before export copies them)
for _fn in (*_ADDC, lerp):
    export(_fn, method=True, inplace=True)


def isclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    """Elementwise ``|input - other| <= atol + rtol * |other|`` (or equal; infinities are
    close only to themselves; NaN to NaN only with ``equal_nan``), a bool tensor. As in
    PyTorch, both tensors must have one dtype; integer and bool ones are compared in the
    default float dtype."""
    input, other = to_tensor(input), to_tensor(other)
    if input.dtype is not other.dtype:
        raise DTypeError(
            f"input and other must share one dtype, got {input.dtype} and {other.dtype}",
            op="isclose",
        )
    if rtol < 0 or atol < 0:
        raise ArgumentError(f"isclose: rtol ({rtol}) and atol ({atol}) must be non-negative")
    close = input == other
    inexact = input.dtype.is_floating_point or input.dtype.is_complex
    if equal_nan and inexact:
        close = E.logical_or(close, E.logical_and(E.isnan(input), E.isnan(other)))
    if rtol == 0 and atol == 0:
        return close
    if not inexact:
        input, other = (E.cast(t, dt.get_default_dtype()) for t in (input, other))
    allowed = E.abs(other * float(rtol)) + float(atol)
    actual = E.abs(input - other)
    return E.logical_or(close, E.logical_and(E.isfinite(actual), actual <= allowed))


def allclose(input, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    """Whether every element of ``isclose(input, other, ...)`` holds, a Python bool (so it
    needs the values: inside a captured function it raises TraceError, as any ``.item()``)."""
    return bool(E.all(isclose(input, other, rtol, atol, equal_nan)).item())


for _fn in (isclose, allclose):
    export(_fn, method=True)
