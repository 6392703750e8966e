"""Counting primitives with PyTorch's names: ``unique_consecutive`` (the distinct values or
slices of each run, with inverse indices and counts) and ``histogram`` (counts, or weights,
per bin, and the bin edges, as ``ember.return_types.histogram``) and ``histogramdd`` (the
same per D-dimensional bin, with each dimension's edges). Neither is differentiable,
as in PyTorch.

``histogram``'s result shapes depend only on its arguments, so it captures; the edges of
``bins=n`` come from the data's range when no ``range`` is given (computed by the kernel, as
PyTorch's linspace: from the start for the first half, from the end for the second). A value
lies in the bin whose edges enclose it, the last bin closed on the right; values outside the
edges are not counted. ``unique_consecutive``'s size depends on the values, so it runs
eagerly only, as ``unique``.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .. import return_types
from ..errors import ArgumentError, ArgumentTypeError, DTypeError, ShapeError
from ..types import TensorType
from ._registry import OpDef, TensorBase, apply, export, register
from ._util import memory_cost, normalize_axis
from .promotion import to_tensor
from .sorting import _rows, grouped, select_parts, unique_infer

# --------------------------------------------------------------------- unique_consecutive


def _runs(a: np.ndarray, axis):
    """(first index of each run, inverse, counts): a run is equal neighbouring elements (rows
    along ``axis``); NaN equals nothing."""
    rows = _rows(a, axis)
    n = rows.shape[0]
    if n == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    new = np.ones(n, bool)
    if n > 1:
        new[1:] = np.any(rows[1:] != rows[:-1], axis=1)
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, n)).astype(np.int64)
    return starts, (np.cumsum(new) - 1).astype(np.int64), counts


def _consecutive_kernel(x, *, axis, count):
    return select_parts(x, axis, count, _runs, "runs", "unique_consecutive")


_UNIQUE_CONSECUTIVE = register(
    OpDef(
        name="unique_consecutive",
        kind="index",
        infer=unique_infer,
        kernel=_consecutive_kernel,
        cost=memory_cost,
        num_outputs=3,
        batch=None,
        doc="unique_consecutive(x, axis, count): the first element (slice along axis) of each "
        "run of equal neighbours, the inverse indices and the run lengths. The count is "
        "data-dependent: the public function reads it from x when the call is made.",
    )
)


@export(method=True)
def unique_consecutive(
    input, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None
):
    """One element (``dim=None``: of the flattened input) or slice along ``dim`` per run of
    equal neighbours; with ``return_inverse`` the run of each element (slice), with
    ``return_counts`` each run's length. Each NaN is its own run. Eager only (the result's
    size depends on the values); not differentiable."""
    x = to_tensor(input)
    axis = None if dim is None else normalize_axis("unique_consecutive", dim, x.ndim)
    return grouped(_UNIQUE_CONSECUTIVE, _runs, x, axis, return_inverse, return_counts)


# ------------------------------------------------------------------------------ histogram


def _linspace(start, end, steps, dtype):
    """PyTorch's CPU linspace: ``start + step * i`` for the first half, ``end - step * (n - 1 -
    i)`` for the rest, the step rounded to the dtype and each value rounded once (its vector
    loop's fused multiply-add; float64's products here round twice, within an ulp)."""
    start, end = dtype.type(start), dtype.type(end)
    step = np.float64((end - start) / dtype.type(steps - 1))
    i = np.arange(steps, dtype=np.float64)
    low = np.float64(start) + step * i
    high = np.float64(end) - step * (steps - 1 - i)
    return np.where(i < steps // 2, low, high).astype(dtype)


def _histogram_infer(x, *rest, bins, range, density, edges, weighted):  # noqa: A002
    name = "histogram"
    if not x.dtype.is_floating_point or x.dtype in (dt.float16, dt.bfloat16):
        raise DTypeError(f"histogram is not implemented for {x.dtype}", op=name)
    for t in rest:
        if t.dtype != x.dtype:
            raise DTypeError(
                f"the bins and weight must have the input's dtype {x.dtype}, got {t.dtype}",
                op=name,
            )
    count = bins
    if edges:
        if rest[0].ndim != 1 or rest[0].shape[0] < 1:
            raise ShapeError("bins must be a 1-d tensor of at least one edge", op=name)
        count = rest[0].shape[0] - 1
    if weighted and tuple(rest[-1].shape) != tuple(x.shape):
        raise ShapeError(
            f"weight has shape {tuple(rest[-1].shape)}, the input {tuple(x.shape)}", op=name
        )
    return TensorType((count,), x.dtype), TensorType((count + 1,), x.dtype)


def _histogram_kernel(x, *rest, bins, range, density, edges, weighted):  # noqa: A002
    values = x.reshape(-1)
    weight = rest[-1].reshape(-1) if weighted else None
    if edges:
        bin_edges = rest[0]
    else:
        if range is not None:
            low, high = float(range[0]), float(range[1])
        elif values.size:
            low, high = float(values.min()), float(values.max())
        else:
            low, high = 0.0, 1.0
        if not (np.isfinite(low) and np.isfinite(high)):
            raise ShapeError(f"histogram's range [{low}, {high}] is not finite", op="histogram")
        if low > high:
            raise ShapeError(f"histogram's range [{low}, {high}] is reversed", op="histogram")
        if low == high:
            low, high = low - 0.5, high + 0.5
        bin_edges = _linspace(low, high, bins + 1, x.dtype)
    n = bin_edges.size - 1
    hist = np.zeros(n, np.float64)
    if n > 0 and values.size:
        inside = (values >= bin_edges[0]) & (values <= bin_edges[-1])
        pos = np.searchsorted(bin_edges, values[inside], side="right") - 1
        pos = np.minimum(pos, n - 1)  # the last bin holds its right edge
        w = None if weight is None else weight[inside].astype(np.float64)
        hist = np.bincount(pos, weights=w, minlength=n).astype(np.float64)
    if density:
        total = hist.sum()
        with np.errstate(all="ignore"):
            hist = hist / (total * np.diff(bin_edges.astype(np.float64)))
    return hist.astype(x.dtype), np.asarray(bin_edges, x.dtype)


_HISTOGRAM = register(
    OpDef(
        name="histogram",
        kind="index",
        infer=_histogram_infer,
        kernel=_histogram_kernel,
        cost=memory_cost,
        num_outputs=2,
        batch=None,
        doc="histogram(x, [edges], [weight], bins, range, density): counts (or weight sums, or "
        "densities) per bin, and the bin edges",
    )
)


@export(method=True)
def histogram(input, bins=100, *, range=None, weight=None, density=False):  # noqa: A002
    """``(hist, bin_edges)``: the input's values counted into ``bins`` equal bins over
    ``range`` (default: the values' min to max) or into the bins between the edges of a 1-d
    tensor ``bins``; ``weight`` (the input's shape) sums weights instead of counting,
    ``density`` divides by the total and the bin widths. Float32/float64, as PyTorch."""
    x = to_tensor(input)
    inputs = [x]
    edges = isinstance(bins, TensorBase)
    if edges:
        inputs.append(bins)
        count = 0
    else:
        if not isinstance(bins, int) or isinstance(bins, bool) or bins < 1:
            raise ArgumentError(f"histogram: bins must be a positive int or a tensor, got {bins!r}")
        count = bins
    if range is not None:
        range = (float(range[0]), float(range[1]))  # noqa: A001
    if weight is not None:
        inputs.append(to_tensor(weight))
    hist, bin_edges = apply(
        _HISTOGRAM,
        *inputs,
        bins=count,
        range=range,
        density=bool(density),
        edges=edges,
        weighted=weight is not None,
    )
    return return_types.histogram(hist, bin_edges)


# ---------------------------------------------------------------------------- histogramdd


def _histogramdd_infer(x, *rest, bins, ranges, density, edges, weighted):
    name = "histogramdd"
    if not x.dtype.is_floating_point or x.dtype in (dt.float16, dt.bfloat16):
        raise DTypeError(f"histogramdd is not implemented for {x.dtype}", op=name)
    d = x.shape[-1]
    for t in rest:
        if t.dtype != x.dtype:
            raise DTypeError(
                f"the bins and weight must have the input's dtype {x.dtype}, got {t.dtype}",
                op=name,
            )
    counts = list(bins)
    if edges:
        for k, e in enumerate(rest[:d]):
            if e.ndim != 1 or e.shape[0] < 1:
                raise ShapeError(
                    f"bins[{k}] must be a 1-d tensor of at least one edge, got shape "
                    f"{tuple(e.shape)}",
                    op=name,
                )
        counts = [e.shape[0] - 1 for e in rest[:d]]
    if weighted and tuple(rest[-1].shape) != tuple(x.shape[:-1]):
        raise ShapeError(
            f"weight has shape {tuple(rest[-1].shape)}, expected the input's leading "
            f"{tuple(x.shape[:-1])}",
            op=name,
        )
    return (TensorType(tuple(counts), x.dtype),) + tuple(
        TensorType((c + 1,), x.dtype) for c in counts
    )


def _histogramdd_kernel(x, *rest, bins, ranges, density, edges, weighted):
    d = x.shape[-1]
    values = x.reshape(-1, d)
    weight = rest[-1].reshape(-1).astype(np.float64) if weighted else None
    all_edges = []
    for k in range(d):
        if edges:
            all_edges.append(np.asarray(rest[k]))
            continue
        column = values[:, k]
        if ranges is not None:
            low, high = ranges[2 * k], ranges[2 * k + 1]
        elif column.size:
            low, high = float(column.min()), float(column.max())
        else:
            low, high = 0.0, 1.0
        if not (np.isfinite(low) and np.isfinite(high)):
            raise ShapeError(
                f"histogramdd's range [{low}, {high}] of dimension {k} is not finite",
                op="histogramdd",
            )
        if low > high:
            raise ShapeError(
                f"histogramdd's range [{low}, {high}] of dimension {k} is reversed",
                op="histogramdd",
            )
        if low == high:
            low, high = low - 0.5, high + 0.5
        all_edges.append(_linspace(low, high, bins[k] + 1, x.dtype))
    counts = tuple(e.size - 1 for e in all_edges)
    hist = np.zeros(counts, np.float64)
    if all(c > 0 for c in counts) and values.shape[0]:
        inside = np.ones(values.shape[0], bool)
        positions = []
        for k, e in enumerate(all_edges):
            inside &= (values[:, k] >= e[0]) & (values[:, k] <= e[-1])
        for k, e in enumerate(all_edges):
            pos = np.searchsorted(e, values[inside, k], side="right") - 1
            positions.append(np.minimum(pos, counts[k] - 1))  # the last bin holds its edge
        flat = np.ravel_multi_index(tuple(positions), counts)
        w = None if weight is None else weight[inside]
        hist = np.bincount(flat, weights=w, minlength=int(np.prod(counts))).reshape(counts)
    if density:
        volume = np.ones(counts, np.float64)
        for k, e in enumerate(all_edges):
            shape = [1] * d
            shape[k] = counts[k]
            volume = volume * np.diff(e.astype(np.float64)).reshape(shape)
        with np.errstate(all="ignore"):
            hist = hist / (hist.sum() * volume)
    return (hist.astype(x.dtype),) + tuple(np.asarray(e, x.dtype) for e in all_edges)


_HISTOGRAMDD = register(
    OpDef(
        name="histogramdd",
        kind="index",
        infer=_histogramdd_infer,
        kernel=_histogramdd_kernel,
        cost=memory_cost,
        num_outputs=None,
        batch=None,
        doc="histogramdd(x (..., D), [D edges], [weight], bins, ranges, density): counts (or "
        "weight sums, or densities) per D-dimensional bin, and each dimension's edges",
    )
)


@export
def histogramdd(input, bins=10, *, range=None, weight=None, density=False, out=None):  # noqa: A002
    """``torch.histogramdd``: ``(hist, bin_edges)`` of the points ``input`` (..., D): ``bins``
    an int (each dimension), D ints, or D 1-d tensors of edges; ``range`` 2D floats (min and
    max per dimension; default: the points' own); ``weight`` (input.shape[:-1]) sums weights
    instead of counting; ``density`` divides by the total and the bins' volumes. As
    `histogram` per dimension: a point is counted where it lies inside every dimension's
    edges, each last bin closed on the right. Float32/float64, as PyTorch. ``bin_edges`` is a
    tuple of D tensors."""
    if out is not None:
        raise ArgumentTypeError("histogramdd: out= is not supported (ember has no out tensors)")
    x = to_tensor(input)
    name = "histogramdd"
    if x.ndim < 2:
        raise ShapeError(
            f"input tensor should have at least 2 dimensions, got shape {tuple(x.shape)}",
            op=name,
        )
    d = x.shape[-1]
    inputs = [x]
    edges = isinstance(bins, (list, tuple)) and any(isinstance(b, TensorBase) for b in bins)
    if isinstance(bins, TensorBase):
        raise ArgumentTypeError(
            "histogramdd: bins must be an int, a sequence of ints or of tensors"
        )
    if edges:
        if len(bins) != d:
            raise ShapeError(
                f"The size of bins must be equal to the innermost dimension of the input "
                f"({d}), got {len(bins)}",
                op=name,
            )
        inputs += [to_tensor(b) for b in bins]
        counts = ()
    else:
        counts = (bins,) * d if isinstance(bins, int) and not isinstance(bins, bool) else bins
        counts = tuple(counts)
        if len(counts) != d:
            raise ShapeError(
                f"The size of bins must be equal to the innermost dimension of the input "
                f"({d}), got {len(counts)}",
                op=name,
            )
        for c in counts:
            if not isinstance(c, int) or isinstance(c, bool) or c < 1:
                raise ArgumentError(f"histogramdd: bins must be positive ints, got {bins!r}")
    ranges = None
    if range is not None:
        ranges = tuple(float(v) for v in range)
        if len(ranges) != 2 * d:
            raise ShapeError(
                f"for a {d}-dimensional histogram range should have {2 * d} elements, but got "
                f"{len(ranges)}",
                op=name,
            )
    if weight is not None:
        inputs.append(to_tensor(weight))
    out = apply(
        _HISTOGRAMDD,
        *inputs,
        bins=counts,
        ranges=ranges,
        density=bool(density),
        edges=edges,
        weighted=weight is not None,
    )
    return return_types.histogramdd(out[0], tuple(out[1:]))
