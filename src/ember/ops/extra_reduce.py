"""Issue 19's long tail of reductions and scans, PyTorch's names: cummax, cummin, median,
nanmedian, mode, count_nonzero, nansum, nanmean, std_mean and var_mean (logcumsumexp is in
ops/logcumsumexp.py; dist, equal, diff and the trapezoids in ops/differences.py; histc,
searchsorted and bucketize in ops/binning.py).

Selections (cummax, cummin, median, nanmedian, mode) are one primitive, ``select_index``, that
computes the chosen positions (int64, no gradient) with a NumPy kernel; the values are a
``gather`` of the input at them, so the gradient goes to the selected elements, as PyTorch's
does. The rest are composites of ember's ops.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .. import return_types
from ..errors import ArgumentError, AxisError, DTypeError, KernelDTypeError
from ..types import TensorType
from . import api as E
from ._limited import refuse_limited
from ._node_names import renames
from ._registry import OpDef, apply, export, register
from ._stl_steps import Steps
from ._util import normalize_axes, normalize_axis, reduction_cost, refuse_complex
from .cast import accumulated_as
from .promotion import to_tensor

cummax_t = return_types.cummax
cummin_t = return_types.cummin
median_t = return_types.median
nanmedian_t = return_types.nanmedian
mode_t = return_types.mode

_SCANS = ("cummax", "cummin")
_KINDS = ("cummax", "cummin", "median", "nanmedian", "mode")


# ---------------------------------------------------------------------- select_index primitive


def _select_infer(x, *, kind, axis):
    if kind not in _KINDS:
        raise ArgumentError(f"select_index: unknown kind {kind!r}")
    shape = list(x.shape)
    if kind not in _SCANS:
        if x.ndim and x.shape[axis] == 0:
            raise AxisError(
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
    """The most frequent value's position along the last axis, as PyTorch's CPU kernel finds
    it: the row's (value, position) pairs sorted by ``std::sort`` on the value, runs of equal
    values counted (a NaN equals nothing: a run of one), the first longest run taking it, and
    its last pair's position reported. ``std::sort`` is not stable: where the chosen value
    occurs more than once in a row longer than its insertion-sort threshold (16), or the row
    holds NaN, its steps decide the position (ops/_stl_steps.py); elsewhere it is the value's
    last occurrence."""
    rows = x.reshape(-1, x.shape[-1])
    out = np.empty(rows.shape[0], np.int64)
    n = rows.shape[1]
    for r, row in enumerate(rows):
        nan = row != row
        values, counts = np.unique(row[~nan], return_counts=True)
        if not nan.any() and (n <= 16 or counts.max() == 1):
            best = values[np.argmax(counts)]  # (np.unique sorts: the first maximum is smallest)
            out[r] = np.flatnonzero(row == best)[-1]
        else:
            out[r] = _sorted_mode(row.tolist())
    return out.reshape(x.shape[:-1])


def _sorted_mode(row: list) -> int:
    pairs = [(v, j) for j, v in enumerate(row)]
    Steps(pairs, lambda a, b: a[0] < b[0]).sort(0, len(pairs))
    best, count, position = 0, 0, 0
    for i, (v, j) in enumerate(pairs):
        count += 1
        if i == len(pairs) - 1 or v != pairs[i + 1][0]:
            if count > best:
                best, position = count, j
            count = 0
    return position


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


def _select_fast(x, *, kind, axis):
    """kernels/crunning.py's scan for cummax's and cummin's positions (the same comparisons:
    this kernel's positions); None for the other kinds and dtypes."""
    if kind not in _SCANS or x.ndim == 0:
        return None
    from ..kernels import crunning

    return crunning.positions(x, axis, kind)


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
        fast=_select_fast,
        cost=reduction_cost,
        doc="select_index(x; kind, axis): the positions cummax / cummin / median / nanmedian / "
        "mode select along axis (int64; kept as a size-1 axis for the reductions)",
    )
)


def _selected(kind, x, dim, keepdim):
    x = to_tensor(x)
    if kind in _SCANS and x.ndim and 0 in tuple(x.shape) and isinstance(dim, int):
        # PyTorch returns an empty tensor's running maxima/minima before it reads the dim,
        # so even an out-of-range one is accepted: every axis gives the same empty result
        dim = 0
    axis = normalize_axis(kind, dim, max(x.ndim, 1))  # (PyTorch checks the dim first)
    if x.ndim and x.shape[axis] == 0 and kind not in _SCANS:  # (then its size: before dtypes)
        raise AxisError(
            f"{kind}: cannot reduce the empty dimension {axis} of shape {tuple(x.shape)}",
            op=kind,
        )
    if x.dtype is dt.bool_ and kind in ("median", "nanmedian"):
        raise KernelDTypeError(f"{kind} is not defined for bool tensors (as in PyTorch)", op=kind)
    idx = apply(_SELECT, x, kind=kind, axis=axis)
    if x.ndim == 0:
        return E.clone(x), idx
    values = E.gather(x, axis, idx)
    if kind not in _SCANS and not keepdim:
        values, idx = E.squeeze(values, axis), E.squeeze(idx, axis)
    return values, idx


@export(method=True)
@renames("CummaxBackward0")
def cummax(input, dim: int):
    """Running maxima along ``dim`` and their positions, a named tuple (values, indices).
    Ties take the later position, and NaN propagates, as in PyTorch."""
    return cummax_t(*_selected("cummax", input, dim, True))


@export(method=True)
@renames("CumminBackward0")
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
@renames(lambda input, dim=None, keepdim=False: f"MedianBackward{0 if dim is None else 1}")
def median(input, dim: int | None = None, keepdim: bool = False):
    """Without ``dim``: the lower median of all elements (a 0-d tensor; NaN if any is NaN).
    With ``dim``: a named tuple (values, indices) of the lower medians along it. Positions
    among equal values may differ from PyTorch's (it leaves them unspecified)."""
    x = to_tensor(input)
    if dim is None:
        if x.dtype is dt.bool_:
            raise KernelDTypeError(
                "median is not defined for bool tensors (as in PyTorch)", op="median"
            )
        return _whole_median(x, "median")
    return median_t(*_selected("median", x, dim, keepdim))


@export(method=True)
@renames(lambda input, dim=None, keepdim=False: f"NanmedianBackward{0 if dim is None else 1}")
def nanmedian(input, dim: int | None = None, keepdim: bool = False):
    """median ignoring NaN (NaN only where every element is NaN)."""
    x = to_tensor(input)
    if dim is None:
        if x.dtype is dt.bool_:
            raise KernelDTypeError("nanmedian is not defined for bool tensors", op="nanmedian")
        return _whole_median(x, "nanmedian")
    return nanmedian_t(*_selected("nanmedian", x, dim, keepdim))


@export(method=True)
@renames("ModeBackward0")
def mode(input, dim: int = -1, keepdim: bool = False):
    """The most frequent value along ``dim`` (the smallest among equally frequent ones) and its
    last position, a named tuple (values, indices)."""
    return mode_t(*_selected("mode", input, dim, keepdim))


# ------------------------------------------------------------------------- counting and NaN


@export(method=True)
def count_nonzero(input, dim=None):
    """The number of non-zero elements (over ``dim``: an int or a tuple), int64."""
    x = to_tensor(input)
    refuse_limited("count_nonzero", x)
    nz = x != 0
    return E.sum(E.cast(nz, dt.int64), dim) if dim is not None else E.sum(E.cast(nz, dt.int64))


@export(method=True)
@renames("NansumBackward0")
def nansum(input, dim=None, keepdim: bool = False, *, dtype=None):
    """sum with NaN counted as 0 (the gradient is 0 there). Complex tensors are refused, as
    PyTorch does."""
    x = to_tensor(input)
    if dim is not None:
        normalize_axes("nansum", dim, x.ndim)  # (PyTorch checks the dims before the dtype)
    reason = "nansum on CPU does not support complex inputs (as PyTorch)"
    refuse_complex("nansum", x, reason=reason)
    if dtype is not None:
        refuse_complex("nansum", TensorType((), dt.as_dtype(dtype)), reason=reason)

    def total(v):
        if v.dtype.is_floating_point:
            v = E.where(v != v, 0.0, v)
        return E.sum(v, dim, keepdim) if dim is not None else E.sum(v, keepdim=keepdim)

    return accumulated_as("nansum", x, dtype, total)


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
@renames("VarMeanBackward0")
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
    return E.var(x, dim, keepdim=keepdim, **kw), E.mean(x, dim, keepdim)


@export
@renames("StdMeanBackward0")
def std_mean(input, dim=None, unbiased=None, keepdim: bool = False, *, correction=None):
    """``(std, mean)`` over ``dim`` in one call (see var_mean)."""
    x = to_tensor(input)
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    kw = {"unbiased": unbiased} if unbiased is not None else {}
    if correction is not None:
        kw = {"correction": correction}
    return E.std(x, dim, keepdim=keepdim, **kw), E.mean(x, dim, keepdim)
