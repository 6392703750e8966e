"""Elementwise ops of a CSR matrix keep the CSR layout, as PyTorch's: the functions that are
zero at zero (abs, sin, relu, ... of ops/sparse_methods.py), negation, a product by a number
or a dense tensor of its shape give a CSR matrix of the same pattern (its row pointers
shared); the sum of two CSR matrices is one (its pattern the union). Subtraction, division,
square, pow and nan_to_num refuse a CSR operand in PyTorch's words ("unsupported tensor
layout: SparseCsr"), as its kernels do."""

from __future__ import annotations

from ..errors import EmberError
from . import sparse_methods  # noqa: F401  (the values methods this module wraps)
from .sparse_csr import SparseCSRTensor, _from_coo
from .sparse_tensor import SparseTensor


def _keeping(name: str):
    base = getattr(SparseTensor, name)

    def method(self, *args, **kwargs):
        out = base(self, *args, **kwargs)
        if not isinstance(out, SparseTensor) or isinstance(out, SparseCSRTensor):
            return out  # (a dense result: a sum with a dense tensor)
        if out._idx is self._idx:  # (the same pattern: the row pointers shared)
            return SparseCSRTensor(out._idx, out._vals, out._size, self._crow)
        return _from_coo(out.coalesce())

    method.__name__ = name
    method.__doc__ = f"``{name}``, a CSR matrix as PyTorch's (see the module)."
    return method


def _refused(name: str):
    def method(self, *args, **kwargs):
        raise EmberError("unsupported tensor layout: SparseCsr", op=name.strip("_"))

    method.__name__ = name
    return method


# (square and pow: PyTorch's CSR kernels refuse them, nan_to_num has no CSR kernel at all)
_REFUSED_VALUES = ("square", "pow", "nan_to_num")
_KEPT = (*sparse_methods._COALESCING, *sparse_methods._LINEAR, "__add__", "__radd__", "__neg__",
         "__mul__", "__rmul__")  # fmt: skip
for _name in _KEPT:
    if _name not in _REFUSED_VALUES:
        setattr(SparseCSRTensor, _name, _keeping(_name))
SparseCSRTensor.mul = _keeping("__mul__")
SparseCSRTensor.add = _keeping("__add__")
for _name in ("__sub__", "__rsub__", "__truediv__", "__rtruediv__", "sub", "div", *_REFUSED_VALUES):
    setattr(SparseCSRTensor, _name, _refused(_name))
