"""PyTorch's refusal of an in-place op whose operand partly overlaps the tensor it writes.

``y.mul_(y.t())`` or ``y[1:].add_(y[:-1])`` would read elements the same call has already
overwritten, so PyTorch's kernels (TensorIterator's ``assert_no_partial_overlap``) refuse them
when called: "unsupported operation: some elements of the input tensor and the written-to
tensor refer to a single memory location". ember computes out of place and would give the
values of a copy; it refuses where PyTorch refuses, by PyTorch's test (`overlap`):

* the same memory laid out alike (``x.add_(x)``, a view of x with x's own strides) is a full
  overlap, allowed;
* two non-overlapping and dense tensors of one storage whose byte ranges meet otherwise are a
  partial overlap, refused;
* anything else, a strided (not dense) operand included, is "too hard" for PyTorch to decide
  and allowed, as there.

The indexed writes (scatter, scatter_add, scatter_reduce, index_copy, index_add, index_put,
and ``out=`` of gather, index_select and take) refuse a full overlap too, PyTorch's
``assert_no_overlap``: their result's elements move, so even ``x.scatter_(1, i, x)`` would
read elements the call has already written. Their public functions carry
``overlap_refused = ANY`` (in place) or ``out_overlap_refused = ANY`` (``out=``).
"""

from __future__ import annotations

import numpy as np

from ..errors import EmberError

FULL, PARTIAL, NONE = "full", "partial", "none"
ANY = "any"  # (the value of a function's overlap attribute: a full overlap refused too)


def _dense(arr: np.ndarray) -> bool:
    """PyTorch's ``is_non_overlapping_and_dense``: the elements fill one block of memory,
    each once, in some order of the dimensions (sizes of 1 place no constraint)."""
    if arr.flags.c_contiguous or arr.flags.f_contiguous:
        return True
    dims = sorted((s, n) for s, n in zip(arr.strides, arr.shape) if n != 1)
    expected = arr.itemsize
    for stride, size in dims:
        if stride != expected:
            return False
        expected *= size
    return True


def _begin(arr: np.ndarray) -> int:
    return arr.__array_interface__["data"][0]


def _owner(arr: np.ndarray):
    """The array owning ``arr``'s memory (its last NumPy base), or None where something else
    (a buffer, a memory map) does."""
    while arr.base is not None:
        arr = arr.base
        if type(arr) is not np.ndarray:
            return None
    return arr


def overlap(a: np.ndarray, b: np.ndarray) -> str:
    """FULL, PARTIAL or NONE, as PyTorch's ``get_overlap_status`` of the two tensors (its
    "too hard" read as NONE, which PyTorch's assertion lets through too)."""
    if a is b:
        return FULL
    if a.size == 0 or b.size == 0:
        return NONE
    owner_a, owner_b = _owner(a), _owner(b)
    # (arrays of two owners share no memory: the common case, told without NumPy's bounds)
    if owner_a is not owner_b and owner_a is not None and owner_b is not None:
        return NONE
    if not np.may_share_memory(a, b):
        return NONE
    if not (_dense(a) and _dense(b)):
        return NONE
    a_begin, b_begin = _begin(a), _begin(b)
    a_end, b_end = a_begin + a.nbytes, b_begin + b.nbytes
    if a_begin == b_begin and a_end == b_end:
        return FULL if a.strides == b.strides else PARTIAL
    return PARTIAL if a_begin < b_end and b_begin < a_end else NONE


def refuse_partial_overlap(op: str, written: np.ndarray, operands, full: bool = False) -> None:
    """Raise PyTorch's error where one of ``operands`` (arrays) partly overlaps ``written``
    (with ``full``, where one overlaps it at all: PyTorch's ``assert_no_overlap``)."""
    refused = (PARTIAL, FULL) if full else (PARTIAL,)
    for arr in operands:
        if overlap(written, arr) in refused:
            raise EmberError(
                "unsupported operation: some elements of the input tensor and the written-to "
                "tensor refer to a single memory location. Please clone() the tensor before "
                "performing the operation.",
                op=op,
            )
