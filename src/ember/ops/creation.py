"""Tensor creation: ``full`` is a primitive (its shape may later be symbolic in a graph); the
rest (tensor, zeros, ones, arange, linspace, eye, *_like) build on it or on constants."""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from ..kernels.cprepack import exposed
from ..symbolic import SymDim
from ..types import TensorType
from . import api as E
from ._data import to_array
from ._limited import refuse_limited
from ._linspace_values import linspace_values
from ._registry import (
    OpDef,
    TensorBase,
    apply,
    building_graph,
    constant,
    eager_constant,
    export,
    is_traced,
    register,
)
from ._util import fill_number, memory_cost, size_arg


def _full_kernel(*, shape, value, dtype):
    return np.full(shape, value, dtype=dtype.np)


def _onnx_full(e):
    shape, value, dtype = e.attrs["shape"], e.attrs["value"], e.attrs["dtype"]
    if isinstance(value, SymDim):  # a symbolic size's value (a mean's count over the batch)
        count = e.node("Reshape", [e.cast(e.dim(value), dtype), e.ints(())])
        return e.node("Expand", [count, e.shape(shape)])
    if not any(isinstance(d, SymDim) for d in shape):
        return e.node("Identity", [e.constant(np.full(shape, value, dtype=dtype.np))])
    fill = np.full((1,), value, dtype=dtype.np)
    return e.node("ConstantOfShape", [e.shape(shape)], value=fill)


_FULL = register(
    OpDef(
        name="full",
        onnx=_onnx_full,
        kind="creation",
        infer=lambda *, shape, value, dtype: TensorType(shape, dtype),
        kernel=_full_kernel,
        cost=memory_cost,
        doc="full(shape, value, dtype): a new tensor filled with one value",
    )
)


def _fill_dtype(value, dtype):
    if dtype is not None:
        return dt.as_dtype(dtype)
    if isinstance(value, SymDim):  # (a size is an int)
        return dt.int64
    return dt.result_type(value)


@export
def full(*args, fill_value=None, dtype=None, requires_grad=False):
    """``full(shape, value)`` (also ``full(*sizes, fill_value=v)``)."""
    if fill_value is None:
        *shape_args, fill_value = args
    else:
        shape_args = args
    shape = size_arg("full", tuple(shape_args))
    d = _fill_dtype(fill_value, dtype)
    if is_traced(fill_value):
        out = _full_of_item(shape, fill_value, d)
        return out.requires_grad_() if requires_grad else out
    if isinstance(fill_value, SymDim):  # (a symbolic size: each call fills its own number)
        out = apply(_FULL, shape=shape, value=fill_value, dtype=d)
        return out.requires_grad_() if requires_grad else out
    if d.is_complex:
        value = complex(fill_value)
    elif isinstance(fill_value, complex):
        raise DTypeError(f"a complex fill value {fill_value!r} for a {d} tensor", op="full")
    else:
        fill_value = fill_number("full", fill_value, d)
        value = (
            bool(fill_value)
            if d.is_bool
            else (int(fill_value) if d.is_integer else float(fill_value))
        )
    out = apply(_FULL, shape=shape, value=value, dtype=d)
    return out.requires_grad_() if requires_grad else out


def _full_of_item(shape: tuple, item, d):
    """``full(shape, m.item())`` in a graph being built (graph/traced_item.py): the number is
    a graph value, not known while tracing, so it is spread rather than made an attribute."""
    from . import api as E

    return E.clone(E.broadcast_to(item.tensor_for(d), shape))


@export
def zeros(*shape, dtype=None, requires_grad=False):
    """A tensor of zeros (default float dtype)."""
    return full(
        *shape, fill_value=0.0, dtype=dtype or dt.get_default_dtype(), requires_grad=requires_grad
    )


@export
def ones(*shape, dtype=None, requires_grad=False):
    """A tensor of ones (default float dtype)."""
    return full(
        *shape, fill_value=1.0, dtype=dtype or dt.get_default_dtype(), requires_grad=requires_grad
    )


export(zeros, name="empty")  # ember never hands out uninitialised memory


@export
def full_like(x, fill_value, dtype=None, requires_grad=False):
    return full(
        tuple(x.shape), fill_value=fill_value, dtype=dtype or x.dtype, requires_grad=requires_grad
    )


@export
def zeros_like(x, dtype=None, requires_grad=False):
    return full_like(x, 0, dtype=dtype, requires_grad=requires_grad)


@export
def ones_like(x, dtype=None, requires_grad=False):
    return full_like(x, 1, dtype=dtype, requires_grad=requires_grad)


export(zeros_like, name="empty_like")


@export
def tensor(data, dtype=None, requires_grad=False):
    """A new tensor holding a copy of ``data`` (lists, scalars, arrays, tensors).

    Python floats become the default float dtype (float32); NumPy arrays keep their dtype."""
    if building_graph() and _holds_traced(data):  # (items exist only while tracing)
        out = _tensor_of_traced(data, dtype)
        return out.requires_grad_() if requires_grad else out
    arr = np.array(to_array(data, dtype), copy=True)
    if not requires_grad:
        return constant(arr)
    # a leaf that requires grad is an eager tensor even inside a trace (captured when used)
    return eager_constant(arr).requires_grad_()


def _holds_traced(data) -> bool:
    if isinstance(data, (list, tuple)):
        return any(_holds_traced(x) for x in data)
    # (a symbolic size, ``tensor(x.size(1))``: its number too is the graph's, each call's)
    return is_traced(data) or is_traced(data, "is_traced_list") or isinstance(data, SymDim)


def _tensor_of_traced(data, dtype):
    """``tensor([a.item(), n])``, ``tensor(p.tolist())`` in a graph being built: the numbers
    have no values while tracing, so the graph values they are read from are stacked, in the
    dtype PyTorch infers from the Python numbers they stand for (a float32 tensor's .tolist()
    is floats: the default float dtype) unless ``dtype`` is given."""
    from . import api as E

    def example(x):  # a Python number (or an item: a weak scalar of its kind) for promotion
        if isinstance(x, (list, tuple)):
            return [e for v in x for e in example(v)]
        if is_traced(x, "is_traced_list"):  # (its elements' Python type, by category)
            return [(False, 0, 0.0, 0j)[x.tensor.dtype.category]]
        return [0 if isinstance(x, SymDim) else x]

    d = dt.as_dtype(dtype) if dtype is not None else dt.result_type(*example(data))

    def build(x):
        if isinstance(x, (list, tuple)):
            return E.stack([build(v) for v in x])
        if is_traced(x):
            return x.tensor_for(d)
        if isinstance(x, SymDim):
            return apply(_FULL, shape=(), value=x, dtype=d)
        if is_traced(x, "is_traced_list"):
            return E.cast(x.tensor, d) if x.tensor.dtype is not d else x.tensor
        return constant(np.array(to_array(x, d), copy=True))

    return build(data)


@export
def as_tensor(data, dtype=None):
    """Like `tensor` but shares memory with a NumPy array (or returns a tensor unchanged)."""
    if isinstance(data, TensorBase) and (dtype is None or data.dtype == dtype):
        return data
    if building_graph() and _holds_traced(data):
        return _tensor_of_traced(data, dtype)
    array = to_array(data, dtype)
    if array is data:  # shared with the caller, who may write it (kernels/cprepack.py)
        exposed(array, early=True)
    return constant(array)


@export
def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    """PyTorch's ``asarray``: ``obj`` as a tensor, sharing memory with a tensor or NumPy array
    of the wanted dtype (a tensor is returned itself) unless ``copy=True``; ``copy=False``
    refuses what must be copied (a conversion, a Python sequence) with PyTorch's ValueError.
    ``requires_grad=True`` sets it on the result (on ``obj`` itself where that is returned)."""
    from ._factory_kwargs import placement

    placement("asarray", {"device": device})
    want = None if dtype is None else dt.as_dtype(dtype)
    if copy is True:
        out = tensor(obj, dtype=want)
    else:
        if isinstance(obj, (TensorBase, np.ndarray)):
            have = obj.dtype if isinstance(obj, TensorBase) else dt.from_numpy_dtype(obj.dtype)
            if copy is False and want is not None and have is not want:
                raise ArgumentError(f"asarray: can't alias a {have} tensor into dtype {want}")
        elif copy is False:
            raise ArgumentError("asarray: can't alias an arbitrary sequence into a tensor")
        out = as_tensor(obj, dtype=want)
    return out.requires_grad_() if requires_grad else out


@export
def from_numpy(array: np.ndarray):
    """A tensor sharing memory with ``array`` (writes through either are visible in both)."""
    if not isinstance(array, np.ndarray):
        raise ArgumentTypeError(f"from_numpy expects an np.ndarray, got {type(array).__name__}")
    dt.from_numpy_dtype(array.dtype)  # validates the dtype
    exposed(array, early=True)  # (the caller may write it: kernels/cprepack.py)
    return constant(array)


@export
def arange(start, end=None, step=1, *, dtype=None, requires_grad=False):
    """Values from ``start`` to ``end`` (exclusive) by ``step``; int64 for integer arguments.

    A float value is ``start + i * step`` computed in double and rounded once to the dtype.
    PyTorch's CPU kernel rounds each vector's first value before adding ``j * step``, so a few
    of its float32 values are an ulp (of that first value) away from these."""
    if end is None:
        start, end = 0, start
    if isinstance(end, SymDim):
        out = _symbolic_range(start, end, step, dtype)
        return out.requires_grad_() if requires_grad else out
    for name, v in (("start", start), ("step", step)):
        if isinstance(v, SymDim):  # (a graph built for symbolic sizes: its values are constants)
            raise ShapeError(
                f"{name} is the symbolic size {v}: a range's length is fixed while the graph is "
                "built; give this dimension a concrete size",
                op="arange",
            )
    d = dt.as_dtype(dtype) if dtype is not None else dt.result_type(start, end, step)
    refuse_limited("arange", d)
    out = constant(_arange_values(start, end, step, d))
    return out.requires_grad_() if requires_grad else out


def _symbolic_range(start, end, step, dtype):
    """``arange(start, end, step)`` up to a symbolic size (a position index ``arange(T)``, a
    cache's new positions ``arange(past, past + T)``): a whole-number or symbolic start, a
    positive whole step, ``ceil((end - start) / step)`` values made in the graph as the running
    count of ones, so the length follows the size when the graph runs (a symbolic start is
    filled in at run time, as a symbolic size in arithmetic is)."""
    whole = isinstance(start, (int, SymDim)) and not isinstance(start, bool)
    if not (whole and isinstance(step, int) and step > 0):
        raise ShapeError(
            f"a range up to the symbolic size {end} needs a whole start and a positive whole "
            f"step, got start {start!r} and step {step!r}",
            op="arange",
        )
    count = (end - start + step - 1) // step
    k = E.cumsum(E.full((count,), 1, dtype=dt.int64), 0)  # 1 .. count
    offsets = E.sub(k, 1) if step == 1 else E.mul(E.sub(k, 1), step)
    values = offsets if isinstance(start, int) and start == 0 else E.add(offsets, start)
    d = dt.int64 if dtype is None else dt.as_dtype(dtype)
    return values if d is dt.int64 else E.cast(values, d)


def _arange_values(start, end, step, d) -> np.ndarray:
    """PyTorch's values: ``ceil((end - start) / step)`` elements, each ``start + i * step``
    computed in double (in float for float16/bfloat16, PyTorch's accumulation type on the CPU)
    and rounded once to ``d``. NumPy's float arange adds a rounded step instead, which puts
    float32 results an ulp off (and float64 ones too, a step that is not a double's sum)."""
    if d.is_integer:  # (PyTorch's: the ends and step cast to the integer dtype first)
        start, end, step = (math.trunc(v) for v in (start, end, step))
    if step == 0:
        raise ArgumentError("step must be nonzero", op="arange")
    if (float(end) - float(start)) * float(step) < 0:  # (an empty range is fine: end == start)
        raise ArgumentError(
            f"upper bound and lower bound inconsistent with step sign: start={start}, "
            f"end={end}, step={step}",
            op="arange",
        )
    if not d.is_floating_point and all(isinstance(v, (bool, int)) for v in (start, end, step)):
        return np.arange(start, end, step, dtype=d.np)
    count = max(math.ceil((float(end) - float(start)) / float(step)), 0)
    acc = np.float32 if d in (dt.float16, dt.bfloat16) else np.float64
    values = np.arange(count, dtype=acc) * acc(step) + acc(start)
    return values.astype(d.np)


def space_endpoints(name: str, start, end, dtype):
    """linspace's and logspace's ends as Python numbers (0-d tensors read) and the result's
    dtype: ``dtype``, else the default complex dtype where an end is complex (PyTorch's), else
    the default float dtype. Complex ends with a real ``dtype`` are refused, as PyTorch does."""
    ends = []
    for v in (start, end):
        if hasattr(v, "item") and getattr(v, "ndim", None) == 0:
            v = v.item()
        if not isinstance(v, (bool, int, float, complex, np.number)):
            raise ArgumentTypeError(
                f"{name}: start and end must be numbers or 0-d tensors, got {v!r}"
            )
        ends.append(complex(v) if isinstance(v, np.complexfloating) else v)
    is_complex = any(isinstance(v, complex) for v in ends)
    if dtype is None:
        return ends, dt.get_default_complex_dtype() if is_complex else dt.get_default_dtype()
    d = dt.as_dtype(dtype)
    if is_complex and not d.is_complex:
        raise DTypeError(
            f"complex ends {ends[0]!r} and {ends[1]!r} cannot be cast safely to {d}", op=name
        )
    return ends, d


def _linspace_items(start, end, steps, dtype, requires_grad):
    """linspace between ends of which one is a traced ``.item()`` (ops/_item_scalars.py): the
    ends' graph values in float64 (complex128), each half stepped from its own end as
    PyTorch's kernel does, cast to the result dtype."""
    kinds = [v.kind if is_traced(v) else (3 if isinstance(v, complex) else 2) for v in (start, end)]
    d = (
        dt.as_dtype(dtype)
        if dtype is not None
        else (dt.get_default_complex_dtype() if 3 in kinds else dt.get_default_dtype())
    )
    wide = dt.complex128 if d.is_complex or 3 in kinds else dt.float64
    a, b = (v.tensor_for(wide) if is_traced(v) else E.tensor(v, dtype=wide) for v in (start, end))
    steps = int(steps)
    index = E.arange(steps, dtype=dt.float64)
    step = (b - a) / max(steps - 1, 1)
    halfway = steps // 2 if steps > 1 else 1  # (one step: the start)
    values = E.where(index < halfway, a + step * index, b - step * (steps - 1 - index))
    out = E.cast(values, d) if values.dtype is not d else values
    return out.requires_grad_() if requires_grad else out


@export
def linspace(start, end, steps: int, *, dtype=None, requires_grad=False):
    if is_traced(start) or is_traced(end):
        return _linspace_items(start, end, steps, dtype, requires_grad)
    (start, end), d = space_endpoints("linspace", start, end, dtype)
    refuse_limited("linspace", d)
    if d.is_complex or isinstance(start, complex) or isinstance(end, complex):
        wide = np.complex128 if d.is_complex else np.float64
        out = constant(np.linspace(start, end, steps, dtype=wide).astype(d.np))
    elif isinstance(steps, SymDim):  # (a graph's symbolic size: the values made as it runs)
        out = apply(_LINSPACE, start=float(start), end=float(end), steps=steps, dtype=d)
    else:  # (PyTorch's kernel's rounding, bit for bit)
        out = constant(linspace_values(float(start), float(end), int(steps), d.np))
    return out.requires_grad_() if requires_grad else out


# ``linspace(a, b, x.size(1))`` in a graph over symbolic sizes: a creation op whose count is
# the size at run time (a concrete count is a constant, as above)
_LINSPACE = register(
    OpDef(
        name="linspace",
        kind="creation",
        infer=lambda *, start, end, steps, dtype: TensorType((steps,), dtype),
        kernel=lambda *, start, end, steps, dtype: linspace_values(
            start, end, int(steps), dtype.np
        ),
        cost=memory_cost,
        doc="linspace(start, end, steps, dtype): PyTorch's evenly spaced values, its rounding",
    )
)


@export
def eye(n: int, m: int | None = None, *, dtype=None, requires_grad=False):
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    out = constant(np.eye(n, m, dtype=d.np))
    return out.requires_grad_() if requires_grad else out
