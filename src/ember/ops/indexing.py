"""Indexing: ``x[index]`` and ``x[index] = value`` (masked_fill, take, nonzero and other
selections built on them live in ops/selection.py).

Primitives (each adjoint pair is the other's VJP, so higher-order gradients never end):

* ``getitem`` / ``getitem_backward``: basic indexing (ints, slices with any step, None) is a
  NumPy *view* of its input; its adjoint writes the gradient into zeros of the input's shape.
* ``index`` / ``index_backward``: advanced indexing by integer tensors and bool masks (a copy);
  its adjoint scatter-adds into zeros, so gradients of repeated indices accumulate.
* ``index_put``: a new tensor equal to x with the indexed positions set to a (broadcast) value;
  ``Tensor.__setitem__`` runs it through the in-place protocol.

Index tensors and masks are operands of these ops (a graph can feed them); everything else about
an index is the canonical ``index``/``spec`` attribute described in ``_index_plan``. A bool mask's
number of selected elements is data-dependent: the public functions read it from the mask in
eager mode and record it in the attribute, and the kernels check it, so shape rules stay pure.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..types import TensorType
from . import api as E
from ._index_plan import (
    FULL,
    IndexOutOfRangeError,
    advanced_shape,
    basic_shape,
    numpy_advanced,
    numpy_basic,
    parse_basic,
    parse_index,
    split_stages,
)
from ._registry import OpDef, TensorBase, apply, export, register
from ._scatter_kernels import add_slices
from ._util import broadcast_shapes, fmt_shape, memory_cost, same_type
from .elementwise import to_tensor

# ---------------------------------------------------------------------------- basic indexing


def _getitem_infer(x, *, index):
    return TensorType(basic_shape("getitem", tuple(x.shape), index), x.dtype)


def _getitem_kernel(x, *, index):
    # the trailing Ellipsis keeps a full selection a 0-d view instead of a NumPy scalar copy
    return x[numpy_basic(index) + (Ellipsis,)]


def _getitem_backward_infer(g, *, index, in_shape):
    expected = basic_shape("getitem_backward", in_shape, index)
    if tuple(g.shape) != expected:
        raise ShapeError(
            f"gradient of shape {fmt_shape(g.shape)} does not match the indexed shape "
            f"{fmt_shape(expected)} of a tensor of shape {fmt_shape(in_shape)}",
            op="getitem_backward",
        )
    return TensorType(tuple(in_shape), g.dtype)


def _getitem_backward_kernel(g, *, index, in_shape):
    out = np.zeros(in_shape, dtype=g.dtype)
    out[numpy_basic(index) + (Ellipsis,)] = g  # basic indexes never repeat a position
    return out


GETITEM = register(
    OpDef(
        name="getitem",
        kind="shape",
        infer=_getitem_infer,
        kernel=_getitem_kernel,
        vjp=lambda c, g: (
            apply(
                _GETITEM_BACKWARD, g, index=c.attrs["index"], in_shape=tuple(c.in_types[0].shape)
            ),
        ),
        cost=memory_cost,
        save_inputs=(),
        view=True,
        doc="getitem(x, index): basic indexing (ints, slices, None) as a view; index is the "
        "canonical entry tuple of ops/_index_plan.py",
    )
)

_GETITEM_BACKWARD = register(
    OpDef(
        name="getitem_backward",
        kind="shape",
        infer=_getitem_backward_infer,
        kernel=_getitem_backward_kernel,
        vjp=lambda c, g: (apply(GETITEM, g, index=c.attrs["index"]),),
        cost=memory_cost,
        save_inputs=(),
        doc="getitem_backward(g, index, in_shape): zeros of in_shape with g written at index "
        "(the adjoint of getitem)",
    )
)


# ------------------------------------------------------------------------- advanced indexing


def _index_infer(x, *indices, spec):
    return TensorType(advanced_shape("index", tuple(x.shape), spec, indices), x.dtype)


def _single_axis(spec):
    """The axis of the only index tensor when every other entry is a full slice, else None."""
    if spec and spec[-1] == ("tensor",) and all(e == FULL for e in spec[:-1]):
        return len(spec) - 1
    return None


def _out_of_range(op, exc, shape):
    return IndexOutOfRangeError(f"{exc} (tensor shape {fmt_shape(shape)})", op=op)


def _check_masks(op, spec, indices):
    for e, a in zip((e for e in spec if e != FULL), indices):
        if e[0] == "mask" and int(np.count_nonzero(a)) != e[1]:
            raise ShapeError(
                f"the mask selects {int(np.count_nonzero(a))} elements but the op was built for "
                f"{e[1]}; a mask's count is fixed when the op is recorded",
                op=op,
            )


def _index_kernel(x, *indices, spec):
    _check_masks("index", spec, indices)
    try:
        axis = _single_axis(spec)
        if axis is not None:  # np.take is the fastest gather along one axis
            return np.take(x, indices[0], axis=axis)
        return x[numpy_advanced(spec, indices)]
    except IndexError as exc:
        raise _out_of_range("index", exc, x.shape) from None


def _index_backward_infer(g, *indices, spec, in_shape):
    expected = advanced_shape("index_backward", tuple(in_shape), spec, indices)
    if tuple(g.shape) != expected:
        raise ShapeError(
            f"gradient of shape {fmt_shape(g.shape)} does not match the indexed shape "
            f"{fmt_shape(expected)} of a tensor of shape {fmt_shape(in_shape)}",
            op="index_backward",
        )
    return TensorType(tuple(in_shape), g.dtype)


def _index_backward_kernel(g, *indices, spec, in_shape):
    try:
        axis = _single_axis(spec)
        if axis is not None:  # one index tensor: a sparse-matrix scatter-add (embeddings)
            return add_slices(tuple(in_shape), axis, indices[0], g)
        out = np.zeros(in_shape, dtype=g.dtype)
        if any(e != FULL and e[0] == "tensor" for e in spec):
            np.add.at(out, numpy_advanced(spec, indices), g)  # repeated indices accumulate
        else:
            out[numpy_advanced(spec, indices)] = g  # masks select each position at most once
    except IndexError as exc:
        raise _out_of_range("index_backward", exc, in_shape) from None
    return out


def _index_backward_fast(g, *indices, spec, in_shape):
    """One index tensor along one axis: the C scatter-add (kernels/cindex.py), or None."""
    axis = _single_axis(spec)
    if axis is None:
        return None
    from ..kernels import cindex

    return cindex.add_slices(tuple(in_shape), axis, indices[0], g)


def _index_vjp(c, g):
    spec = c.attrs["spec"]
    indices = c.inputs[1:]
    gx = apply(_INDEX_BACKWARD, g, *indices, spec=spec, in_shape=tuple(c.in_types[0].shape))
    return (gx,) + (None,) * len(indices)


_INDEX = register(
    OpDef(
        name="index",
        kind="index",
        infer=_index_infer,
        kernel=_index_kernel,
        vjp=_index_vjp,
        cost=memory_cost,
        doc="index(x, *indices, spec): advanced indexing by integer tensors and bool masks "
        "(NumPy placement of the advanced dimensions). A mask's output size is data-dependent: "
        "spec records its count, read from the mask when the call is made.",
    )
)

_INDEX_BACKWARD = register(
    OpDef(
        name="index_backward",
        kind="index",
        infer=_index_backward_infer,
        kernel=_index_backward_kernel,
        fast=_index_backward_fast,
        vjp=lambda c, g: (
            (apply(_INDEX, g, *c.inputs[1:], spec=c.attrs["spec"]),)
            + (None,) * (len(c.in_types) - 1)
        ),
        cost=memory_cost,
        doc="index_backward(g, *indices, spec, in_shape): zeros of in_shape with g scatter-added "
        "at the indices (repeats accumulate); the adjoint of index",
    )
)


# ------------------------------------------------------------------- composing the two stages


def _index_entries(x, entries, operands):
    """``x[index]`` from canonical entries: the basic stage (a view), then the advanced one."""
    basic, spec = split_stages(entries, tuple(x.shape), operands)
    if not spec:
        return apply(GETITEM, x, index=entries)
    y = apply(GETITEM, x, index=basic) if basic else x
    return apply(_INDEX, y, *operands, spec=spec)


def _scatter_entries(v, shape, entries, operands):
    """The adjoint of `_index_entries`: v (of the indexed shape) summed into zeros of shape."""
    basic, spec = split_stages(entries, shape, operands)
    if spec:
        inner = basic_shape("index_put", shape, basic)
        v = apply(_INDEX_BACKWARD, v, *operands, spec=spec, in_shape=inner)
        if not basic:
            return v
        entries = basic
    return apply(_GETITEM_BACKWARD, v, index=entries, in_shape=tuple(shape))


def _indexed_shape(op, shape, entries, operands) -> tuple:
    basic, spec = split_stages(entries, shape, operands)
    if not spec:
        return basic_shape(op, shape, entries)
    return advanced_shape(op, basic_shape(op, shape, basic), spec, operands)


@export(name="getitem")
def getitem(x, index):
    """``x[index]`` with NumPy/PyTorch semantics: ints (negative count from the end), slices with
    any step, None, Ellipsis, integer tensors/lists/arrays and bool masks. Basic indexing returns
    a view sharing memory with x; advanced indexing a copy. Gradients scatter-add back."""
    x = to_tensor(x)
    shape = tuple(x.shape)
    entries = parse_basic("getitem", shape, index)
    if entries is not None:  # ints, slices, None and Ellipsis only: one view
        return apply(GETITEM, x, index=entries)
    if isinstance(index, TensorBase) and index.dtype.is_integer:  # x[idx]: one gather
        return apply(_INDEX, x, index, spec=(("tensor",),))
    entries, operands = parse_index("getitem", shape, index)
    return _index_entries(x, entries, operands)


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


_INDEX_PUT = register(
    OpDef(
        name="index_put",
        kind="index",
        infer=_index_put_infer,
        kernel=_index_put_kernel,
        vjp=_index_put_vjp,
        cost=memory_cost,
        doc="index_put(x, value, *indices, index): a copy of x with x[index] = value "
        "(broadcast); index holds canonical entries, the index tensors are operands",
    )
)


@export(method=True, inplace=True)
def index_put(x, index, value, accumulate: bool = False):
    """A new tensor equal to ``x`` with ``x[index]`` set to ``value`` (broadcast and cast to x's
    dtype); with ``accumulate=True`` the value is added instead, summing repeated indices.
    ``index`` is anything ``x[index]`` accepts, including PyTorch's tuple of index tensors.
    ``x[index] = value`` and ``x.index_put_(index, value)`` write the result into x."""
    x = to_tensor(x)
    entries, operands = parse_index("index_put", tuple(x.shape), index)
    value = to_tensor(value, x.dtype)
    if not accumulate:
        return apply(_INDEX_PUT, x, value, *operands, index=entries)
    target = _indexed_shape("index_put", tuple(x.shape), entries, operands)
    vshape = _strip_leading_ones(value.shape, len(target))
    value = E.broadcast_to(E.reshape(value, vshape), target)
    return x + _scatter_entries(value, tuple(x.shape), entries, operands)
