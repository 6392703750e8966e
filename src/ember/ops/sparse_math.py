"""``torch.sparse.addmm`` and ``torch.sparse.sampled_addmm`` on sparse COO tensors
(ops/sparse_tensor.py): ember ops on a sparse tensor's indices and values, over the product
``mm`` and the sampled dot primitive of ops/sparse.py."""

from __future__ import annotations

from ..errors import ShapeError
from . import api as E
from ._util import fmt_shape
from .promotion import promote
from .sparse import SAMPLED_DOT_OP
from .sparse_tensor import SparseTensor, _matrix, mm


def addmm(input, mat1: SparseTensor, mat2, *, beta=1, alpha=1):
    """``torch.sparse.addmm``: ``beta * input + alpha * (mat1 @ mat2)``, mat1 sparse."""
    product = mm(mat1, mat2)
    if isinstance(input, SparseTensor):
        input = input.to_dense()
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product + E.zeros_like(product)
    return (input if beta == 1 else input * beta) + product


def sampled_addmm(input: SparseTensor, mat1, mat2, *, beta=1.0, alpha=1.0) -> SparseTensor:
    """``torch.sparse.sampled_addmm``: ``beta * input + alpha * (mat1 @ mat2)`` at the
    positions of sparse ``input``'s pattern only, a sparse tensor of that pattern (PyTorch
    takes a CSR input; ember's COO one may hold repeated indices, each getting the product).
    The dense product is never formed."""
    op = "sparse.sampled_addmm"
    _matrix(op, input)
    values, mat1, mat2 = promote(input._vals, mat1, mat2)
    if mat1.ndim != 2 or mat2.ndim != 2 or mat1.shape[1] != mat2.shape[0]:
        raise ShapeError(
            f"mat1 {fmt_shape(mat1.shape)} and mat2 {fmt_shape(mat2.shape)} must be matrices "
            "that multiply",
            op=op,
        )
    if (mat1.shape[0], mat2.shape[1]) != input._size:
        raise ShapeError(
            f"mat1 @ mat2 is {fmt_shape((mat1.shape[0], mat2.shape[1]))}, input "
            f"{fmt_shape(input._size)}",
            op=op,
        )
    sampled = SAMPLED_DOT_OP(input._idx, mat1, E.transpose(mat2, 0, 1))
    if alpha != 1:
        sampled = sampled * alpha
    out = sampled if beta == 0 else (values if beta == 1 else values * beta) + sampled
    return SparseTensor(input._idx, out, input._size, input._coalesced)
