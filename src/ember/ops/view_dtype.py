"""``view_dtype``: a tensor's bytes read as another dtype (PyTorch's ``x.view(dtype)``), and
the ``view`` method that takes either a shape or a dtype.

Elements of one width map one to one; to a narrower dtype the last dimension grows by the ratio
of the widths, to a wider one it shrinks (it must divide), as PyTorch's. Bit reinterpretation
has no gradient: PyTorch's result never requires grad, so the public function detaches its
input. The result is a new tensor, not an alias: a write into it does not reach ``x`` (PyTorch's
shares the storage).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentTypeError, ShapeError
from ..types import TensorType
from ._registry import OpDef, apply, export, register
from ._util import memory_cost
from .promotion import to_tensor
from .shape import view_shape


def _view_dtype_infer(x, *, dtype):
    shape = tuple(x.shape)
    src, dst = x.dtype, dtype
    if src.itemsize != dst.itemsize:
        what = f"view {src} ({src.itemsize} bytes) as {dst} ({dst.itemsize} bytes)"
        if not shape:
            raise ShapeError(
                f"cannot {what}: a 0-d tensor has no last dimension to resize", op="view_dtype"
            )
        last = shape[-1]
        total = last * src.itemsize
        if isinstance(last, int) and total % dst.itemsize:
            raise ShapeError(
                f"cannot {what}: the last dimension, {last}, times {src.itemsize} must be a "
                f"multiple of {dst.itemsize}",
                op="view_dtype",
            )
        shape = (*shape[:-1], total // dst.itemsize)
    return TensorType(shape, dst)


def _view_dtype_kernel(x, *, dtype):
    return np.ascontiguousarray(x).view(dtype.np).copy()


VIEW_DTYPE = register(
    OpDef(
        name="view_dtype",
        float8=True,
        kind="shape",
        infer=_view_dtype_infer,
        kernel=_view_dtype_kernel,
        cost=memory_cost,
        doc="view_dtype(x, dtype): x's bytes read as dtype (the last dimension rescaled)",
    )
)


@export(method=True, toplevel=False)
def view(x, *shape, dtype=None):
    """``x.view(*shape)``: ``reshape``'s view; ``x.view(dtype)``: ``x``'s bytes as ``dtype``
    (see the module docstring)."""
    if dtype is None and len(shape) == 1 and isinstance(shape[0], dt.DType):
        dtype = shape[0]
    elif dtype is not None and shape:
        raise ArgumentTypeError("view() takes a shape or a dtype, not both")
    if dtype is None:
        return view_shape(x, *shape)
    x = to_tensor(x)
    dtype = dt.as_dtype(dtype)
    if dtype == x.dtype:
        return x.detach()
    return apply(VIEW_DTYPE, x.detach(), dtype=dtype)
