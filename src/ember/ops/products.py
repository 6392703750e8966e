"""Composites on the matrix product (ops/linalg.py): PyTorch's mm, bmm, mv, dot, outer (ger)
and ``F.bilinear``, each checking its operands' ranks as PyTorch does before calling
``matmul`` (``F.bilinear`` as two products)."""

from __future__ import annotations

import math

from ..errors import ShapeError
from . import _torch_flops
from . import api as E
from ._autocast import Autocast, autocasts
from ._node_names import rename_node
from ._registry import export
from ._util import fmt_shape
from .linalg import linear, matmul
from .promotion import promote, to_tensor
from .sparse_methods import rmatmul as sparse_rmatmul
from .sparse_tensor import SparseTensor
from .sparse_tensor import mm as sparse_mm


def _require_ndim(op: str, ndims: tuple, *tensors) -> None:
    if tuple(t.ndim for t in tensors) != ndims:
        shapes = " and ".join(fmt_shape(t.shape) for t in tensors)
        raise ShapeError(
            f"expects operands of {' and '.join(str(n) for n in ndims)} dimensions, "
            f"got shapes {shapes}",
            op=op,
        )


@export(method=True)
@autocasts(Autocast.LOWER)
def mm(a, b):
    """Product of two matrices (2-D only; use matmul for batches and broadcasting). A sparse
    ``a`` multiplies through ``ember.sparse.mm``, a sparse ``b`` as ``(b.T @ a.T).T``."""
    if isinstance(a, SparseTensor):
        return sparse_mm(a, b)
    if isinstance(b, SparseTensor):
        return sparse_rmatmul(b, a)
    a, b = to_tensor(a), to_tensor(b)
    _require_ndim("mm", (2, 2), a, b)
    return matmul(a, b)


export(mm, name="spmm")  # (PyTorch's older name for a sparse matrix times a dense one)


@export(method=True)
@autocasts(Autocast.LOWER)
def bmm(a, b):
    """Batched product of (B, M, K) and (B, K, N) tensors (no broadcasting, as in PyTorch)."""
    a, b = to_tensor(a), to_tensor(b)
    _require_ndim("bmm", (3, 3), a, b)
    if a.shape[0] != b.shape[0]:
        raise ShapeError(
            f"batch sizes differ: shapes {fmt_shape(a.shape)} and {fmt_shape(b.shape)}", op="bmm"
        )
    return rename_node(matmul(a, b), "BmmBackward0")


@export(method=True)
@autocasts(Autocast.KEEP)
def mv(a, v):
    """Matrix-vector product of a (M, K) matrix (dense or sparse) and a (K,) vector."""
    if isinstance(a, SparseTensor):
        return a.mv(v)
    a, v = to_tensor(a), to_tensor(v)
    _require_ndim("mv", (2, 1), a, v)
    return matmul(a, v)


@export(method=True)
@autocasts(Autocast.KEEP)
def dot(a, b):
    """Inner product of two 1-D tensors of one size (a 0-d result)."""
    a, b = to_tensor(a), to_tensor(b)
    _require_ndim("dot", (1, 1), a, b)
    return matmul(a, b)


@export(method=True)
@autocasts(Autocast.KEEP)
def outer(a, b):
    """Outer product of two 1-D tensors: out[i, j] = a[i] * b[j]."""
    a, b = to_tensor(a), to_tensor(b)
    _require_ndim("outer", (1, 1), a, b)
    return E.reshape(a, (-1, 1)) * E.reshape(b, (1, -1))


export(outer, name="ger", method=True)


@export(functional=True, toplevel=False)
@autocasts(Autocast.KEEP)
@_torch_flops.counts_as(None)  # (PyTorch's _trilinear, which FlopCounterMode does not count)
def bilinear(input1, input2, weight, bias=None):
    """PyTorch's F.bilinear: ``out[..., o] = x1[..., i] weight[o, i, j] x2[..., j] + bias[o]``
    (``x1``, ``x2``: ``input1``, ``input2``)."""
    x1, x2, weight = promote(input1, input2, weight)
    if (
        weight.ndim != 3
        or x1.ndim == 0
        or x1.shape[-1] != weight.shape[1]
        or x2.ndim == 0
        or x2.shape[-1] != weight.shape[2]
        or tuple(x1.shape[:-1]) != tuple(x2.shape[:-1])
    ):
        raise ShapeError(
            f"inputs of shapes {fmt_shape(x1.shape)} and {fmt_shape(x2.shape)} do not fit a "
            f"weight of shape {fmt_shape(weight.shape)} (out, in1, in2); the inputs must share "
            "their leading dimensions",
            op="bilinear",
        )
    # Two products instead of one three-operand contraction (which np.einsum runs without
    # BLAS): the larger input feature axis contracted by one GEMM with the weight as a matrix,
    # (n, big) x (big, out*small), then the smaller one by a batch of matrix-vector products,
    # so the forward and each gradient (through matmul's VJPs) run on the GEMM.
    n_out, n1, n2 = weight.shape
    lead = tuple(x1.shape[:-1])
    rows = math.prod(lead)
    if n2 >= n1:
        big, small, n_small = x2, x1, n1
        matrix = E.reshape(weight, (n_out * n1, n2))
    else:
        big, small, n_small = x1, x2, n2
        matrix = E.reshape(E.transpose(weight, 1, 2), (n_out * n2, n1))
    partial = linear(E.reshape(big, (rows, big.shape[-1])), matrix)
    out = matmul(E.reshape(partial, (rows, n_out, n_small)), E.reshape(small, (rows, n_small, 1)))
    out = E.reshape(out, lead + (n_out,))
    return out if bias is None else out + bias
