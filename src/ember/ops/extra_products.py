"""Issue 19's products and constructors, PyTorch's names (split from ops/extra_shape.py), all
composites of ember's ops (so they differentiate and capture through them): kron, block_diag,
cartesian_prod, combinations, tril_indices, triu_indices, vander, logspace, addbmm, addmv,
chain_matmul and cross.
"""

from __future__ import annotations

import itertools

import numpy as np

from .. import dtypes as dt
from ..errors import ShapeError
from . import _item_scalars as _items
from . import _torch_flops
from . import api as E
from ._autocast import Autocast, autocasts
from ._limited import refuse_limited
from ._node_names import rename_node, renames
from ._registry import export
from ._util import broadcast_shapes, check_scalars, normalize_axis, truncated_scalars
from .promotion import promote, to_tensor


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
