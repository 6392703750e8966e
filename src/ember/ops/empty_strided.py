"""``ember.empty_strided`` (PyTorch's ``torch.empty_strided``): a tensor of a given size whose
memory has the given strides (in elements). ember never hands out uninitialised memory, so its
values are zeros; the strides are those of the NumPy view it holds, so ``x.stride()`` reports
them.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import ShapeError
from ._registry import constant, export


@export
def empty_strided(size, stride, *, dtype=None, requires_grad=False):
    """A tensor of ``size`` over memory laid out with ``stride`` (zeros: see the module)."""
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise ShapeError(
            f"mismatch in length of strides and shape: {len(stride)} strides for "
            f"{len(size)} dimensions",
            op="empty_strided",
        )
    if any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise ShapeError(
            f"sizes and strides must be non-negative, got {size} and {stride}", op="empty_strided"
        )
    d = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
    count = 0 if 0 in size else 1 + sum((n - 1) * s for n, s in zip(size, stride))
    storage = np.zeros(count, d.np)
    view = np.lib.stride_tricks.as_strided(
        storage, size, tuple(s * storage.itemsize for s in stride)
    )
    out = constant(view)
    return out.requires_grad_() if requires_grad else out
