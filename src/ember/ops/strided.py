"""``as_strided``: PyTorch's window over a tensor's memory by sizes and strides, on ember's
model of it. A contiguous tensor's storage is its own elements in row-major order, from
``storage_offset()`` on; the result gathers ``storage[offset + sum_k i_k * stride_k]`` (an
``index_select`` of the flattened tensor: a copy, not a view of the memory), so its
gradient adds each element's share back where it came from, overlapping windows summed, as
PyTorch's does. A non-contiguous tensor (whose storage holds elements outside it) and windows
reaching outside the tensor's own elements are refused, naming the fix."""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from . import api as E
from ._node_names import rename_node
from ._registry import constant, export
from .promotion import to_tensor


@export(method=True)
def as_strided(input, size, stride, storage_offset=None):
    """``input``'s elements at ``storage_offset + sum_k i_k * stride_k`` for each index
    ``(i_0, i_1, ...)`` of ``size`` (see the module docstring); ``storage_offset`` defaults
    to the tensor's own, as in PyTorch."""
    x = to_tensor(input)
    size, stride = tuple(int(d) for d in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise ShapeError(
            f"mismatch in length of strides and shape: {len(stride)} and {len(size)}",
            op="as_strided",
        )
    if any(d < 0 for d in size) or any(s < 0 for s in stride):
        raise ShapeError(f"negative size or stride: {size}, {stride}", op="as_strided")
    if not x.is_contiguous():
        raise ShapeError(
            f"ember reads a contiguous tensor's own elements; this one (shape "
            f"{tuple(x.shape)}, strides {x.stride()}) is not: call .contiguous() first",
            op="as_strided",
        )
    own = x.storage_offset() if hasattr(type(x), "storage_offset") else 0
    start = own if storage_offset is None else int(storage_offset)
    index = np.full(size, start - own, dtype=np.int64)
    for axis, (d, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[axis] = d
        index = index + (np.arange(d, dtype=np.int64) * s).reshape(shape)
    n = x.numel()
    if index.size and (index.min() < 0 or index.max() >= n):
        raise ShapeError(
            f"sizes {list(size)}, strides {list(stride)} and storage offset {start} reach "
            f"elements {int(index.min()) + own}..{int(index.max()) + own}, outside the "
            f"tensor's own {own}..{own + n - 1}",
            op="as_strided",
        )
    flat = E.reshape(x, (-1,))
    picked = E.index_select(flat, 0, constant(index.reshape(-1)))
    return rename_node(E.reshape(picked, size), "AsStridedBackward0", x)  # (PyTorch's node)
