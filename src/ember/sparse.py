"""``ember.sparse``: PyTorch's ``torch.sparse`` names for sparse COO tensors.

The tensors and their operations live in the ops layer (ops/sparse_tensor.py: `SparseTensor`,
built on the ``sparse_mm`` primitive of ops/sparse.py and on ordinary ops); this module is the
public namespace: ``mm``, ``addmm``, ``sampled_addmm``, ``sum``, ``softmax``,
``log_softmax`` and the tensor type.
"""

from __future__ import annotations

from .ops.sparse_tensor import (  # noqa: A004
    SparseTensor,
    addmm,
    log_softmax,
    mm,
    sampled_addmm,
    softmax,
    sum,
)

__all__ = ["SparseTensor", "addmm", "log_softmax", "mm", "sampled_addmm", "softmax", "sum"]
