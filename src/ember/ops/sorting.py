"""Sorting and selecting by order: the ``argsort`` and ``unique`` primitives; sort, topk and
argsort built on them (PyTorch semantics).

``argsort`` is the one sorting primitive: sort and topk gather their values at its indices, so
their gradient is gather's (a scatter-add of the output gradient back to the chosen
positions), and the indices never carry a gradient. Its order is *stable* (equal elements
keep their order, descending too), PyTorch's ``stable=True``; with ``stable=False`` equal
elements are ordered as PyTorch's CPU sort (``std::sort``) leaves them. NaN sorts above every
number (last ascending, first descending), as in PyTorch. With ``k`` (topk) it gives
PyTorch's topk positions. Both differ from the stable order only in the order of equal values
(ops/_torch_order.py, kernels/ctopk.py).

``unique``'s output size is data-dependent: like ``nonzero`` (ops/selection.py), the public
function reads the number of distinct values from the data when the call is made and records
it as an attribute; the kernel checks that it still holds. A graph being captured has no data,
so capture refuses ``unique`` with a `TraceError` naming it, except on integer host values:
constants the function made (and pure calls on them) and the integer arguments
``ember.function`` keys its graphs on (graph/symbolic_tensor.py ``host_value``).
"""

from __future__ import annotations

import operator

import numpy as np

from .. import dtypes as dt
from .. import return_types
from ..errors import (
    AxisError,
    DTypeError,
    KernelDTypeError,
    NeedsArgumentValue,
    ShapeError,
    TraceError,
)
from ..types import TensorType
from . import api as E
from . import qtensor_ops
from ._limited import refuse_limited
from ._node_names import rename_node
from ._registry import OpDef, apply, export, register
from ._torch_order import sort_positions, topk_positions
from ._util import fmt_shape, memory_cost, normalize_axis, numel, refuse_complex
from .promotion import to_tensor

# torch.return_types.sort / topk: (values, indices), also unpackable as a pair
SortResult = return_types.sort
TopkResult = return_types.topk


def _sortable(a: np.ndarray) -> np.ndarray:
    """An array NumPy sorts in the same order: bools as bytes, bfloat16 as float32 (exact)."""
    if a.dtype == np.bool_:
        return a.view(np.uint8)
    if a.dtype == dt.bfloat16.np:
        return a.astype(np.float32)
    return a


# ----------------------------------------------------------------------------------- argsort


def _argsort_infer(x, *, axis, descending, k=None, ordered=True, stable=True):
    if k is None or not x.ndim:
        return TensorType(tuple(x.shape), dt.int64)
    return TensorType(tuple(k if d == axis else s for d, s in enumerate(x.shape)), dt.int64)


def _stable_order(a: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    if not descending:
        return np.argsort(a, axis=axis, kind="stable")
    # a stable descending order: the stable ascending order of the reversed array, read
    # backwards, keeps equal elements in their original order (and puts NaN first)
    n = a.shape[axis]
    return n - 1 - np.flip(np.argsort(np.flip(a, axis), axis=axis, kind="stable"), axis)


# below this many elements along the axis (or for k above this share of them) sorting the
# whole row costs about what selecting first does
_SELECT_MIN, _SELECT_SHARE = 512, 8


def _first_k(a: np.ndarray, k: int, descending: bool) -> np.ndarray:
    """The first ``k`` of the stable order of each row of the 2-D, NaN-free ``a``, without
    sorting whole rows: the k-th value ``t`` (np.partition), the elements beyond ``t``, the
    first ones (by index) equal to ``t`` that complete k, then those k sorted stably."""
    rows, n = a.shape
    t = np.partition(a, n - k if descending else k - 1, axis=1)[:, n - k if descending else k - 1]
    t = t[:, None]
    beyond = a > t if descending else a < t
    equal = a == t
    need = k - beyond.sum(axis=1, keepdims=True)
    chosen = beyond | (equal & (np.cumsum(equal, axis=1) <= need))
    picked = np.nonzero(chosen)[1].reshape(rows, k)  # (row-major: each row's in index order)
    order = _stable_order(np.take_along_axis(a, picked, 1), 1, descending)
    return np.take_along_axis(picked, order, 1)


def _stable_first_k(rows: np.ndarray, k: int, descending: bool) -> np.ndarray:
    n = rows.shape[1]
    if (
        n < _SELECT_MIN
        or k * _SELECT_SHARE > n
        or (rows.dtype.kind == "f" and np.isnan(rows).any())
    ):
        return _stable_order(rows, 1, descending)[:, :k]
    return _first_k(rows, k, descending)


def _argsort_kernel(x, *, axis, descending, k=None, ordered=True, stable=True):
    """The stable order, or (``stable=False``) PyTorch's sort's; with ``k`` (topk) the
    positions PyTorch's topk reports. Both are the stable order's wherever no ties decide them
    (ops/_torch_order.py)."""
    if x.ndim == 0:
        return np.zeros((), np.int64)
    a = _sortable(x)
    if k is None and stable:
        return _stable_order(a, axis, descending).astype(np.int64, copy=False)
    rows = np.moveaxis(a, axis, -1)
    flat = rows.reshape(numel(rows.shape[:-1]), rows.shape[-1])
    if k is None:
        order = _stable_order(flat, 1, descending).astype(np.int64, copy=False)
        order = sort_positions(flat, descending, order).reshape(rows.shape)
        return np.ascontiguousarray(np.moveaxis(order, -1, axis))
    first = topk_positions(flat, k, descending, ordered, _stable_first_k(flat, k, descending))
    first = first.astype(np.int64, copy=False).reshape(rows.shape[:-1] + (k,))
    return np.ascontiguousarray(np.moveaxis(first, -1, axis))


def _argsort_fast(x, *, axis, descending, k=None, ordered=True, stable=True):
    """kernels/ctopk.py: PyTorch's sorting steps in C for topk and an unstable sort (the
    kernel's positions); None for a stable sort (NumPy's) and where it does not apply."""
    if (k is None and stable) or x.ndim == 0 or k == 0 or x.size == 0:
        return None
    from ..kernels import ctopk

    a = _sortable(x)
    n = a.shape[axis]
    rows = np.moveaxis(a, axis, -1)
    if k is None:
        first = ctopk.torch_sort(rows.reshape(-1, n), bool(descending))
        k = n
    else:
        first = ctopk.torch_k(rows.reshape(-1, n), k, bool(descending), bool(ordered))
    if first is None:
        return None
    first = first.reshape(rows.shape[:-1] + (k,))
    return np.ascontiguousarray(np.moveaxis(first, -1, axis))


def _argsort_cost(in_types, out_types, attrs):
    shape = [d if isinstance(d, int) else 1 for d in in_types[0].shape]  # (symbolic: 1)
    size = shape[attrs["axis"]] if shape else 1
    comparisons = int(numel(shape) * max(np.log2(max(size, 1)), 1))
    return memory_cost(in_types, out_types, attrs)._replace(flops=comparisons)


def _onnx_argsort(e):
    """TopK's indices: ONNX orders equal elements by index, as the stable kernel does (topk's
    ties: where PyTorch's selection picks or orders equal values otherwise, ONNX's differ)."""
    x, t = e.inputs[0], e.in_types[0]
    a = e.attrs
    if not t.shape:
        return e.node("Identity", [e.constant(np.zeros((), np.int64))])
    if t.dtype is dt.bool_:
        x = e.cast(x, dt.uint8)
    axis = a["axis"]
    k = a.get("k")
    k = e.dim(t.shape[axis] if k is None else k)
    _, indices = e.node(
        "TopK", [x, k], outputs=2, axis=axis, largest=int(a["descending"]), sorted=1
    )
    return indices


_ARGSORT = register(
    OpDef(
        name="argsort",
        onnx=_onnx_argsort,
        kind="index",
        infer=_argsort_infer,
        kernel=_argsort_kernel,
        fast=_argsort_fast,
        cost=_argsort_cost,
        batch=None,
        doc="argsort(x, axis, descending, k=None, ordered=True, stable=True): int64 indices "
        "that sort x along axis, stably (equal elements keep their order), or as PyTorch's "
        "sort(stable=False) orders equal elements; NaN sorts above every number. With k, the "
        "positions PyTorch's topk(k, sorted=ordered) reports (its libstdc++ selection's "
        "choice and order among equal values)",
    )
)


# complex numbers have no order: PyTorch refuses to sort them, in these words
_NO_COMPLEX_SORT = "Sort does not support complex dtypes on CPU (as PyTorch)"


def _sort_axis(op, x, dim) -> int:
    return normalize_axis(op, dim, max(x.ndim, 1))


@export(method=True)
def argsort(x, dim: int = -1, descending: bool = False, *, stable: bool = False):
    """Indices (int64) that sort ``x`` along ``dim``; NaN sorts above every number. Equal
    elements keep their order with ``stable=True``; otherwise they are ordered as PyTorch's
    CPU sort leaves them (``std::sort``'s steps, ops/_torch_order.py)."""
    x = to_tensor(x)
    if qtensor_ops.held(x):
        return qtensor_ops.argsort(x, dim, descending, stable=stable)
    refuse_complex("argsort", x, reason=_NO_COMPLEX_SORT)
    axis = _sort_axis("argsort", x, dim)
    return apply(_ARGSORT, x, axis=axis, descending=bool(descending), stable=bool(stable))


@export(method=True)
def sort(x, dim: int = -1, descending: bool = False, *, stable: bool = False):
    """``(values, indices)`` of ``x`` sorted along ``dim`` (a named tuple like
    ``torch.return_types.sort``), equal elements ordered as `argsort` orders them; the
    gradient flows to the sorted elements' positions."""
    x = to_tensor(x)
    if qtensor_ops.held(x):
        return qtensor_ops.sort(x, dim, descending, stable=stable)
    refuse_complex("sort", x, reason=_NO_COMPLEX_SORT)
    axis = _sort_axis("sort", x, dim)
    indices = apply(_ARGSORT, x, axis=axis, descending=bool(descending), stable=bool(stable))
    if x.ndim == 0:
        return SortResult(x, indices)
    return SortResult(rename_node(E.gather(x, axis, indices), "SortBackward0"), indices)


# (PyTorch's out= refuses an operand partly overlapping out: ops/_out.py, ops/_overlap.py)
sort.out_overlap_refused = True


@export(method=True)
def topk(x, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):  # noqa: A002
    """The ``k`` largest (``largest=False``: smallest) elements of ``x`` along ``dim`` and their
    indices, a named tuple like ``torch.return_types.topk``. NaN counts as larger than every
    number. Among equal values, the ones chosen and their order are PyTorch's CPU topk's (the
    steps of its libstdc++ selection, ops/_torch_order.py), and so is the order ``sorted=False``
    leaves. The gradient flows to the chosen elements' positions."""
    x = to_tensor(x)
    if qtensor_ops.held(x):
        return qtensor_ops.topk(x, k, dim, largest, sorted)
    refuse_limited("topk", x)
    if x.dtype is dt.bool_:
        raise DTypeError("not defined for bool tensors (as in PyTorch)", op="topk")
    refuse_complex("topk", x, reason="topk does not support complex dtypes on CPU (as PyTorch)")
    axis = _sort_axis("topk", x, dim)
    size = x.shape[axis] if x.ndim else 1
    k = operator.index(k)
    if k < 0 or (isinstance(size, int) and k > size):  # (a symbolic size: checked by the run)
        raise ShapeError(
            f"k ({k}) is out of range for dimension {axis} of size {size} "
            f"(tensor shape {fmt_shape(x.shape)})",
            op="topk",
        )
    flat = x if x.ndim else E.reshape(x, (1,))
    order = apply(_ARGSORT, flat, axis=axis, descending=bool(largest), k=k, ordered=bool(sorted))
    values = E.gather(flat, axis, order)
    if x.ndim == 0:
        return TopkResult(E.reshape(values, ()), E.reshape(order, ()))
    return TopkResult(rename_node(values, "TopkBackward0"), order)


# --------------------------------------------------------------------------------- kthvalue


def _gt_or_nan(a, b) -> bool:
    return a > b or (a != a and b == b)  # (NaN above every number)


def _quickselect(row: list, k: int) -> int:
    """The index PyTorch's CPU kthvalue reports: where its quickselect (median of three,
    Hoare partition, NaN above every number; aten's quick_select_template) leaves the k-th
    smallest (k from 0) of ``row``. Among equal elements that is not the first by index."""
    arr, idx = list(row), list(range(len(row)))

    def swap(i, j):
        arr[i], arr[j] = arr[j], arr[i]
        idx[i], idx[j] = idx[j], idx[i]

    lo, hi = 0, len(arr) - 1
    while hi > lo:
        if hi == lo + 1:
            if _gt_or_nan(arr[lo], arr[hi]):
                swap(lo, hi)
            break
        swap(lo + (hi - lo) // 2, lo + 1)
        if _gt_or_nan(arr[lo + 1], arr[hi]):
            swap(lo + 1, hi)
        if _gt_or_nan(arr[lo], arr[hi]):
            swap(lo, hi)
        if _gt_or_nan(arr[lo + 1], arr[lo]):
            swap(lo + 1, lo)
        i, j, pivot = lo + 1, hi, arr[lo]
        while True:
            i += 1
            while _gt_or_nan(pivot, arr[i]):
                i += 1
            j -= 1
            while _gt_or_nan(arr[j], pivot):
                j -= 1
            if j < i:
                break
            swap(i, j)
        swap(lo, j)
        if j <= k:
            lo = i
        if j >= k:
            hi = j - 1
    return idx[k]


def _kth_index_infer(x, *, axis, k):
    return TensorType(tuple(1 if d == axis else s for d, s in enumerate(x.shape)), dt.int64)


def _kth_index_kernel(x, *, axis, k):
    """The stable order's k-th index; where other elements equal that one (NaN equals NaN
    here), the index PyTorch's quickselect leaves there instead."""
    if x.ndim == 0:
        return np.zeros((), np.int64)
    a = np.moveaxis(_sortable(x), axis, -1)
    rows = a.reshape(-1, a.shape[-1])
    index = np.argsort(rows, axis=1, kind="stable")[:, k - 1].astype(np.int64)
    chosen = rows[np.arange(rows.shape[0]), index][:, None]
    equal = rows == chosen
    if rows.dtype.kind == "f":
        equal |= np.isnan(rows) & np.isnan(chosen)
    for r in np.flatnonzero(equal.sum(axis=1) > 1):
        index[r] = _quickselect(rows[r].tolist(), k - 1)
    out = index.reshape(a.shape[:-1] + (1,))
    return np.ascontiguousarray(np.moveaxis(out, -1, axis))


def _onnx_kth_index(e):
    """TopK's k smallest, the last of them: equal elements in index order (the stable
    order's; PyTorch's quickselect may report another of the equal ones)."""
    x, t = e.inputs[0], e.in_types[0]
    axis, k = e.attrs["axis"], e.attrs["k"]
    if t.dtype is dt.bool_:
        x = e.cast(x, dt.uint8)
    _, indices = e.node("TopK", [x, e.dim(k)], outputs=2, axis=axis, largest=0, sorted=1)
    starts, ends = e.constant(np.array([k - 1], np.int64)), e.constant(np.array([k], np.int64))
    return e.node("Slice", [indices, starts, ends, e.constant(np.array([axis], np.int64))])


_KTH_INDEX = register(
    OpDef(
        name="kthvalue_index",
        onnx=_onnx_kth_index,
        kind="index",
        infer=_kth_index_infer,
        kernel=_kth_index_kernel,
        cost=_argsort_cost,
        batch=None,
        doc="kthvalue_index(x, axis, k): int64 index of the k-th smallest element (k from 1) "
        "along axis, size 1 there; NaN above every number; among equal elements the one "
        "PyTorch's CPU quickselect reports",
    )
)


@export(method=True)
def kthvalue(x, k: int, dim: int = -1, keepdim: bool = False):
    """The ``k``-th smallest element of ``x`` along ``dim`` (k from 1) and its index, a named
    tuple like ``torch.return_types.kthvalue``; NaN counts as larger than every number. Among
    equal elements (NaN too) the index is the one PyTorch's CPU quickselect reports. The
    gradient flows to the chosen element's position."""
    x = to_tensor(x)
    if x.dtype is dt.bool_:
        raise KernelDTypeError("not defined for bool tensors (as in PyTorch)", op="kthvalue")
    axis = _sort_axis("kthvalue", x, dim)
    size = x.shape[axis] if x.ndim else 1
    k = operator.index(k)
    if not 1 <= k <= size:
        raise (AxisError if size == 0 else ShapeError)(
            f"k ({k}) is out of range for dimension {axis} of size {size} "
            f"(tensor shape {fmt_shape(x.shape)})",
            op="kthvalue",
        )
    flat = x if x.ndim else E.reshape(x, (1,))
    index = apply(_KTH_INDEX, flat, axis=axis, k=k)
    values = E.gather(flat, axis, index)
    if x.ndim == 0:
        return return_types.kthvalue(E.reshape(values, ()), E.reshape(index, ()))
    if not keepdim:
        values, index = E.squeeze(values, axis), E.squeeze(index, axis)
    return return_types.kthvalue(rename_node(values, "KthvalueBackward0", x), index)


# ------------------------------------------------------------------------------------ unique


def _rows(a: np.ndarray, axis):
    """``a`` as rows to compare: its elements (axis None) or its slices along ``axis``,
    flattened, as a 2-D array of one row each."""
    a = _sortable(a)
    if axis is None:
        return a.reshape(-1, 1)
    n = a.shape[axis]
    return np.moveaxis(a, axis, 0).reshape(n, a.size // n if n else 0)


def _stable_int_order(rows: np.ndarray):
    """The stable sorting order of one column of integers (or bools), or None: sorted as the
    distinct keys ``(value - min) * n + position``, whose order is the stable one whatever the
    sort (NumPy's unstable sort of int64 runs several times faster than its stable argsort),
    where the keys fit in int64."""
    n = rows.shape[0]
    if rows.shape[1] != 1 or rows.dtype.kind not in "biu" or rows.dtype == np.uint64:
        return None
    v = rows[:, 0].astype(np.int64)
    lo = int(v.min())
    if (int(v.max()) - lo + 1) * n >= 2**62:
        return None
    keys = np.sort((v - lo) * n + np.arange(n, dtype=np.int64))
    return keys % n


def _unique_parts(a: np.ndarray, axis):
    """(first index of each distinct row in sorted order, inverse, counts). Rows compare
    lexicographically; NaN equals nothing, so each NaN is its own value (PyTorch's unique)."""
    rows = _rows(a, axis)
    n = rows.shape[0]
    if n == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    order = _stable_int_order(rows)
    if order is None:
        # np.lexsort's last key is the primary one; it is stable, so equal rows keep their order
        order = np.lexsort(rows.T[::-1]) if rows.shape[1] else np.arange(n)
    ordered = rows[order]
    new = np.ones(n, bool)
    if n > 1:
        new[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    group = np.cumsum(new) - 1
    inverse = np.empty(n, np.int64)
    inverse[order] = group
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, n)).astype(np.int64)
    return order[starts], inverse, counts


def unique_infer(x, *, axis, count):
    if axis is None:
        return (
            TensorType((count,), x.dtype),
            TensorType(tuple(x.shape), dt.int64),
            TensorType((count,), dt.int64),
        )
    shape = tuple(count if d == axis else s for d, s in enumerate(x.shape))
    return (
        TensorType(shape, x.dtype),
        TensorType((x.shape[axis],), dt.int64),
        TensorType((count,), dt.int64),
    )


def select_parts(x, axis, count: int, parts, what: str, op: str):
    """The kernel of `unique` and `unique_consecutive`: ``parts(x, axis)`` gives the first
    position of each group, each element's group and the group sizes; the groups' first
    elements (slices along ``axis``) are selected. ``count`` (the groups the op was built for,
    read from the data when the call was made) must still hold."""
    first, inverse, counts = parts(x, axis)
    if first.size != count:
        raise ShapeError(
            f"the tensor has {first.size} {what} but the op was built for {count}", op=op
        )
    if axis is None:
        return x.reshape(-1)[first], inverse.reshape(x.shape), counts
    return np.take(x, first, axis=axis), inverse, counts


def _unique_kernel(x, *, axis, count):
    return select_parts(x, axis, count, _unique_parts, "distinct values", "unique")


_UNIQUE = register(
    OpDef(
        name="unique",
        kind="index",
        infer=unique_infer,
        kernel=_unique_kernel,
        cost=memory_cost,
        num_outputs=3,
        batch=None,
        doc="unique(x, axis, count): the sorted distinct elements (axis None) or slices along "
        "axis, the inverse indices and the counts. The count is data-dependent: the public "
        "function reads it from x when the call is made.",
    )
)


@export(method=True)
def unique(
    x,
    sorted: bool = True,  # noqa: A002
    return_inverse: bool = False,
    return_counts: bool = False,
    dim: int | None = None,
):
    """The distinct elements of ``x`` (``dim=None``: flattened) or its distinct slices along
    ``dim``, sorted; with ``return_inverse`` the index of each element (slice) in the result,
    with ``return_counts`` how often each occurs. Each NaN is distinct, as in PyTorch. The
    result is always sorted (``sorted=False`` allows any order). Not differentiable.

    The result's size depends on the values, so ``unique`` runs eagerly only: capturing it
    (``ember.function``, ``ember.trace``) raises a `TraceError` naming it, except on integer
    host values (see the module docstring)."""
    x = to_tensor(x)
    axis = None if dim is None else normalize_axis("unique", dim, x.ndim)
    return grouped(_UNIQUE, _unique_parts, x, axis, return_inverse, return_counts)


def grouped(op, parts, x, axis, return_inverse: bool, return_counts: bool):
    """The public side of `unique` and `unique_consecutive`: their group count read from x's
    value (by ``parts``, as `select_parts` reads it), the op applied, and PyTorch's result
    (the values alone, or with the inverse and/or the counts). Eager only: a traced x has no
    value, and the count fixes the result's size."""
    try:
        if hasattr(x, "host_value") and (x.dtype.is_integer or x.dtype is dt.bool_):
            # (integers while a graph is built: host data, a constant or a keyed argument)
            data = x.host_value(f"{op.name}'s group count")
        else:
            data = x.detach().numpy()
    except NeedsArgumentValue:
        raise
    except TraceError:
        raise TraceError(
            "the size of the result depends on the input's values, so the op needs its value, "
            f"which a graph does not have while it is built; call {op.name} outside the "
            "captured function",
            op=op.name,
        ) from None
    if axis is not None and any(n == 0 for i, n in enumerate(x.shape) if i != axis):
        # (PyTorch's rule: every slice would be empty, so none could be told apart)
        raise ShapeError(
            f"input of shape {fmt_shape(x.shape)} has a 0-sized dimension other than dim "
            f"{axis}, so its slices along dim {axis} cannot be compared",
            op=op.name,
        )
    count = parts(data, axis)[0].size
    values, inverse, counts = apply(op, x, axis=axis, count=count)
    if not (return_inverse or return_counts):
        return values
    out = (values,)
    if return_inverse:
        out += (inverse,)
    if return_counts:
        out += (counts,)
    return out
