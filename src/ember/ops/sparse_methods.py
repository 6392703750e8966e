"""Sparse COO tensors (ops/sparse_tensor.py) in more of PyTorch's functions.

* The elementwise methods that keep a zero zero (``s.abs()``, ``s.sqrt()``, ``s.pow(2)``,
  ``s.relu()``, ...): the function of the values, a sparse tensor of the same pattern. As
  PyTorch's, each runs on the coalesced tensor (``abs`` of two entries at one index is not the
  sum of their ``abs``) except the linear ``neg``, ``positive`` and ``conj``.
* ``clone``, ``cpu``, ``mv``; a dense matrix or vector times a sparse matrix (``dense @ s``,
  ``torch.mm(dense, s)``: through the transposed sparse product).
* ``torch.cat`` and ``torch.stack`` of sparse tensors along a sparse dimension: the indices
  offset (or given a new row) and joined, the values joined; uncoalesced, as PyTorch's.
* PyTorch's legacy constructors ``torch.sparse.FloatTensor(indices, values, size)`` and kin.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError, ShapeError
from . import api as E
from ._util import fmt_shape, normalize_axis
from .promotion import promote, to_tensor
from .sparse_tensor import SparseTensor, matmul, mm, sparse_coo_tensor

__all__ = ["cat", "legacy_constructor", "rmatmul", "stack"]

# zero at zero: f(values) is the function of the whole tensor (PyTorch's sparse kernels)
_COALESCING = (
    "abs sqrt sin tan tanh square expm1 log1p sign sgn floor ceil round trunc relu asin atan "
    "sinh asinh atanh erf erfinv deg2rad rad2deg frac isnan signbit nan_to_num pow"
).split()
_LINEAR = ("neg", "positive", "conj")


def _values_method(name: str, coalescing: bool):
    def method(self: SparseTensor, *args, **kwargs) -> SparseTensor:
        source = self.coalesce() if coalescing else self
        values = getattr(E, name)(source._vals, *args, **kwargs)
        return SparseTensor(source._idx, values, source._size, source._coalesced)

    method.__name__ = name
    method.__doc__ = f"``{name}`` of the values: a sparse tensor of the same pattern."
    return method


for _name in _COALESCING:
    setattr(SparseTensor, _name, _values_method(_name, True))
for _name in _LINEAR:
    setattr(SparseTensor, _name, _values_method(_name, False))


def _clone(self: SparseTensor, *, memory_format=None) -> SparseTensor:
    return SparseTensor(E.clone(self._idx), E.clone(self._vals), self._size, self._coalesced)


def _cpu(self: SparseTensor, memory_format=None) -> SparseTensor:
    return self


def _mv(self: SparseTensor, vec) -> SparseTensor:
    vec = to_tensor(vec)
    if self.ndim != 2 or vec.ndim != 1:
        raise ShapeError(
            f"expects a sparse matrix and a vector, got shapes {fmt_shape(self._size)} and "
            f"{fmt_shape(vec.shape)}",
            op="mv",
        )
    return matmul(self, vec)


def rmatmul(self: SparseTensor, other):
    """``other @ self``: a dense matrix (or vector) times the sparse matrix ``self``, as
    ``(self.T @ other.T).T``."""
    other = to_tensor(other)
    if other.ndim == 1:
        return matmul(self.t(), other)
    if other.ndim != 2:
        raise ShapeError(
            f"a dense operand times a sparse matrix must be a matrix or a vector, got shape "
            f"{fmt_shape(other.shape)}",
            op="mm",
        )
    return E.transpose(mm(self.t(), E.transpose(other, 0, 1)), 0, 1)


SparseTensor.clone = _clone
SparseTensor.cpu = _cpu
SparseTensor.mv = _mv
SparseTensor.__rmatmul__ = rmatmul


def _joined(op: str, tensors, dim: int, extra: int):
    """The tensors (all sparse), the dimension checked against their sparse dimensions (``extra``
    1 for stack's new one), their values promoted to one dtype."""
    tensors = list(tensors)
    if not tensors:
        raise ArgumentError("expected a non-empty list of tensors", op=op)
    if not all(isinstance(t, SparseTensor) for t in tensors):
        kinds = ", ".join("sparse" if isinstance(t, SparseTensor) else "dense" for t in tensors)
        raise ArgumentError(
            f"sparse and dense tensors do not join ({kinds}): convert with to_dense() or "
            "to_sparse() first",
            op=op,
        )
    first = tensors[0]
    sd = first.sparse_dim()
    d = normalize_axis(op, dim, first.ndim + extra)
    if any(t.sparse_dim() != sd or t.ndim != first.ndim for t in tensors) or d > sd - 1 + extra:
        raise ShapeError(
            f"sparse tensors join along a sparse dimension, all of one sparse_dim; got "
            f"dim {dim} of sizes {', '.join(fmt_shape(t._size) for t in tensors)} "
            f"(sparse_dim {', '.join(str(t.sparse_dim()) for t in tensors)})",
            op=op,
        )
    values = promote(*(t._vals for t in tensors)) if len(tensors) > 1 else [first._vals]
    return tensors, d, list(values)


def cat(tensors, dim: int = 0) -> SparseTensor:
    """``torch.cat`` of sparse tensors along sparse dimension ``dim``."""
    tensors, d, values = _joined("cat", tensors, dim, 0)
    size = list(tensors[0]._size)
    for t in tensors[1:]:
        if any(a != b for i, (a, b) in enumerate(zip(size, t._size)) if i != d):
            raise ShapeError(
                f"sizes {fmt_shape(tuple(size))} and {fmt_shape(t._size)} differ outside "
                f"dimension {d}",
                op="cat",
            )
    indices, offset = [], 0
    for t in tensors:
        shift = np.zeros((t.sparse_dim(), 1), dtype=np.int64)
        shift[d] = offset
        indices.append(t._idx + E.tensor(shift) if offset else t._idx)
        offset += t._size[d]
    size[d] = offset
    return SparseTensor(E.cat(indices, 1), E.cat(values, 0), tuple(size), False)


def stack(tensors, dim: int = 0) -> SparseTensor:
    """``torch.stack`` of sparse tensors of one size: a new sparse dimension ``dim``."""
    tensors, d, values = _joined("stack", tensors, dim, 1)
    size = tensors[0]._size
    if any(t._size != size for t in tensors):
        listed = ", ".join(fmt_shape(t._size) for t in tensors)
        raise ShapeError(f"all tensors must have one shape; got {listed}", op="stack")
    indices = []
    for k, t in enumerate(tensors):
        row = E.full((1, t._nnz()), k, dtype=dt.int64)
        indices.append(E.cat([t._idx[:d], row, t._idx[d:]], 0))
    new_size = size[:d] + (len(tensors),) + size[d:]
    return SparseTensor(E.cat(indices, 1), E.cat(values, 0), new_size, False)


def legacy_constructor(dtype: dt.DType, name: str):
    """``torch.sparse.FloatTensor`` and kin: ``(indices, values, size)`` or
    ``(indices, values)`` as `sparse_coo_tensor` with this dtype, or ``(*size)`` / ``(size)``:
    an empty sparse tensor of that size."""

    def construct(*args, device=None):
        if (
            args
            and all(isinstance(a, int) for a in args)
            or (len(args) == 1 and isinstance(args[0], (tuple, list)))
        ):
            size = tuple(args[0]) if len(args) == 1 and not isinstance(args[0], int) else args
            empty = E.zeros((len(size), 0), dtype=dt.int64)
            return sparse_coo_tensor(empty, E.zeros((0,), dtype=dtype), size, device=device)
        if len(args) not in (2, 3):
            raise ArgumentError(
                "expects (indices, values), (indices, values, size) or a size", op="sparse"
            )
        return sparse_coo_tensor(*args, dtype=dtype, device=device)

    construct.__name__ = construct.__qualname__ = name
    return construct
