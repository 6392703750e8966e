"""PyTorch's memory formats as strides, for eager tensors.

A tensor ``x.to(memory_format=ember.channels_last)`` holds its values in NHWC order (NDHWC for
``channels_last_3d``), viewed as NCHW: its ``stride()``, ``is_contiguous()`` and
``is_contiguous(memory_format=...)`` say what PyTorch's say. Ops read it as any strided array;
elementwise results and casts keep the order (NumPy's order "K"), ``clone`` and the ``*_like``
factories keep it as PyTorch's ``preserve_format`` does, and other ops return row-major results
(PyTorch's convolutions would return channels-last ones: the values are the same). A graph's
values are dense and row-major; capture ignores the format.
"""

from __future__ import annotations

import numpy as np

from ..devices import channels_last, channels_last_3d, contiguous_format
from ..errors import ShapeError

_RANKS = ((channels_last, 4), (channels_last_3d, 5))


def _rank(fmt):
    for known, rank in _RANKS:
        if fmt is known:
            return rank
    return None


def _order(rank: int) -> tuple:
    return (0, *range(2, rank), 1)


def check_rank(fmt, ndim: int, what: str) -> None:
    """PyTorch's refusal of a channels-last format for a tensor of another rank."""
    rank = _rank(fmt)
    if rank is not None and ndim != rank:
        raise ShapeError(f"required rank {rank} tensor to use {fmt.name} format", op=what)


def is_in(arr: np.ndarray, fmt) -> bool:
    """Whether ``arr``'s elements lie densely in ``fmt``'s order."""
    rank = _rank(fmt)
    if rank is None:
        return bool(arr.flags.c_contiguous)
    return arr.ndim == rank and bool(np.transpose(arr, _order(rank)).flags.c_contiguous)


def preserved(arr: np.ndarray):
    """The channels-last format ``arr`` is laid out in where it is not row-major too (what
    PyTorch's ``preserve_format`` keeps), else None."""
    if arr.ndim not in (4, 5) or arr.flags.c_contiguous:
        return None
    fmt = channels_last if arr.ndim == 4 else channels_last_3d
    return fmt if is_in(arr, fmt) else None


def laid_out(arr: np.ndarray, fmt) -> np.ndarray:
    """``arr``'s values in ``fmt``'s order (``arr`` itself where they are already)."""
    if is_in(arr, fmt):
        return arr
    rank = _rank(fmt)
    if rank is None:
        return np.ascontiguousarray(arr)
    order = _order(rank)
    return np.ascontiguousarray(np.transpose(arr, order)).transpose(np.argsort(order))


def relayout(t, fmt):
    """``t``, a tensor just made (no one else holds its array), laid out in ``fmt`` (None and
    ``preserve_format`` leave it as it is). A symbolic tensor is unchanged."""
    data = getattr(t, "_data", None)
    if data is not None and wants_copy(data, fmt):
        t._data = laid_out(data, fmt)
    return t


def wants_copy(arr, fmt) -> bool:
    """Whether a tensor holding ``arr`` must be copied to be in ``fmt`` (None and
    ``preserve_format``: never)."""
    if arr is None:
        return False
    if fmt is contiguous_format:
        return not arr.flags.c_contiguous
    return _rank(fmt) is not None and not is_in(arr, fmt)
