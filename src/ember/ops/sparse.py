"""The sparse (COO) matrix products as primitives: ``sparse_mm(indices, values, dense)`` and its
companion ``sampled_dot(indices, a, b)``, the dense product ``a @ b.T`` at a sparse pattern.

A sparse tensor (ops/sparse_tensor.py) is two ordinary tensors, an int64 ``indices`` (2, nnz)
and ``values`` (nnz,), so its product is an op on three dense operands and works wherever ops
work: eagerly with the tape, captured in graphs, differentiated by graph autodiff. Attributes:
``rows`` and ``cols`` (the sparse matrix's size) and ``transpose`` (multiply by its
transpose, which is how the backward pass multiplies without transposing the indices, so the
cached CSR structure of one indices array serves both directions).

Kernels: the NumPy reference (``np.add.at``) and scipy.sparse's CSR product as the fast rule,
CSR structure cached per indices array (ops/_sparse_kernels.py).

VJP: ``d dense = A.T @ g`` (the same op, transposed) and ``d values[k] = g[row_k] . dense[col_k]``
(``sampled_dot``): the gradient of the values sits on the sparse operand's own pattern, as
PyTorch's does. ``sampled_dot``'s own VJP is two sparse products (``d a = S @ b``, ``d b =
S.T @ a`` for the sparse S of its pattern and cotangent), so gradients of any order stay
sparse. ``sampled_dot`` is also ``ember.sparse.sampled_addmm``'s product.

ONNX: the rows of the dense operand each nonzero reads (Gather), scaled by its value and added
at its output row (ScatterND, reduction add: opset 16); ``sampled_dot`` gathers both rows and
sums their product (ReduceSum).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..types import TensorType
from . import _onnx
from ._registry import Cost, OpDef, register
from ._sparse_kernels import coo_mm, coo_mm_fast, sampled_dot
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
        g_values = SAMPLED_DOT_OP(indices, g, dense, transpose)
    return None, g_values, g_dense


def _onnx_pairs(e, indices, transpose):
    """(first, second) of each index pair as 1-D int64 tensors (rows swapped with transpose)."""
    one, other = (1, 0) if transpose else (0, 1)
    pick = [e.node("Gather", [indices, e.constant(np.asarray(k, np.int64))], axis=0)
            for k in (one, other)]  # fmt: skip
    if e.in_types[0].dtype is not dt.int64:
        pick = [e.node("Cast", [p], to=7) for p in pick]  # (ONNX's INT64)
    return pick


def _onnx_sparse_mm(e):
    """Each nonzero's row of the dense operand, scaled, added at its output row (ScatterND's
    reduction: opset 16)."""
    if e.opset < 16:
        e.unsupported("before opset 16 (ScatterND's reduction)")
    indices, values, dense = e.inputs
    out_at, dense_at = _onnx_pairs(e, indices, e.attrs["transpose"])
    scaled = e.node(
        "Mul", [e.node("Gather", [dense, dense_at], axis=0), _onnx.unsqueeze(e, values, (1,))]
    )
    width = e.node("Slice", [e.node("Shape", [dense]), e.ints([1]), e.ints([2])])
    shape = e.node("Concat", [e.ints([e.out_types[0].shape[0]]), width], axis=0)
    zeros = e.node("Expand", [_onnx.scalar(e, 0, e.out_types[0].dtype), shape])
    return e.node("ScatterND", [zeros, _onnx.unsqueeze(e, out_at, (1,)), scaled], reduction="add")


def _onnx_sampled_dot(e):
    indices, a, b = e.inputs
    first, second = _onnx_pairs(e, indices, e.attrs["transpose"])
    product = e.node(
        "Mul", [e.node("Gather", [a, first], axis=0), e.node("Gather", [b, second], axis=0)]
    )
    return _onnx.reduce(e, "ReduceSum", product, (1,), False)


def _sparse_mm_cost(in_types, out_types, attrs) -> Cost:
    nnz = in_types[0].shape[1]
    n = in_types[2].shape[1]
    return Cost(2 * numel((nnz, n)), sum(nbytes(t) for t in (*in_types, *out_types)))


SPARSE_MM = register(
    OpDef(
        name="sparse_mm",
        kind="linalg",
        onnx=_onnx_sparse_mm,
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


def _sampled_dot_infer(indices, a, b, *, transpose):
    op = "sampled_dot"
    if not indices.dtype.is_integer:
        raise DTypeError(f"indices must be integers, got {indices.dtype}", op=op)
    if indices.ndim != 2 or indices.shape[0] != 2:
        raise ShapeError(f"indices must have shape (2, nnz), got {fmt_shape(indices.shape)}", op=op)
    if a.dtype is not b.dtype or a.dtype is dt.bool_:
        raise DTypeError(
            f"operands of one numeric dtype expected, got {a.dtype} and {b.dtype}", op=op
        )
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ShapeError(
            f"two matrices of one width expected, got {fmt_shape(a.shape)} and "
            f"{fmt_shape(b.shape)}",
            op=op,
        )
    return TensorType((indices.shape[1],), a.dtype)


def _sampled_dot_vjp(c, g):
    indices, a, b = c.inputs
    transpose = c.attrs["transpose"]
    _, need_a, need_b = c.needs_input_grad
    rows, cols = (b.shape[0], a.shape[0]) if transpose else (a.shape[0], b.shape[0])
    g_a = g_b = None
    if need_a:  # d a[r] += g_k b[c]
        g_a = SPARSE_MM_OP(indices, g, b, rows, cols, transpose)
    if need_b:  # d b[c] += g_k a[r]
        g_b = SPARSE_MM_OP(indices, g, a, rows, cols, not transpose)
    return None, g_a, g_b


def _sampled_dot_cost(in_types, out_types, attrs) -> Cost:
    nnz, n = in_types[0].shape[1], in_types[1].shape[1]
    moved = nbytes(in_types[0]) + 2 * numel((nnz, n)) * in_types[1].dtype.itemsize
    return Cost(2 * numel((nnz, n)), moved + nbytes(out_types[0]))


SAMPLED_DOT = register(
    OpDef(
        name="sampled_dot",
        kind="linalg",
        onnx=_onnx_sampled_dot,
        infer=_sampled_dot_infer,
        kernel=sampled_dot,
        vjp=_sampled_dot_vjp,
        cost=_sampled_dot_cost,
        flop_family="matmul",
        batch=None,
        doc="sampled_dot(indices, a, b, transpose): out[k] = a[indices[0, k]] . "
        "b[indices[1, k]] (indices' rows swapped with transpose): a @ b.T at a sparse pattern",
    )
)


def SAMPLED_DOT_OP(indices, a, b, transpose=False):  # noqa: N802
    """Apply `SAMPLED_DOT`."""
    from ._registry import apply

    return apply(SAMPLED_DOT, indices, a, b, transpose=transpose)


def SPARSE_MM_OP(indices, values, dense, rows, cols, transpose=False):  # noqa: N802
    """Apply `SPARSE_MM` (the one call site of its attributes)."""
    from ._registry import apply

    return apply(SPARSE_MM, indices, values, dense, rows=rows, cols=cols, transpose=transpose)
