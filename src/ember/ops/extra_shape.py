"""Issue 19's long tail of shape functions, products and constructors, PyTorch's names, all
composites of ember's ops (so they differentiate and capture through them): moveaxis, fliplr,
flipud, rot90, diag_embed, atleast_1d/2d/3d, column_stack, dstack, tensor_split, hsplit,
vsplit, dsplit, kron, block_diag, cartesian_prod, combinations, tril_indices, triu_indices,
vander, logspace, addbmm, addmv, chain_matmul, cross, Tensor.unfold, sum_to_size, reshape_as,
ravel, masked_scatter and fill_diagonal_.
"""

from __future__ import annotations

import itertools

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..symbolic import SymDim
from . import _item_scalars as _items
from . import _torch_flops
from . import api as E
from ._aliased_source import sequential_reads
from ._autocast import Autocast, autocasts
from ._limited import refuse_limited
from ._node_names import rename_node, renames
from ._registry import TensorBase, building_graph, export, is_grad_enabled
from ._util import broadcast_shapes, check_scalars, normalize_axis, truncated_scalars
from .pad import pad
from .promotion import promote, to_tensor


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


# ---------------------------------------------------------------------------------- products


@export(method=True)
def kron(input, other):
    """The Kronecker product (of any ranks: the smaller is padded with leading 1s)."""
    a, b = promote(input, other)
    nd = max(a.ndim, b.ndim)
    a = E.reshape(a, (1,) * (nd - a.ndim) + tuple(a.shape))
    b = E.reshape(b, (1,) * (nd - b.ndim) + tuple(b.shape))
    a_shape = sum(((s, 1) for s in a.shape), ())
    b_shape = sum(((1, s) for s in b.shape), ())
    out = E.reshape(a, a_shape) * E.reshape(b, b_shape)
    return E.reshape(out, tuple(p * q for p, q in zip(a.shape, b.shape)))


@export
def block_diag(*tensors):
    """A block-diagonal matrix of the given 0-, 1- or 2-d tensors (promoted to one dtype)."""
    if not tensors:
        return E.zeros((1, 0))
    mats = []
    for t in tensors:
        t = to_tensor(t)
        if t.ndim > 2:
            raise ShapeError(
                f"block_diag takes tensors of at most 2 dims, got {tuple(t.shape)}", op="block_diag"
            )
        mats.append(
            E.reshape(t, (1, 1)) if t.ndim == 0 else E.reshape(t, (1, -1)) if t.ndim == 1 else t
        )
    dtype = dt.result_type(*mats)
    mats = [E.cast(m, dtype) if m.dtype is not dtype else m for m in mats]
    width = sum(m.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        r, c = m.shape
        parts = [E.zeros((r, left), dtype=dtype), m, E.zeros((r, width - left - c), dtype=dtype)]
        rows.append(E.cat(parts, 1))
        left += c
    return E.cat(rows, 0)


@export
def cartesian_prod(*tensors):
    """Every combination of the 1-d tensors' elements, one row each (a single tensor comes back
    as it is, as in PyTorch)."""
    if len(tensors) == 1:
        return to_tensor(tensors[0])
    grids = E.meshgrid(*tensors, indexing="ij")
    return E.stack([E.reshape(g, (-1,)) for g in grids], 1)


@export
def combinations(input, r: int = 2, with_replacement: bool = False):
    """The length-``r`` combinations of a 1-d tensor's elements, one row each (as
    itertools.combinations / combinations_with_replacement), shape (count, r)."""
    x = to_tensor(input)
    if x.ndim != 1:
        raise ShapeError(
            f"combinations needs a 1-d tensor, got shape {tuple(x.shape)}", op="combinations"
        )
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.array(list(pick(range(x.shape[0]), r)), np.int64).reshape(-1, r)
    if r == 0:
        return E.index_select(x, 0, to_tensor(np.zeros(0, np.int64)))
    return E.reshape(E.index_select(x, 0, to_tensor(idx.reshape(-1))), idx.shape)


def _indices(fn, name):
    def indices(row: int, col: int, offset: int = 0, *, dtype=None):
        rows, cols = fn(int(row), int(offset), int(col))
        out = np.stack([rows, cols]).astype(np.int64).reshape(2, -1)
        return to_tensor(out, dtype or dt.int64)

    indices.__name__ = indices.__qualname__ = name
    indices.__doc__ = (
        f"The row and column indices of a (row, col) matrix's {name[:4]} part above offset, "
        "shape (2, N), in row-major order; int64 unless ``dtype``."
    )
    return export(indices)


tril_indices = _indices(np.tril_indices, "tril_indices")
triu_indices = _indices(np.triu_indices, "triu_indices")


@export
def vander(x, N: int | None = None, increasing: bool = False):
    """The Vandermonde matrix of a 1-d tensor: columns x^(N-1), ..., x, 1 (or increasing).
    Written as running products, so the gradient at x = 0 is finite, as in PyTorch."""
    x = to_tensor(x)
    if x.ndim != 1:
        raise ShapeError(f"vander needs a 1-d tensor, got shape {tuple(x.shape)}", op="vander")
    if not (x.dtype.is_floating_point or x.dtype.is_complex):  # integers, bools: int64
        x = E.cast(x, dt.int64)
    n = x.shape[0] if N is None else int(N)
    if n < 0:
        raise ShapeError(f"vander: N must be non-negative, got {N}", op="vander")
    if n == 0:
        return E.zeros((x.shape[0], 0), dtype=x.dtype)
    cols = [E.ones_like(x)]
    for _ in range(n - 1):
        cols.append(cols[-1] * x)
    if not increasing:
        cols.reverse()
    return E.stack(cols, 1)


@export
def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, requires_grad=False):
    """``steps`` values ``base ** t`` for t evenly spaced from start to end (default float
    dtype unless ``dtype``)."""
    from .creation import space_endpoints

    (start, end), dtype = space_endpoints("logspace", start, end, dtype)
    refuse_limited("logspace", dtype)
    wide = np.complex128 if dtype.is_complex else np.float64
    exps = np.linspace(start, end, int(steps), dtype=wide)
    with np.errstate(over="ignore", invalid="ignore"):
        values = np.power(float(base), exps)
    if not (dtype.is_floating_point or dtype.is_complex):
        values = np.trunc(values)
    out = to_tensor(values, dtype)
    if requires_grad:
        out.requires_grad_(True)
    return out


def _scaled(name, input, product, beta, alpha):
    input, product = promote(input, product)
    if _items.any_item(beta, alpha):  # (traced .item()s: their tensors)
        check_scalars(name, input.dtype, beta, alpha)
        return _items.add_scaled(name, input, product, beta, alpha, input.dtype)
    beta, alpha = truncated_scalars(name, input.dtype, beta, alpha)
    scaled = product if alpha == 1 else product * alpha
    if beta == 0:  # the input is ignored, its NaN and infinities too
        return E.broadcast_to(
            scaled, broadcast_shapes(name, tuple(input.shape), tuple(scaled.shape))
        )
    return (input if beta == 1 else input * beta) + scaled


@export(method=True, inplace=True)
@autocasts(Autocast.LOWER)
@_torch_flops.counts_as(None)  # (PyTorch's FlopCounterMode has no formula for addbmm)
def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``; beta=0 ignores the input.
    ``addbmm_`` refuses an input that broadcasts (PyTorch's resizes it to the result's shape):
    in-place ops never change a tensor's shape in ember."""
    b1, b2 = to_tensor(batch1), to_tensor(batch2)
    if b1.ndim != 3 or b2.ndim != 3:
        raise ShapeError(
            f"addbmm takes 3-d batches, got {tuple(b1.shape)} and {tuple(b2.shape)}",
            op="addbmm",
        )
    products = E.bmm(b1, b2)
    # (summing keeps the batch's dtype: sum alone would widen integers to int64)
    out = _scaled("addbmm", input, E.cast(E.sum(products, 0), products.dtype), beta, alpha)
    return rename_node(out, "AddbmmBackward0")


# (PyTorch's addbmm_ is a product into its input, not an elementwise kernel: it does not
# refuse operands overlapping the input, ops/_overlap.py)
addbmm.overlap_ok = True


@export(method=True, inplace=True)
@renames("AddmvBackward0")
def addmv(input, mat, vec, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat @ vec)``; beta=0 ignores the input."""
    m, v = to_tensor(mat), to_tensor(vec)
    if m.ndim != 2 or v.ndim != 1:
        raise ShapeError(
            f"addmv takes a matrix and a vector, got {tuple(m.shape)} and {tuple(v.shape)}",
            op="addmv",
        )
    return _scaled("addmv", input, E.mv(m, v), beta, alpha)


# (PyTorch's addmv_ is a product into its input, not an elementwise kernel: it does not
# refuse operands overlapping the input, ops/_overlap.py)
addmv.overlap_ok = True


@export
def chain_matmul(*matrices):
    """The product of 2-d matrices, left to right (PyTorch's deprecated spelling of
    linalg.multi_dot)."""
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise ShapeError("chain_matmul needs at least one matrix", op="chain_matmul")
    out = to_tensor(matrices[0])
    for m in matrices:
        if to_tensor(m).ndim != 2:
            raise ShapeError(
                f"chain_matmul takes 2-d matrices, got {tuple(m.shape)}", op="chain_matmul"
            )
    for m in matrices[1:]:
        out = E.mm(out, m)
    return out if len(matrices) > 1 else E.clone(out)


@export(method=True)
def cross(input, other, dim: int | None = None):
    """The cross product of 3-vectors along ``dim`` (broadcasting); without ``dim``, the first
    dim of size 3 (PyTorch's deprecated default)."""
    a, b = promote(input, other)
    if a.ndim != b.ndim:
        raise ShapeError(
            f"cross: inputs must have the same number of dims, got {tuple(a.shape)} and "
            f"{tuple(b.shape)}",
            op="cross",
        )
    shape = broadcast_shapes("cross", tuple(a.shape), tuple(b.shape))
    a, b = E.broadcast_to(a, shape), E.broadcast_to(b, shape)
    if dim is None:
        dims = [i for i, s in enumerate(shape) if s == 3]
        if not dims:
            raise ShapeError(f"cross: no dim of size 3 in shape {shape}", op="cross")
        axis = dims[0]
    else:
        axis = normalize_axis("cross", dim, len(shape))
    if shape[axis] != 3:
        raise ShapeError(f"cross: dim {dim} of shape {shape} must have size 3", op="cross")
    a0, a1, a2 = (E.select(a, axis, i) for i in range(3))
    b0, b1, b2 = (E.select(b, axis, i) for i in range(3))
    return E.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis)


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
