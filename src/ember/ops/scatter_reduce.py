"""``scatter_reduce`` (a primitive) and the slice fills ``index_fill`` / ``index_copy`` (built on
scatter and index_put), with PyTorch's semantics and gradients.

``scatter_reduce(x, dim, index, src, reduce, include_self)`` combines, at each position the
index names, x's value (when ``include_self``) and every src value scattered there, by
``reduce``: "sum", "prod", "mean", "amax" or "amin"; positions no index names keep x's value.
The index follows gather's rules (ops/gather.py): as many dimensions as x and src, no larger
than src anywhere nor than x outside ``dim``; negative values count from the end. An integer
"mean" rounds down, as PyTorch's does.

The VJP is PyTorch's ``scatter_reduce_backward``, written in ember ops (gather, scatter_add,
scatter_reduce itself): "sum" and "mean" pass the (averaged) gradient through; "amax" and
"amin" share it evenly among every value, of x or of src, equal to the result; "prod" gives
each factor the product of the others, exactly where factors are zero (a position with one
zero factor recomputes its product without it).
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError, DTypeError, ShapeError
from . import _onnx
from . import api as E
from ._autocast import Autocast, autocasts
from ._index_dtypes import check_index_dtype
from ._index_plan import IndexOutOfRangeError
from ._limited import refuse_limited
from ._overlap import ANY as OVERLAP_ANY
from ._registry import OpDef, TensorBase, apply, export, register
from ._rules import Complex
from ._scatter_kernels import normalized
from ._util import (
    check_fill_value,
    fmt_shape,
    memory_cost,
    normalize_axis,
    numel,
    refuse_complex,
    require_source_dtype,
    same_type,
)
from .gather import _GATHER, _SCATTER, _SCATTER_ADD, _check_index, _gather_for_src, _leading
from .promotion import to_tensor

REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")
# PyTorch takes "max" and "min" for "amax" and "amin" without documenting them
_ALIASES = {"max": "amax", "min": "amin"}
_UFUNC = {
    "sum": np.add,
    "prod": np.multiply,
    "mean": np.add,
    "amax": np.maximum,
    "amin": np.minimum,
}


def _identity(reduce, dtype: np.dtype):
    """Where a position starts when x's value is left out (include_self=False)."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype == np.bool_:
        return reduce == "amin"
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return info.min if reduce == "amax" else info.max
    return -math.inf if reduce == "amax" else math.inf


def _positions(shape, axis, index) -> np.ndarray:
    """Flat positions in an array of ``shape`` of ``[..., index[i, j, ...], ...]``."""
    index = normalized(index, shape[axis]).astype(np.int64, copy=False)
    strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
    flat = index * strides[axis]
    for d, size in enumerate(index.shape):
        if d != axis:
            along = [1] * index.ndim
            along[d] = size
            flat = flat + (np.arange(size) * strides[d]).reshape(along)
    return flat.reshape(-1)


def _scatter_reduce_infer(x, index, src, *, axis, reduce, include_self):
    if src.dtype is not x.dtype:
        raise DTypeError(
            f"src dtype {src.dtype} differs from the input's {x.dtype}", op="scatter_reduce"
        )
    if reduce == "mean" and x.dtype is dt.bool_:
        raise DTypeError("reduce='mean' is not defined for bool tensors", op="scatter_reduce")
    if reduce in ("amax", "amin"):  # (complex numbers have no order; PyTorch refuses them too)
        refuse_complex("scatter_reduce", x, reason=f"reduce={reduce!r} of {x.dtype} tensors")
    _check_index("scatter_reduce", index, (("the input", x, False), ("src", src, True)), axis)
    return same_type(x)


def _scatter_reduce_kernel(x, index, src, *, axis, reduce, include_self):
    # (row-major whatever x's layout: the flat view below must alias it, not copy a
    # transposed operand's elements, which dropped every write)
    out = np.array(x, copy=True, order="C")
    if out.ndim == 0:  # a 0-d tensor is one position along its dim 0
        return _scatter_reduce_kernel(
            out.reshape(1),
            index.reshape(1),
            src.reshape(1),
            axis=0,
            reduce=reduce,
            include_self=include_self,
        ).reshape(())
    if index.size == 0:
        return out
    try:
        flat = _positions(out.shape, axis, index)
    except IndexError as exc:
        raise IndexOutOfRangeError(
            f"{exc} (tensor shape {fmt_shape(x.shape)})", op="scatter_reduce"
        ) from None
    target = out.reshape(-1)  # out is a fresh contiguous copy: a view
    values = _leading(src, index.shape).reshape(-1)
    if not include_self:
        target[flat] = _identity(reduce, out.dtype)
    with np.errstate(invalid="ignore"):  # (NaN meeting a number in maximum: NaN wins)
        _UFUNC[reduce].at(target, flat, values)
    if reduce == "mean":
        counts = np.zeros(target.size, np.int64)
        np.add.at(counts, flat, 1)
        counts = counts + 1 if include_self else np.maximum(counts, 1)
        if np.issubdtype(out.dtype, np.integer):
            target[:] = np.floor_divide(target, counts).astype(out.dtype)
        else:
            target[:] = (target / counts).astype(out.dtype)
    return out


def _scattered(x_shape, index, axis):
    """A bool tensor of x's shape: True at the positions the index names."""
    hit = E.full(tuple(index.shape), True, dtype=dt.bool_)
    return apply(_SCATTER, E.zeros(tuple(x_shape), dtype=dt.bool_), index, hit, axis=axis)


def _scatter_reduce_vjp(c, g):
    x, index, src = c.inputs
    result = c.outputs[0]
    axis, reduce, include_self = c.attrs["axis"], c.attrs["reduce"], c.attrs["include_self"]
    src_shape = tuple(c.in_types[2].shape)
    lead = src if tuple(index.shape) == src_shape else _leading_of(src, index.shape)
    gather = lambda t: apply(_GATHER, t, index, axis=axis)  # noqa: E731

    def to_src(t):  # a tensor of index's shape padded with zeros to src's (the unused rest)
        if tuple(index.shape) == src_shape:
            return t
        pad = []
        for i, s in zip(reversed(index.shape), reversed(src_shape)):
            pad += [0, s - i]
        return E.pad(t, pad)

    def sums(t_src, base):
        return apply(_SCATTER_ADD, base, index, t_src, axis=axis)

    if reduce in ("sum", "mean"):
        if reduce == "mean":
            ones = E.ones(tuple(index.shape), dtype=g.dtype)
            start = (
                E.ones(tuple(x.shape), dtype=g.dtype)
                if include_self
                else E.zeros(tuple(x.shape), dtype=g.dtype)
            )
            count = sums(ones, start)
            g = g / E.where(count == 0, 1, count)
        gx, gsrc = g, _gather_for_src(g, index, axis, src_shape)
    elif reduce in ("amax", "amin"):
        value = gather(result)
        # (without include_self, x's own value still counts among the ties where it equals
        # the result, and then gets no share: PyTorch 2.13's rule, kept for parity)
        x_hit = E.cast(x == result, g.dtype)
        src_hit = E.cast(lead == value, g.dtype)
        share = g / sums(src_hit, x_hit)
        gx, gsrc = x_hit * share, to_src(src_hit * gather(share))
    else:  # prod
        safe_x = E.where(x == 0, 1, x)
        without_x = apply(
            _SCATTER_REDUCE,
            safe_x,
            index,
            lead,
            axis=axis,
            reduce="prod",
            include_self=include_self,
        )
        gx = g * without_x / safe_x
        src_zero = lead == 0
        zeros_there = gather(
            sums(E.cast(src_zero, g.dtype), E.zeros(tuple(x.shape), dtype=g.dtype))
        )
        single_zero = E.logical_and(src_zero, zeros_there == 1)
        without_zero = apply(
            _SCATTER_REDUCE,
            x,
            index,
            E.where(single_zero, 1, lead),
            axis=axis,
            reduce="prod",
            include_self=include_self,
        )
        others = gather(g * result) / E.where(src_zero, 1, lead)
        gsrc = to_src(E.where(single_zero, gather(g * without_zero), others))
    if not include_self:
        gx = E.where(_scattered(x.shape, index, axis), 0, gx)
    return gx, None, gsrc


def _leading_of(t, shape):
    """The leading ``shape`` block of tensor ``t`` (a view)."""
    return E.getitem(t, tuple(slice(0, s) for s in shape))


_ONNX_REDUCTIONS = {"sum": "add", "mean": "add", "prod": "mul", "amax": "max", "amin": "min"}


def _onnx_scatter_reduce(e):
    x, index, src = e.inputs
    axis, reduce = e.attrs["axis"], e.attrs["reduce"]
    dtype = e.in_types[0].dtype
    since = 18 if reduce in ("amax", "amin") else 16
    if e.opset < since:
        e.unsupported(f"with reduce={reduce} before opset {since} (ScatterElements' reduction)")
    if reduce == "mean" and not dtype.is_floating_point:
        e.unsupported("for an integer mean")
    if not e.attrs["include_self"]:
        # the positions the index names start from the reduction's identity instead of x
        start = _identity(reduce, dtype.np)
        fill = e.node("Expand", [_onnx.scalar(e, start, dtype), e.node("Shape", [src])])
        x = e.node("ScatterElements", [x, index, fill], axis=axis)
    out = e.node("ScatterElements", [x, index, src], axis=axis, reduction=_ONNX_REDUCTIONS[reduce])
    if reduce != "mean":
        return out
    one = _onnx.scalar(e, 1, dtype)
    ones = e.node("Expand", [one, e.node("Shape", [src])])
    base = e.node(
        "Expand",
        [one if e.attrs["include_self"] else _onnx.scalar(e, 0, dtype), e.node("Shape", [x])],
    )
    count = e.node("ScatterElements", [base, index, ones], axis=axis, reduction="add")
    count = e.node("Max", [count, one])  # untouched positions (count 0) keep their value
    return e.node("Div", [out, count])


_SCATTER_REDUCE = register(
    OpDef(
        name="scatter_reduce",
        onnx=_onnx_scatter_reduce,
        kind="index",
        infer=_scatter_reduce_infer,
        kernel=_scatter_reduce_kernel,
        vjp=_scatter_reduce_vjp,
        cost=lambda i, o, a: memory_cost(i, o, a)._replace(flops=numel(i[1].shape)),
        save_outputs=(0,),
        batch=None,
        # sum, prod and mean of complex values (the shape rule refuses amax and amin), without
        # a gradient: PyTorch's scatter_reduce has no complex derivative either
        complex=Complex.VALUES,
        doc="scatter_reduce(x, index, src, axis, reduce, include_self): x with the src values "
        "at [index[i][j]][j] (axis 0) combined by reduce (sum, prod, mean, amax, amin), x's "
        "own value included when include_self",
    )
)


def _index_arg(index):
    if isinstance(index, TensorBase):
        return index
    return to_tensor(np.asarray(index, dtype=np.int64))


@export(method=True, inplace=True)
def scatter_reduce(x, dim: int, index, src, reduce: str, *, include_self: bool = True):
    """``x`` with every ``src[i][j]`` combined into position ``[index[i][j]][j]`` (dim 0) by
    ``reduce``: "sum", "prod", "mean", "amax" or "amin"; with ``include_self`` x's own value
    there takes part ("max" and "min" are taken for "amax" and "amin", as PyTorch's
    forward takes them; its backward refuses them, ember's is amax's and amin's). Integer
    "mean" rounds down. Gradients as PyTorch's (see the module)."""
    x = to_tensor(x)
    reduce = _ALIASES.get(reduce, reduce)
    if reduce not in REDUCTIONS:
        raise ArgumentError(
            f"scatter_reduce: reduce must be one of {', '.join(REDUCTIONS)}, got {reduce!r}"
        )
    index = _index_arg(index)
    check_index_dtype("scatter_reduce", index)
    src = to_tensor(src)
    if src.dtype is not x.dtype:
        raise DTypeError(
            f"src dtype {src.dtype} differs from the input's {x.dtype}", op="scatter_reduce"
        )
    axis = normalize_axis("scatter_reduce", dim, max(x.ndim, 1))
    return apply(
        _SCATTER_REDUCE, x, index, src, axis=axis, reduce=reduce, include_self=bool(include_self)
    )


# ------------------------------------------------------------------- index_fill, index_copy


def _slice_index(op, x, dim, index):
    """(axis, 1-D int64 index) for the slice ops; a 0-d index is one slice."""
    index = _index_arg(index)
    check_index_dtype(op, index)
    if index.ndim > 1:
        raise ShapeError(f"index must be 0-D or 1-D, got shape {fmt_shape(index.shape)}", op=op)
    if index.ndim == 0:
        index = E.reshape(index, (1,))
    return normalize_axis(op, dim, max(x.ndim, 1)), index


@export(method=True, inplace=True)
def index_fill(x, dim: int, index, value):
    """``x`` with the slices at ``index`` along ``dim`` set to ``value`` (a Python scalar or a
    0-d tensor, which then gets the gradient of every filled position, each counted once
    however often the index repeats it)."""
    x = to_tensor(x)
    axis, index = _slice_index("index_fill", x, dim, index)
    if isinstance(value, TensorBase) and value.ndim != 0:
        raise ShapeError(
            f"value must be a scalar or a 0-d tensor, got shape {fmt_shape(value.shape)}",
            op="index_fill",
        )
    check_fill_value("index_fill", value, x.dtype)
    refuse_limited("index_fill", x)
    if x.ndim == 0:
        chosen = _scattered((1,), index, 0)
        return E.where(E.reshape(chosen, ()), to_tensor(value, x.dtype), x)
    size = x.shape[axis]
    chosen = _scattered((size,), index, 0)
    shape = tuple(size if d == axis else 1 for d in range(x.ndim))
    return E.where(E.reshape(chosen, shape), to_tensor(value, x.dtype), x)


# (its tensor value is one number PyTorch reads before writing: an overlapping one is allowed)
index_fill.overlap_ok = True


@export(method=True, inplace=True)
@autocasts(Autocast.PROMOTE)
def index_copy(x, dim: int, index, source):
    """``x`` with its slices at ``index`` along ``dim`` replaced by ``source``'s slices in turn
    (``source`` has x's shape with ``len(index)`` along ``dim``). Where the index repeats a
    position one of the writes wins, as in PyTorch (which leaves it undefined)."""
    x = to_tensor(x)
    axis, index = _slice_index("index_copy", x, dim, index)
    require_source_dtype("index_copy", x, source)
    source = to_tensor(source, x.dtype)
    if x.ndim == 0:
        return E.reshape(index_copy(E.reshape(x, (1,)), 0, index, E.reshape(source, (-1,))), ())
    expected = tuple(index.shape[0] if d == axis else s for d, s in enumerate(x.shape))
    if tuple(source.shape) != expected:
        if numel(source.shape) == numel(expected) and source.ndim != x.ndim:
            source = E.reshape(source, expected)  # a 0-d index's slice, without its dim
        else:
            raise ShapeError(
                f"source of shape {fmt_shape(source.shape)} does not fit: copying along "
                f"dimension {axis} of shape {fmt_shape(x.shape)} at {index.shape[0]} indices "
                f"needs {fmt_shape(expected)}",
                op="index_copy",
            )
    return E.index_put(x, (slice(None),) * axis + (index,), source)


# PyTorch's indexed writes refuse an operand sharing the written memory at all (ops/_overlap.py)
scatter_reduce.overlap_refused = index_copy.overlap_refused = OVERLAP_ANY
