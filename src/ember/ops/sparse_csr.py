"""PyTorch's sparse CSR matrices, their basics: ``x.to_sparse_csr()``,
``ember.sparse_csr_tensor(crow_indices, col_indices, values, size)``, ``crow_indices()``,
``col_indices()``, ``values()``, ``to_dense()``, ``layout`` (``ember.sparse_csr``), PyTorch's
printing, and products with dense matrices (``csr @ dense``, ``mm``, ``matmul``).

A CSR matrix is a coalesced COO matrix (ops/sparse_tensor.py) whose entries are in row-major
order, which is CSR's order: its column indices and values are the COO tensor's, its row
pointers the running count of entries per row. So the products, ``to_dense`` and the
elementwise methods are the COO tensor's (their results are COO or dense tensors, where
PyTorch's would keep the CSR layout); only the 2-D, all-sparse form exists (PyTorch's batched
and hybrid CSR tensors are refused).
"""

from __future__ import annotations

import numpy as np

from ..errors import EmberError, ShapeError
from . import api as E
from ._factory_kwargs import sparse_csr
from ._registry import export
from ._util import fmt_shape
from .promotion import to_tensor
from .sparse_tensor import SparseTensor, _concrete, to_sparse


class SparseCSRTensor(SparseTensor):
    """A 2-D sparse CSR matrix (see the module): a row-major coalesced COO matrix."""

    __slots__ = ("_crow",)
    layout = sparse_csr
    is_sparse = False  # (PyTorch's: COO only)
    is_sparse_csr = True

    def __init__(self, indices, values, size, crow):
        super().__init__(indices, values, size, True)
        self._crow = crow

    def crow_indices(self):
        """The row pointers: row i's entries are ``crow[i]:crow[i + 1]``."""
        return self._crow

    def col_indices(self):
        return self._idx[1]

    def indices(self):
        raise EmberError(
            "a CSR tensor has crow_indices() and col_indices(), not indices() (PyTorch's "
            "error too): convert it with .to_sparse() for COO indices",
            op="SparseCSRTensor.indices",
        )

    def to_sparse_csr(self, dense_dim: int | None = None):
        return self

    def to_sparse(self, sparse_dim: int | None = None, *, layout=None, blocksize=None,
                  dense_dim: int | None = None):  # fmt: skip
        """The COO tensor of the same entries (``layout=ember.sparse_csr``: itself)."""
        if layout is sparse_csr and blocksize is None:
            return self
        coo = SparseTensor(self._idx, self._vals, self._size, True)
        return coo.to_sparse(sparse_dim, layout=layout, blocksize=blocksize, dense_dim=dense_dim)

    def to_sparse_coo(self):
        return self.to_sparse()

    def is_contiguous(self, memory_format=None):
        raise EmberError("Sparse CSR tensors do not have is_contiguous", op="is_contiguous")

    def __repr__(self) -> str:
        def part(name, t, first=False):
            lead = "tensor(" if first else "       "
            return lead + f"{name}=" + repr(t).replace("\n", "\n" + " " * len(lead + name + "="))

        text = (
            f"{part('crow_indices', self._crow, True)},\n{part('col_indices', self.col_indices())},"
            f"\n{part('values', self._vals)}"
        )
        # PyTorch's suffixes, its line-length bookkeeping (torch._tensor_str._add_suffixes)
        last = len(text) - text.rfind("\n") + 1
        for suffix in (f"size={self._size}", f"nnz={self._nnz()}", f"layout={self.layout!r}"):
            if last + len(suffix) + 2 > 80:
                text, last = text + f",\n       {suffix}", 7 + len(suffix)
            else:
                text, last = text + f", {suffix}", last + len(suffix) + 2
        return text + ")"


def _from_coo(coo: SparseTensor) -> SparseCSRTensor:
    rows = coo._idx[0]
    data = _concrete(rows, "the row pointers", "to_sparse_csr")
    counts = np.bincount(data.astype(np.int64), minlength=coo._size[0])
    crow = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return SparseCSRTensor(coo._idx, coo._vals, coo._size, E.tensor(crow))


@export(method=True, toplevel=False)
def to_sparse_csr(x, dense_dim: int | None = None):
    """PyTorch's ``Tensor.to_sparse_csr()`` of a 2-D tensor (dense or COO)."""
    if dense_dim:
        raise EmberError("to_sparse_csr: ember's CSR tensors have no dense dimensions",
                         op="to_sparse_csr")  # fmt: skip
    if isinstance(x, SparseCSRTensor):
        return x
    if x.ndim != 2:
        raise ShapeError(
            f"to_sparse_csr takes a matrix (ember has no batched CSR tensors), got shape "
            f"{fmt_shape(x.shape)}",
            op="to_sparse_csr",
        )
    coo = x.coalesce() if isinstance(x, SparseTensor) else to_sparse(x)
    return _from_coo(coo)


@export
def sparse_csr_tensor(crow_indices, col_indices, values, size=None, *, dtype=None,
                      device=None, requires_grad: bool = False, check_invariants=None):  # fmt: skip
    """PyTorch's ``torch.sparse_csr_tensor``: a 2-D CSR matrix from its row pointers, column
    indices and values (``size`` inferred from them when not given); the indices are checked
    (rows' pointers non-decreasing from 0 to nnz, columns in range and increasing per row)."""
    crow = _concrete(to_tensor(crow_indices), "the row pointers", "sparse_csr_tensor")
    col = _concrete(to_tensor(col_indices), "the column indices", "sparse_csr_tensor")
    vals = to_tensor(values, dtype) if dtype is not None else to_tensor(values)
    op = "sparse_csr_tensor"
    if crow.ndim != 1 or col.ndim != 1 or vals.ndim != 1 or len(col) != vals.shape[0]:
        raise ShapeError(
            f"expected 1-d crow_indices, col_indices and values of one length, got shapes "
            f"{crow.shape}, {col.shape} and {tuple(vals.shape)}",
            op=op,
        )
    n_rows = len(crow) - 1
    if size is None:
        size = (n_rows, int(col.max()) + 1 if len(col) else 0)
    size = tuple(int(s) for s in size)
    if len(size) != 2 or size[0] != n_rows:
        raise ShapeError(f"size {size} does not fit {n_rows + 1} row pointers", op=op)
    if crow[0] != 0 or crow[-1] != len(col) or (np.diff(crow) < 0).any():
        raise ShapeError("crow_indices must start at 0, end at nnz and never decrease", op=op)
    rows = np.repeat(np.arange(n_rows), np.diff(crow))
    if len(col) and ((col < 0).any() or (col >= size[1]).any()):
        raise ShapeError(f"column indices must lie in [0, {size[1]})", op=op)
    same_row = rows[1:] == rows[:-1]
    if (np.diff(col)[same_row] <= 0).any():
        raise ShapeError("column indices must increase within each row", op=op)
    if requires_grad:
        vals = vals.detach().requires_grad_(True)
    indices = E.tensor(np.stack([rows, col]).astype(np.int64).reshape(2, -1))
    return SparseCSRTensor(indices, vals, size, E.tensor(crow.astype(np.int64)))
