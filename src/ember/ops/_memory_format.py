"""PyTorch's memory formats as strides, for eager tensors.

A tensor ``x.to(memory_format=ember.channels_last)`` holds its values in NHWC order (NDHWC for
``channels_last_3d``), viewed as NCHW: its ``stride()``, ``is_contiguous()`` and
``is_contiguous(memory_format=...)`` say what PyTorch's say. Ops read it as any strided array;
casts keep the order (NumPy's order "K"), ``clone`` and the ``*_like`` factories keep it as
PyTorch's ``preserve_format`` does, and an op's ``layout`` rule (`result_format`) gives its eager
results the channels-last format PyTorch's kernels would: elementwise results that of their
first operand of the result's shape, convolutions, pooling, batch and group normalization,
linear interpolation and padding that of their data operand (a convolution's weight too).
Other ops return row-major results. A leaf's gradient takes the leaf's format (PyTorch's
AccumulateGrad layout contract, autograd_accumulate.py). A graph's values are dense and
row-major; capture ignores the format.
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
    if arr.strides[1] != arr.itemsize and arr.shape[1] != 1 and arr.size:
        # (channels innermost, one element apart, or the format cannot hold: a head split's
        # permuted view, asked by every elementwise op on it, told apart without a transpose)
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


def result_format(rule, inputs, out: np.ndarray):
    """The channels-last format an op's ``layout`` rule (ops/_rules.py `Layout`) gives a 4-d
    or 5-d result ``out`` of eager operands ``inputs``, or None (row-major, as the kernel made
    it). Row-major operands, the common case, are told apart by one flag."""
    if rule.inputs is None:  # (elementwise: the first operand of the result's shape)
        shape = out.shape
        for t in inputs:
            arr = t._data
            if arr.shape == shape:
                if arr.flags.c_contiguous or type(arr) is not np.ndarray:
                    return None
                return preserved(arr)
        return None
    rank = out.ndim
    for i in rule.inputs:
        if i < len(inputs):
            arr = inputs[i]._data
            if arr.ndim == rank and not arr.flags.c_contiguous and type(arr) is np.ndarray:
                fmt = preserved(arr)
                if fmt is not None:
                    return fmt
    return None


def lay_out_results(rule, inputs, outs) -> None:
    """Give each 4-d or 5-d tensor of ``outs`` (eager tensors just made) the format ``rule``
    says."""
    for t in outs:
        data = t._data
        if (data.ndim == 4 or data.ndim == 5) and type(data) is np.ndarray:
            fmt = result_format(rule, inputs, data)
            if fmt is not None and not is_in(data, fmt):
                t._data = laid_out(data, fmt)


def keep_format(result, source):
    """``result``, a tensor a composite just made from ``source``, laid out channels-last where
    ``source`` is (the format PyTorch's one kernel for the composite keeps); returns it."""
    data = getattr(source, "_data", None)
    if result is not source and isinstance(data, np.ndarray):
        relayout(result, preserved(data))
    return result
