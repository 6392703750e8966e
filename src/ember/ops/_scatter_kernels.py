"""Fast NumPy kernels for scatter-adds (the adjoints of gathers), where repeated indices must
accumulate.

``np.add.at`` is exact but slow on rows of a multi-dimensional array (it walks element by
element); NumPy 2 has a fast path only for a 1-D target and 1-D integer index. So:

* `add_slices`: slices of g added into zeros along one axis at integer indices (the adjoint of
  ``index_select``, of an embedding lookup, of ``x[idx]``) is a sparse selection matrix of shape
  (n, len(idx)), one 1 per column, times g: a compiled sparse-dense product.
* `add_elements`: elements added at per-element coordinates (the adjoint of ``gather``) become
  flat positions in the raveled target and one 1-D ``np.add.at``.

Both validate the indices (negative ones count from the end) and keep g's dtype.
"""

from __future__ import annotations

import math

import numpy as np

# below this many elements the plain np.add.at costs less than building the sparse matrix
_SPARSE_MIN = 4096


def normalized(idx: np.ndarray, n: int) -> np.ndarray:
    """Indices in [0, n); an IndexError naming the first bad one otherwise."""
    if idx.size == 0:
        return idx.astype(np.int64)
    lo, hi = int(idx.min()), int(idx.max())
    if lo < -n or hi >= n:
        bad = lo if lo < -n else hi
        raise IndexError(f"index {bad} is out of bounds for a dimension of size {n}")
    return np.where(idx < 0, idx + n, idx) if lo < 0 else idx


def add_slices(in_shape: tuple, axis: int, idx: np.ndarray, g: np.ndarray) -> np.ndarray:
    """zeros(in_shape) with ``g``'s slices added at ``idx`` along ``axis``; g has shape
    ``in_shape[:axis] + idx.shape + in_shape[axis + 1:]``."""
    n = in_shape[axis]
    flat = normalized(idx.reshape(-1), n)
    if g.size < _SPARSE_MIN or g.dtype not in (np.float32, np.float64):
        out = np.zeros(in_shape, dtype=g.dtype)
        g = g.reshape(in_shape[:axis] + (flat.size,) + in_shape[axis + 1 :])
        np.add.at(out, (slice(None),) * axis + (flat,), g)
        return out
    from scipy import sparse

    outer, inner, m = math.prod(in_shape[:axis]), math.prod(in_shape[axis + 1 :]), flat.size
    rows = g.reshape(outer, m, inner).transpose(1, 0, 2).reshape(m, outer * inner)
    # column j of the selection matrix has its single 1 in row flat[j]: CSC needs no sorting
    select = sparse.csc_array((np.ones(m, g.dtype), flat, np.arange(m + 1)), shape=(n, m))
    summed = np.asarray(select @ rows, dtype=g.dtype)
    out = summed.reshape(n, outer, inner).transpose(1, 0, 2).reshape(in_shape)
    return np.ascontiguousarray(out)


def add_elements(out: np.ndarray, axis: int, index: np.ndarray, src: np.ndarray) -> None:
    """``out[..., index[i, j, ...], ...] += src[i, j, ...]`` along ``axis`` (in place); index and
    src have one shape, no larger than out outside ``axis``."""
    if out.size == 0 or index.size == 0:
        return
    index = normalized(index, out.shape[axis]).astype(np.int64, copy=False)
    strides = [math.prod(out.shape[d + 1 :]) for d in range(out.ndim)]
    flat = index * strides[axis]
    for d, size in enumerate(index.shape):
        if d != axis:
            shape = [1] * index.ndim
            shape[d] = size
            flat = flat + (np.arange(size) * strides[d]).reshape(shape)
    target = out.reshape(-1)  # out is freshly allocated and contiguous: a view
    np.add.at(target, flat.reshape(-1), src.reshape(-1))
