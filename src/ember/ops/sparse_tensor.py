"""Sparse COO tensors, with PyTorch's names and semantics (``torch.sparse_coo_tensor``).

A `SparseTensor` is two ordinary tensors and a size: ``indices``, int64 of shape
(sparse_dim, nnz), and ``values``, of shape (nnz, *dense_dims) (a hybrid tensor when it has
dense dimensions). Everything it does is ember ops on those two, so it differentiates through
the tape and captures into graphs like any tensor computation: the values are the autograd
leaf (``requires_grad=True`` makes them one), and a sparse tensor's ``grad`` is a sparse
tensor on its own pattern (the values' gradient), as PyTorch's is. Its product with a dense
matrix is the primitive ``sparse_mm`` (ops/sparse.py; ``addmm`` and ``sampled_addmm`` in
ops/sparse_math.py); ``to_dense`` is an accumulating
``index_put``; ``coalesce`` sums repeated indices with ``index_add`` (which needs the indices'
values, so it runs eagerly, as does ``Tensor.to_sparse``, whose nnz depends on the data).

A captured function can take sparse tensors as arguments (their indices and values are its
tensor inputs, their size part of its key), close over one (its indices and values are
captured as constants where used) or build one from its own tensors with an explicit size.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentTypeError, DTypeError, EmberError, ShapeError, TraceError
from ..size import Size
from . import api as E
from ._factory_kwargs import sparse_coo, sparse_csr
from ._index_plan import IndexOutOfRangeError
from ._registry import METHODS, TensorBase, export
from ._util import fmt_shape, normalize_axes
from .promotion import promote, to_tensor
from .sparse import SPARSE_MM_OP


def _concrete(t, what: str, op: str):
    """``t``'s NumPy value, or a TraceError saying why ``op`` needs it."""
    try:
        return t.detach().numpy()
    except TraceError:
        raise TraceError(
            f"{what} depends on the indices' values, which a graph does not have while it is "
            f"built: call {op} outside the captured function",
            op=op,
        ) from None


class SparseTensor:
    """A sparse COO tensor (see the module). Made by `sparse_coo_tensor` and
    ``Tensor.to_sparse()``; PyTorch's attributes and methods."""

    __slots__ = ("_idx", "_vals", "_size", "_coalesced", "__weakref__")
    is_sparse = True  # (PyTorch's: True for COO only; ember's own code asks `ember_sparse`)
    is_sparse_csr = False
    ember_sparse = True  # any of ember's sparse tensors, COO or CSR
    layout = sparse_coo
    is_cuda = False
    is_cpu = True

    def __init__(self, indices, values, size, coalesced: bool = False):
        self._idx = indices
        self._vals = values
        self._size = tuple(int(s) for s in size)
        self._coalesced = bool(coalesced)

    # ---- description
    @property
    def shape(self) -> Size:
        return Size(self._size)

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self._size[dim]

    @property
    def dtype(self):
        return self._vals.dtype

    @property
    def device(self):
        return self._vals.device

    @property
    def ndim(self) -> int:
        return len(self._size)

    def dim(self) -> int:
        return len(self._size)

    def sparse_dim(self) -> int:
        return int(self._idx.shape[0])

    def dense_dim(self) -> int:
        return self.ndim - self.sparse_dim()

    def _nnz(self) -> int:
        return int(self._idx.shape[1])

    @property
    def nnz(self) -> int:
        return self._nnz()

    def _indices(self):
        return self._idx

    def _values(self):
        return self._vals

    def indices(self):
        """The indices (sparse_dim, nnz); like PyTorch, only of a coalesced tensor."""
        self._require_coalesced("indices")
        return self._idx

    def values(self):
        """The values (nnz, *dense_dims); like PyTorch, only of a coalesced tensor."""
        self._require_coalesced("values")
        return self._vals

    def _require_coalesced(self, what):
        if not self._coalesced:
            raise EmberError(
                f"cannot get the {what} of an uncoalesced sparse tensor (repeated indices "
                f"would be ambiguous): call .coalesce() first, or ._{what}() for the raw ones",
                op=f"SparseTensor.{what}",
            )

    def is_coalesced(self) -> bool:
        return self._coalesced

    def numel(self) -> int:
        return int(np.prod(self._size, dtype=np.int64))

    # ---- autograd: the values are the leaf
    @property
    def requires_grad(self) -> bool:
        return self._vals.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> SparseTensor:
        self._vals.requires_grad_(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        return self._vals.is_leaf

    @property
    def grad_fn(self):
        return self._vals.grad_fn

    @property
    def grad(self):
        """The gradient as a sparse tensor on this tensor's pattern (None before): the
        values' gradient, each repeated index once (the gradient with respect to the matrix,
        as PyTorch's, whose values are the dense gradient at the pattern's positions)."""
        g = self._vals.grad
        if g is None:
            return None
        if self._coalesced:
            return SparseTensor(self._idx, g, self._size, True)
        idx = _concrete(self._idx, "a sparse gradient", "grad")
        if idx.shape[1] == 0:
            return SparseTensor(self._idx, g, self._size, True)
        keys = np.ravel_multi_index(tuple(idx), self._size[: self.sparse_dim()])
        unique, first = np.unique(keys, return_index=True)
        new_idx = np.stack(np.unravel_index(unique, self._size[: self.sparse_dim()]))
        at = E.tensor(first.astype(np.int64))
        return SparseTensor(E.tensor(new_idx.astype(np.int64)), g[at], self._size, True)

    @grad.setter
    def grad(self, value) -> None:
        if value is None:
            self._vals.grad = None
        else:
            raise EmberError(
                "only None can be assigned to a sparse tensor's grad", op="SparseTensor.grad"
            )

    def detach(self) -> SparseTensor:
        return SparseTensor(self._idx, self._vals.detach(), self._size, self._coalesced)

    def zero_(self) -> SparseTensor:
        """No entries left (nnz 0), in place, as PyTorch's (``zero_grad(set_to_none=False)``)."""
        self._idx = E.zeros((self.sparse_dim(), 0), dtype=dt.int64)
        self._vals = E.zeros((0,) + tuple(self._vals.shape[1:]), dtype=self._vals.dtype)
        self._coalesced = True
        return self

    def to(self, *args, dtype=None, **kwargs) -> SparseTensor:
        """A dtype (positional or ``dtype=``) casts the values; a device must be the CPU."""
        for arg in args:
            if isinstance(arg, dt.DType):
                dtype = arg
            else:
                from ..devices import check_device

                check_device(arg, "SparseTensor.to")
        if "device" in kwargs:
            from ..devices import check_device

            check_device(kwargs.pop("device"), "SparseTensor.to")
        if dtype is None or dtype is self.dtype:
            return self
        return SparseTensor(self._idx, E.cast(self._vals, dtype), self._size, self._coalesced)

    def float(self) -> SparseTensor:
        return self.to(dt.float32)

    def double(self) -> SparseTensor:
        return self.to(dt.float64)

    # ---- as an argument of a captured function (graph/tree.py, capture/signature.py)
    def _tree_leaves(self) -> tuple:
        return (self._idx, self._vals)

    def _tree_key(self) -> tuple:
        return (self._size, self._coalesced)

    def _tree_rebuild(self, leaves) -> SparseTensor:
        return SparseTensor(leaves[0], leaves[1], self._size, self._coalesced)

    # ---- conversions
    def coalesce(self) -> SparseTensor:
        """Repeated indices summed into one, indices sorted (row-major); self if coalesced."""
        if self._coalesced:
            return self
        idx = _concrete(self._idx, "coalescing", "coalesce")
        sparse_shape = self._size[: self.sparse_dim()]
        if idx.shape[1] == 0:
            return SparseTensor(self._idx, self._vals, self._size, True)
        keys = np.ravel_multi_index(tuple(idx), sparse_shape) if sparse_shape else idx[0] * 0
        unique, inverse = np.unique(keys, return_inverse=True)
        if unique.size == keys.size and np.all(keys[1:] > keys[:-1]):
            return SparseTensor(self._idx, self._vals, self._size, True)
        new_idx = np.stack(np.unravel_index(unique, sparse_shape)).astype(np.int64)
        dense_shape = tuple(self._vals.shape[1:])
        summed = E.index_add(
            E.zeros((unique.size,) + dense_shape, dtype=self._vals.dtype),
            0,
            E.tensor(inverse.reshape(-1).astype(np.int64)),
            self._vals,
        )
        return SparseTensor(E.tensor(new_idx), summed, self._size, True)

    def to_dense(self):
        """The dense tensor (repeated indices add); differentiable in the values."""
        rows = tuple(self._idx[d] for d in range(self.sparse_dim()))
        zeros = E.zeros(self._size, dtype=self._vals.dtype)
        return E.index_put(zeros, rows, self._vals, accumulate=True)

    def to_sparse_csr(self, dense_dim: int | None = None):
        """The CSR matrix of a 2-D COO tensor (ops/sparse_csr.py)."""
        return METHODS["to_sparse_csr"](self, dense_dim)

    def to_sparse(self, sparse_dim: int | None = None, *, layout=None, blocksize=None,
                  dense_dim: int | None = None):  # fmt: skip
        """Itself (``layout=ember.sparse_csr``: its CSR matrix), as PyTorch's."""
        if layout is not None and layout is not sparse_coo:
            return _to_layout(self, layout, blocksize, dense_dim)
        if sparse_dim is not None and sparse_dim != self.sparse_dim():
            raise EmberError(
                f"to_sparse: this tensor has sparse_dim {self.sparse_dim()}, not {sparse_dim}; "
                "convert through to_dense()",
                op="to_sparse",
            )
        return self

    # ---- arithmetic
    def t(self) -> SparseTensor:
        """The transpose of a 2-D sparse tensor (its indices' rows swapped)."""
        if self.sparse_dim() != 2 or self.dense_dim() != 0:
            raise ShapeError(
                f"t() expects a 2-D sparse matrix, got sparse_dim {self.sparse_dim()} and "
                f"dense_dim {self.dense_dim()}",
                op="t",
            )
        swapped = E.stack([self._idx[1], self._idx[0]])
        return SparseTensor(swapped, self._vals, self._size[::-1], False)

    def transpose(self, dim0: int, dim1: int) -> SparseTensor:
        if sorted(normalize_axes("transpose", (dim0, dim1), 2)) != [0, 1] or self.ndim != 2:
            raise ShapeError("a sparse tensor transposes its two dimensions only", op="transpose")
        return self.t()

    @property
    def T(self) -> SparseTensor:  # noqa: N802
        return self.t()

    def __add__(self, other):
        if isinstance(other, SparseTensor):
            if other._size != self._size:
                raise ShapeError(
                    f"sparse tensors of sizes {fmt_shape(self._size)} and "
                    f"{fmt_shape(other._size)} do not add",
                    op="add",
                )
            if other.sparse_dim() != self.sparse_dim():
                raise ShapeError("sparse tensors of different sparse_dim do not add", op="add")
            a, b = promote(self._vals, other._vals)
            both = SparseTensor(
                E.cat([self._idx, other._idx], 1), E.cat([a, b], 0), self._size, False
            )
            return both.coalesce()
        return self.to_dense() + other

    __radd__ = __add__

    def __sub__(self, other):
        return self + (-other)

    def __rsub__(self, other):
        return (-self) + other

    def __neg__(self) -> SparseTensor:
        return SparseTensor(self._idx, -self._vals, self._size, self._coalesced)

    def __mul__(self, other):
        if isinstance(other, SparseTensor):
            raise EmberError(
                "sparse * sparse is not supported; multiply to_dense() values", op="mul"
            )
        if isinstance(other, TensorBase) and other.ndim > 0:
            if tuple(other.shape) != self._size:
                raise ShapeError(
                    f"sparse * dense needs one shape: {fmt_shape(self._size)} and "
                    f"{fmt_shape(other.shape)}",
                    op="mul",
                )
            at = other[tuple(self._idx[d] for d in range(self.sparse_dim()))]
            return SparseTensor(self._idx, self._vals * at, self._size, self._coalesced)
        return SparseTensor(self._idx, self._vals * other, self._size, self._coalesced)

    __rmul__ = __mul__

    def __truediv__(self, other):
        if isinstance(other, (SparseTensor, TensorBase)) and getattr(other, "ndim", 0) > 0:
            raise EmberError("a sparse tensor divides by a scalar only", op="div")
        return SparseTensor(self._idx, self._vals / other, self._size, self._coalesced)

    def __matmul__(self, other):
        return matmul(self, other)

    def mm(self, other):
        return mm(self, other)

    def matmul(self, other):
        return matmul(self, other)

    def sum(self, dim=None, dtype=None):
        return sum(self, dim, dtype=dtype)

    def __repr__(self) -> str:
        # (each part's rows lined up under its first, as PyTorch prints them)
        indices = repr(self._idx).replace("\n", "\n" + " " * len("tensor(indices="))
        values = repr(self._vals).replace("\n", "\n" + " " * len("       values="))
        return (
            f"tensor(indices={indices},\n       values={values},\n       "
            f"size={self._size}, nnz={self._nnz()}, layout={self.layout!r})"
        )

    def __len__(self) -> int:
        if not self._size:
            raise ArgumentTypeError("len() of a 0-d tensor")
        return self._size[0]


# ------------------------------------------------------------------------- construction


def _check_indices(idx: np.ndarray, size: tuple) -> None:
    """Refuse negative indices and ones outside ``size`` (naming the dimension)."""
    if idx.size == 0:
        return
    low = idx.min(axis=1)
    high = idx.max(axis=1)
    for d in range(idx.shape[0]):
        if low[d] < 0:
            raise IndexOutOfRangeError(
                f"indices has a negative entry ({int(low[d])}) in row {d}; sparse indices "
                "count from 0",
                op="sparse_coo_tensor",
            )
        if high[d] >= size[d]:
            raise IndexOutOfRangeError(
                f"size {fmt_shape(size)} is smaller than the indices need: index "
                f"{int(high[d])} in dimension {d} needs a size of at least {int(high[d]) + 1}",
                op="sparse_coo_tensor",
            )


def _sorted_unique(idx: np.ndarray) -> bool:
    """Whether the (in-range) index columns strictly increase in row-major order: a coalesced
    tensor's, with no repeats."""
    if idx.shape[1] < 2:
        return True
    if idx.shape[0] == 0:  # (all columns are the one empty index: repeats)
        return False
    step = idx[:, 1:] - idx[:, :-1]  # (indices are in range: no overflow)
    differs = step != 0
    first = differs.argmax(axis=0)  # the first dimension where two neighbours differ
    return bool(np.all(differs.any(axis=0) & (step[first, np.arange(step.shape[1])] > 0)))


def sparse_coo_tensor(
    indices,
    values,
    size=None,
    *,
    dtype=None,
    device=None,
    requires_grad: bool = False,
    check_invariants: bool | None = None,
    is_coalesced: bool | None = None,
) -> SparseTensor:
    """PyTorch's ``torch.sparse_coo_tensor``: the sparse tensor with ``values[k]`` at
    ``indices[:, k]`` (indices: integers of shape (sparse_dim, nnz); values: (nnz, *dense)).
    Without ``size`` each sparse dimension is one more than its largest index. Repeated
    indices are kept until ``coalesce()`` sums them. Indices are checked (negative, beyond
    ``size``) unless ``check_invariants=False``; a size, dtype or shape that does not fit
    raises `EmberError` naming it."""
    op = "sparse_coo_tensor"
    if device is not None:
        from ..devices import check_device

        check_device(device, f"{op}(device)")
    if isinstance(indices, SparseTensor) or isinstance(values, SparseTensor):
        raise DTypeError("indices and values must be dense tensors", op=op)
    indices = to_tensor(indices if isinstance(indices, TensorBase) else np.asarray(indices))
    if not indices.dtype.is_integer:
        raise DTypeError(f"indices must be integers, got {indices.dtype}", op=op)
    if indices.ndim != 2:
        raise ShapeError(
            f"indices must be 2-D (sparse_dim, nnz), got shape {fmt_shape(indices.shape)}", op=op
        )
    if indices.dtype is not dt.int64:
        indices = E.cast(indices, dt.int64)
    values = to_tensor(values, dtype)
    if values.ndim == 0:
        raise ShapeError("values must have at least 1 dimension (nnz, ...)", op=op)
    sparse_dim, nnz = indices.shape
    if values.shape[0] != nnz:
        raise ShapeError(
            f"values has {values.shape[0]} entries (shape {fmt_shape(values.shape)}) but "
            f"indices has {nnz} (shape {fmt_shape(indices.shape)}): their lengths must match",
            op=op,
        )
    dense_shape = tuple(values.shape[1:])
    checking = check_invariants is not False
    idx = None
    if size is None or checking:
        try:
            idx = indices.detach().numpy()
        except TraceError:
            if size is None:
                raise TraceError(
                    "without a size, the size depends on the indices' values, which a graph "
                    "does not have while it is built: pass size=",
                    op=op,
                ) from None
    if size is None:
        size = tuple(int(m) + 1 for m in idx.max(axis=1)) if nnz else (0,) * sparse_dim
        size = size + dense_shape
    else:
        size = tuple(int(s) for s in size)
        if len(size) != sparse_dim + len(dense_shape):
            raise ShapeError(
                f"size {fmt_shape(size)} has {len(size)} dimensions, but indices has "
                f"{sparse_dim} sparse and values {len(dense_shape)} dense ones",
                op=op,
            )
        if size[sparse_dim:] != dense_shape:
            raise ShapeError(
                f"size {fmt_shape(size)} ends in {fmt_shape(size[sparse_dim:])}, but values' "
                f"dense dimensions are {fmt_shape(dense_shape)}",
                op=op,
            )
        if any(s < 0 for s in size):
            raise ShapeError(f"size {fmt_shape(size)} has a negative dimension", op=op)
    if checking and idx is not None:
        _check_indices(idx, size)
        if is_coalesced and not _sorted_unique(idx):
            raise EmberError(
                "cannot set is_coalesced to true if indices correspond to uncoalesced COO "
                "tensor (repeated or unsorted indices); call .coalesce() instead",
                op=op,
            )
    if requires_grad:
        values = values.detach().requires_grad_(True)
    # (at most one entry is coalesced whatever the flag, as PyTorch marks it)
    return SparseTensor(indices, values, size, bool(is_coalesced) or nnz <= 1)


@export(method=("to_sparse", "to_sparse_coo"), toplevel=False)
def to_sparse(
    x, sparse_dim: int | None = None, *, layout=None, blocksize=None, dense_dim: int | None = None
):
    """PyTorch's ``Tensor.to_sparse``: the coalesced COO tensor of x's nonzero entries (with
    ``sparse_dim`` < x.ndim, or ``dense_dim`` > 0, of its nonzero slices over the leading
    dimensions). Differentiable in x; eager only (nnz depends on the values). ``layout``:
    ``ember.sparse_coo`` or ``ember.sparse_csr`` (`to_sparse_csr`), the layouts ember has."""
    if layout is not None and layout is not sparse_coo:
        return _to_layout(x, layout, blocksize, dense_dim)
    if dense_dim is not None:
        if sparse_dim is not None:
            raise EmberError("to_sparse: give sparse_dim or dense_dim, not both", op="to_sparse")
        sparse_dim = x.ndim - int(dense_dim)
    if isinstance(x, SparseTensor):
        return x.to_sparse(sparse_dim)
    x = to_tensor(x)
    sd = x.ndim if sparse_dim is None else int(sparse_dim)
    if not 0 < sd <= x.ndim:
        raise ShapeError(
            f"sparse_dim must be in 1..{x.ndim} for a tensor of shape {fmt_shape(x.shape)}, "
            f"got {sparse_dim}",
            op="to_sparse",
        )
    data = _concrete(x, "the number of nonzeros", "to_sparse")
    mask = data != 0
    if sd < x.ndim:
        mask = mask.any(axis=tuple(range(sd, x.ndim)))
    where = np.nonzero(mask)
    indices = np.stack(where).astype(np.int64).reshape(sd, -1)
    values = x[tuple(E.tensor(w.astype(np.int64)) for w in where)]
    return SparseTensor(E.tensor(indices), values, tuple(x.shape), True)


def _to_layout(x, layout, blocksize, dense_dim):
    """``to_sparse(layout=...)`` for a layout other than COO: CSR, which ember has."""
    if layout is not sparse_csr or blocksize is not None:
        raise EmberError(
            f"to_sparse: ember has the sparse_coo and sparse_csr layouts only, got {layout!r}"
            + (" with a blocksize" if blocksize is not None else ""),
            op="to_sparse",
        )
    return METHODS["to_sparse_csr"](x, dense_dim)  # (ops/sparse_csr.py, late-bound)


@export(method=True, toplevel=False)
def to_dense(x):
    """A sparse tensor's dense form; a dense tensor itself (PyTorch's ``Tensor.to_dense``)."""
    return x.to_dense() if isinstance(x, SparseTensor) else to_tensor(x)


# --------------------------------------------------------------------------- operations


def _matrix(op, a):
    if not isinstance(a, SparseTensor):
        raise DTypeError(
            f"the first operand must be a sparse tensor, got {type(a).__name__}", op=op
        )
    if a.sparse_dim() != 2 or a.dense_dim() != 0:
        raise ShapeError(
            f"the sparse operand must be a matrix (sparse_dim 2, dense_dim 0), got sparse_dim "
            f"{a.sparse_dim()} and dense_dim {a.dense_dim()}",
            op=op,
        )


def mm(a: SparseTensor, b):
    """``torch.sparse.mm``: a sparse (n, m) matrix times a dense (m, p) one, a dense (n, p)
    result; gradients to both (the sparse one's on its own pattern). Times a sparse matrix,
    a sparse result (through the dense product: eager only)."""
    _matrix("sparse.mm", a)
    if isinstance(b, SparseTensor):  # sparse @ sparse is sparse, as in PyTorch (eager only)
        return to_sparse(mm(a, b.to_dense()))
    values, b = promote(a._vals, b)
    if b.ndim != 2 or b.shape[0] != a._size[1]:
        raise ShapeError(
            f"sparse {fmt_shape(a._size)} times dense {fmt_shape(b.shape)}: the dense operand "
            f"must be a matrix of {a._size[1]} rows",
            op="sparse.mm",
        )
    return SPARSE_MM_OP(a._idx, values, b, a._size[0], a._size[1])


def matmul(a: SparseTensor, b):
    """``a @ b`` with a sparse matrix ``a``: a dense matrix or vector ``b``."""
    b = b if isinstance(b, SparseTensor) else to_tensor(b)
    if getattr(b, "ndim", 2) == 1:
        return E.reshape(mm(a, E.reshape(b, (-1, 1))), (-1,))
    return mm(a, b)


def sum(input: SparseTensor, dim=None, dtype=None):  # noqa: A001
    """``torch.sparse.sum``: over every dimension (a 0-d tensor), or over ``dim``: a dense
    tensor when every sparse dimension is summed, else a coalesced sparse tensor."""
    if not isinstance(input, SparseTensor):
        return E.sum(to_tensor(input), dim) if dim is not None else E.sum(to_tensor(input))
    values = input._vals if dtype is None else E.cast(input._vals, dtype)
    if dim is None:
        return E.sum(values)
    dims = normalize_axes(
        "sparse.sum", dim if isinstance(dim, (tuple, list)) else (dim,), input.ndim
    )
    sd = input.sparse_dim()
    dense_axes = tuple(d - sd + 1 for d in dims if d >= sd)
    if dense_axes:
        values = E.sum(values, dense_axes)
    kept = [d for d in range(sd) if d not in dims]
    if not kept:
        return E.sum(values, 0)
    size = tuple(input._size[d] for d in kept) + tuple(
        input._size[d] for d in range(sd, input.ndim) if d not in dims
    )
    indices = E.stack([input._idx[d] for d in kept])
    return SparseTensor(indices, values, size, False).coalesce()
