"""``index_reduce`` (Tensor method, in place too, and ``ember.index_reduce``): PyTorch's
reduction of source slices into the input's slices chosen by an index, written as
``scatter_reduce`` with the index spread over the source's shape, so values, gradients and
capture are scatter_reduce's.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import ArgumentError, DTypeError, ShapeError
from . import api as E
from ._index_dtypes import check_index_dtype
from ._registry import export
from ._util import normalize_axis, refuse_complex
from .promotion import to_tensor

_REDUCES = ("prod", "mean", "amax", "amin")


@export(method=True, inplace=True)
def index_reduce(input, dim: int, index, source, reduce: str, *, include_self: bool = True):
    """``input`` with each slice ``source.select(dim, i)`` reduced into
    ``input.select(dim, index[i])`` by ``reduce`` ("prod", "mean", "amax" or "amin"); with
    ``include_self=False`` the input's own values of the slices written take no part."""
    x, index, src = to_tensor(input), to_tensor(index), to_tensor(source)
    if reduce not in _REDUCES:
        raise ArgumentError(
            f"index_reduce: reduce argument must be either prod, mean, amax or amin, got {reduce!r}"
        )
    check_index_dtype("index_reduce", index)
    if index.ndim > 1:
        raise ShapeError("index_reduce: index must be a vector", op="index_reduce")
    if src.dtype != x.dtype:
        raise DTypeError(
            f"index_reduce: self ({x.dtype}) and source ({src.dtype}) must have the same "
            "scalar type",
            op="index_reduce",
        )
    if not include_self or reduce in ("amax", "amin"):  # (PyTorch's complex kernels: these)
        refuse_complex(
            "index_reduce",
            x,
            reason=f"reduce={reduce!r}, include_self="
            f"{include_self} of {x.dtype} tensors (PyTorch refuses it)",
        )
    axis = normalize_axis("index_reduce", dim, x.ndim)
    if src.ndim != x.ndim and not (x.ndim <= 1 and src.ndim <= 1):
        raise ShapeError(
            f"index_reduce: source has {src.ndim} dimensions, self {x.ndim}", op="index_reduce"
        )
    n = index.numel()
    src_len = src.shape[axis] if src.ndim else 1
    if n != src_len:
        raise ShapeError(
            f"index_reduce: index has {n} entries but source has {src_len} along dim {axis}",
            op="index_reduce",
        )
    if x.ndim == 0:
        x1, src1 = E.reshape(x, (1,)), E.reshape(src, (1,))
        out = index_reduce(x1, 0, index, src1, reduce, include_self=include_self)
        return E.reshape(out, ())
    src = E.reshape(src, (1,)) if src.ndim == 0 else src
    shape = [1] * x.ndim
    shape[axis] = n
    spread = E.broadcast_to(E.reshape(index.to(dt.int64), tuple(shape)), tuple(src.shape))
    return E.scatter_reduce(x, axis, spread, src, reduce, include_self=include_self)
