"""Indexed assignment: the ``index_put`` primitive, a new tensor equal to x with the indexed
positions set to (or, with ``accumulate``, increased by) a broadcast value, and the public
``index_put``/``index_put_`` that ``Tensor.__setitem__`` runs through the in-place protocol.
Reading (``x[index]``) is in ops/indexing.py, the index plans in ops/_index_plan.py.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..symbolic import SymDim
from ..types import TensorType
from . import api as E
from ._index_plan import (
    advanced_shape,
    numpy_advanced,
    numpy_basic,
    parse_index,
    split_stages,
)
from ._overlap import ANY as OVERLAP_ANY
from ._registry import OpDef, TensorBase, apply, export, register
from ._rules import Complex
from ._util import (
    broadcast_shapes,
    check_fill_value,
    fmt_shape,
    memory_cost,
    numel,
    require_source_dtype,
    same_type,
)
from .indexing import (
    _INDEX,
    GETITEM,
    _check_masks,
    _index_entries,
    _indexed_shape,
    _out_of_range,
    _scatter_entries,
)
from .promotion import to_tensor

# -------------------------------------------------------------------------------- index_put


def _strip_leading_ones(shape, ndim) -> tuple:
    """Drop leading size-1 dimensions beyond ``ndim`` (assignment ignores them, as in NumPy)."""
    shape = tuple(shape)
    while len(shape) > ndim and shape[0] == 1:
        shape = shape[1:]
    return shape


def _index_put_infer(x, value, *indices, index):
    if value.dtype is not x.dtype:
        raise DTypeError(
            f"value dtype {value.dtype} differs from the tensor's {x.dtype}", op="index_put"
        )
    target = _indexed_shape("index_put", tuple(x.shape), index, indices)
    vshape = _strip_leading_ones(value.shape, len(target))
    try:
        fits = broadcast_shapes("index_put", vshape, target) == target
    except ShapeError:
        fits = False
    if not fits:
        raise ShapeError(
            f"cannot assign a value of shape {fmt_shape(value.shape)} to the indexed region of "
            f"shape {fmt_shape(target)} (tensor shape {fmt_shape(x.shape)})",
            op="index_put",
        )
    return same_type(x)


def _index_put_kernel(x, value, *indices, index):
    out = x.copy()
    basic, spec = split_stages(index, x.shape, indices)
    if not spec:
        target = numpy_basic(index) + (Ellipsis,)
        out[target] = value.reshape(_strip_leading_ones(value.shape, out[target].ndim))
        return out
    _check_masks("index_put", spec, indices)
    view = out[numpy_basic(basic) + (Ellipsis,)] if basic else out  # a view: writes reach out
    where = numpy_advanced(spec, indices)
    types = [TensorType(a.shape, dt.from_numpy_dtype(a.dtype)) for a in indices]
    target_ndim = len(advanced_shape("index_put", view.shape, spec, types))
    try:
        view[where] = value.reshape(_strip_leading_ones(value.shape, target_ndim))
    except IndexError as exc:
        raise _out_of_range("index_put", exc, x.shape) from None
    return out


def _index_put_vjp(c, g):
    index = c.attrs["index"]
    indices = c.inputs[2:]
    nx, nv = c.needs_input_grad[:2]
    gx = gv = None
    if nx:  # the overwritten positions do not reach the output
        zero = E.zeros((), dtype=g.dtype)
        gx = apply(_INDEX_PUT, g, zero, *indices, index=index)
    if nv:
        vshape = tuple(c.in_types[1].shape)
        taken = _index_entries(g, index, indices)
        gv = E.reshape(E.sum_to(taken, _strip_leading_ones(vshape, taken.ndim)), vshape)
    return (gx, gv) + (None,) * len(indices)


def _position_grid(e, shape) -> str:
    """Each element's position, ``shape + (ndim,)`` int64: a constant, or, where a size is
    symbolic, built from the sizes when the model runs (one Range per dimension, expanded)."""
    if not any(isinstance(n, SymDim) for n in shape):
        return e.constant(np.moveaxis(np.indices(shape, dtype=np.int64), 0, -1).copy())
    full, zero, one = e.shape(tuple(shape) + (1,)), e.scalar(0, dt.int64), e.scalar(1, dt.int64)
    axes = []
    for d, n in enumerate(shape):
        count = e.node("Reshape", [e.dim(n), e.ints(())])
        view = [1] * (len(shape) + 1)
        view[d] = -1
        steps = e.node("Reshape", [e.node("Range", [zero, count, one]), e.ints(view)])
        axes.append(e.node("Expand", [steps, full]))
    return e.node("Concat", axes, axis=-1)


def _onnx_index_put(e):
    """ScatterND of the value at the positions the index selects: the index applied, by the
    indexing ops' own rules, to a constant holding each element's position."""
    x, value, *indices = e.inputs
    shape = tuple(e.in_types[0].shape)
    grid_type = TensorType(shape + (len(shape),), dt.int64)
    index_types = list(e.in_types[2:])
    basic, spec = split_stages(e.attrs["index"], shape, index_types)
    positions, t = _position_grid(e, shape), grid_type
    if basic or not spec:
        attrs = {"index": basic if spec else e.attrs["index"]}
        positions = e.call(GETITEM, [positions], attrs, in_types=[t])[0]
        t = GETITEM.infer(t, **attrs)
    if spec:
        positions = e.call(
            _INDEX, [positions, *indices], {"spec": spec}, in_types=[t, *index_types]
        )[0]
        t = _INDEX.infer(t, *index_types, spec=spec)
    target = tuple(t.shape[:-1])
    values = e.node("Expand", [value, e.shape(target)])
    return e.node("ScatterND", [x, positions, values])


_INDEX_PUT = register(
    OpDef(
        name="index_put",
        complex=Complex.GRADIENT,
        onnx=_onnx_index_put,
        kind="index",
        infer=_index_put_infer,
        kernel=_index_put_kernel,
        vjp=_index_put_vjp,
        cost=memory_cost,
        doc="index_put(x, value, *indices, index): a copy of x with x[index] = value "
        "(broadcast); index holds canonical entries, the index tensors are operands",
    )
)


def _masked_put(x, index, value, accumulate: bool):
    """``x[mask] = value`` for one bool mask over x's leading dimensions and a value that
    broadcasts over the dimensions the mask leaves (a number, ``x[rows] = row_vector``): a
    select, whose shape does not depend on how many elements the mask holds, so a captured
    graph records it too (``scores[mask] = -inf``). None for any other index."""
    mask = index[0] if isinstance(index, tuple) and len(index) == 1 else index
    if not (isinstance(mask, TensorBase) and mask.dtype.is_bool and 0 < mask.ndim <= x.ndim):
        return None
    if tuple(mask.shape) != tuple(x.shape[: mask.ndim]):
        return None  # parse_index names the mismatch
    value = to_tensor(value, x.dtype)
    rest = tuple(x.shape[mask.ndim :])
    vshape = _strip_leading_ones(value.shape, len(rest))
    if len(vshape) > len(rest) or any(v not in (1, r) for v, r in zip(vshape[::-1], rest[::-1])):
        return None  # one value per selected element: its count depends on the mask
    value = E.reshape(value, vshape)
    mask = E.reshape(mask, tuple(mask.shape) + (1,) * len(rest))
    if accumulate:
        return x + E.where(mask, value, E.zeros((), dtype=x.dtype))
    return E.where(mask, value, x)


def _check_value_dtype(x, index, value, accumulate: bool) -> None:
    """PyTorch's index_put takes a tensor value only in x's dtype. A basic index (ints, slices,
    0-d integer tensors) writes through a view with ``copy_``, which casts, and one bool mask
    with a one-element value is ``masked_fill``, which casts too."""
    items = index if isinstance(index, tuple) else (index,)
    advanced = [i for i in items if _is_advanced(i)]
    if not advanced:
        return
    if not accumulate and len(items) == 1 and _is_mask(items[0]) and _numel(value) == 1:
        return
    require_source_dtype("index_put", x, value, "value")


def _is_advanced(item) -> bool:
    if isinstance(item, TensorBase):
        return item.ndim > 0 or item.dtype.is_bool
    return isinstance(item, (list, np.ndarray))


def _is_mask(item) -> bool:
    if isinstance(item, TensorBase):
        return item.dtype.is_bool
    return isinstance(item, list) and bool(item) and all(isinstance(b, bool) for b in item)


def _numel(value) -> int:
    return numel(value.shape) if isinstance(value, TensorBase) else 1


@export(method=True, inplace=True)
def index_put(x, index, value, accumulate: bool = False):
    """A new tensor equal to ``x`` with ``x[index]`` set to ``value`` (broadcast and cast to x's
    dtype); with ``accumulate=True`` the value is added instead, summing repeated indices.
    ``index`` is anything ``x[index]`` accepts, including PyTorch's tuple of index tensors.
    ``x[index] = value`` and ``x.index_put_(index, value)`` write the result into x."""
    x = to_tensor(x)
    _check_value_dtype(x, index, value, accumulate)
    # (x[i] = 300 into uint8: PyTorch refuses; so 1e39 into float32, but not 1e5 into float16)
    check_fill_value("index_put", value, x.dtype, floats="float32")
    selected = _masked_put(x, index, value, accumulate)
    if selected is not None:
        return selected
    entries, operands = parse_index("index_put", tuple(x.shape), index)
    value = to_tensor(value, x.dtype)
    if not accumulate:
        return apply(_INDEX_PUT, x, value, *operands, index=entries)
    target = _indexed_shape("index_put", tuple(x.shape), entries, operands)
    vshape = _strip_leading_ones(value.shape, len(target))
    value = E.broadcast_to(E.reshape(value, vshape), target)
    return x + _scatter_entries(value, tuple(x.shape), entries, operands)


# PyTorch's index_put_ refuses a value or index sharing the written memory at all
# (ops/_overlap.py)
index_put.overlap_refused = OVERLAP_ANY
