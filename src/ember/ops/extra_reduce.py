"""Issue 19's long tail of reductions and scans, PyTorch's names: cummax, cummin, median,
nanmedian, mode, logcumsumexp, count_nonzero, nansum, nanmean, std_mean, var_mean, dist,
equal, diff, trapezoid (trapz), cumulative_trapezoid, histc, searchsorted and bucketize.

Selections (cummax, cummin, median, nanmedian, mode) are one primitive, ``select_index``, that
computes the chosen positions (int64, no gradient) with a NumPy kernel; the values are a
``gather`` of the input at them, so the gradient goes to the selected elements, as PyTorch's
does. The rest are composites of ember's ops, but histc and searchsorted, primitives whose
results are counts and positions (no gradient).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..types import TensorType
from . import _onnx
from . import api as E
from ._registry import OpDef, TensorBase, apply, export, register
from ._util import elementwise_cost, normalize_axis, reduction_cost
from .elementwise import to_tensor

cummax_t = namedtuple("cummax", ["values", "indices"])
cummin_t = namedtuple("cummin", ["values", "indices"])
median_t = namedtuple("median", ["values", "indices"])
nanmedian_t = namedtuple("nanmedian", ["values", "indices"])
mode_t = namedtuple("mode", ["values", "indices"])

_SCANS = ("cummax", "cummin")
_KINDS = ("cummax", "cummin", "median", "nanmedian", "mode")


# ---------------------------------------------------------------------- select_index primitive


def _select_infer(x, *, kind, axis):
    if kind not in _KINDS:
        raise ValueError(f"select_index: unknown kind {kind!r}")
    shape = list(x.shape)
    if kind not in _SCANS:
        if x.ndim and x.shape[axis] == 0:
            raise ShapeError(
                f"{kind}: cannot reduce the empty dimension {axis} of shape {tuple(x.shape)}",
                op=kind,
            )
        if x.ndim:
            shape[axis] = 1
    return TensorType(tuple(shape), dt.int64)


def _scan_positions(x, kind):
    """cummax/cummin along the last axis: a position moves to j where x[j] >= (<=) the running
    extreme or x[j] is NaN, so ties take the later position and NaN propagates, as PyTorch's
    CPU kernel does."""
    out = np.zeros(x.shape, np.int64)
    if x.shape[-1] == 0:
        return out
    better = np.greater_equal if kind == "cummax" else np.less_equal
    best = x[..., 0].copy()
    pos = np.zeros(x.shape[:-1], np.int64)
    floating = x.dtype.kind == "f" or x.dtype in (dt.bfloat16.np,)
    with np.errstate(invalid="ignore"):
        for j in range(1, x.shape[-1]):
            v = x[..., j]
            take = better(v, best)
            if floating:
                take = take | np.isnan(v.astype(np.float32) if v.dtype.itemsize < 4 else v)
            best = np.where(take, v, best)
            pos = np.where(take, j, pos)
            out[..., j] = pos
    return out


def _isnan(x):
    if x.dtype.kind in "biu":
        return np.zeros(x.shape, bool)
    return np.isnan(x.astype(np.float64))


def _median_positions(x, ignore_nan):
    """The lower median's position along the last axis: of the sorted values (NaN last), the
    element (n - 1) // 2; a row holding NaN gives its first NaN (median) or, for nanmedian,
    the lower median of the others (its first NaN when all are NaN)."""
    order = np.argsort(
        x.astype(np.float64) if x.dtype.kind == "f" or x.dtype == dt.bfloat16.np else x,
        axis=-1,
        kind="stable",
    )
    nans = _isnan(x)
    count = nans.shape[-1] - nans.sum(-1)
    n = x.shape[-1]
    k = (count - 1) // 2 if ignore_nan else np.full(count.shape, (n - 1) // 2)
    k = np.clip(k, 0, n - 1)
    pos = np.take_along_axis(order, k[..., None], -1)[..., 0]
    if not ignore_nan:
        first_nan = np.argmax(nans, axis=-1)
        pos = np.where(nans.any(-1), first_nan, pos)
    else:
        pos = np.where(count == 0, np.argmax(nans, axis=-1), pos)
    return pos


def _mode_positions(x):
    """The most frequent value's position along the last axis: ties between values go to the
    smallest value, and the position is its last occurrence, as PyTorch's CPU kernel gives."""
    rows = x.reshape(-1, x.shape[-1])
    out = np.empty(rows.shape[0], np.int64)
    for r, row in enumerate(rows):
        values, counts = np.unique(row, return_counts=True)
        best = values[np.argmax(counts)]  # np.unique sorts: the first maximum is the smallest
        out[r] = np.flatnonzero(row == best)[-1] if best == best else np.argmax(row != row)
    return out.reshape(x.shape[:-1])


def _select_kernel(x, *, kind, axis):
    if x.ndim == 0:
        return np.zeros((), np.int64)
    moved = np.moveaxis(x, axis, -1)
    if kind in _SCANS:
        return np.moveaxis(_scan_positions(moved, kind), -1, axis)
    if kind == "mode":
        pos = _mode_positions(moved)
    else:
        pos = _median_positions(moved, kind == "nanmedian")
    return np.expand_dims(pos.astype(np.int64), axis)


def _onnx_select_index(e):
    """cummax / cummin positions: a Scan along the axis carrying the running extreme, its
    position and the step (ties take the later position, NaN wins, as the kernel)."""
    x, t = e.inputs[0], e.in_types[0]
    kind, axis = e.attrs["kind"], e.attrs["axis"]
    if kind not in _SCANS:
        e.unsupported(f"for kind={kind} (ONNX cannot sort NaN and ties as the kernel does)")
    if not t.shape or t.shape[axis] == 0:
        return e.node("Identity", [e.constant(np.zeros(t.shape, np.int64))])
    dtype = dt.uint8 if t.dtype is dt.bool_ else t.dtype
    x = e.cast(x, dtype) if dtype is not t.dtype else x
    nd = len(t.shape)
    perm = [axis] + [d for d in range(nd) if d != axis]
    moved = e.node("Transpose", [x], perm=perm) if axis else x
    row = tuple(t.shape[d] for d in perm[1:])
    value_type, pos_type = TensorType(row, dtype), TensorType(row, dt.int64)
    step_type = TensorType((), dt.int64)

    def step(best, pos, j, v):
        take = e.node("GreaterOrEqual" if kind == "cummax" else "LessOrEqual", [v, best])
        if dtype.is_floating_point:
            take = e.node("Or", [take, e.node("IsNaN", [v])])
        best = e.node("Where", [take, v, best])
        pos = e.node("Where", [take, j, pos])
        return best, pos, e.node("Add", [j, e.scalar(1, dt.int64)]), e.node("Identity", [pos])

    first = e.node("Gather", [moved, e.scalar(0, dt.int64)], axis=0)
    zeros = e.node("ConstantOfShape", [e.shape(row)], value=np.zeros(1, np.int64))
    body = e.body(
        [value_type, pos_type, step_type, value_type],
        step,
        "cumulative_step",
        [value_type, pos_type, step_type, pos_type],
    )
    *_, stacked = e.node(
        "Scan",
        [first, zeros, e.scalar(0, dt.int64), moved],
        outputs=4,
        body=body,
        num_scan_inputs=1,
    )
    back = [perm.index(d) for d in range(nd)]
    return e.node("Transpose", [stacked], perm=back) if axis else stacked


_SELECT = register(
    OpDef(
        name="select_index",
        onnx=_onnx_select_index,
        kind="reduce",
        infer=_select_infer,
        kernel=_select_kernel,
        cost=reduction_cost,
        doc="select_index(x; kind, axis): the positions cummax / cummin / median / nanmedian / "
        "mode select along axis (int64; kept as a size-1 axis for the reductions)",
    )
)


def _selected(kind, x, dim, keepdim):
    x = to_tensor(x)
    if x.dtype is dt.bool_ and kind in ("median", "nanmedian"):
        raise DTypeError(f"{kind} is not defined for bool tensors (as in PyTorch)", op=kind)
    axis = normalize_axis(kind, dim, max(x.ndim, 1))
    idx = apply(_SELECT, x, kind=kind, axis=axis)
    if x.ndim == 0:
        return E.clone(x), idx
    values = E.gather(x, axis, idx)
    if kind not in _SCANS and not keepdim:
        values, idx = E.squeeze(values, axis), E.squeeze(idx, axis)
    return values, idx


@export(method=True)
def cummax(input, dim: int):
    """Running maxima along ``dim`` and their positions, a named tuple (values, indices).
    Ties take the later position, and NaN propagates, as in PyTorch."""
    return cummax_t(*_selected("cummax", input, dim, True))


@export(method=True)
def cummin(input, dim: int):
    """Running minima along ``dim`` and their positions, a named tuple (values, indices)."""
    return cummin_t(*_selected("cummin", input, dim, True))


def _whole_median(x, kind):
    """median()/nanmedian() without a dim: the lower median of all elements, a 0-d tensor whose
    gradient is shared evenly among the elements equal to it (PyTorch's rule)."""
    flat = E.reshape(x, (-1,))
    if flat.shape[0] == 0:
        return E.full((), float("nan"), dtype=x.dtype)
    values, _ = _selected(kind, flat, 0, False)
    m = E.stop_gradient(values)
    if not x.dtype.is_floating_point:
        return m
    equal = E.logical_or(flat == m, E.logical_and(flat != flat, m != m))
    count = E.sum(E.cast(equal, x.dtype))
    return m + E.sum(E.where(equal, flat - m, 0.0)) / count


@export(method=True)
def median(input, dim: int | None = None, keepdim: bool = False):
    """Without ``dim``: the lower median of all elements (a 0-d tensor; NaN if any is NaN).
    With ``dim``: a named tuple (values, indices) of the lower medians along it. Positions
    among equal values may differ from PyTorch's (it leaves them unspecified)."""
    x = to_tensor(input)
    if dim is None:
        if x.dtype is dt.bool_:
            raise DTypeError("median is not defined for bool tensors (as in PyTorch)", op="median")
        return _whole_median(x, "median")
    return median_t(*_selected("median", x, dim, keepdim))


@export(method=True)
def nanmedian(input, dim: int | None = None, keepdim: bool = False):
    """median ignoring NaN (NaN only where every element is NaN)."""
    x = to_tensor(input)
    if dim is None:
        if x.dtype is dt.bool_:
            raise DTypeError("nanmedian is not defined for bool tensors", op="nanmedian")
        return _whole_median(x, "nanmedian")
    return nanmedian_t(*_selected("nanmedian", x, dim, keepdim))


@export(method=True)
def mode(input, dim: int = -1, keepdim: bool = False):
    """The most frequent value along ``dim`` (the smallest among equally frequent ones) and its
    last position, a named tuple (values, indices)."""
    return mode_t(*_selected("mode", input, dim, keepdim))


# ------------------------------------------------------------------------------ logcumsumexp


@export(method=True)
def logcumsumexp(input, dim: int):
    """``log(cumsum(exp(x)))`` along ``dim`` without overflow or underflow: each running value
    is the previous one log-added to the next element. Float tensors only, as in PyTorch."""
    x = to_tensor(input)
    if not x.dtype.is_floating_point:
        raise DTypeError(
            f"logcumsumexp is defined for float tensors, got {x.dtype}", op="logcumsumexp"
        )
    if x.ndim == 0:
        return E.clone(x)
    axis = normalize_axis("logcumsumexp", dim, x.ndim)
    # a running logaddexp, written as one log-sum-exp per prefix over a masked square, so it
    # differentiates through ember's ops (O(n^2) along dim: programs use it on short axes)
    n = x.shape[axis]
    moved = E.movedim(x, axis, -1)
    rows = E.unsqueeze(moved, -2)  # (..., 1, n): prefix i reads elements j <= i
    mask = to_tensor(np.tril(np.ones((n, n), bool)))
    masked = E.where(mask, rows, float("-inf"))
    out = E.logsumexp(masked, -1)
    return E.movedim(out, -1, axis)


# ------------------------------------------------------------------------- counting and NaN


@export(method=True)
def count_nonzero(input, dim=None):
    """The number of non-zero elements (over ``dim``: an int or a tuple), int64."""
    x = to_tensor(input)
    nz = x != 0
    return E.sum(E.cast(nz, dt.int64), dim) if dim is not None else E.sum(E.cast(nz, dt.int64))


@export(method=True)
def nansum(input, dim=None, keepdim: bool = False, *, dtype=None):
    """sum with NaN counted as 0 (the gradient is 0 there)."""
    x = to_tensor(input)
    if dtype is not None:
        x = E.cast(x, dtype)
    if x.dtype.is_floating_point:
        x = E.where(x != x, 0.0, x)
    return E.sum(x, dim, keepdim) if dim is not None else E.sum(x, keepdim=keepdim)


@export(method=True)
def nanmean(input, dim=None, keepdim: bool = False, *, dtype=None):
    """mean over the non-NaN elements (NaN where there are none). Float tensors only."""
    x = to_tensor(input)
    if dtype is not None:
        x = E.cast(x, dtype)
    if not x.dtype.is_floating_point:
        raise DTypeError(f"nanmean is defined for float tensors, got {x.dtype}", op="nanmean")
    kept = x == x
    total = nansum(x, dim, keepdim)
    count = nansum(E.cast(kept, x.dtype), dim, keepdim)
    return total / count


@export
def var_mean(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """``(var, mean)`` over ``dim`` in one call; ``correction`` (default 1) or PyTorch's older
    ``unbiased`` flag, positional after dim as in PyTorch's overload (so ``var_mean(x, 1,
    True)`` is unbiased, not keepdim: pass ``keepdim=`` by name)."""
    x = to_tensor(input)
    if isinstance(dim, bool):  # var_mean(x, unbiased)
        unbiased, dim = dim, None
    kw = {"unbiased": unbiased} if unbiased is not None else {}
    if correction is not None:
        kw = {"correction": correction}
    return E.var(x, dim, keepdim, **kw), E.mean(x, dim, keepdim)


@export
def std_mean(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """``(std, mean)`` over ``dim`` in one call (see var_mean)."""
    x = to_tensor(input)
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    kw = {"unbiased": unbiased} if unbiased is not None else {}
    if correction is not None:
        kw = {"correction": correction}
    return E.std(x, dim, keepdim, **kw), E.mean(x, dim, keepdim)


# ------------------------------------------------------------------------------ dist, equal


@export(method=True)
def dist(input, other, p: float = 2):
    """The p-norm of ``input - other`` (broadcast), a 0-d tensor: p = inf the largest
    |difference|, p = 0 the number of non-zero differences. The gradient at a zero distance is
    0, as in PyTorch."""
    a, b = to_tensor(input), to_tensor(other)
    if not (a.dtype.is_floating_point and b.dtype.is_floating_point):
        raise DTypeError(
            f"dist is defined for float tensors, got {a.dtype} and {b.dtype}", op="dist"
        )
    d = E.abs(a - b)
    p = float(p)
    if p == float("inf"):
        return E.amax(d) if d.numel() else E.sum(d)
    if p == float("-inf"):
        return E.amin(d) if d.numel() else E.sum(d)
    if p == 0:  # (d * 0 links the count to the inputs: its gradient is 0, as PyTorch's)
        return E.sum(E.where(d != 0, 1.0, d * 0))
    if p == 1:
        return E.sum(d)
    total = E.sum(d * d if p == 2 else d**p)
    zero = total == 0
    safe = E.where(zero, 1.0, total)
    return E.where(zero, 0.0, E.sqrt(safe) if p == 2 else safe ** (1.0 / p))


@export(method=True)
def equal(input, other) -> bool:
    """True if both tensors have the same shape and elements (a Python bool; NaN is unequal
    to itself, as in PyTorch)."""
    a, b = to_tensor(input), to_tensor(other)
    if tuple(a.shape) != tuple(b.shape):
        return False
    return bool(E.all(a == b))


# --------------------------------------------------------------------- differences and areas


@export(method=True)
def diff(input, n: int = 1, dim: int = -1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim``, with ``prepend`` / ``append`` joined to
    the input first. Bool tensors give ``!=`` of neighbours, as in PyTorch."""
    x = to_tensor(input)
    if x.ndim == 0:
        raise ShapeError("diff needs a tensor of at least one dimension", op="diff")
    axis = normalize_axis("diff", dim, x.ndim)
    parts = [x]
    if prepend is not None:
        parts.insert(0, _edge(prepend, x, axis))
    if append is not None:
        parts.append(_edge(append, x, axis))
    if len(parts) > 1:
        x = E.cat(parts, axis)
    for _ in range(n):
        size = x.shape[axis]
        if size == 0:
            break
        hi = E.narrow(x, axis, 1, size - 1)
        lo = E.narrow(x, axis, 0, size - 1)
        x = E.logical_xor(hi, lo) if x.dtype is dt.bool_ else hi - lo
    return x


def _edge(value, x, axis):
    t = to_tensor(value, None if isinstance(value, TensorBase) else x.dtype)
    if t.ndim == 0:  # a scalar is one slice along dim
        shape = list(x.shape)
        shape[axis] = 1
        t = E.broadcast_to(t, tuple(shape))
    return t


def _spacing(y, x, dx, axis, op):
    """The widths of trapezoid's intervals along axis: x's differences, or dx."""
    if x is None:
        return 1.0 if dx is None else dx
    if dx is not None:
        raise TypeError(f"{op}: give x or dx, not both")
    x = to_tensor(x)
    if x.ndim == 1:
        widths = diff(x)
        shape = [1] * y.ndim
        shape[axis] = widths.shape[0]
        return E.reshape(widths, tuple(shape))
    return diff(x, dim=axis)


def _trapezoid_terms(y, x, dx, dim, op):
    y = to_tensor(y)
    if y.dtype is dt.bool_:
        raise DTypeError(f"{op}: bool y is not supported (as in PyTorch)", op=op)
    axis = normalize_axis(op, dim, y.ndim)
    size = y.shape[axis]
    if size == 0:
        return None, axis, y
    width = _spacing(y, x, dx, axis, op)
    left = E.narrow(y, axis, 0, size - 1)
    right = E.narrow(y, axis, 1, size - 1)
    if isinstance(width, (int, float)):
        return (left + right) * (0.5 * width), axis, y
    return (left + right) * width * 0.5, axis, y


@export
def trapezoid(y, x=None, *, dx=None, dim: int = -1):
    """The trapezoid rule along ``dim``: sample points ``x`` (a tensor) or a constant spacing
    ``dx`` (default 1)."""
    terms, axis, y = _trapezoid_terms(y, x, dx, dim, "trapezoid")
    if terms is None:  # no intervals: zeros, unconnected to y (as PyTorch's)
        return E.zeros_like(E.sum(E.stop_gradient(y), axis))
    return E.sum(terms, axis)


@export
def trapz(y, x=None, *, dx=None, dim: int = -1):
    """PyTorch's older name of trapezoid."""
    return trapezoid(y, x, dx=dx, dim=dim)


@export
def cumulative_trapezoid(y, x=None, *, dx=None, dim: int = -1):
    """The running trapezoid rule along ``dim`` (one element fewer than y along it)."""
    terms, axis, y = _trapezoid_terms(y, x, dx, dim, "cumulative_trapezoid")
    if terms is None:
        return y
    return E.cumsum(terms, axis)


# --------------------------------------------------------------------------------- histc


def _histc_infer(x, *, bins, lo, hi):
    if not x.dtype.is_floating_point:
        raise DTypeError(f"histc is defined for float tensors, got {x.dtype}", op="histc")
    return TensorType((bins,), x.dtype)


def _histc_kernel(x, *, bins, lo, hi):
    v = x.astype(np.float64).reshape(-1)
    if lo == hi and v.size:
        finite = v[np.isfinite(v)]
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (lo, hi)
    if lo == hi:
        lo, hi = lo - 1, hi + 1
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
    return apply(_HISTC, to_tensor(input), bins=int(bins), lo=float(min), hi=float(max))


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
    if seq.ndim <= 1:
        return np.searchsorted(seq, values, side=side).astype(out_dtype)
    rows = seq.reshape(-1, seq.shape[-1])
    vals = values.reshape(-1, values.shape[-1])
    out = np.stack([np.searchsorted(r, v, side=side) for r, v in zip(rows, vals)])
    return out.reshape(values.shape).astype(out_dtype)


def _onnx_searchsorted(e):
    """The insertion position is the count of elements before it: of the row's elements below
    the value (``right``: not above it), NaN ordered above every number as in NumPy."""
    seq, values = e.inputs
    st, vt = e.in_types
    common = np.result_type(st.dtype.np, vt.dtype.np)
    if common == dt.bfloat16.np or st.dtype is dt.bfloat16:
        common = np.dtype(np.float32)
    common = dt.from_numpy_dtype(common)
    seq, values = e.cast(seq, common), e.cast(values, common)
    v = e.node("Unsqueeze", [values, e.ints([-1])])
    s = seq if len(st.shape) <= 1 else e.node("Unsqueeze", [seq, e.ints([-2])])
    if e.attrs["right"]:
        before = e.node("LessOrEqual", [s, v])
    else:
        before = e.node("Less", [s, v])
    if common.is_floating_point:
        v_nan = e.node("IsNaN", [v])
        if e.attrs["right"]:
            before = e.node("Or", [before, v_nan])
        else:
            s_number = e.node("Not", [e.node("IsNaN", [s])])
            before = e.node("Or", [before, e.node("And", [v_nan, s_number])])
    count = _onnx.reduce(e, "ReduceSum", e.cast(before, dt.int64), (-1,), False)
    return e.cast(count, e.out_types[0].dtype)


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
            raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ValueError("searchsorted: side='left' contradicts right=True")
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
