"""Parsing and shape planning of Python index expressions (``x[index]``) for the indexing ops.

`parse_index` turns a user index into a canonical, hashable tuple of *entries* plus the index
tensors, which become operands of the op. One entry per index position, after Ellipsis expansion:

* ``int`` (non-negative): select one element of a dimension (the dimension goes away);
* ``("slice", start, stop, step)``: ``range(start, stop, step)`` over a dimension, normalised so
  that equal selections have equal entries (``stop`` may be -1 for negative steps);
* ``None``: a new dimension of size 1;
* ``("tensor",)``: an integer index tensor (the next operand) over one dimension;
* ``("mask", count)``: a bool mask (the next operand) over ``mask.ndim`` dimensions, selecting
  ``count`` elements. The count is the one data-dependent fact of indexing: the public function
  reads it from the mask, so the shape rules themselves never look at data.

Trailing full slices are dropped, so ``x[0]`` and ``x[0, :]`` give the same entries.

Indexing runs in two stages, which is PyTorch's semantics: the basic stage (ints, slices, None;
a NumPy view) and then the advanced stage (tensors and masks) on its result, described by a
*spec* with one entry per dimension it covers: ``":"`` (kept whole), ``("tensor",)`` or
``("mask", count)``. Advanced dimensions follow NumPy's placement rule on that spec: they replace
the indexed dimensions in place when the advanced entries are adjacent, else they go first.
(NumPy itself treats an int next to an index tensor as advanced; PyTorch and ember do not.)
"""

from __future__ import annotations

import functools
import operator
import warnings

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError, ArgumentTypeError, IndexTypeError, ShapeError
from ..symbolic import SymDim
from ._index_dtypes import advanced_index_kind
from ._registry import TensorBase
from ._util import broadcast_shapes, fmt_shape, size_from_values

FULL = ":"


class IndexOutOfRangeError(ShapeError, IndexError):
    """An index outside a dimension (an `EmberError` that is also an `IndexError`)."""


# ------------------------------------------------------------------------------------- parsing


def _symbolic_slice_entry(s: slice, n: SymDim) -> tuple:
    """A slice of a dimension whose size is known only when the graph runs: bounds from the
    end are ``n - k``, its length ``ceil((stop - start) / step)``. A bound past the end is taken
    to be within it (as PyTorch's dynamic shapes guard); negative steps need the size and are
    refused."""
    step = 1 if s.step is None else operator.index(s.step)
    if step < 1:
        raise ShapeError(
            f"a slice with step {step} of the symbolic size {n} needs its value while the graph "
            "is built; give the dimension a fixed size",
            op="getitem",
        )
    start = 0 if s.start is None else _bound(s.start)
    stop = n if s.stop is None else _bound(s.stop)
    start = n + start if isinstance(start, int) and start < 0 else start
    stop = n + stop if isinstance(stop, int) and stop < 0 else stop
    return ("slice", start, stop, step)


def _bound(value):
    """A slice bound: an int, or a symbolic size (``x[..., : x.shape[-1] // 2]``)."""
    return value if isinstance(value, SymDim) else operator.index(value)


def _slice_entry(s: slice, n: int) -> tuple:
    if s.step == 0:
        raise ArgumentError("getitem: slice step cannot be zero")
    if isinstance(n, SymDim) or isinstance(s.start, SymDim) or isinstance(s.stop, SymDim):
        return _symbolic_slice_entry(s, n)  # (a table's first T rows: pos[:T])
    start, stop, step = s.indices(n)  # takes anything with __index__ (ints, 0-d int tensors)
    length = len(range(start, stop, step))
    if length == 0:
        return ("slice", 0, 0, 1)
    if step == 1 and start == 0 and length == n:
        return ("slice", 0, n, 1)
    return ("slice", start, start + length * step, step)


def _int_entry(op: str, i: int, n: int, dim: int, shape) -> int:
    if isinstance(n, SymDim):  # from the end: n - k, resolved when the graph runs
        i = operator.index(i)
        return n + i if i < 0 else i
    if not -n <= i < n:
        raise IndexOutOfRangeError(
            f"index {i} is out of range for dimension {dim} of size {n} "
            f"(tensor shape {fmt_shape(shape)})",
            op=op,
        )
    return i % n


def _as_index_tensor(op: str, item):
    """A list or NumPy array used as an index, as an ember tensor (int64 or bool)."""
    from .promotion import to_tensor

    arr = np.asarray(item)
    if arr.dtype.kind not in "biu":
        if arr.size == 0:  # x[[]] selects nothing, as in NumPy and PyTorch
            arr = arr.astype(np.int64)
        else:
            raise ArgumentTypeError(
                f"{op}: only integers, slices, None, Ellipsis and integer or bool tensors are "
                f"valid indices; got an array of {arr.dtype}"
            )
    if arr.dtype.kind in "iu" and arr.dtype != np.int64:
        arr = arr.astype(np.int64)
    return to_tensor(arr)


def _classify(op: str, item):
    """One user index item as ('int', i) | slice | None | Ellipsis | ('tensor', t) | ('mask', t)."""
    if item is None or item is Ellipsis or isinstance(item, slice):
        return item
    if isinstance(item, TensorBase):
        if item.dtype.is_floating_point or item.dtype.is_complex:
            raise IndexTypeError(
                f"tensors used as indices must be integer or bool, got {item.dtype}; "
                "convert with .long()",
                op=op,
            )
        kind = advanced_index_kind(op, item.dtype)
        if kind == "byte_mask":  # (PyTorch's deprecated uint8 mask: a bool mask, with its warning)
            warnings.warn(
                "indexing with dtype torch.uint8 is now deprecated, please use a dtype "
                "torch.bool instead.",
                UserWarning,
                stacklevel=3,
            )
            return ("mask", item != 0)
        return (kind, item)
    if isinstance(item, (bool, np.bool_)):
        return ("mask", _as_index_tensor(op, item))
    if isinstance(item, (int, np.integer)):
        return ("int", int(item))
    if isinstance(item, (list, tuple, range, np.ndarray)):
        # (a sequence: x[range(3)], x[:, (0, 2)] index as a list does, as in PyTorch)
        t = _as_index_tensor(op, item)
        return ("mask", t) if t.dtype is dt.bool_ else ("tensor", t)
    if hasattr(type(item), "__index__"):
        # an object standing for an int, as PyTorch takes it (a traced int .item() of host
        # data gives its number; one without a value while tracing raises its TraceError)
        return ("int", operator.index(item))
    raise ArgumentTypeError(
        f"{op}: only integers, slices, None, Ellipsis and integer or bool tensors are valid "
        f"indices; got {type(item).__name__}"
    )


def parse_basic(op: str, shape: tuple, index) -> tuple | None:
    """The entries of an index made only of ints, slices, None and one Ellipsis (the common,
    fast case); None when it holds anything else, for `parse_index` to handle."""
    items = index if type(index) is tuple else (index,)
    used, ellipsis = 0, False
    for item in items:
        kind = type(item)
        if kind is int or kind is slice:
            used += 1
        elif item is Ellipsis and not ellipsis:
            ellipsis = True
        elif item is not None:
            return None
    ndim = len(shape)
    if used > ndim:
        return None
    entries, dims = [], []
    dim = 0
    for item in items:
        if item is None:
            entries.append(None)
            dims.append(None)
        elif item is Ellipsis:
            for _ in range(ndim - used):
                entries.append(("slice", 0, shape[dim], 1))
                dims.append(dim)
                dim += 1
        else:
            n = shape[dim]
            entries.append(
                _slice_entry(item, n)
                if type(item) is slice
                else _int_entry(op, item, n, dim, shape)
            )
            dims.append(dim)
            dim += 1
    while entries and dims[-1] is not None and entries[-1] == ("slice", 0, shape[dims[-1]], 1):
        entries.pop()
        dims.pop()
    return tuple(entries)


def _width(item) -> int:
    """How many input dimensions a classified item indexes."""
    if item is None or item is Ellipsis:
        return 0
    if isinstance(item, tuple) and item[0] == "mask":
        return item[1].ndim
    return 1


def parse_index(op: str, shape: tuple, index) -> tuple[tuple, list]:
    """The canonical entries of ``index`` on a tensor of ``shape``, and its index tensors."""
    items = index if isinstance(index, tuple) else (index,)
    items = [_classify(op, i) for i in items]
    if sum(i is Ellipsis for i in items) > 1:
        raise IndexOutOfRangeError("an index can only have a single Ellipsis (...)", op=op)
    used = sum(
        0
        if i is None or i is Ellipsis
        else (i[1].ndim if isinstance(i, tuple) and i[0] == "mask" else 1)
        for i in items
    )
    if used > len(shape):
        raise IndexOutOfRangeError(
            f"too many indices for a tensor of shape {fmt_shape(shape)}: "
            f"{used} dimensions indexed, but it has {len(shape)}",
            op=op,
        )
    entries, operands = [], []
    dim = 0
    for item in items:
        if item is Ellipsis:
            for _ in range(len(shape) - used):
                entries.append(("slice", 0, shape[dim], 1))
                dim += 1
        elif item is None:
            entries.append(None)
        elif isinstance(item, slice):
            entries.append(_slice_entry(item, shape[dim]))
            dim += 1
        elif item[0] == "int":
            entries.append(_int_entry(op, item[1], shape[dim], dim, shape))
            dim += 1
        elif item[0] == "tensor":
            entries.append(("tensor",))
            operands.append(item[1])
            dim += 1
        else:
            mask = item[1]
            _check_mask(op, mask, shape, dim)
            from . import api as E

            count = size_from_values(
                E.sum(mask),
                op,
                "the count of True values in the boolean mask index",
                "keep the shape: ember.where(mask, x, 0), x * mask, or a masked reduction "
                "((x * mask).sum() / mask.sum())",
            )
            entries.append(("mask", count))
            operands.append(mask)
            dim += mask.ndim
    while dim < len(shape):
        entries.append(("slice", 0, shape[dim], 1))
        dim += 1
    return strip_trailing(entries, shape, operands), operands


def _check_mask(op: str, mask, shape, dim: int) -> None:
    covered = tuple(shape[dim : dim + mask.ndim])
    if tuple(mask.shape) != covered:
        raise ShapeError(
            f"the bool mask of shape {fmt_shape(mask.shape)} does not match dimensions "
            f"{dim}..{dim + mask.ndim - 1} of the tensor of shape {fmt_shape(shape)} "
            f"(sizes {fmt_shape(covered)})",
            op=op,
        )


def strip_trailing(entries, shape, operands) -> tuple:
    """Drop trailing full slices (they select everything) so equal indexes compare equal."""
    entries = list(entries)
    dims = _dims_of(entries, operands)
    while entries and _is_full(entries[-1], shape[dims[-1]] if dims[-1] is not None else -1):
        entries.pop()
        dims.pop()
    return tuple(entries)


def _dims_of(entries, operands) -> list:
    """The input dimension each entry starts at (None for new dimensions)."""
    out, dim, k = [], 0, 0
    for e in entries:
        if e is None:
            out.append(None)
            continue
        out.append(dim)
        if isinstance(e, tuple) and e[0] in ("tensor", "mask"):
            dim += operands[k].ndim if e[0] == "mask" else 1
            k += 1
        else:
            dim += 1
    return out


def _is_full(entry, n: int) -> bool:
    return entry == ("slice", 0, n, 1)


# ------------------------------------------------------------------------------- two stages


def split_stages(entries, shape, operand_types) -> tuple[tuple, tuple]:
    """(basic entries, advanced spec); either may be empty (nothing to do in that stage)."""
    basic, spec = [], []
    k = 0
    dim = 0
    has_advanced = False
    for e in entries:
        if e is None:
            basic.append(None)
            spec.append(FULL)
        elif isinstance(e, int):
            basic.append(e)
            dim += 1
        elif e[0] == "slice":
            basic.append(e)
            spec.append(FULL)
            dim += 1
        else:
            has_advanced = True
            n = operand_types[k].ndim if e[0] == "mask" else 1
            for _ in range(n):
                basic.append(("slice", 0, shape[dim], 1))
                dim += 1
            spec.append(e)
            k += 1
    if not has_advanced:
        return tuple(entries), ()
    while spec and spec[-1] == FULL:
        spec.pop()
    # all-full basic entries strip to nothing: the basic stage is then skipped
    return strip_trailing(basic, shape, ()), tuple(spec)


# -------------------------------------------------------------------------------- shape rules


@functools.lru_cache(maxsize=4096)
def basic_shape(op: str, shape: tuple, entries: tuple) -> tuple:
    """Output shape of the basic stage (ints, slices, None); validates against ``shape``."""
    out = []
    dim = 0
    for e in entries:
        if e is None:
            out.append(1)
            continue
        if dim >= len(shape):
            raise IndexOutOfRangeError(
                f"too many indices for a tensor of shape {fmt_shape(shape)}", op=op
            )
        n = shape[dim]
        if isinstance(e, SymDim) or (isinstance(e, int) and isinstance(n, SymDim)):
            pass  # an index into a symbolic size: checked when the graph runs
        elif isinstance(e, tuple) and any(isinstance(b, SymDim) for b in (n, *e[1:3])):
            _, start, stop, step = e  # (see _symbolic_slice_entry: a positive step)
            out.append((stop - start + step - 1) // step)
        elif isinstance(e, int):
            if not 0 <= e < n:
                raise IndexOutOfRangeError(
                    f"index {e} is out of range for dimension {dim} of size {n} "
                    f"(tensor shape {fmt_shape(shape)})",
                    op=op,
                )
        else:
            _, start, stop, step = e
            r = range(start, stop, step)
            if len(r) and not (0 <= r[0] < n and 0 <= r[-1] < n):
                raise IndexOutOfRangeError(
                    f"slice {start}:{stop}:{step} is out of range for dimension {dim} of size "
                    f"{n} (tensor shape {fmt_shape(shape)})",
                    op=op,
                )
            out.append(len(r))
        dim += 1
    return tuple(out) + tuple(shape[dim:])


def advanced_shape(op: str, shape, spec, index_types) -> tuple:
    """Output shape of the advanced stage; validates dtypes, masks and broadcasting."""
    pieces = []  # per spec entry: ("full", size) or ("adv", broadcast shape)
    dim, k = 0, 0
    index_shapes = []
    for e in spec:
        if e == FULL:
            if dim >= len(shape):
                raise IndexOutOfRangeError(
                    f"too many indices for a tensor of shape {fmt_shape(shape)}", op=op
                )
            pieces.append(("full", shape[dim]))
            dim += 1
            continue
        t = index_types[k]
        k += 1
        if e[0] == "tensor":
            if not t.dtype.is_integer:
                raise ShapeError(f"index tensors must be integer, got {t.dtype}", op=op)
            if dim >= len(shape):
                raise IndexOutOfRangeError(
                    f"too many indices for a tensor of shape {fmt_shape(shape)}", op=op
                )
            index_shapes.append(tuple(t.shape))
            dim += 1
        else:
            if t.dtype is not dt.bool_:
                raise ShapeError(f"masks must be bool tensors, got {t.dtype}", op=op)
            _check_mask(op, t, shape, dim)
            index_shapes.append((e[1],))
            dim += t.ndim
        pieces.append(("adv", None))
    if k != len(index_types):
        raise ShapeError(f"expected {k} index tensors, got {len(index_types)}", op=op)
    if index_shapes:
        try:
            b = broadcast_shapes(op, *index_shapes)
        except ShapeError:
            listed = ", ".join(fmt_shape(s) for s in index_shapes)
            raise ShapeError(
                f"index tensors of shapes {listed} cannot be broadcast together", op=op
            ) from None
    else:
        b = ()
    rest = tuple(shape[dim:])
    adv_at = [i for i, p in enumerate(pieces) if p[0] == "adv"]
    fulls = [p[1] for p in pieces if p[0] == "full"]
    if adv_at and adv_at[-1] - adv_at[0] + 1 == len(adv_at):
        before = [p[1] for p in pieces[: adv_at[0]]]
        after = [p[1] for p in pieces[adv_at[-1] + 1 :]]
        return tuple(before) + tuple(b) + tuple(after) + rest
    return tuple(b) + tuple(fulls) + rest


# ---------------------------------------------------------------------------- NumPy tuples


@functools.lru_cache(maxsize=4096)
def numpy_basic(entries: tuple) -> tuple:
    out = []
    for e in entries:
        if e is None or isinstance(e, int):
            out.append(e)
        else:
            _, start, stop, step = e
            out.append(slice(start, None if stop < 0 else stop, step))
    return tuple(out)


def numpy_advanced(spec, arrays) -> tuple:
    out, k = [], 0
    for e in spec:
        if e == FULL:
            out.append(slice(None))
        else:
            out.append(arrays[k])
            k += 1
    return tuple(out)
