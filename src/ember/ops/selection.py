"""Selections built on indexing: masked_fill, masked_select, take, select, narrow, and the
``nonzero`` primitive (with argwhere).

``nonzero``'s output size is data-dependent; like a bool mask's count in indexing, the public
function reads the count from the data in eager mode and records it as an attribute, so the
shape rule never looks at data (the kernel checks that the count still holds).
"""

from __future__ import annotations

import operator

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError, DTypeError, ShapeError
from ..symbolic import SymDim
from ..types import TensorType
from . import api as E
from . import qtensor
from ._index_dtypes import check_index_dtype
from ._limited import refuse_limited
from ._node_names import rename_node, renames
from ._overlap import ANY as OVERLAP_ANY
from ._registry import OpDef, TensorBase, apply, export, register
from ._util import (
    broadcast_shapes,
    check_fill_value,
    fmt_shape,
    memory_cost,
    normalize_axis,
    size_from_values,
)
from .indexing import getitem
from .promotion import to_tensor

# ----------------------------------------------------------------------------- mask helpers


def _bool_mask(op, mask):
    mask = to_tensor(mask)
    if mask.dtype is not dt.bool_:
        raise DTypeError(f"the mask must be a bool tensor, got {mask.dtype}", op=op)
    return mask


@export(method=True, inplace=True)
def masked_fill(x, mask, value):
    """``value`` where ``mask`` is true, else ``x``, broadcast together as PyTorch's
    out-of-place form (the in-place form needs the broadcast shape to be x's). ``value`` is a
    Python scalar or a 0-d tensor (gradients flow to both x and a tensor value)."""
    x = to_tensor(x)
    if qtensor.is_quantized(x):  # (PyTorch's: the value quantized into a copy)
        return x.clone().masked_fill_(mask, value)
    mask = _bool_mask("masked_fill", mask)
    try:
        broadcast_shapes("masked_fill", x.shape, mask.shape)
    except ShapeError:
        raise ShapeError(
            f"mask of shape {fmt_shape(mask.shape)} does not broadcast with the tensor's shape "
            f"{fmt_shape(x.shape)}",
            op="masked_fill",
        ) from None
    if isinstance(value, float) and not np.isfinite(value) and x.dtype.is_integer:
        raise ArgumentError(
            f"value {value} cannot be converted to {x.dtype} without overflow", op="masked_fill"
        )
    if isinstance(value, TensorBase) and value.ndim != 0:
        raise ShapeError(
            f"value must be a scalar or a 0-d tensor, got shape {fmt_shape(value.shape)}",
            op="masked_fill",
        )
    check_fill_value("masked_fill", value, x.dtype)
    refuse_limited("masked_fill", x)
    if isinstance(value, TensorBase) and hasattr(value, "_data") and value.dtype != x.dtype:
        # (PyTorch reads a tensor value as its number, converted to x's dtype with the check)
        check_fill_value("masked_fill", value.item(), x.dtype)
    return rename_node(E.where(mask, to_tensor(value, x.dtype), x), "MaskedFillBackward0")


# (its tensor value is one number PyTorch reads before writing: an overlapping one is allowed)
masked_fill.overlap_ok = True


@export(method=True)
@renames("MaskedSelectBackward0")
def masked_select(x, mask):
    """The elements of ``x`` where ``mask`` is true, as a 1-D tensor (x and mask broadcast)."""
    x = to_tensor(x)
    refuse_limited("masked_select", x)
    mask = _bool_mask("masked_select", mask)
    shape = broadcast_shapes("masked_select", x.shape, mask.shape)
    # (a 0-d pair selects from one element: a 0-d boolean index would keep the 0-d shape)
    shape = shape or (1,)
    return getitem(E.broadcast_to(x, shape), E.broadcast_to(mask, shape))


@export(method=True)
@renames("TakeBackward0")
def take(x, index):
    """Elements of ``x`` viewed as 1-D at the integer ``index`` (the result has index's shape)."""
    x, index = to_tensor(x), to_tensor(index)
    check_index_dtype("take", index)
    return getitem(E.reshape(x, (-1,)), index)


take.out_overlap_refused = OVERLAP_ANY  # (PyTorch's out= of an indexed read: ops/_overlap.py)


# ---------------------------------------------------------------------------------- nonzero


def _nonzero_kernel(x, *, count):
    out = np.argwhere(x)
    if out.shape[0] != count:
        raise ShapeError(
            f"the tensor has {out.shape[0]} non-zero elements but the op was built for {count}",
            op="nonzero",
        )
    return out.astype(np.int64, copy=False)


_NONZERO = register(
    OpDef(
        name="nonzero",
        kind="index",
        infer=lambda x, *, count: TensorType((count, x.ndim), dt.int64),
        kernel=_nonzero_kernel,
        cost=memory_cost,
        doc="nonzero(x, count): the (count, ndim) coordinates of the non-zero elements. The count "
        "is data-dependent: the public function reads it from x when the call is made.",
    )
)


@export(method=True)
def nonzero(x, *, as_tuple: bool = False):
    """Coordinates of the non-zero elements, one row each (``as_tuple``: one 1-D tensor per
    dimension, usable as an index). Complex tensors too (their non-zero elements)."""
    x = to_tensor(x)
    if as_tuple and x.ndim == 0:  # (one index tensor, as PyTorch's: 0-d seen as one element)
        return nonzero(E.reshape(x, (1,)), as_tuple=True)
    if x.dtype.is_complex:  # (the kernel reads truth values)
        x = E.ne(x, 0)
    count = size_from_values(
        E.sum(E.ne(x, 0)),
        "nonzero",
        "the count of non-zero elements",
        "keep the shape with ember.where(cond, x, 0) or a mask multiplied in",
    )
    out = apply(_NONZERO, x, count=count)
    if as_tuple:
        return tuple(getitem(out, (slice(None), d)) for d in range(x.ndim))
    return out


export(lambda x: nonzero(x), name="argwhere", method=True)


@export(method=True)
def select(x, dim: int, index: int):
    """The slice of ``x`` at ``index`` along ``dim``, that dimension removed (a view)."""
    x = to_tensor(x)
    d = normalize_axis("select", dim, x.ndim)
    return getitem(x, (slice(None),) * d + (operator.index(index),))


@export(method=True)
def narrow(x, dim: int, start: int, length: int):
    """``length`` entries of ``x`` from ``start`` along ``dim`` (a view)."""
    x = to_tensor(x)
    d = normalize_axis("narrow", dim, x.ndim)
    n = x.shape[d]
    start = start if isinstance(start, SymDim) else operator.index(start)
    if start < 0:
        start += n
    if not (0 <= start <= n and 0 <= length and start + length <= n):
        raise ShapeError(
            f"start {start} and length {length} fall outside dimension {d} of size {n} "
            f"(tensor shape {fmt_shape(x.shape)})",
            op="narrow",
        )
    return getitem(x, (slice(None),) * d + (slice(start, start + length),))
