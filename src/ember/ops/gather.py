"""Gathers and scatters along one dimension (PyTorch semantics): gather, scatter_add and scatter
as primitives; index_select, take_along_dim and one_hot built on them or on indexing.

``gather`` and ``scatter_add`` are mutual adjoints (each is the other's VJP); ``scatter`` (no
accumulation) has PyTorch's gradient: zero at the overwritten positions of x, and the gathered
gradient for src. The index tensor is an operand and never differentiated. As in PyTorch, the
index may be smaller than x (and src) in every dimension except ``dim``; only the leading part
is used. Negative index values count from the end, as in NumPy.
"""

from __future__ import annotations

import functools

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentTypeError, AxisError, DTypeError, ShapeError, UnsupportedError
from ..types import TensorType
from . import _batching
from . import api as E
from ._index_dtypes import check_index_dtype
from ._index_plan import FULL, IndexOutOfRangeError
from ._node_names import rename_node, renames
from ._overlap import ANY as OVERLAP_ANY
from ._registry import (
    OpDef,
    TensorBase,
    _state,
    apply,
    building_graph,
    eager_constant,
    export,
    is_traced,
    register,
)
from ._rules import Complex
from ._scatter_kernels import add_elements
from ._util import (
    check_fill_value,
    fmt_shape,
    memory_cost,
    normalize_axis,
    numel,
    require_int,
    require_source_dtype,
    same_type,
)
from .promotion import promote, to_tensor


@functools.cache
def _celements():
    """kernels/celements.py, imported at the first call (every eager gather:
    an import statement there costs each call half a microsecond)."""
    from ..kernels import celements

    return celements


# -------------------------------------------------------------------------------- shape rules


def _check_index(op, index, others, axis):
    """index has the rank of the others and is no larger outside ``axis`` (``others``: (name,
    type, also_along_axis) triples), of a dtype PyTorch's op takes (ops/_index_dtypes.py)."""
    check_index_dtype(op, index)
    for name, t, along_axis in others:
        if t.ndim != index.ndim:
            raise ShapeError(
                f"index of shape {fmt_shape(index.shape)} must have as many dimensions as "
                f"{name} of shape {fmt_shape(t.shape)}",
                op=op,
            )
        for d, (i, s) in enumerate(zip(index.shape, t.shape)):
            if (along_axis or d != axis) and _exceeds(i, s):
                raise ShapeError(
                    f"index of shape {fmt_shape(index.shape)} is larger than {name} of shape "
                    f"{fmt_shape(t.shape)} in dimension {d}",
                    op=op,
                )


def _exceeds(i, s) -> bool:
    """``i > s`` where that is known while the graph is built: a symbolic size against a number
    (a batch traced with ``TensorSpec((None, ...))``) is left to the run, as ONNX's Gather and
    PyTorch's dynamic shapes check it there."""
    try:
        return bool(i > s)
    except ShapeError:
        return False


def _leading(a, shape, skip=None):
    """The leading ``shape`` block of array a (all of dimension ``skip``); a view."""
    if a.shape == tuple(shape):
        return a
    return a[tuple(slice(None) if d == skip else slice(0, s) for d, s in enumerate(shape))]


def _wrap_index_error(op, shape):
    def wrap(exc):
        return IndexOutOfRangeError(f"{exc} (tensor shape {fmt_shape(shape)})", op=op)

    return wrap


# ------------------------------------------------------------------------------------ gather


def _gather_infer(x, index, *, axis):
    _check_index("gather", index, (("the input", x, False),), axis)
    return TensorType(tuple(index.shape), x.dtype)


def _gather_kernel(x, index, *, axis):
    try:
        return np.take_along_axis(_leading(x, index.shape, skip=axis), index, axis)
    except IndexError as exc:
        raise _wrap_index_error("gather", x.shape)(exc) from None


def _gather_fast(x, index, *, axis):
    """kernels/celements.py's one pass (the same copy), for an index of x's extent outside
    the axis; None otherwise, and where an index is out of range (NumPy's kernel names it)."""
    return _celements().gather(x, index, axis)


def _gather_vjp(c, g):
    index = c.inputs[1]
    axis = c.attrs["axis"]
    if building_graph() and _picks_one_per_row(c.in_types[0], index, g, axis):
        return _one_hot_grad(c.in_types[0], index, g, axis), None
    zeros = E.zeros(c.in_types[0].shape, dtype=g.dtype)
    return apply(_SCATTER_ADD, zeros, index, g, axis=axis), None


# class positions compared in float32 are exact below this count
_EXACT_POSITIONS = 2**24


def _picks_one_per_row(x_type, index, g, axis) -> bool:
    """Whether the gather picks one element per row along ``axis`` of a float tensor of its
    own extent elsewhere (cross-entropy's pick of each target's log-probability), with static
    sizes: its adjoint is then a select against the positions along ``axis``."""
    shape = tuple(x_type.shape)
    if not all(isinstance(d, int) for d in shape) or not g.dtype.is_floating_point:
        return False
    axis = axis % len(shape) if shape else 0
    want = shape[:axis] + (1,) + shape[axis + 1 :]
    return bool(shape) and tuple(index.shape) == want and 0 < shape[axis] < _EXACT_POSITIONS


def _one_hot_grad(x_type, index, g, axis):
    """``scatter_add(zeros, index, g)`` for one index per row, as ``where(position == index, g
    + 0, 0)``: the same values bit for bit (the zeros' +0.0 added, so a -0.0 gradient gives
    +0.0 as the scatter's sum does), and elementwise, so a graph's fused loops compute it where
    it is read instead of holding a dense tensor of mostly zeros (the logits' gradient of a
    cross-entropy over many classes). The forward gather checked the indices' range; negative
    ones count from the end, as there."""
    shape = tuple(x_type.shape)
    axis = axis % len(shape)
    n = shape[axis]
    wrapped = E.where(E.lt(index, 0), E.add(index, n), index)
    positions = E.reshape(
        E.arange(n, dtype=dt.float32), (1,) * axis + (n,) + (1,) * (len(shape) - axis - 1)
    )
    picked = E.eq(E.cast(wrapped, dt.float32), positions)
    return E.where(picked, E.add(g, 0.0), E.zeros((), dtype=g.dtype))


def _onnx_gather(e):
    return e.node("GatherElements", e.inputs, axis=e.attrs["axis"])


_GATHER = register(
    OpDef(
        name="gather",
        complex=Complex.GRADIENT,
        onnx=_onnx_gather,
        kind="index",
        infer=_gather_infer,
        kernel=_gather_kernel,
        fast=_gather_fast,
        vjp=_gather_vjp,
        cost=memory_cost,
        save_inputs=(1,),
        gathers=lambda attrs: attrs["axis"],
        doc="gather(x, index, axis): out[i][j] = x[index[i][j]][j] for axis 0 (PyTorch's gather)",
        batch=_batching.indexing_rule,
    )
)


# ------------------------------------------------------------------------- scatter_add/scatter


def _scatter_infer(name):
    def infer(x, index, src, *, axis):
        if src.dtype is not x.dtype:
            raise DTypeError(f"src dtype {src.dtype} differs from the input's {x.dtype}", op=name)
        _check_index(name, index, (("the input", x, False), ("src", src, True)), axis)
        return same_type(x)

    return infer


def _scatter_add_kernel(x, index, src, *, axis):
    out = x.copy()
    try:
        add_elements(out, axis, index, _leading(src, index.shape))
    except IndexError as exc:
        raise _wrap_index_error("scatter_add", x.shape)(exc) from None
    return out


def _scatter_add_fast(x, index, src, *, axis):
    """kernels/celements.py's one pass, adding in np.add.at's order (NumPy's bits); None
    where it does not apply or an index is out of range (NumPy's kernel then names it)."""
    from ..kernels import celements, cindex

    out = x.copy()
    src = _leading(src, index.shape)
    rows = _along_axis_only(index, x.shape, axis)
    if rows is not None and cindex.accumulate_slices(out, axis, rows, src):
        return out  # (whole slices: index_add's kernel, the same order of additions)
    return out if celements.scatter_add(out, index, src, axis) else None


def _along_axis_only(index: np.ndarray, shape: tuple, axis: int):
    """The 1-d index of a scatter whose ``index`` varies along ``axis`` only and spans every
    other axis of ``shape`` (``idx[:, None].expand(-1, d)``: each source slice added whole),
    or None."""
    if index.ndim != len(shape) or index.ndim < 2 or index.size == 0:
        return None
    for d in range(index.ndim):
        if d != axis and (index.shape[d] != shape[d] or (index.strides[d] and index.shape[d] > 1)):
            return None
    return index[tuple(slice(None) if d == axis else 0 for d in range(index.ndim))]


def _scatter_kernel(x, index, src, *, axis):
    out = x.copy()
    try:
        # a view of out's leading block, so the writes land in out
        np.put_along_axis(
            _leading(out, index.shape, skip=axis), index, _leading(src, index.shape), axis
        )
    except IndexError as exc:
        raise _wrap_index_error("scatter", x.shape)(exc) from None
    return out


def _gather_for_src(g, index, axis, src_shape):
    """gather(g, index) padded with zeros to src's shape (src beyond the index is unused)."""
    taken = apply(_GATHER, g, index, axis=axis)
    if tuple(index.shape) == tuple(src_shape):
        return taken
    pad = []
    for i, s in zip(reversed(index.shape), reversed(src_shape)):
        pad += [0, s - i]
    return E.pad(taken, pad)


def _scatter_add_vjp(c, g):
    nx, _, ns = c.needs_input_grad
    index = c.inputs[1]
    gsrc = _gather_for_src(g, index, c.attrs["axis"], c.in_types[2].shape) if ns else None
    return (g if nx else None), None, gsrc


def _scatter_vjp(c, g):
    nx, _, ns = c.needs_input_grad
    index, axis = c.inputs[1], c.attrs["axis"]
    gx = gsrc = None
    if nx:  # overwritten positions of x do not reach the output
        zeros = E.zeros(index.shape, dtype=g.dtype)
        gx = apply(_SCATTER, g, index, zeros, axis=axis)
    if ns:
        gsrc = _gather_for_src(g, index, axis, c.in_types[2].shape)
    return gx, None, gsrc


def _scatter_add_cost(in_types, out_types, attrs):
    # one addition per index element
    return memory_cost(in_types, out_types, attrs)._replace(flops=numel(in_types[1].shape))


def _onnx_scatter_src(e):
    """The src values the index reads: src cut to the index's shape (ONNX's updates have it)."""
    src, index_type, src_type = e.inputs[2], e.in_types[1], e.in_types[2]
    if tuple(src_type.shape) == tuple(index_type.shape):
        return src
    n = len(index_type.shape)
    return e.node("Slice", [src, e.ints([0] * n), e.node("Shape", [e.inputs[1]]), e.ints(range(n))])


def _onnx_scatter_add(e):
    if e.opset < 16:
        e.unsupported("before opset 16 (ScatterElements' reduction)")
    x, index = e.inputs[:2]
    src = _onnx_scatter_src(e)
    return e.node("ScatterElements", [x, index, src], axis=e.attrs["axis"], reduction="add")


_SCATTER_ADD = register(
    OpDef(
        name="scatter_add",
        complex=Complex.GRADIENT,
        onnx=_onnx_scatter_add,
        kind="index",
        infer=_scatter_infer("scatter_add"),
        kernel=_scatter_add_kernel,
        fast=_scatter_add_fast,
        vjp=_scatter_add_vjp,
        cost=_scatter_add_cost,
        save_inputs=(1,),
        doc="scatter_add(x, index, src, axis): x with src[i][j] added at [index[i][j]][j] "
        "(axis 0); repeated indices accumulate. The adjoint of gather.",
        batch=_batching.indexing_rule,
    )
)


def _onnx_scatter(e):
    # (ONNX leaves the winner of repeated indices unspecified, as the kernel's NumPy does)
    x, index = e.inputs[:2]
    return e.node("ScatterElements", [x, index, _onnx_scatter_src(e)], axis=e.attrs["axis"])


_SCATTER = register(
    OpDef(
        name="scatter",
        complex=Complex.GRADIENT,
        onnx=_onnx_scatter,
        kind="index",
        infer=_scatter_infer("scatter"),
        kernel=_scatter_kernel,
        vjp=_scatter_vjp,
        cost=memory_cost,
        save_inputs=(1,),
        doc="scatter(x, index, src, axis): x with src[i][j] written at [index[i][j]][j] (axis "
        "0); with repeated indices one of the writes wins",
    )
)


def _dim(op, x, dim):
    return normalize_axis(op, dim, max(x.ndim, 1))


def _index_arg(index):
    return index if isinstance(index, TensorBase) else to_tensor(np.asarray(index, dtype=np.int64))


def _empty(t) -> bool:
    """Whether t has no elements, known while a graph is built (a symbolic size is not)."""
    return any(isinstance(s, int) and s == 0 for s in t.shape)


def _as_vectors(*ts):
    """PyTorch's gathers and scatters see a 0-d tensor as one of shape (1,): 0-d operands
    reshaped, when no operand has more than one dimension (else the ranks differ, refused by
    the shape rule)."""
    if all(t.ndim <= 1 for t in ts) and any(t.ndim == 0 for t in ts):
        return tuple(E.reshape(t, (1,)) if t.ndim == 0 else t for t in ts)
    return ts


@export(method=True)
def gather(x, dim: int, index, *, sparse_grad: bool = False):
    """``out[i][j][k] = x[index[i][j][k]][j][k]`` for dim 0 (and likewise for other dims).

    ``sparse_grad`` is accepted for PyTorch compatibility; gradients are always dense."""
    x = to_tensor(x)
    index = _index_arg(index)
    axis = _dim("gather", x, dim)
    if _empty(index):  # (PyTorch checks no shapes for an empty index: nothing is read)
        require_int("gather", "index", index)
        return E.reshape(E.reshape(x, (-1,))[:0], tuple(index.shape))
    x1, index1 = _as_vectors(x, index)
    out = apply(_GATHER, x1, index1, axis=axis)
    return out if index1 is index else E.reshape(out, ())


def _src_arg(x, index, src, op="scatter"):
    if isinstance(src, (bool, int, float, complex)):  # a scalar value fills every position
        check_fill_value(op, src, x.dtype)
        return E.full(tuple(index.shape), src, dtype=x.dtype)
    if is_traced(src):  # (a traced .item(): a scalar too)
        return E.full(tuple(index.shape), src, dtype=x.dtype)
    require_source_dtype(op, x, src, "src")
    return to_tensor(src, x.dtype)


@export(method=True, inplace=True)
def scatter_add(x, dim: int, index, src):
    """``x`` with ``src[i][j]`` added at ``[index[i][j]][j]`` (dim 0); repeats accumulate."""
    x = to_tensor(x)
    index = _index_arg(index)
    src = _src_arg(x, index, src, "scatter_add")
    return _scattered(_SCATTER_ADD, x, index, src, _dim("scatter_add", x, dim))


def _scattered(op, x, index, src, axis):
    """``op`` (scatter or scatter_add) applied as PyTorch's: x itself (a copy) for an empty
    index, 0-d operands as vectors of one element."""
    if _empty(index):
        require_int(op.name, "index", index)
        return E.clone(x)
    check_index_dtype(op.name, index)  # (before the kernels' own dtype refusals, as PyTorch)
    x1, index1, src1 = _as_vectors(x, index, src)
    out = apply(op, x1, index1, src1, axis=axis)
    return out if x1 is x else E.reshape(out, ())


@export(method=True, inplace=True)
def scatter(x, dim: int, index, src=None, *, value=None, reduce=None):
    """``x`` with ``src[i][j]`` (or a scalar ``value``) written at ``[index[i][j]][j]`` (dim 0).
    ``reduce="add"`` / ``"multiply"`` (PyTorch's older form) combines them with what is there
    instead: `scatter_reduce` with ``"sum"`` / ``"prod"``, including x's values."""
    x = to_tensor(x)
    index = _index_arg(index)
    if src is None:
        if value is None:
            raise ArgumentTypeError("scatter: give src (a tensor) or value (a scalar)")
        src = value
    if reduce is not None:
        modes = {"add": "sum", "multiply": "prod"}
        if reduce not in modes:
            raise UnsupportedError(
                f"reduce argument must be either 'add' or 'multiply', got {reduce!r}",
                op="scatter",
            )
        src = _src_arg(x, index, src)
        return E.scatter_reduce(x, dim, index, src, modes[reduce], include_self=True)
    return _scattered(_SCATTER, x, index, _src_arg(x, index, src), _dim("scatter", x, dim))


# --------------------------------------------------------------------------------- composites


@export(method=True)
def index_select(x, dim: int, index):
    """The entries of ``x`` at the 1-D integer ``index`` along ``dim`` (gradients scatter-add)."""
    from .indexing import _INDEX

    x = to_tensor(x)
    index = _index_arg(index)
    check_index_dtype("index_select", index)
    if index.ndim > 1:
        raise ShapeError(
            f"index must be 1-D, got shape {fmt_shape(index.shape)}", op="index_select"
        )
    if index.ndim == 0:
        index = E.reshape(index, (1,))
    if x.ndim == 0:
        return E.reshape(apply(_INDEX, E.reshape(x, (1,)), index, spec=(("tensor",),)), ())
    d = _dim("index_select", x, dim)
    out = apply(_INDEX, x, index, spec=(FULL,) * d + (("tensor",),))
    return rename_node(out, "IndexSelectBackward0")


@export(method=True)
def take_along_dim(x, indices, dim: int | None = None):
    """Values of ``x`` at ``indices`` along ``dim``; x and indices broadcast in the other
    dimensions. With ``dim=None`` both are flattened first."""
    x = to_tensor(x)
    indices = _index_arg(indices)
    check_index_dtype("take_along_dim", indices)
    if dim is None:
        return gather(E.reshape(x, (-1,)), 0, E.reshape(indices, (-1,)))
    if x.ndim != indices.ndim:
        raise ShapeError(
            f"x of shape {fmt_shape(x.shape)} and indices of shape {fmt_shape(indices.shape)} "
            "must have the same number of dimensions",
            op="take_along_dim",
        )
    if x.ndim == 0:  # (PyTorch's: 0-d tensors take along no dimension)
        raise AxisError(
            f"dimension {dim} specified but the tensor has no dimensions", op="take_along_dim"
        )
    d = _dim("take_along_dim", x, dim)
    shape = []
    for i, (a, b) in enumerate(zip(x.shape, indices.shape)):
        if i != d and a != b and a != 1 and b != 1:
            raise ShapeError(
                f"x of shape {fmt_shape(x.shape)} and indices of shape "
                f"{fmt_shape(indices.shape)} do not broadcast in dimension {i}",
                op="take_along_dim",
            )
        shape.append(b if a == 1 else a)  # (not max: 1 broadcasts to 0)
    x_shape = tuple(x.shape[i] if i == d else s for i, s in enumerate(shape))
    i_shape = tuple(indices.shape[i] if i == d else s for i, s in enumerate(shape))
    return gather(E.broadcast_to(x, x_shape), d, E.broadcast_to(indices, i_shape))


@export(functional=True)
def one_hot(t, num_classes: int = -1):
    """int64 one-hot encoding: ``t.shape + (num_classes,)``; ``num_classes=-1`` uses max + 1."""
    t = to_tensor(t)
    if t.dtype is not dt.int64:  # (PyTorch's words: int32 and bool classes refused too)
        raise DTypeError(
            f"one_hot is only applicable to index tensor of type LongTensor (got {t.dtype})",
            op="one_hot",
        )
    if t.numel() == 0 and num_classes < 0:
        raise ShapeError(
            "cannot infer the number of classes from an empty tensor; pass num_classes",
            op="one_hot",
        )
    if not _state.modes and hasattr(t, "_data"):  # eager: NumPy's passes, no op calls
        return eager_constant(_one_hot_array(t._data, num_classes))
    # while a graph is built the classes have no values: with num_classes given, the graph
    # encodes them unchecked (a class out of range gives a row of zeros), as a compiled torch
    if t.numel() and not (num_classes >= 0 and building_graph()):
        num_classes = _class_count(int(E.amin(t).item()), int(E.amax(t).item()), num_classes)
    classes = E.arange(num_classes, dtype=t.dtype)
    hot, classes = promote(E.unsqueeze(t, -1), classes)
    return E.cast(E.eq(hot, classes), dt.int64)


def _class_count(lo: int, hi: int, num_classes: int) -> int:
    """``num_classes`` (the largest class + 1 when -1), the classes from ``lo`` to ``hi``
    checked to lie below it."""
    if num_classes < 0:
        num_classes = hi + 1
    if lo < 0 or hi >= num_classes:
        raise IndexOutOfRangeError(
            f"class values must lie in [0, {num_classes}), got values from {lo} to {hi}",
            op="one_hot",
        )
    return num_classes


def _one_hot_array(data: np.ndarray, num_classes: int) -> np.ndarray:
    """`one_hot` of an eager tensor's classes: checked, then the ones put in a zero array (the
    composite's ops, its amin/amax items and a comparison with every class, cost several
    times that)."""
    if data.size:
        num_classes = _class_count(int(data.min()), int(data.max()), num_classes)
    out = np.zeros(data.shape + (num_classes,), np.int64)
    np.put_along_axis(out, data[..., None].astype(np.intp, copy=False), 1, axis=-1)
    return out


@export(method=True, inplace=True)
@renames("IndexAddBackward0")
def index_add(x, dim: int, index, source, *, alpha=1):
    """``x`` with ``alpha * source``'s slices added at the 1-D ``index`` along ``dim``;
    repeated indices accumulate (the adjoint of `index_select`)."""
    from .indexing import _INDEX_BACKWARD

    x = to_tensor(x)
    index = _index_arg(index)
    check_index_dtype("index_add", index)
    require_source_dtype("index_add", x, source)
    source = to_tensor(source, x.dtype)
    if index.ndim > 1:
        raise ShapeError(f"index must be 1-D, got shape {fmt_shape(index.shape)}", op="index_add")
    if index.ndim == 0:
        index = E.reshape(index, (1,))
    if x.ndim == 0:  # (a 0-d x and source: vectors of one element, as PyTorch's)
        return E.reshape(index_add(E.reshape(x, (1,)), 0, index, source, alpha=alpha), ())
    if source.ndim == 0 and x.ndim == 1 and index.shape[0] == 1:
        source = E.reshape(source, (1,))
    d = _dim("index_add", x, dim)
    expected = tuple(x.shape[:d]) + (index.shape[0],) + tuple(x.shape[d + 1 :])
    if tuple(source.shape) != expected:
        raise ShapeError(
            f"source of shape {fmt_shape(source.shape)} does not fit: adding along dimension "
            f"{d} of shape {fmt_shape(x.shape)} at {index.shape[0]} indices needs "
            f"{fmt_shape(expected)}",
            op="index_add",
        )
    if is_traced(alpha):  # (a traced .item(): its tensor in x's dtype)
        source = E.cast(source * alpha.tensor_for(x.dtype), x.dtype)
    else:
        check_fill_value("index_add", alpha, x.dtype)  # (PyTorch converts it to x's dtype)
        if alpha != 1:  # (computed in x's dtype, as PyTorch's index_add is)
            source = E.cast(source * alpha, x.dtype)
    spec = (FULL,) * d + (("tensor",),)
    return x + apply(_INDEX_BACKWARD, source, index, spec=spec, in_shape=tuple(x.shape))


# PyTorch's indexed writes refuse an operand sharing the written memory at all, a full overlap
# too (``x.scatter_(1, i, x)``), and so does out= of the indexed reads (ops/_overlap.py)
scatter.overlap_refused = scatter_add.overlap_refused = index_add.overlap_refused = OVERLAP_ANY
gather.out_overlap_refused = index_select.out_overlap_refused = OVERLAP_ANY
