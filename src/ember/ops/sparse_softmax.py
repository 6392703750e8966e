"""``torch.sparse.softmax`` / ``log_softmax`` on ember's sparse COO tensors
(ops/sparse_tensor.py): over the specified entries of each slice along a dimension, in
ordinary ops (a scatter of each slice's maximum, an index_add of its exponentials), so the
values' gradient flows; a dense tensor gets the dense softmax."""

from __future__ import annotations

import numpy as np

from . import api as E
from ._util import normalize_axes
from .elementwise import to_tensor
from .sparse_tensor import SparseTensor, _concrete


def _softmax(input, dim: int, dtype, log: bool, op: str):
    """`softmax` / `log_softmax` of a sparse tensor along ``dim``: over the specified entries of
    each slice (the unspecified ones count as -inf, so they stay unspecified), a sparse tensor
    of the coalesced input's pattern."""
    if not isinstance(input, SparseTensor):
        x = to_tensor(input)
        return (E.log_softmax if log else E.softmax)(x, dim, dtype=dtype)
    (dim,) = normalize_axes(op, (dim,), input.ndim)
    x = input.coalesce()
    vals = x._vals if dtype is None else E.cast(x._vals, dtype)
    sd = x.sparse_dim()
    if dim >= sd:  # a dense dimension: each specified entry's values along it
        out = (E.log_softmax if log else E.softmax)(vals, dim - sd + 1)
        return SparseTensor(x._idx, out, x._size, True)
    idx = _concrete(x._idx, "the slices of a sparse softmax", op)
    others = [d for d in range(sd) if d != dim]
    if others:
        keys = np.ravel_multi_index(tuple(idx[others]), tuple(x._size[d] for d in others))
    else:
        keys = np.zeros(idx.shape[1], np.int64)
    unique, inverse = np.unique(keys, return_inverse=True)
    groups = E.tensor(inverse.reshape(-1).astype(np.int64))
    dense = tuple(vals.shape[1:])
    index = groups.reshape((-1,) + (1,) * len(dense)).expand(*vals.shape) if dense else groups
    # the largest value of each slice (shift only: the softmax does not depend on it)
    peak = E.scatter_reduce(
        E.zeros((unique.size,) + dense, dtype=vals.dtype),
        0,
        index,
        E.detach(vals),
        "amax",
        include_self=False,
    )
    shifted = vals - E.index_select(peak, 0, groups)
    ex = E.exp(shifted)
    total = E.index_add(E.zeros((unique.size,) + dense, dtype=vals.dtype), 0, groups, ex)
    per_entry = E.index_select(total, 0, groups)
    out = shifted - E.log(per_entry) if log else ex / per_entry
    return SparseTensor(x._idx, out, x._size, True)


def softmax(input, dim: int, dtype=None):
    """``torch.sparse.softmax``: softmax along ``dim`` over the specified entries."""
    return _softmax(input, dim, dtype, False, "sparse.softmax")


def log_softmax(input, dim: int, dtype=None):
    """``torch.sparse.log_softmax``: log-softmax along ``dim`` over the specified entries."""
    return _softmax(input, dim, dtype, True, "sparse.log_softmax")
