"""Kernels of the sparse (COO) matrix product: the NumPy reference and the CSR product (ember's
C loop, kernels/csparse.py, or scipy.sparse's without a compiler), with the CSR structure of an
indices array cached.

A COO matrix is an ``indices`` array (2, nnz) of (row, column) pairs, in any order and with
repeats (repeats add), and a ``values`` array (nnz,). The reference (`coo_mm`) adds each
value's row of products with ``np.add.at``: the specification, independent of scipy.

The fast path (`coo_mm_fast`) runs a CSR product. Converting COO to CSR
sorts the pairs, which costs more than the product itself at GCN sizes, and a model multiplies
the same adjacency every step (forward, and its transpose in backward): so the row pointers,
column indices and the permutation of the values into CSR order are cached per indices array
(one entry per array object, held by a weak reference, and checked against a copy of the
array on every use, so an indices tensor written in place is converted again rather than
read stale). Each call then only puts the values in place (no copy at all when the indices
are already in row-major order, as coalesced ones are).
"""

from __future__ import annotations

import weakref

import numpy as np

from ..kernels import csparse
from ._index_plan import IndexOutOfRangeError

_FAST_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _check_bounds(op, r, c, n_rows, n_cols):
    """Refuse pairs outside the matrix (a graph given unchecked indices): NumPy would wrap
    negative ones and C would read outside its operand."""
    for what, idx, n in (("row", r, n_rows), ("column", c, n_cols)):
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= n):
            bad = int(idx.min()) if int(idx.min()) < 0 else int(idx.max())
            raise IndexOutOfRangeError(
                f"{what} index {bad} is outside the sparse matrix's {n} {what}s", op=op
            )


def coo_mm(indices, values, dense, *, rows, cols, transpose):
    """``A @ dense`` (or ``A.T @ dense`` with ``transpose``) for the (rows, cols) COO matrix
    ``A`` of ``indices`` and ``values``; the NumPy reference."""
    r, c = (indices[1], indices[0]) if transpose else (indices[0], indices[1])
    out_rows = cols if transpose else rows
    _check_bounds("sparse_mm", r, c, out_rows, rows if transpose else cols)
    out = np.zeros((out_rows,) + dense.shape[1:], dtype=np.result_type(values, dense))
    if values.size:
        scale = values.reshape((-1,) + (1,) * (dense.ndim - 1))
        np.add.at(out, r, scale * dense[c])
    return out


_BLOCK_BYTES = 1 << 22  # the gathered rows of one block of the sampled product, at most


def sampled_dot(indices, a, b, *, transpose):
    """``out[k] = a[r_k] . b[c_k]`` for the pairs (r, c) of ``indices`` ((c, r) with
    ``transpose``): the product ``a @ b.T`` sampled at a sparse pattern, computed a block of
    nonzeros at a time (never the (nnz, n) gathered rows whole)."""
    r, c = (indices[1], indices[0]) if transpose else (indices[0], indices[1])
    _check_bounds("sampled_dot", r, c, a.shape[0], b.shape[0])
    out = np.empty(r.shape[0], dtype=np.result_type(a, b))
    row_bytes = max(1, a.shape[1] * (a.itemsize + b.itemsize))
    step = max(1, _BLOCK_BYTES // row_bytes)
    for start in range(0, r.shape[0], step):
        stop = start + step
        np.einsum("ij,ij->i", a[r[start:stop]], b[c[start:stop]], out=out[start:stop])
    return out


class _Structure:
    """The CSR form of one indices array (its transpose's made when first asked for)."""

    __slots__ = ("ref", "copy", "shape", "forms", "__weakref__")

    def __init__(self, indices, shape):
        self.ref = weakref.ref(indices)
        self.copy = np.array(indices, copy=True)
        self.shape = shape
        self.forms = {}

    def matches(self, indices, shape) -> bool:
        return (
            self.ref() is indices
            and self.shape == shape
            and self.copy.shape == indices.shape
            and np.array_equal(self.copy, indices)
        )

    def form(self, transpose: bool) -> _Form:
        """The CSR form of the matrix (or of its transpose)."""
        found = self.forms.get(transpose)
        if found is None:
            found = self.forms[transpose] = _Form(self.copy, self.shape, transpose)
        return found


class _Form:
    """One CSR form: int64 row pointers and column indices (kernels/csparse.py's), the
    permutation of the values into CSR order (None: already in it), and scipy's matrix over
    the same structure, made when first needed (the fallback without a C compiler)."""

    __slots__ = ("indptr", "indices", "order", "shape", "_scipy")

    def __init__(self, indices, shape, transpose):
        r, c = (indices[1], indices[0]) if transpose else (indices[0], indices[1])
        self.shape = (shape[1], shape[0]) if transpose else tuple(shape)
        _check_bounds("sparse_mm", r, c, *self.shape)  # (once per indices array)
        keys = r.astype(np.int64) * max(self.shape[1], 1) + c
        if keys.size and np.all(keys[1:] >= keys[:-1]):
            self.order = None
        else:
            self.order = np.argsort(keys, kind="stable")
            r, c = r[self.order], c[self.order]
        self.indptr = np.searchsorted(r, np.arange(self.shape[0] + 1)).astype(np.int64)
        self.indices = np.ascontiguousarray(c, dtype=np.int64)
        self._scipy = None

    def scipy(self):
        if self._scipy is None:
            import scipy.sparse as sp

            small = max(*self.shape, self.indices.size) < np.iinfo(np.int32).max
            itype = np.int32 if small else np.int64
            self._scipy = sp.csr_matrix(
                (
                    np.zeros(self.indices.size, np.float64),
                    self.indices.astype(itype),
                    self.indptr.astype(itype),
                ),
                shape=self.shape,
            )
        return self._scipy


_CACHE: dict[int, _Structure] = {}
_CACHE_LIMIT = 64


def structure(indices: np.ndarray, shape: tuple) -> _Structure:
    """The cached CSR structure of ``indices`` (made and cached when missing or stale)."""
    key = id(indices)
    found = _CACHE.get(key)
    if found is not None and found.matches(indices, shape):
        return found
    made = _Structure(indices, shape)
    if len(_CACHE) >= _CACHE_LIMIT:
        for stale in [k for k, s in _CACHE.items() if s.ref() is None]:
            del _CACHE[stale]
        if len(_CACHE) >= _CACHE_LIMIT:
            _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = made
    return made


def coo_mm_fast(indices, values, dense, *, rows, cols, transpose):
    """The CSR product on the cached structure: kernels/csparse.py's C loop, or scipy's where
    there is no C compiler; None where neither applies (dtypes other than float32 and float64,
    operands of two dtypes, a dense operand that is not a matrix)."""
    if (
        values.dtype not in _FAST_DTYPES
        or dense.dtype != values.dtype
        or dense.ndim != 2
        or values.ndim != 1
        or indices.ndim != 2
    ):
        return None
    try:
        weakref.ref(indices)
    except TypeError:
        return None
    form = structure(indices, (rows, cols)).form(transpose)
    data = values if form.order is None else values[form.order]
    out = csparse.csr_mm(form.indptr, form.indices, data, dense, form.shape[0])
    if out is not None:
        return out
    try:
        matrix = form.scipy()
    except ImportError:  # (a declared dependency; the reference serves without it)
        return None
    # a fresh shell around the cached structure: the cached matrix is never written
    shell = matrix.__class__(matrix.shape, dtype=values.dtype)
    shell.indptr, shell.indices, shell.data = matrix.indptr, matrix.indices, data
    return np.ascontiguousarray(shell @ dense)
