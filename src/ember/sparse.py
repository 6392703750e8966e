"""``ember.sparse``: PyTorch's ``torch.sparse`` names for sparse COO tensors.

The tensors and their operations live in the ops layer (ops/sparse_tensor.py: `SparseTensor`,
built on the ``sparse_mm`` primitive of ops/sparse.py and on ordinary ops; the softmaxes in
ops/sparse_softmax.py); this module is the
public namespace: ``mm``, ``addmm``, ``sampled_addmm``, ``sum``, ``softmax``,
``log_softmax``, the tensor type and PyTorch's legacy constructors (``FloatTensor`` and kin:
ops/sparse_methods.py).
"""

from __future__ import annotations

from . import dtypes as _dt
from .ops.sparse_math import addmm, sampled_addmm
from .ops.sparse_methods import legacy_constructor as _legacy
from .ops.sparse_softmax import log_softmax, softmax
from .ops.sparse_tensor import SparseTensor, mm, sum  # noqa: A004

__all__ = ["SparseTensor", "addmm", "log_softmax", "mm", "sampled_addmm", "softmax", "sum"]

# PyTorch's legacy constructors (deprecated there, still in tutorials' GCNs)
FloatTensor = _legacy(_dt.float32, "FloatTensor")
DoubleTensor = _legacy(_dt.float64, "DoubleTensor")
LongTensor = _legacy(_dt.int64, "LongTensor")
IntTensor = _legacy(_dt.int32, "IntTensor")
