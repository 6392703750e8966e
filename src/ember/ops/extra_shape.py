"""Issue 19's long tail of shape functions, PyTorch's names, all composites of ember's ops (so
they differentiate and capture through them): moveaxis, fliplr, flipud, rot90, diag_embed,
atleast_1d/2d/3d, column_stack, dstack, tensor_split, hsplit, vsplit, dsplit,
sum_to_size, reshape_as, ravel, masked_scatter, fill_diagonal_, is_nonzero and
is_floating_point. The products and constructors (kron, block_diag, cartesian_prod, vander,
logspace, addbmm, addmv, chain_matmul, cross, ...) are ops/extra_products.py's.
"""

from __future__ import annotations

import itertools

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..symbolic import SymDim
from . import api as E
from ._aliased_source import sequential_reads
from ._node_names import rename_node, renames
from ._registry import TensorBase, building_graph, export, is_grad_enabled
from ._util import broadcast_shapes, normalize_axis
from .pad import pad
from .promotion import to_tensor


@export(method=True)
def moveaxis(input, source, destination):
    """PyTorch's (and NumPy's) alias of movedim."""
    return E.movedim(input, source, destination)


# ----------------------------------------------------------------------------- flips, rot90


@export(method=True)
def fliplr(input):
    """Reverse dim 1 (columns); at least 2-d."""
    x = to_tensor(input)
    if x.ndim < 2:
        raise ShapeError(f"fliplr needs at least 2 dims, got shape {tuple(x.shape)}", op="fliplr")
    return E.flip(x, (1,))


@export(method=True)
def flipud(input):
    """Reverse dim 0 (rows); at least 1-d."""
    x = to_tensor(input)
    if x.ndim < 1:
        raise ShapeError("flipud needs at least 1 dim, got a 0-d tensor", op="flipud")
    return E.flip(x, (0,))


@export(method=True)
@renames("Rot90Backward0")
def rot90(input, k: int = 1, dims=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane of ``dims``, from the first dim towards
    the second (PyTorch's and NumPy's direction)."""
    x = to_tensor(input)
    dims = tuple(dims)
    if len(dims) != 2:
        raise ShapeError(f"rot90: dims must be two dims, got {dims}", op="rot90")
    if x.ndim < 2:
        raise ShapeError(f"rot90 needs at least 2 dims, got shape {tuple(x.shape)}", op="rot90")
    d0, d1 = (normalize_axis("rot90", d, x.ndim) for d in dims)
    if d0 == d1:
        raise ShapeError(f"rot90: dims must differ, got {dims}", op="rot90")
    k %= 4
    if k == 1:
        return E.transpose(E.flip(x, (d1,)), d0, d1)
    if k == 2:
        return E.flip(x, (d0, d1))
    if k == 3:
        return E.transpose(E.flip(x, (d0,)), d0, d1)
    return E.clone(x)


# --------------------------------------------------------------------------------- diag_embed


@export(method=True)
@renames("DiagEmbedBackward0")
def diag_embed(input, offset: int = 0, dim1: int = -2, dim2: int = -1):
    """Matrices whose ``offset`` diagonal (in the plane of the new result's dims ``dim1`` and
    ``dim2``) holds the last dim of ``input``; zeros elsewhere."""
    x = to_tensor(input)
    if x.ndim == 0:
        x = E.reshape(x, (1,))
    nd = x.ndim + 1
    d1, d2 = normalize_axis("diag_embed", dim1, nd), normalize_axis("diag_embed", dim2, nd)
    if d1 == d2:
        raise ShapeError(
            f"diag_embed: dim1 and dim2 must differ, got {dim1}, {dim2}", op="diag_embed"
        )
    length = x.shape[-1]
    n = length + abs(offset)
    if offset == 0 and not building_graph() and not (is_grad_enabled() and x.requires_grad):
        # eagerly without a gradient: each value followed by n zeros (one padding pass), whose
        # first n * n elements, n + 1 apart, are the diagonal's
        lead = tuple(x.shape[:-1])
        padded = E.reshape(pad(E.unsqueeze(x, -1), (0, n)), (*lead, n * (n + 1)))
        out = E.reshape(E.narrow(padded, -1, 0, n * n), (*lead, n, n))
        return E.movedim(out, (nd - 2, nd - 1), (d1, d2))
    # the vector written into zeros at the diagonal's positions: its gradient is the
    # gradient's diagonal, gathered (a selection over the whole (n, n) plane took a reduction
    # over it, 6x PyTorch's backward)
    start_r, start_c = (0, offset) if offset >= 0 else (-offset, 0)
    rows = E.arange(start_r, start_r + length)
    cols = E.arange(start_c, start_c + length)
    out = E.index_put(E.zeros((*x.shape[:-1], n, n), dtype=x.dtype), (Ellipsis, rows, cols), x)
    return E.movedim(out, (nd - 2, nd - 1), (d1, d2))


# --------------------------------------------------------------------- atleast_nd and stacks


def _atleast(n):
    def fn(*tensors):
        single = len(tensors) == 1 and not isinstance(tensors[0], (list, tuple))
        items = (
            tensors[0] if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else (tensors)
        )
        out = []
        for t in items:
            t = to_tensor(t)
            if t.ndim < n:
                if t.ndim == 0:
                    shape = (1,) * n
                elif t.ndim == 1:
                    shape = (1, t.shape[0], 1)[:n] if n == 3 else (1, t.shape[0])
                else:
                    shape = (*t.shape, 1)
                t = E.reshape(t, shape)
            out.append(t)
        return out[0] if single else tuple(out)

    fn.__name__ = fn.__qualname__ = f"atleast_{n}d"
    fn.__doc__ = f"The tensor(s) viewed with at least {n} dims (as NumPy's atleast_{n}d)."
    return fn


atleast_1d = export(_atleast(1))
atleast_2d = export(_atleast(2))
atleast_3d = export(_atleast(3))


@export
def column_stack(tensors):
    """Join along dim 1, 0-d and 1-d tensors first made into columns."""
    cols = []
    for t in tensors:
        t = to_tensor(t)
        cols.append(E.reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t)
    return E.hstack(cols)


@export
def dstack(tensors):
    """Join along dim 2 (depth), each tensor first made at least 3-d."""
    return E.cat(list(atleast_3d(*tensors)) if len(tensors) != 1 else [atleast_3d(tensors[0])], 2)


# ------------------------------------------------------------------------------------ splits


def _split_at(x, bounds, axis):
    """x[start:b] along axis for consecutive bounds (each clamped to the size; a bound below
    the previous one gives an empty part, and the next part starts at it, as in PyTorch)."""
    size = x.shape[axis]
    out, start = [], 0
    for b in [*bounds, size]:
        b = min(max(int(b), 0), size)
        out.append(E.narrow(x, axis, start, max(b - start, 0)))
        start = b
    return tuple(out)


@export(method=True)
def tensor_split(input, indices_or_sections, dim: int = 0):
    """Split into ``sections`` parts of sizes differing by at most one (the first
    ``size % sections`` one larger), or at the given ``indices``; views of the input."""
    x = to_tensor(input)
    if x.ndim == 0:
        raise ShapeError("tensor_split needs at least 1 dim", op="tensor_split")
    axis = normalize_axis("tensor_split", dim, x.ndim)
    spec = indices_or_sections
    if isinstance(spec, TensorBase):
        spec = spec.tolist()
    if isinstance(spec, int):
        if spec <= 0:
            raise ShapeError(
                f"tensor_split: sections must be positive, got {spec}", op="tensor_split"
            )
        size = x.shape[axis]
        if isinstance(size, SymDim):  # piece k: floor((size + spec - 1 - k) / spec), which
            # gives the first size % spec pieces one more, whatever the size
            pieces = [(size + spec - 1 - k) // spec for k in range(spec)]
            return tuple(E.split(x, pieces, axis))
        base, extra = size // spec, size % spec
        bounds = list(itertools.accumulate(base + (i < extra) for i in range(spec - 1)))
        return _split_at(x, bounds, axis)
    return _split_at(x, list(spec), axis)


def _directional(name, dim, min_ndim):
    def fn(input, indices_or_sections):
        x = to_tensor(input)
        if x.ndim < min_ndim:
            raise ShapeError(
                f"{name} needs at least {min_ndim} dims, got shape {tuple(x.shape)}", op=name
            )
        axis = dim if x.ndim > 1 or name != "hsplit" else 0
        spec = indices_or_sections
        if isinstance(spec, int) and x.shape[axis] % spec:
            raise ShapeError(
                f"{name}: dim {axis} of size {x.shape[axis]} does not split into {spec} equal "
                "parts; use tensor_split for unequal ones",
                op=name,
            )
        return tensor_split(x, spec, axis)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"tensor_split along dim {dim}; an int must divide the dim evenly."
    return export(fn, method=True)


hsplit = _directional("hsplit", 1, 1)
vsplit = _directional("vsplit", 0, 2)
dsplit = _directional("dsplit", 2, 3)


# ----------------------------------------------------------------------------- Tensor methods


def _sum_to_size(self, *size):
    """Sum broadcast dims away so the result has ``size`` (self must broadcast from it)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    if not size:  # (PyTorch's sum_to: the whole sum, its dtype too, even of a 0-d tensor)
        return E.sum(self)
    return E.sum_to(self, tuple(size))


def _reshape_as(self, other):
    return E.reshape(self, tuple(other.shape))


export(_sum_to_size, name="sum_to_size", method=True, toplevel=False)
export(_reshape_as, name="reshape_as", method=True, toplevel=False)


@export(method=True)
def ravel(input):
    """The elements as a 1-d tensor (a reshape)."""
    return E.reshape(input, (-1,))


@export(method=True)
def masked_scatter(input, mask, source):
    """``input`` with the positions where ``mask`` (broadcast to input) is True filled with
    ``source``'s leading elements, in row-major order. The gradient goes to input where mask
    is False and to the source elements used."""
    x, m, src = to_tensor(input), to_tensor(mask), to_tensor(source)
    if m.dtype is not dt.bool_:
        raise DTypeError(f"masked_scatter: mask must be bool, got {m.dtype}", op="masked_scatter")
    if src.dtype is not x.dtype:
        raise DTypeError(
            f"masked_scatter: source {src.dtype} must have input's dtype {x.dtype}",
            op="masked_scatter",
        )
    # (out of place, input and mask broadcast together, as PyTorch's; x.masked_scatter_ keeps
    # x's shape, which the in-place protocol checks)
    shape = broadcast_shapes("masked_scatter", tuple(x.shape), tuple(m.shape))
    _refuse_short_source(m, shape, src)
    x, m = E.broadcast_to(x, shape), E.broadcast_to(m, shape)
    flat_mask = E.reshape(m, (-1,))
    pos = E.cumsum(E.cast(flat_mask, dt.int64), 0) - 1
    flat_src = E.reshape(src, (-1,))
    if flat_src.shape[0] == 0:
        return E.clone(x)
    pos = E.clamp(pos, 0, flat_src.shape[0] - 1)
    picked = E.reshape(E.index_select(flat_src, 0, pos), shape)
    return rename_node(E.where(m, picked, x), "MaskedScatterBackward0")


def _refuse_short_source(mask, shape, source):
    """PyTorch refuses a source with fewer elements than the mask (broadcast) has ones; the
    count is known only where the mask holds data (eagerly, not while a graph is built)."""
    data = getattr(mask, "_data", None)
    if not isinstance(data, np.ndarray) or data.dtype != np.bool_:
        return
    ones = int(np.count_nonzero(np.broadcast_to(data, shape)))
    have = int(np.prod(source.shape, dtype=np.int64))
    if have < ones:
        raise ShapeError(
            f"the source has {have} elements, fewer than the {ones} ones in the mask "
            f"(broadcast to {tuple(shape)})",
            op="masked_scatter",
        )


# (PyTorch's masked_scatter_ reads its source as it writes: an overlapping source is allowed)
masked_scatter.overlap_ok = True


@export(name="masked_scatter_", method=True, toplevel=False)
def _masked_scatter_inplace(self, mask, source):
    """``self.masked_scatter_(mask, source)``; a source sharing self's memory is read as
    PyTorch's loop reads it, seeing the elements earlier steps wrote (ops/_aliased_source.py).
    Those values are written after the out-of-place result, so the gradient is PyTorch's
    formula's (mask-selected gradient to the source's leading elements), which ignores the
    aliasing as PyTorch's does."""
    data, src, m = (getattr(t, "_data", None) for t in (self, source, mask))
    arrays = all(isinstance(a, np.ndarray) for a in (data, src, m))
    reads = None
    if arrays and m.dtype == np.bool_ and not building_graph():
        full_mask = np.broadcast_to(m, data.shape)
        reads = sequential_reads(data, full_mask, src)
    if reads is None:
        return self._inplace("masked_scatter_", masked_scatter, mask, source)
    values = src.reshape(-1)[reads]  # (a copy, taken before the write)
    out = self._inplace("masked_scatter_", masked_scatter, mask, source)
    self._data.reshape(-1)[np.flatnonzero(full_mask)[: len(reads)]] = values
    return out


def _fill_diagonal_mask(shape, wrap):
    if len(shape) < 2:
        raise ShapeError(f"fill_diagonal_ needs at least 2 dims, got {shape}", op="fill_diagonal_")
    if len(shape) > 2 and len(set(shape)) != 1:
        raise ShapeError(
            f"fill_diagonal_: all dims must be equal, got {shape}", op="fill_diagonal_"
        )
    mask = np.zeros(shape, bool)
    n = min(shape)
    idx = np.arange(n)
    mask[(idx,) * len(shape)] = True
    if wrap and len(shape) == 2 and shape[0] > shape[1]:
        # PyTorch's wrap: the diagonal starts again every (cols + 1) rows of a tall matrix
        flat = mask.reshape(-1)
        flat[:: shape[1] + 1] = True
    return mask


def _fill_diagonal_(self, fill_value, wrap: bool = False):
    mask = to_tensor(_fill_diagonal_mask(tuple(self.shape), wrap))
    return self._inplace("fill_diagonal_", lambda old: E.masked_fill(old, mask, fill_value))


export(_fill_diagonal_, name="fill_diagonal_", method=True, toplevel=False)


@export(method=True)
def is_nonzero(input) -> bool:
    """Whether a one-element tensor is non-zero (an error for any other size)."""
    x = to_tensor(input)
    if x.numel() != 1:
        raise ShapeError(
            f"is_nonzero needs a tensor of one element, got shape {tuple(x.shape)}",
            op="is_nonzero",
        )
    return bool(x.item() != 0)


@export
def is_floating_point(input) -> bool:
    """Whether the tensor's dtype is a floating-point one."""
    return to_tensor(input).dtype.is_floating_point
