"""Helpers shared by op definitions: shape arithmetic for the shape rules, argument
normalisation for the public wrappers, and default cost formulas.

Shape rules must work on abstract values, so nothing here reads array data.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from ..dtypes import DType, bfloat16, float16
from ..errors import (
    ArgumentError,
    ArgumentTypeError,
    AxisError,
    ComplexDTypeError,
    DTypeError,
    KernelDTypeError,
    ShapeError,
    TraceError,
)
from ..symbolic import SymDim
from ..types import TensorType
from ._registry import Cost, TensorBase


def value_bytes(v) -> int:
    """Bytes of the array of a value or type (a symbolic size counts as 1), for workspace
    rules: ``workspace(node, layouts)`` gives the bytes a kernel allocates beyond its
    outputs at its peak (plan/memory.py), measured against tracemalloc per op family."""
    size = 1
    for d in v.shape:
        size *= d if isinstance(d, int) else 1
    return size * v.dtype.itemsize


_HALF_NAMES = ("float16", "bfloat16")
_HALF_NP = frozenset([float16.np, bfloat16.np])


def half_precision(v) -> bool:
    """Whether a value or type is float16 / bfloat16: kernels that compute those in float32
    (matmul, convolutions, softmax, ...) allocate float32 copies that workspace rules count."""
    dtype = v.dtype
    if type(dtype) is DType:
        return dtype.name in _HALF_NAMES
    return dtype in _HALF_NP  # (a NumPy dtype's ``name`` is a slow Python property)


def shape_arg(shape) -> tuple:
    """A shape given as ``f(2, 3)`` or ``f((2, 3))``, as a tuple of ints (symbolic sizes, a
    graph's batch N from ``x.shape[0]``, stay symbolic)."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    dims = []
    for s in shape:  # (every reshape and permute passes here: no generator)
        dims.append(s if type(s) is int or isinstance(s, SymDim) else operator.index(s))
    return tuple(dims)


def size_arg(op: str, shape) -> tuple:
    """A new tensor's shape (``shape_arg``'s forms); a negative size is a ShapeError naming
    ``op``, as PyTorch's factories raise."""
    shape = shape_arg(shape)
    if any(isinstance(s, int) and s < 0 for s in shape):
        raise ShapeError(f"cannot make a tensor with a negative size: {fmt_shape(shape)}", op=op)
    return shape


def numel(shape) -> int:
    return math.prod(shape)


def fmt_shape(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def broadcast_shapes(op: str, *shapes) -> tuple:
    """NumPy broadcasting of ``shapes``; a ShapeError naming ``op`` and all shapes on a clash."""
    first = shapes[0]
    if len(shapes) == 2:  # the common calls: with a scalar, or two equal shapes
        if not shapes[1] or first == shapes[1]:
            return tuple(first)
        if not first:
            return tuple(shapes[1])
        return _broadcast_two(op, first, shapes[1])
    elif all(s == first for s in shapes):
        return tuple(first)
    ndim = max((len(s) for s in shapes), default=0)
    result = []
    for i in range(-ndim, 0):
        size = 1
        for s in shapes:
            if len(s) >= -i:
                d = s[i]
                if d == 1:
                    continue
                if size == 1:
                    size = d
                elif d != size:
                    listed = " and ".join(fmt_shape(x) for x in shapes)
                    raise ShapeError(
                        f"shapes {listed} cannot be broadcast together "
                        f"(dimension {i}: {size} vs {d})",
                        op=op,
                    )
        result.append(size)
    return tuple(result)


def _broadcast_two(op: str, x, y) -> tuple:
    """`broadcast_shapes` of two shapes: its loop over the shapes spelled out for two (a + row
    passes here), the same comparisons in the same order, so symbolic sizes record the same
    assumptions (symbolic.py: ``==`` of two sizes records that they are equal)."""
    nx, ny = len(x), len(y)
    result = []
    for i in range(-(nx if nx > ny else ny), 0):
        if -i > ny or -i > nx:  # (one shape has this dimension: its size)
            d = x[i] if -i > ny else y[i]
            result.append(1 if d == 1 else d)
            continue
        a, b = x[i], y[i]
        size = 1 if a == 1 else a
        if not b == 1:
            if size == 1:
                size = b
            elif b != size:
                raise ShapeError(
                    f"shapes {fmt_shape(x)} and {fmt_shape(y)} cannot be broadcast together "
                    f"(dimension {i}: {size} vs {b})",
                    op=op,
                )
        result.append(size)
    return tuple(result)


def normalize_axis(op: str, axis: int, ndim: int) -> int:
    if type(axis) is not int:
        try:
            axis = operator.index(axis)
        except TypeError:
            raise ArgumentTypeError(
                f"{op}: axis must be an int, got {type(axis).__name__}"
            ) from None
    n = ndim if ndim > 1 else 1  # (a 0-d tensor takes axis 0 and -1, as PyTorch's)
    if not -n <= axis < n:
        raise AxisError(f"axis {axis} is out of range for a tensor of {ndim} dimensions", op=op)
    return axis % n


def normalize_axes(op: str, axis, ndim: int) -> tuple[int, ...]:
    """None -> every axis; int or sequence -> sorted tuple of non-negative axes, no repeats."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (list, tuple)):
        axes = tuple(normalize_axis(op, a, ndim) for a in axis)
    else:
        axes = (normalize_axis(op, axis, ndim),)
    if len(set(axes)) != len(axes):
        raise ShapeError(f"axis {axis} repeats a dimension", op=op)
    if ndim == 0:
        return ()
    return tuple(sorted(axes))


def pick_axis(dim, axis, default=None):
    """Accept PyTorch's ``dim`` and NumPy's ``axis`` spellings of the same argument."""
    if axis is not None:
        if dim is not None:
            raise ArgumentTypeError("give either dim or axis, not both")
        return axis
    return default if dim is None else dim


def require_float(op: str, *types) -> None:
    for t in types:
        if not t.dtype.is_floating_point:
            raise KernelDTypeError(
                f"expected a floating-point tensor, got {t.dtype}; "
                f"convert it first, e.g. x.float()",
                op=op,
            )


def require_kernel_dtype(op: str, x, *, integers=(), bool_ok: bool = False) -> None:
    """Refuse what PyTorch's CPU kernel of ``op`` is not implemented for: it takes floating
    (and complex, where the op's own rules do) tensors, the integer dtypes named in
    ``integers`` (DTypes; True for every one, False for none) and bool where ``bool_ok``.
    ember's NumPy kernels would compute the others; PyTorch raises NotImplementedError
    (KernelDTypeError is one)."""
    dtype = x.dtype
    if dtype.is_floating_point or dtype.is_complex:
        return
    if dtype.is_integer and (integers is True or (integers and dtype in integers)):
        return
    if bool_ok and not dtype.is_integer:
        return
    raise KernelDTypeError(f"not implemented for {dtype} (as PyTorch's CPU kernel)", op=op)


def require_float_or_complex(op: str, *types) -> None:
    """`require_float`, complex dtypes accepted too (for ops whose ``complex`` rule takes them:
    the rule has refused them already where it does not)."""
    for t in types:
        if not (t.dtype.is_floating_point or t.dtype.is_complex):
            require_float(op, t)


def check_scalars(op: str, dtype: DType, *scalars) -> None:
    """The ``beta``/``alpha`` of the add-a-product functions (addmv, addr, addbmm, ...) for a
    result of ``dtype``, PyTorch's rule: integer results take no float scalar, and only complex
    results take a complex one."""
    if any(isinstance(s, complex) for s in scalars) and not dtype.is_complex:
        raise DTypeError(
            f"complex beta and alpha need complex tensors, got {dtype}: "
            f"{', '.join(repr(s) for s in scalars)}",
            op=op,
        )
    if any(isinstance(s, float) for s in scalars) and not (
        dtype.is_floating_point or dtype.is_complex
    ):
        raise DTypeError(f"beta and alpha must be integers for {dtype} tensors", op=op)


def truncated_scalars(op: str, dtype: DType, beta, alpha) -> tuple:
    """The ``beta``/``alpha`` of addmm, addmv, addbmm and baddbmm for a result of ``dtype``:
    PyTorch's rule for these four (addr and add refuse instead, `check_scalars`): a float
    scalar of an integer result is read as its integer part, truncated toward zero (beta 1.7
    is 1, -2.6 is -2); a complex one needs a complex result."""
    check_scalars(op, dtype, *(s for s in (beta, alpha) if not isinstance(s, float)))
    if dtype.is_floating_point or dtype.is_complex:
        return beta, alpha
    return tuple(int(s) if isinstance(s, float) else s for s in (beta, alpha))


def check_fill_value(op: str, value, dtype: DType, floats: bool | str = True) -> None:
    """A Python number written into a tensor (full, fill_, masked_fill, index_fill, scatter's
    value, where's and clamp's numbers, ``x[i] = v``), refused as PyTorch's ``checked_convert``
    refuses it: a complex one into a real tensor, and one outside an integer dtype's range
    (an unsigned one takes negatives down to minus its maximum, which wrap), where arithmetic
    (``u8 + 300``) would wrap it silently; with ``floats``, also a finite one beyond a floating
    dtype's largest value (1e5 into float16), which would become an infinity (PyTorch's
    where and item assignment refuse it for float32 only: they pass "float32")."""
    if isinstance(value, complex) and not dtype.is_complex:
        raise ArgumentError(
            f"value {value!r} cannot be converted to type {dtype} without overflow (a complex "
            "value for a real tensor)",
            op=op,
        )
    if (
        floats
        and type(value) in (int, float)
        and not -65504.0 <= value <= 65504.0  # (float16's largest: the others' exceed it)
        and dtype.name in _FLOAT_TYPES
        and (floats is True or floats == dtype.name)
    ):
        _check_float_range(op, value, dtype)
    if (
        type(value) in (int, float)
        and dtype.is_integer
        and not dtype.is_bool
        and _overflows(value, np.iinfo(dtype.np))
    ):
        c_type = _C_INTEGER_TYPES.get(dtype.name, dtype.name + "_t")
        raise ArgumentError(
            f"value cannot be converted to type {c_type} without overflow (value {value!r}, "
            f"tensor of {dtype})",
            op=op,
        )


def fill_number(op: str, value, dtype: DType, floats: bool | str = True):
    """``value`` checked as `check_fill_value` checks it, then as the dtype's kernels take it: a
    negative int for an unsigned dtype wrapped modulo its range (``full((2,), -1,
    dtype=uint8)`` is 255, as PyTorch's two's-complement conversion gives)."""
    check_fill_value(op, value, dtype, floats)
    if type(value) is int and value < 0 and dtype.is_integer and not dtype.is_bool:
        info = np.iinfo(dtype.np)
        if info.min == 0:
            return value % (int(info.max) + 1)
    return value


# c10's spelling of the integer types its message names (int32_t's is the C type's name)
_C_INTEGER_TYPES = {"int32": "int"}


# c10's names of the floating types whose range a number must fit, as its message spells
# them, and their largest finite values
_FLOAT_TYPES = {"float16": "c10::Half", "bfloat16": "c10::BFloat16", "float32": "float"}
_FLOAT_MAX = {
    "float16": 65504.0,
    "bfloat16": 3.3895313892515355e38,
    "float32": 3.4028234663852886e38,
}


def _check_float_range(op: str, value, dtype: DType) -> None:
    # (infinities fit; NaN compares false)
    infinite = isinstance(value, float) and math.isinf(value)
    if not infinite and abs(value) > _FLOAT_MAX[dtype.name]:
        raise ArgumentError(
            f"value cannot be converted to type {_FLOAT_TYPES[dtype.name]} without overflow "
            f"(value {value!r}, tensor of {dtype})",
            op=op,
        )


def _overflows(value, info) -> bool:
    """c10's ``overflows<To>(value)`` for an integer type: beyond the maximum, or below the
    minimum, where an unsigned type's minimum is minus its maximum for an int (whose negatives
    wrap) but 0 for a float; an infinity or a NaN (integers have neither) overflows."""
    if isinstance(value, float) and not math.isfinite(value):
        return True
    if value > info.max:
        return True
    lowest = -int(info.max) if info.min == 0 and isinstance(value, int) else int(info.min)
    return value < lowest


def refuse_complex(op: str, *tensors, reason: str | None = None) -> None:
    """A composite public function that PyTorch refuses for complex tensors (sort, isin,
    nansum, interpolate, ...) refuses them by its own name before its primitives would (each
    primitive's ``complex`` rule would name the primitive, or take them); ``reason``: PyTorch's
    own words where it has some. Non-tensors pass."""
    for t in tensors:
        dtype = getattr(t, "dtype", None)
        if dtype is not None and dtype.is_complex:
            torch_name = "ComplexFloat" if dtype.name == "complex64" else "ComplexDouble"
            raise ComplexDTypeError(
                reason or f"not implemented for '{torch_name}' ({dtype}), as in PyTorch",
                op=op,
            )


def require_same_dtype(op: str, *types) -> DType:
    first = types[0].dtype
    for t in types[1:]:
        if t.dtype is not first:
            names = ", ".join(str(x.dtype) for x in types)
            raise DTypeError(f"operands must share one dtype, got {names}", op=op)
    return first


def require_source_dtype(op: str, x, source, what: str = "source") -> None:
    """A tensor written into ``x`` (scatter's src, index_add's source, an index_put value)
    must have x's dtype, as PyTorch's kernels require; a Python number is cast instead."""
    if isinstance(source, TensorBase) and source.dtype is not x.dtype:
        raise DTypeError(
            f"self ({x.dtype}) and {what} ({source.dtype}) must have the same dtype", op=op
        )


def require_int(op: str, what: str, t) -> None:
    if not t.dtype.is_integer:
        raise DTypeError(f"{what} must be an integer tensor, got {t.dtype}", op=op)


def same_type(x) -> TensorType:
    # (TensorType without its Python-level constructor: every unary op call makes one)
    return tuple.__new__(TensorType, (tuple(x.shape), x.dtype))


def nbytes(t) -> int:
    return numel(t.shape) * t.dtype.itemsize


def io_bytes(in_types, out_types) -> int:
    return sum(nbytes(t) for t in in_types) + sum(nbytes(t) for t in out_types)


def elementwise_cost(flops_per_element: int = 1):
    def cost(in_types, out_types, attrs) -> Cost:
        return Cost(flops_per_element * numel(out_types[0].shape), io_bytes(in_types, out_types))

    return cost


def memory_cost(in_types, out_types, attrs) -> Cost:
    """Data movement only (shape ops, gathers, casts)."""
    return Cost(0, io_bytes(in_types, out_types))


def reduction_cost(in_types, out_types, attrs) -> Cost:
    return Cost(numel(in_types[0].shape), io_bytes(in_types, out_types))


def fit_inplace_result(name: str, result, target):
    """``result`` made fit to be written into ``target`` by an in-place op (eager or recorded):
    the same shape, and its dtype cast to the target's, which as in PyTorch may narrow within a
    category (float64 into float32) or come from a lower one, but never drop a category (float
    into int, int into bool)."""
    if tuple(result.shape) != tuple(target.shape):
        raise ShapeError(
            f"the result has shape {fmt_shape(result.shape)} but the in-place target has shape "
            f"{fmt_shape(target.shape)}; in-place ops cannot change a tensor's shape",
            op=name,
        )
    if result.dtype != target.dtype:
        if result.dtype.category > target.dtype.category:
            raise DTypeError(
                f"result type {result.dtype} cannot be written in place into a "
                f"{target.dtype} tensor",
                op=name,
            )
        result = result.to(target.dtype)
    return result


def size_from_values(t, op: str, what: str, fix: str) -> int:
    """``int(t.item())`` where ``t`` decides the size of ``op``'s result (a mask's count, a
    maximum): a value a graph does not have while it is built, so a traced ``t`` raises a
    `TraceError` that names the op, what it needed (``what``) and the shape-keeping
    alternative (``fix``), rather than a bare ``.item()`` refusal."""
    try:
        return int(t.item())
    except TraceError:
        raise TraceError(
            f"the size of the result is {what}, which a graph does not have while it is "
            f"built (a captured graph's shapes cannot depend on its data); {fix}, or call it "
            "outside the captured function",
            op=op,
        ) from None


def zero_input_grad(c, i: int):
    """The gradient of a backward op in its piecewise-constant operand (a ReLU's result, a leaky
    ReLU's input): zeros, PyTorch's ``zeros_like(self)``, so a second-order gradient reaches
    that operand's history as zeros where None would end it; None where no gradient is wanted."""
    if not c.needs_input_grad[i]:
        return None
    from . import api as E

    return E.zeros_like(c.inputs[i])
