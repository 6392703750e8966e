"""The sparse (COO) matrix product as a primitive: ``sparse_mm(indices, values, dense)``.

A sparse tensor (ops/sparse_tensor.py) is two ordinary tensors, an int64 ``indices`` (2, nnz)
and ``values`` (nnz,), so its product is an op on three dense operands and works wherever ops
work: eagerly with the tape, captured in graphs, differentiated by graph autodiff. Attributes:
``rows`` and ``cols`` (the sparse matrix's size) and ``transpose`` (multiply by its
transpose, which is how the backward pass multiplies without transposing the indices, so the
cached CSR structure of one indices array serves both directions).

Kernels: the NumPy reference (``np.add.at``) and scipy.sparse's CSR product as the fast rule,
CSR structure cached per indices array (ops/_sparse_kernels.py).

VJP: ``d dense = A.T @ g`` (the same op, transposed) and ``d values[k] = g[row_k] . dense[col_k]``
(a gather of both rows and their dot product): the gradient of the values sits on the sparse
operand's own pattern, as PyTorch's does.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..types import TensorType
from . import api as E
from ._registry import Cost, OpDef, register
from ._sparse_kernels import coo_mm, coo_mm_fast
from ._util import fmt_shape, nbytes, numel


def _sparse_mm_infer(indices, values, dense, *, rows, cols, transpose):
    op = "sparse_mm"
    if not indices.dtype.is_integer:
        raise DTypeError(f"indices must be integers, got {indices.dtype}", op=op)
    if indices.ndim != 2 or indices.shape[0] != 2:
        raise ShapeError(f"indices must have shape (2, nnz), got {fmt_shape(indices.shape)}", op=op)
    if values.ndim != 1 or values.shape[0] != indices.shape[1]:
        raise ShapeError(
            f"values must have shape (nnz,) = ({indices.shape[1]},), got {fmt_shape(values.shape)}",
            op=op,
        )
    if values.dtype is not dense.dtype:
        raise DTypeError(
            f"values ({values.dtype}) and the dense operand ({dense.dtype}) differ in dtype",
            op=op,
        )
    if values.dtype is dt.bool_:
        raise DTypeError("bool tensors have no matrix product", op=op)
    inner, outer = (rows, cols) if transpose else (cols, rows)
    if dense.ndim != 2 or dense.shape[0] != inner:
        raise ShapeError(
            f"the dense operand must be a matrix of {inner} rows for a "
            f"{'transposed ' if transpose else ''}sparse matrix of size ({rows}, {cols}), got "
            f"{fmt_shape(dense.shape)}",
            op=op,
        )
    return TensorType((outer, dense.shape[1]), dense.dtype)


def _sparse_mm_vjp(c, g):
    indices, values, dense = c.inputs
    rows, cols, transpose = c.attrs["rows"], c.attrs["cols"], c.attrs["transpose"]
    _, need_values, need_dense = c.needs_input_grad
    g_dense = g_values = None
    if need_dense:
        g_dense = SPARSE_MM_OP(indices, values, g, rows, cols, not transpose)
    if need_values:
        out_at, dense_at = (indices[1], indices[0]) if transpose else (indices[0], indices[1])
        g_values = E.sum(E.index_select(g, 0, out_at) * E.index_select(dense, 0, dense_at), 1)
    return None, g_values, g_dense


def _sparse_mm_cost(in_types, out_types, attrs) -> Cost:
    nnz = in_types[0].shape[1]
    n = in_types[2].shape[1]
    return Cost(2 * numel((nnz, n)), sum(nbytes(t) for t in (*in_types, *out_types)))


SPARSE_MM = register(
    OpDef(
        name="sparse_mm",
        kind="linalg",
        infer=_sparse_mm_infer,
        kernel=coo_mm,
        fast=coo_mm_fast,
        vjp=_sparse_mm_vjp,
        cost=_sparse_mm_cost,
        flop_family="matmul",
        batch=None,
        doc="sparse_mm(indices, values, dense, rows, cols, transpose): the (rows, cols) COO "
        "matrix of indices (2, nnz) and values (nnz,), or its transpose, times a dense matrix; "
        "repeated indices add",
    )
)


def SPARSE_MM_OP(indices, values, dense, rows, cols, transpose=False):  # noqa: N802
    """Apply `SPARSE_MM` (the one call site of its attributes)."""
    from ._registry import apply

    return apply(SPARSE_MM, indices, values, dense, rows=rows, cols=cols, transpose=transpose)
