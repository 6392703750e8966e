"""Indexing: ``x[index]`` (masked_fill, take, nonzero and other
selections built on them live in ops/selection.py).

Primitives (each adjoint pair is the other's VJP, so higher-order gradients never end):

* ``getitem`` / ``getitem_backward``: basic indexing (ints, slices with any step, None) is a
  NumPy *view* of its input; its adjoint writes the gradient into zeros of the input's shape.
* ``index`` / ``index_backward``: advanced indexing by integer tensors and bool masks (a copy);
  its adjoint scatter-adds into zeros, so gradients of repeated indices accumulate.

``index_put`` (``x[index] = value``) is in ops/index_put.py.

Index tensors and masks are operands of these ops (a graph can feed them); everything else about
an index is the canonical ``index``/``spec`` attribute described in ``_index_plan``. A bool mask's
number of selected elements is data-dependent: the public functions read it from the mask in
eager mode and record it in the attribute, and the kernels check it, so shape rules stay pure.
"""

from __future__ import annotations

import functools

import numpy as np

from .. import dtypes as dt
from ..errors import ShapeError
from ..symbolic import SymDim
from ..types import TensorType
from . import _onnx
from . import _onnx_complex as cx
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
from ._rules import Complex
from ._scatter_kernels import add_slices
from ._util import broadcast_shapes, fmt_shape, memory_cost
from .promotion import to_tensor

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


_ONNX_END = 2**62  # past any dimension's end (ONNX clamps slice bounds)


def _onnx_basic_plan(e, entries, shape):
    """Slice (starts, ends, axes, steps), the input axes ints remove and the result axes None
    adds, for the canonical entries of a basic index."""
    starts, ends, axes, steps, dropped, added = [], [], [], [], [], []
    dim = out = 0
    for entry in entries:
        if entry is None:
            added.append(out)
            out += 1
            continue
        if isinstance(entry, (int, SymDim)):  # (x[:, -1] of a symbolic size T: T-1)
            starts.append(entry), ends.append(entry + 1), axes.append(dim), steps.append(1)
            dropped.append(dim)
            dim += 1
            continue
        _, start, stop, step = entry
        if not (step == 1 and start == 0 and stop == shape[dim]):
            # (a symbolic bound is a size, computed at run time; a negative step's end
            # before index 0 is -1 in the entry, which ONNX would read from the end)
            if not isinstance(stop, SymDim) and stop < 0:
                stop = -_ONNX_END
            starts.append(start), ends.append(stop), axes.append(dim), steps.append(step)
        dim += 1
        out += 1
    return (starts, ends, axes, steps), dropped, added


def _onnx_getitem(e):
    x = e.inputs[0]
    (starts, ends, axes, steps), dropped, added = _onnx_basic_plan(
        e, e.attrs["index"], e.in_types[0].shape
    )
    if axes:
        bounds = [e.shape(starts), e.shape(ends)]
        x = e.node("Slice", [x, *bounds, e.ints(axes), e.ints(steps)])
    x = _onnx.squeeze(e, x, dropped)
    x = _onnx.unsqueeze(e, x, added)
    return x if x != e.inputs[0] else e.node("Identity", [x])


def _getitem_node_name(attrs, in_types) -> str:
    """PyTorch indexes entry by entry, so its node is the last entry's that does something:
    select (an int), slice, unsqueeze (None); none at all (``x[...]``): an alias."""
    shape = in_types[0].shape
    last, dim = "AliasBackward0", 0
    for entry in attrs["index"]:
        if entry is None:
            last = "UnsqueezeBackward0"
            continue
        if type(entry) is int or isinstance(entry, SymDim):
            last = "SelectBackward0"
        elif entry != ("slice", 0, shape[dim], 1):
            last = "SliceBackward0"
        dim += 1
    return last


GETITEM = register(
    OpDef(
        name="getitem",
        quantized="per_tensor",  # (moves elements: ops/qtensor.py)
        grad_fn=_getitem_node_name,
        float8=True,
        complex=Complex.GRADIENT,
        onnx=cx.pairs(_onnx_getitem, _onnx_getitem),  # (its axes count from the front)
        kind="shape",
        infer=_getitem_infer,
        cached_infer=True,
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


def _onnx_scatter_basic(e, g, entries, in_shape):
    """zeros of in_shape with ``g`` written at a basic index: ScatterND at the positions the
    index selects, worked out now (the shape is static)."""
    if any(isinstance(n, SymDim) for n in in_shape):
        e.unsupported("for a strided slice of a symbolic shape")
    positions = np.indices(tuple(in_shape), dtype=np.int64)
    picked = np.moveaxis(positions, 0, -1)[numpy_basic(entries) + (Ellipsis,)]
    zeros = e.node("ConstantOfShape", [e.ints(in_shape)], value=np.zeros(1, e.in_types[0].dtype.np))
    return e.node("ScatterND", [zeros, e.constant(np.ascontiguousarray(picked)), g])


def _onnx_getitem_backward(e):
    g = e.inputs[0]
    in_shape = e.attrs["in_shape"]
    (starts, ends, axes, steps), dropped, added = _onnx_basic_plan(e, e.attrs["index"], in_shape)
    if any(s != 1 for s in steps):
        return _onnx_scatter_basic(e, g, e.attrs["index"], in_shape)
    # undo the new axes and the ints' removals, then pad the slice back to the input's shape
    g = _onnx.squeeze(e, g, added)
    g = _onnx.unsqueeze(e, g, dropped)
    before, after = [0] * len(in_shape), [0] * len(in_shape)
    for start, end, axis in zip(starts, ends, axes):
        n = in_shape[axis]
        if any(isinstance(v, SymDim) for v in (n, start, end)):
            e.unsupported("for a slice of a symbolic dimension")
        before[axis], after[axis] = start, n - min(end, n)
    if not any(before) and not any(after):
        return e.node("Identity", [g])
    return e.node("Pad", [g, e.ints(before + after), e.scalar(0, e.in_types[0].dtype)])


_GETITEM_BACKWARD = register(
    OpDef(
        name="getitem_backward",
        complex=Complex.GRADIENT,
        onnx=_onnx_getitem_backward,
        kind="shape",
        infer=_getitem_backward_infer,
        cached_infer=True,
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


def _index_fast(x, *indices, spec):
    """One index tensor along the last axis (an interpolation's column selection): the C
    gather of kernels/cindex.py, rows shared over the thread pool, NumPy's bits; None
    elsewhere (NumPy copies whole slices as fast) and for indices it must wrap or report."""
    axis = _single_axis(spec)
    if axis is None or indices[0].dtype.kind not in "iu":
        return None
    for d in x.shape[axis + 1 :]:  # (whole slices: NumPy's, declined before the kernel asks)
        if d != 1:
            return None
    return _cindex().take(x, indices[0], axis)


@functools.cache
def _cindex():
    """kernels/cindex.py, imported at the first call (an import statement in a fast rule costs
    each small lookup half a microsecond)."""
    from ..kernels import cindex

    return cindex


def _index_c_step(node):
    """The C graph runner's step of one index tensor along one axis (an embedding lookup, an
    imported Gather): kernels/cgather.py, np.take's results; an index out of range raises this
    kernel's error through the runner. None for masks and several index tensors."""
    axis = _single_axis(node.attrs["spec"])  # (a bool index: declined by its dtype)
    if axis is None or len(node.inputs) != 2:
        return None
    from ..kernels import cgather

    x, idx = (v.type for v in node.inputs)
    return cgather.gather_c_step(tuple(x.shape), x.dtype.np, tuple(idx.shape), idx.dtype.np, axis)


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
    return _cindex().add_slices(tuple(in_shape), axis, indices[0], g)


def _index_vjp(c, g):
    spec = c.attrs["spec"]
    indices = c.inputs[1:]
    gx = apply(_INDEX_BACKWARD, g, *indices, spec=spec, in_shape=tuple(c.in_types[0].shape))
    return (gx,) + (None,) * len(indices)


def _onnx_advanced_axes(e, spec):
    """The axes the index tensors select along, when they are consecutive (NumPy then keeps
    the result's advanced dimensions in place); masks have no ONNX form."""
    axes = [d for d, entry in enumerate(spec) if entry != FULL]
    if any(spec[d][0] != "tensor" for d in axes):
        e.unsupported("with a bool mask (its count is data-dependent)")
    return axes


def _onnx_in_place(axes) -> bool:
    """Whether the advanced dimensions stay where the indexed ones were (NumPy's rule: when
    they are adjacent); else they go first."""
    return axes == list(range(axes[0], axes[-1] + 1))


def _onnx_stacked(e, indices, types, shape, axes):
    """The index tensors broadcast together, made non-negative, stacked on a last axis (the
    index tuples GatherND and ScatterND read)."""
    broadcast = broadcast_shapes("index", *(t.shape for t in types))
    cols = []
    for name, t, axis in zip(indices, types, axes):
        name = e.cast(name, dt.int64) if t.dtype is not dt.int64 else name
        # 0-d, so that a 0-d index (x[:, i] with i a tensor) stays 0-d: a 1-D size would
        # broadcast it to one element and GatherND would keep a dimension of 1
        size = e.node("Reshape", [e.dim(shape[axis]), e.shape(())])
        zero = e.scalar(0, dt.int64)
        name = e.node("Where", [e.node("Less", [name, zero]), e.node("Add", [name, size]), name])
        name = e.node("Expand", [name, e.shape(broadcast)])
        cols.append(_onnx.unsqueeze(e, name, [len(broadcast)]))
    return e.node("Concat", cols, axis=-1) if len(cols) > 1 else cols[0], broadcast


def _onnx_index(e):
    x, *indices = e.inputs
    spec = e.attrs["spec"]
    shape = e.in_types[0].shape
    axes = _onnx_advanced_axes(e, spec)
    nd, first = len(shape), axes[0]
    stacked, broadcast = _onnx_stacked(e, indices, e.in_types[1:], shape, axes)
    # GatherND reads leading dimensions: bring the indexed ones first, and the result back
    order = axes + [d for d in range(nd) if d not in axes]
    moved = e.node("Transpose", [x], perm=order) if order != list(range(nd)) else x
    out = e.node("GatherND", [moved, stacked])
    k = len(broadcast)
    if first == 0 or not _onnx_in_place(axes):
        return out
    rest = nd - len(axes)  # the result is (*broadcast, *the other dimensions in order)
    perm = list(range(k, k + first)) + list(range(k)) + list(range(k + first, k + rest))
    return e.node("Transpose", [out], perm=perm)


_INDEX = register(
    OpDef(
        name="index",
        quantized="per_tensor",  # (moves elements: ops/qtensor.py)
        float8=True,
        complex=Complex.GRADIENT,
        onnx=_onnx_index,
        kind="index",
        infer=_index_infer,
        cached_infer=True,
        kernel=_index_kernel,
        fast=_index_fast,
        c_step=_index_c_step,
        vjp=_index_vjp,
        cost=memory_cost,
        doc="index(x, *indices, spec): advanced indexing by integer tensors and bool masks "
        "(NumPy placement of the advanced dimensions). A mask's output size is data-dependent: "
        "spec records its count, read from the mask when the call is made.",
    )
)


def _onnx_index_backward(e):
    if e.opset < 16:
        e.unsupported("before opset 16 (ScatterND's reduction)")
    g, *indices = e.inputs
    spec, in_shape = e.attrs["spec"], tuple(e.attrs["in_shape"])
    axes = _onnx_advanced_axes(e, spec)
    nd, first = len(in_shape), axes[0]
    dtype = e.in_types[0].dtype
    order = axes + [d for d in range(nd) if d not in axes]
    moved_shape = [in_shape[d] for d in order]
    zeros = e.node("ConstantOfShape", [e.shape(moved_shape)], value=np.zeros(1, dtype.np))
    stacked, broadcast = _onnx_stacked(e, indices, e.in_types[1:], in_shape, axes)
    k, rest = len(broadcast), nd - len(axes)
    if first and _onnx_in_place(axes):  # g holds them at the first indexed axis: move them
        perm = list(range(first, first + k)) + list(range(first)) + list(range(first + k, k + rest))
        g = e.node("Transpose", [g], perm=perm)
    out = e.node("ScatterND", [zeros, stacked, g], reduction="add")
    back = [order.index(d) for d in range(nd)]
    return e.node("Transpose", [out], perm=back) if back != list(range(nd)) else out


_INDEX_BACKWARD = register(
    OpDef(
        name="index_backward",
        complex=Complex.GRADIENT,
        onnx=_onnx_index_backward,
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
    data = getattr(x, "_data", None)  # (an eager tensor's array: its shape, no Size made)
    shape = data.shape if type(data) is np.ndarray else tuple(x.shape)
    entries = parse_basic("getitem", shape, index)
    if entries is not None:  # ints, slices, None and Ellipsis only: one view
        return apply(GETITEM, x, index=entries)
    if isinstance(index, TensorBase) and index.dtype.name in ("int64", "int32"):  # one gather
        return apply(_INDEX, x, index, spec=(("tensor",),))
    entries, operands = parse_index("getitem", shape, index)
    return _index_entries(x, entries, operands)
