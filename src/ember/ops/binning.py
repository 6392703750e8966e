"""Counting values into bins and finding their places, PyTorch's names: histc, searchsorted and
bucketize. histc and searchsorted are primitives whose results are counts and positions (no
gradient); bucketize is searchsorted with its arguments swapped."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError, DTypeError, ShapeError
from ..types import TensorType
from . import _onnx
from . import api as E
from ._registry import OpDef, apply, export, register
from ._searchsorted_onnx import binary_search, binary_search_loop
from ._util import elementwise_cost, reduction_cost
from .promotion import to_tensor

# --------------------------------------------------------------------------------- histc


def _histc_infer(x, *, bins, lo, hi):
    if not x.dtype.is_floating_point:
        raise DTypeError(f"histc is defined for float tensors, got {x.dtype}", op="histc")
    return TensorType((bins,), x.dtype)


def _histc_kernel(x, *, bins, lo, hi):
    """PyTorch's linear bin search in the input's own dtype: a float32 value within rounding
    of an edge lands where float32's ``(x - lo) * bins / (hi - lo)`` puts it (-3e-8 over
    [-1, 1] in 4 bins is bin 2 there, bin 1 in float64)."""
    v = x.reshape(-1)
    if lo == hi and v.size:
        finite = v[np.isfinite(v)]
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (lo, hi)
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    lo, hi = np.asarray(lo, x.dtype), np.asarray(hi, x.dtype)
    inside = v[(v >= lo) & (v <= hi)]
    pos = ((inside - lo) * bins / (hi - lo)).astype(np.int64)
    pos = np.minimum(pos, bins - 1)  # the top edge belongs to the last bin
    return np.bincount(pos, minlength=bins).astype(x.dtype)


def _onnx_histc(e):
    """The kernel's steps in float64: the range (the finite data's when lo == hi), each inside
    value's bin, and the bins' counts as sums of one-hot rows."""
    a = e.attrs
    bins, f64 = a["bins"], dt.float64
    v = e.cast(e.node("Reshape", [e.inputs[0], e.ints([-1])]), f64)

    def c(value):
        return e.scalar(value, f64)

    lo, hi = c(a["lo"]), c(a["hi"])
    if a["lo"] == a["hi"]:
        finite = e.node("Not", [e.node("Or", [e.node("IsNaN", [v]), e.node("IsInf", [v])])])
        low = _onnx.reduce(e, "ReduceMin", e.node("Where", [finite, v, c(np.inf)]), (0,), False)
        high = _onnx.reduce(e, "ReduceMax", e.node("Where", [finite, v, c(-np.inf)]), (0,), False)
        found = e.cast(
            _onnx.reduce(e, "ReduceMax", e.cast(finite, dt.uint8), (0,), False), dt.bool_
        )
        lo, hi = e.node("Where", [found, low, lo]), e.node("Where", [found, high, hi])
        same = e.node("Equal", [lo, hi])
        lo = e.node("Where", [same, e.node("Sub", [lo, c(1)]), lo])
        hi = e.node("Where", [same, e.node("Add", [hi, c(1)]), hi])
    inside = e.node("And", [e.node("GreaterOrEqual", [v, lo]), e.node("LessOrEqual", [v, hi])])
    scaled = e.node(
        "Div", [e.node("Mul", [e.node("Sub", [v, lo]), c(bins)]), e.node("Sub", [hi, lo])]
    )
    safe = e.node("Where", [inside, scaled, c(0)])  # (outside values may be NaN or huge)
    pos = e.node("Min", [e.cast(safe, dt.int64), e.scalar(bins - 1, dt.int64)])
    pos = e.node("Where", [inside, pos, e.scalar(-1, dt.int64)])
    hits = e.node("Equal", [e.node("Unsqueeze", [pos, e.ints([-1])]), e.constant(np.arange(bins))])
    counts = _onnx.reduce(e, "ReduceSum", e.cast(hits, f64), (0,), False)
    return e.cast(counts, e.out_types[0].dtype)


_HISTC = register(
    OpDef(
        name="histc",
        onnx=_onnx_histc,
        kind="reduce",
        infer=_histc_infer,
        kernel=_histc_kernel,
        cost=reduction_cost,
        doc="histc(x; bins, lo, hi): counts of x in bins equal-width bins over [lo, hi]",
    )
)


@export(method=True)
def histc(input, bins: int = 100, min: float = 0, max: float = 0):  # noqa: A002
    """A histogram of ``bins`` equal-width bins over [min, max] (with min == max, the data's
    own range); elements outside are ignored. Float tensors; no gradient, as in PyTorch."""
    if int(bins) <= 0:
        raise ShapeError(f"histc: bins must be positive, got {bins}", op="histc")
    if float(min) > float(max):
        raise ShapeError(f"histc: min {min} is larger than max {max}", op="histc")
    # counts are not differentiable: PyTorch's result never requires grad (the input's
    # history is cut before the op, so it records nothing)
    x = to_tensor(input).detach()
    return apply(_HISTC, x, bins=int(bins), lo=float(min), hi=float(max))


# ------------------------------------------------------------------- searchsorted, bucketize


def _searchsorted_infer(seq, values, *, right, int32):
    if seq.ndim > 1 and (
        values.ndim != seq.ndim or tuple(values.shape[:-1]) != tuple(seq.shape[:-1])
    ):
        raise ShapeError(
            f"searchsorted: the leading dims of sorted_sequence {tuple(seq.shape)} and values "
            f"{tuple(values.shape)} must match",
            op="searchsorted",
        )
    return TensorType(tuple(values.shape), dt.int32 if int32 else dt.int64)


def _searchsorted_kernel(seq, values, *, right, int32):
    side = "right" if right else "left"
    out_dtype = np.int32 if int32 else np.int64
    common = np.result_type(seq.dtype, values.dtype)
    if common == dt.bfloat16.np or seq.dtype == dt.bfloat16.np:
        common = np.float32
    seq, values = seq.astype(common), values.astype(common)
    if (np.dtype(common).kind == "f" and np.isnan(seq).any()) or not _is_sorted(seq):
        return _binary_search(seq, values, right).astype(out_dtype)
    if seq.ndim <= 1:
        return np.searchsorted(seq, values, side=side).astype(out_dtype)
    count = int(np.prod(seq.shape[:-1]))  # (not -1: ambiguous for empty rows)
    rows = seq.reshape(count, seq.shape[-1])
    vals = values.reshape(count, values.shape[-1])
    out = np.zeros(vals.shape, np.int64)
    for i, (r, v) in enumerate(zip(rows, vals)):
        out[i] = np.searchsorted(r, v, side=side)
    return out.reshape(values.shape).astype(out_dtype)


def _is_sorted(seq) -> bool:
    """Whether every innermost row is in ascending order (NumPy's search assumes it; on a row
    that is not, PyTorch's answer is its own binary search's)."""
    return seq.ndim == 0 or seq.shape[-1] < 2 or bool(np.all(seq[..., 1:] >= seq[..., :-1]))


def _binary_search(seq, values, right: bool):
    """PyTorch's binary search step for step, for a sequence holding NaN or out of order: the
    start moves past the middle unless ``mid >= value`` (``right``: ``mid > value``) holds,
    which a NaN on either side never does. (NumPy orders NaN last, so its positions differ
    once the search meets a NaN; on a sorted row without one they are the same.)"""
    n = seq.shape[-1]
    rows = seq.reshape(-1, n) if seq.ndim > 1 else seq.reshape(1, n)
    vals = values.reshape(rows.shape[0], -1) if seq.ndim > 1 else values.reshape(1, -1)
    start = np.zeros(vals.shape, np.int64)
    end = np.full(vals.shape, n, np.int64)
    with np.errstate(invalid="ignore"):
        while (active := start < end).any():
            mid = start + ((end - start) >> 1)
            at = np.take_along_axis(rows, np.minimum(mid, n - 1), 1)
            stays = at > vals if right else at >= vals
            start = np.where(active & ~stays, mid + 1, start)
            end = np.where(active & stays, mid, end)
    return start.reshape(values.shape)


def _onnx_searchsorted(e):
    """PyTorch's binary search (ops/_searchsorted_onnx.py: the eager answer for any sequence,
    NaN and unsorted rows included): its halvings written out where the rows' length is
    known, run in a Loop where it is symbolic."""
    seq, values = e.inputs
    st, vt = e.in_types
    common = np.result_type(st.dtype.np, vt.dtype.np)
    if common == dt.bfloat16.np or st.dtype is dt.bfloat16:
        common = np.dtype(np.float32)
    common = dt.from_numpy_dtype(common)
    seq, values = e.cast(seq, common), e.cast(values, common)
    n = st.shape[-1] if len(st.shape) else None
    rows, right = len(st.shape) > 1, e.attrs["right"]
    if isinstance(n, int):
        found = binary_search(e, seq, values, n, rows, right)
    else:
        found = binary_search_loop(e, seq, values, rows, right, e.out_types[0].shape)
    return e.cast(found, e.out_types[0].dtype)


_SEARCHSORTED = register(
    OpDef(
        name="searchsorted",
        onnx=_onnx_searchsorted,
        kind="elementwise",
        infer=_searchsorted_infer,
        kernel=_searchsorted_kernel,
        cost=elementwise_cost(8),
        doc="searchsorted(sorted, values; right, int32): insertion positions of values in the "
        "innermost rows of sorted",
    )
)


@export
def searchsorted(
    sorted_sequence, input, *, out_int32: bool = False, right: bool = False, side=None, sorter=None
):
    """Positions where ``input``'s values would be inserted into the innermost dimension of
    ``sorted_sequence`` to keep it sorted: the first such position, or the last with
    ``right=True`` / ``side="right"``. ``sorter`` gives the positions that sort an unsorted
    sequence (the result indexes the sorted order, as in PyTorch). ``input`` may be a Python
    number (a 0-d result). NaN sorts last."""
    if side is not None:
        if side not in ("left", "right"):
            raise ArgumentError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ArgumentError("searchsorted: side='left' contradicts right=True")
        right = side == "right"
    seq = to_tensor(sorted_sequence)
    if sorter is not None:
        seq = E.take_along_dim(seq, to_tensor(sorter), -1)
    values = to_tensor(input)
    if seq.ndim > 1 and values.ndim == 0:
        raise ShapeError(
            "searchsorted: a scalar input needs a 1-d sorted_sequence", op="searchsorted"
        )
    return apply(_SEARCHSORTED, seq, values, right=bool(right), int32=bool(out_int32))


@export
def bucketize(input, boundaries, *, out_int32: bool = False, right: bool = False):
    """The bucket of each element among the 1-d ``boundaries``: ``searchsorted(boundaries,
    input, right=right)``."""
    b = to_tensor(boundaries)
    if b.ndim != 1:
        raise ShapeError(
            f"bucketize: boundaries must be 1-d, got shape {tuple(b.shape)}", op="bucketize"
        )
    return searchsorted(b, input, out_int32=out_int32, right=right)
