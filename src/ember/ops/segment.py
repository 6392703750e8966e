"""Segment reductions over row splits: the reductions of ``ember.ragged`` over its ragged
dimension, and PyTorch's ``torch.segment_reduce``.

Operands: ``values`` of shape (N, *rest) (a ragged tensor's flat values: N is the total length,
symbolic in a captured graph) and ``row_splits`` (R + 1,) integers, starting at 0, never
decreasing, ending at N: row ``r`` is ``values[row_splits[r]:row_splits[r + 1]]``. The result
has shape (R, *rest). The kernels check the splits' data (a shape rule cannot) and raise
`RowSplitsError` naming ``row_splits``.

* ``segment_sum``: an empty row sums to 0;
* ``segment_mean``: an empty row's mean is NaN (0 / 0), as torch.segment_reduce's;
* ``segment_max`` / ``segment_min``: an empty row gives -inf / +inf (the reductions' identity,
  as torch.segment_reduce and tf.math.segment_max's float lowest); NaN propagates;
* ``segment_expand``: the reverse direction, each row's (R, *rest) slice repeated over that
  row's values: (N, *rest). Its third operand is read for its length N only (the total may be
  symbolic, so it cannot be an attribute); it is the VJP of the sums and the per-row broadcast
  of ``ember.ragged``'s elementwise ops.

VJPs in ember ops: the sum's gradient is the row's gradient expanded over the row; the mean's
divides it by the row's length; max and min share it evenly among the values equal to the
result (ties), as torch.segment_reduce's backward does.
Half precision (float16, bfloat16) accumulates in float32 and rounds once.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError, DTypeError, ShapeError
from ..types import TensorType
from . import api as E
from ._registry import Cost, OpDef, apply, export, register
from ._util import fmt_shape, io_bytes, numel
from .promotion import to_tensor


class RowSplitsError(ShapeError):
    """Row splits that do not describe rows of the values (not starting at 0, decreasing, not
    ending at the values' length)."""


def check_splits(op: str, splits: np.ndarray, total: int, field: str = "row_splits") -> None:
    """Raise `RowSplitsError` naming ``field`` unless ``splits`` are row splits of ``total``
    values (1-D integers from 0, never decreasing, ending at ``total``)."""
    if splits.ndim != 1 or splits.shape[0] < 1:
        raise RowSplitsError(
            f"{field} must be 1-D with at least one entry (0), got shape {fmt_shape(splits.shape)}",
            op=op,
        )
    if splits.dtype.kind not in "iu":
        raise RowSplitsError(f"{field} must be integers, got {splits.dtype}", op=op)
    if splits[0] != 0:
        raise RowSplitsError(f"{field} must start at 0, got {int(splits[0])}", op=op)
    steps = np.diff(splits)
    if (steps < 0).any():
        r = int(np.argmax(steps < 0))
        raise RowSplitsError(
            f"{field} must not decrease: {field}[{r + 1}] = {int(splits[r + 1])} is below "
            f"{field}[{r}] = {int(splits[r])}",
            op=op,
        )
    if int(splits[-1]) != total:
        raise RowSplitsError(
            f"{field} must end at the values' length {total}, got {int(splits[-1])}", op=op
        )


def _infer_splits(op, values, splits):
    if not splits.dtype.is_integer:
        raise DTypeError(f"row_splits must be an integer tensor, got {splits.dtype}", op=op)
    if splits.ndim != 1:
        raise ShapeError(
            f"row_splits must be 1-D (rows + 1,), got shape {fmt_shape(splits.shape)}", op=op
        )
    if values.ndim < 1:
        raise ShapeError("values must have at least one dimension (the total length)", op=op)


def _reduce_infer(op):
    def infer(values, splits):
        _infer_splits(op, values, splits)
        if not values.dtype.is_floating_point:
            raise DTypeError(
                f"values must be a floating-point tensor, got {values.dtype}; convert it first",
                op=op,
            )
        rows = splits.shape[0] - 1
        return TensorType((rows,) + tuple(values.shape[1:]), values.dtype)

    return infer


_UFUNCS = {"sum": np.add, "mean": np.add, "max": np.maximum, "min": np.minimum}
_EMPTY = {"sum": 0.0, "mean": np.nan, "max": -np.inf, "min": np.inf}


def _reduce_kernel(op, reduce):
    def kernel(values, splits):
        check_splits(op, splits, values.shape[0])
        splits = splits.astype(np.int64, copy=False)
        lengths = np.diff(splits)
        work = values.astype(np.float32) if values.dtype.itemsize < 4 else values
        filled = lengths > 0
        if len(lengths) and filled.all() and (lengths == lengths[0]).all():
            # rows of one length (a batch of equal bags): a reduction over the middle axis,
            # which NumPy runs about twice as fast as reduceat
            shape = (len(lengths), int(lengths[0])) + values.shape[1:]
            out = _UFUNCS[reduce].reduce(work.reshape(shape), axis=1)
        elif filled.all() and len(lengths):  # (no empty rows: reduceat's result is the output)
            out = _UFUNCS[reduce].reduceat(work, splits[:-1], axis=0)
        else:
            out = np.full((len(lengths),) + values.shape[1:], _EMPTY[reduce], work.dtype)
            if filled.any():
                # reduceat over the non-empty rows' starts: each runs to the next non-empty
                # start, which is its own end (the empty rows between start and end there)
                out[filled] = _UFUNCS[reduce].reduceat(work, splits[:-1][filled], axis=0)
        if reduce == "mean":
            shape = (-1,) + (1,) * (values.ndim - 1)
            with np.errstate(invalid="ignore", divide="ignore"):
                out /= lengths.reshape(shape).astype(work.dtype)
        return out.astype(values.dtype, copy=False)

    return kernel


def _sum_fast(mean: bool):
    """Sums (or means) of rows as a CSR product of ones with the values (kernels/csparse.py:
    each row's values added in order from zero, as reduceat's running sums), where the values
    are float32/float64; None elsewhere (the kernel runs)."""

    def fast(values, splits):
        if values.dtype not in (np.float32, np.float64) or values.ndim < 1:
            return None
        from ..kernels import csparse

        check_splits("segment_mean" if mean else "segment_sum", splits, values.shape[0])
        n = values.shape[0]
        indptr = splits.astype(np.int64)
        flat = values.reshape(n, -1) if n else values.reshape(0, numel(values.shape[1:]))
        ones = np.ones(n, values.dtype)
        out = csparse.csr_mm(indptr, np.arange(n, dtype=np.int64), ones, flat, len(indptr) - 1)
        if out is None:
            return None
        if mean:
            with np.errstate(invalid="ignore", divide="ignore"):
                out /= np.diff(indptr).astype(values.dtype)[:, None]
        return out.reshape((len(indptr) - 1,) + values.shape[1:])

    return fast


def _onnx_row_of(e, splits, values):
    """Each value's row (int64, (N,)): how many rows end at or before its position."""
    splits = e.node("Cast", [splits], to=e.dtype(dt.int64))
    total = e.node("Gather", [e.node("Shape", [values]), e.constant(np.int64(0))], axis=0)
    positions = e.node("Range", [e.constant(np.int64(0)), total, e.constant(np.int64(1))])
    ends = e.node("Slice", [splits, e.ints([1]), e.ints([2**62]), e.ints([0])])
    after = e.node(
        "GreaterOrEqual",
        [e.node("Unsqueeze", [positions, e.ints([1])]), e.node("Unsqueeze", [ends, e.ints([0])])],
    )
    after = e.node("Cast", [after], to=e.dtype(dt.int64))
    return splits, e.node("ReduceSum", [after, e.ints([1])], keepdims=0)


_ONNX_REDUCTIONS = {"sum": ("add", 16), "mean": ("add", 16), "max": ("max", 18), "min": ("min", 18)}


def _onnx_reduce(reduce):
    """The values scattered into their rows by ScatterND's reduction (add: opset 16; max and
    min: 18), from the empty row's value (0, or -inf/+inf); a mean divides by the lengths
    (an empty row's 0 / 0 is NaN, as the kernel's)."""
    reduction, opset = _ONNX_REDUCTIONS[reduce]

    def rule(e):
        if e.opset < opset:
            e.unsupported(f"before opset {opset} (ScatterND's {reduction} reduction)")
        values, splits = e.inputs
        dtype = e.out_types[0].dtype
        splits, row = _onnx_row_of(e, splits, values)
        rows = e.node("Sub", [e.node("Shape", [splits]), e.ints([1])])
        rest = e.node("Slice", [e.node("Shape", [values]), e.ints([1]), e.ints([2**62])])
        start = e.constant(np.asarray(_EMPTY[reduce] if reduce != "mean" else 0, dtype.np))
        filled = e.node("Expand", [start, e.node("Concat", [rows, rest], axis=0)])
        out = e.node(
            "ScatterND",
            [filled, e.node("Unsqueeze", [row, e.ints([1])]), values],
            reduction=reduction,
        )
        if reduce != "mean":
            return out
        ends = e.node("Slice", [splits, e.ints([1]), e.ints([2**62])])
        starts = e.node("Slice", [splits, e.ints([0]), e.ints([-1])])
        lengths = e.node("Cast", [e.node("Sub", [ends, starts])], to=e.dtype(dtype))
        ndim = len(e.in_types[0].shape)
        if ndim > 1:
            lengths = e.node("Unsqueeze", [lengths, e.ints(list(range(1, ndim)))])
        return e.node("Div", [out, lengths])

    return rule


def _onnx_expand(e):
    x, splits, like = e.inputs
    _, row = _onnx_row_of(e, splits, like)
    return e.node("Gather", [x, row], axis=0)


def _lengths_like(splits, g):
    """The rows' lengths as g's dtype, shaped to broadcast against g (R, 1, ...)."""
    lengths = E.getitem(splits, slice(1, None)) - E.getitem(splits, slice(None, -1))
    # (an empty row's gradient reaches no value: dividing it by 1 instead of 0 keeps it finite)
    lengths = E.clamp(lengths, min=1)
    return E.reshape(E.cast(lengths, g.dtype), (-1,) + (1,) * (g.ndim - 1))


def _sum_vjp(c, g):
    values, splits = c.inputs
    return apply(SEGMENT_EXPAND, g, splits, values), None


def _mean_vjp(c, g):
    values, splits = c.inputs
    return apply(SEGMENT_EXPAND, g / _lengths_like(splits, g), splits, values), None


def _extreme_vjp(c, g):
    values, splits = c.inputs
    result = c.outputs[0]
    chosen = apply(SEGMENT_EXPAND, result, splits, values)
    # a NaN result was chosen by the NaN values (torch.segment_reduce's rule)
    hit = E.logical_or(values == chosen, E.logical_and(E.isnan(values), E.isnan(chosen)))
    hit = E.cast(hit, g.dtype)
    ties = apply(SEGMENT_SUM, hit, splits)
    ties = E.where(ties == 0, 1, ties)  # (empty rows: their gradient reaches no value)
    return hit * apply(SEGMENT_EXPAND, g / ties, splits, values), None


def _reduce_cost(in_types, out_types, attrs) -> Cost:
    return Cost(numel(in_types[0].shape), io_bytes(in_types, out_types))


def _segment_op(reduce, vjp, save_outputs=(), fast=None):
    name = f"segment_{reduce}"
    return register(
        OpDef(
            name=name,
            kind="index",
            infer=_reduce_infer(name),
            kernel=_reduce_kernel(name, reduce),
            fast=fast,
            onnx=_onnx_reduce(reduce),
            vjp=vjp,
            cost=_reduce_cost,
            save_outputs=save_outputs,
            batch=None,
            doc=f"{name}(values, row_splits): the {reduce} of each row "
            "values[row_splits[r]:row_splits[r + 1]] (see ops/segment.py for empty rows)",
        )
    )


SEGMENT_SUM = _segment_op("sum", _sum_vjp, fast=_sum_fast(False))
SEGMENT_MEAN = _segment_op("mean", _mean_vjp, fast=_sum_fast(True))
SEGMENT_MAX = _segment_op("max", _extreme_vjp, save_outputs=(0,))
SEGMENT_MIN = _segment_op("min", _extreme_vjp, save_outputs=(0,))
SEGMENT_REDUCTIONS = {
    "sum": SEGMENT_SUM,
    "mean": SEGMENT_MEAN,
    "max": SEGMENT_MAX,
    "min": SEGMENT_MIN,
}


def _expand_infer(x, splits, like):
    _infer_splits("segment_expand", like, splits)
    if x.ndim < 1:
        raise ShapeError("the per-row tensor needs a row dimension", op="segment_expand")
    rows = splits.shape[0] - 1
    if isinstance(x.shape[0], int) and isinstance(rows, int) and x.shape[0] != rows:
        raise ShapeError(
            f"the per-row tensor of shape {fmt_shape(x.shape)} has {x.shape[0]} rows, the row "
            f"splits {rows}",
            op="segment_expand",
        )
    return TensorType((like.shape[0],) + tuple(x.shape[1:]), x.dtype)


def _expand_kernel(x, splits, like):
    check_splits("segment_expand", splits, like.shape[0])
    return np.repeat(x, np.diff(splits.astype(np.int64, copy=False)), axis=0)


def _expand_vjp(c, g):
    _, splits, _ = c.inputs
    return apply(SEGMENT_SUM, g, splits), None, None


SEGMENT_EXPAND = register(
    OpDef(
        name="segment_expand",
        kind="index",
        infer=_expand_infer,
        kernel=_expand_kernel,
        onnx=_onnx_expand,
        vjp=_expand_vjp,
        cost=lambda i, o, a: Cost(0, io_bytes(i[:2], o)),
        save_inputs=(1, 2),
        batch=None,
        doc="segment_expand(x, row_splits, like): row r of x repeated over row r's "
        "values (like's length)",
    )
)


# ---------------------------------------------------------------------- public functions


def segment(reduce: str, values, row_splits):
    """The ``reduce`` ("sum", "mean", "max", "min") of each row of ``values`` by
    ``row_splits`` (ember.ragged's reductions)."""
    return apply(SEGMENT_REDUCTIONS[reduce], values, row_splits)


def expand_rows(x, row_splits, like):
    """Row ``r`` of ``x`` repeated over row ``r`` of the values ``like`` (N, ...)."""
    return apply(SEGMENT_EXPAND, x, row_splits, like)


@export
def segment_reduce(
    data,
    reduce: str,
    *,
    lengths=None,
    indices=None,
    offsets=None,
    axis: int = 0,
    unsafe: bool = False,
    initial=None,
):
    """torch.segment_reduce: ``reduce`` ("sum", "mean", "max", "min") of consecutive segments
    of ``data`` along axis 0, given by 1-D ``lengths`` or ``offsets`` (row splits). Empty
    segments give 0, NaN, -inf, +inf. ember always checks the segments (``unsafe`` is accepted
    and changes nothing), and refuses offsets that do not start at 0 and end at len(data)
    (PyTorch reduces the segments they name and ignores the rest); ``indices`` is refused as
    PyTorch refuses it; ``initial`` is not supported (an EmberError says so)."""
    op = "segment_reduce"
    if reduce not in SEGMENT_REDUCTIONS:
        raise ArgumentError(
            f"segment_reduce: reduce must be one of {', '.join(SEGMENT_REDUCTIONS)}, got {reduce!r}"
        )
    if indices is not None:
        raise ShapeError("segments given by indices are not supported (as in PyTorch)", op=op)
    if initial is not None:
        raise ShapeError("initial is not supported; add it to the result instead", op=op)
    if (lengths is None) == (offsets is None):
        raise ShapeError("give the segments by exactly one of lengths and offsets", op=op)
    data = to_tensor(data)
    if offsets is not None:
        splits = to_tensor(offsets)
    else:
        lengths = to_tensor(lengths)
        if not lengths.dtype.is_integer:
            raise DTypeError(f"lengths must be integers, got {lengths.dtype}", op=op)
        if lengths.ndim != 1:
            raise ShapeError(f"lengths must be 1-D, got shape {fmt_shape(lengths.shape)}", op=op)
        splits = E.cat([E.zeros((1,), dtype=dt.int64), E.cumsum(E.cast(lengths, dt.int64), 0)])
    if data.ndim == 0:
        raise ShapeError("data must have at least one dimension", op=op)
    if axis not in (0, -data.ndim):
        # (PyTorch reduces along another axis only with lengths or offsets batched over the
        # leading dimensions, which ember does not take)
        raise ShapeError(
            f"segments along axis {axis} need batched lengths or offsets, which ember does "
            "not support: move that axis first (movedim)",
            op=op,
        )
    return segment(reduce, data, splits)
