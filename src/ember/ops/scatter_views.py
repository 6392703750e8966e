"""PyTorch's functional forms of writing into a view, and a few more Tensor functions, as
composites of ember's ops (so they differentiate and capture through them): slice_scatter,
select_scatter, diagonal_scatter (``index_put`` of the view's index: the source gets the
view's gradient, the input the rest), renorm (and ``renorm_``), addr (and ``addr_``) and
split_with_sizes.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..dtypes import result_type
from ..errors import ArgumentError, DTypeError, ShapeError
from . import _item_scalars as _items
from . import api as E
from ._registry import export
from ._util import check_scalars, normalize_axis
from .norms import vector_norm
from .promotion import to_tensor


def _fmt(shape) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _check_src(name, view_shape, src, x):
    """``src`` cast to x's dtype (PyTorch's scatters into a view copy, which casts), once its
    shape is checked to be the view's."""
    if tuple(src.shape) != tuple(view_shape):
        raise ShapeError(
            f"expected src to have a size equal to the slice of self: src size "
            f"{_fmt(src.shape)}, slice size {_fmt(view_shape)}",
            op=name,
        )
    return E.cast(src, x.dtype) if src.dtype is not x.dtype else src


@export(method=True)
def slice_scatter(input, src, dim: int = 0, start=None, end=None, step: int = 1):
    """A copy of ``input`` with ``input[..., start:end:step, ...]`` (along ``dim``) replaced by
    ``src``, which has that slice's shape."""
    x, src = to_tensor(input), to_tensor(src)
    axis = normalize_axis("slice_scatter", dim, x.ndim)
    if step <= 0:
        raise ArgumentError(f"slice_scatter: slice step must be positive, got {step}")
    index = (slice(None),) * axis + (slice(start, end, step),)
    src = _check_src("slice_scatter", x[index].shape, src, x)
    return E.index_put(x, index, src)


@export(method=True)
def select_scatter(input, src, dim: int, index: int):
    """A copy of ``input`` with ``input.select(dim, index)`` replaced by ``src``."""
    x, src = to_tensor(input), to_tensor(src)
    axis = normalize_axis("select_scatter", dim, x.ndim)
    size = x.shape[axis]
    if not -size <= index < size:
        raise IndexError(
            f"select_scatter: index {index} out of range for tensor of size {_fmt(x.shape)} at "
            f"dimension {axis}"
        )
    where = (slice(None),) * axis + (index % size,)
    src = _check_src("select_scatter", x[where].shape, src, x)
    return E.index_put(x, where, src)


@export(method=True)
def diagonal_scatter(input, src, offset: int = 0, dim1: int = 0, dim2: int = 1):
    """A copy of ``input`` with ``input.diagonal(offset, dim1, dim2)`` replaced by ``src``
    (whose last dimension runs along the diagonal, as the view's)."""
    x, src = to_tensor(input), to_tensor(src)
    d1 = normalize_axis("diagonal_scatter", dim1, x.ndim)
    d2 = normalize_axis("diagonal_scatter", dim2, x.ndim)
    if d1 == d2:
        raise ShapeError("diagonal dimensions cannot be identical", op="diagonal_scatter")
    src = _check_src("diagonal_scatter", E.diagonal(x, offset, d1, d2).shape, src, x)
    moved = E.movedim(x, (d1, d2), (-2, -1))
    rows, cols = moved.shape[-2], moved.shape[-1]
    start_r, start_c = (0, offset) if offset >= 0 else (-offset, 0)
    length = max(min(rows - start_r, cols - start_c), 0)
    r = E.arange(start_r, start_r + length)
    c = E.arange(start_c, start_c + length)
    written = E.index_put(moved, (Ellipsis, r, c), src)
    return E.movedim(written, (-2, -1), (d1, d2))


@export(method=True, inplace=True)
def renorm(input, p, dim: int, maxnorm):
    """Each sub-tensor ``input.select(dim, i)`` whose ``p``-norm exceeds ``maxnorm`` scaled to
    norm ``maxnorm`` (by ``maxnorm / (norm + 1e-7)``, as PyTorch); the others unchanged."""
    x = to_tensor(input)
    if not (x.dtype.is_floating_point or x.dtype.is_complex):  # (complex: the moduli's norms)
        raise DTypeError(f"renorm: expected a floating-point tensor, got {x.dtype}", op="renorm")
    if x.ndim < 2:
        raise ShapeError(f"renorm: input needs at least 2 dimensions, got {x.ndim}", op="renorm")
    _items.refuse(p, "renorm", "p", "the norm's order as a number")
    if p <= 0:
        raise ArgumentError(f"renorm: non-positive norm not supported, got p={p}")
    if not _items.is_item(maxnorm) and maxnorm < 0:  # (an item: its tensor, unchecked)
        raise ArgumentError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    axis = normalize_axis("renorm", dim, x.ndim)
    others = tuple(a for a in range(x.ndim) if a != axis)
    norm = vector_norm(x, p, dim=others, keepdim=True) if others else E.abs(x)
    factor = E.where(norm > maxnorm, maxnorm / (norm + 1e-7), E.ones_like(norm))
    return x * factor


@export(method=True, inplace=True)
def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """``beta * input + alpha * outer(vec1, vec2)``; with ``beta == 0`` the input is ignored
    (its NaN and infinities do not propagate), as in PyTorch."""
    x, v1, v2 = to_tensor(input), to_tensor(vec1), to_tensor(vec2)
    if v1.ndim != 1 or v2.ndim != 1:
        raise ShapeError(
            f"addr: expected 1-D vectors, got {v1.ndim}-D and {v2.ndim}-D tensors", op="addr"
        )
    check_scalars("addr", result_type(x, v1, v2), beta, alpha)
    product = E.outer(v1, v2)
    if result_type(x, v1, v2) is dt.bool_ and not _items.any_item(beta, alpha):
        # PyTorch's for bool tensors: (beta and input) or (alpha and vec1 vec2^T), still bool
        product = product if alpha else E.zeros_like(product)
        return E.logical_or(x, product) if beta else E.logical_or(E.zeros_like(x), product)
    if _items.any_item(beta, alpha):  # (traced .item()s: their tensors)
        return _items.add_scaled("addr", x, product, beta, alpha, result_type(x, v1, v2))
    if alpha != 1:
        product = product * alpha
    if beta == 0:  # (zeros of the input's shape: the result broadcasts as with any beta)
        return E.zeros_like(x) + product
    return (x * beta if beta != 1 else x) + product


@export(method=True)
def split_with_sizes(input, split_sizes, dim: int = 0):
    """The input split along ``dim`` into pieces of ``split_sizes``, which must sum to that
    dimension's size (a tuple of views)."""
    x = to_tensor(input)
    axis = normalize_axis("split_with_sizes", dim, x.ndim)
    sizes = [int(s) for s in split_sizes]
    if sum(sizes) != x.shape[axis] or any(s < 0 for s in sizes):
        raise ShapeError(
            f"split_with_sizes expects split_sizes to sum exactly to {x.shape[axis]} (input "
            f"tensor's size at dimension {axis}), but got split_sizes={sizes}",
            op="split_with_sizes",
        )
    return tuple(E.split(x, sizes, axis))
