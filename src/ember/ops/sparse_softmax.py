"""``torch.sparse.softmax`` / ``log_softmax`` on ember's sparse COO tensors
(ops/sparse_tensor.py): over the specified entries of each slice along a dimension, in
ordinary ops (a scatter of each slice's maximum, an index_add of its exponentials), so the
values' gradient flows; a dense tensor gets the dense softmax."""

from __future__ import annotations

import numpy as np

from ..errors import TraceError
from . import api as E
from ._util import normalize_axes
from .promotion import to_tensor
from .sparse_tensor import SparseTensor


def _softmax(input, dim: int, dtype, log: bool, op: str):
    """`softmax` / `log_softmax` of a sparse tensor along ``dim``: over the specified entries of
    each slice (the unspecified ones count as -inf, so they stay unspecified), a sparse tensor
    of the coalesced input's pattern."""
    if not isinstance(input, SparseTensor):
        x = to_tensor(input)
        return (E.log_softmax if log else E.softmax)(x, dim, dtype=dtype)
    (dim,) = normalize_axes(op, (dim,), input.ndim)
    try:
        x = input.coalesce()
    except TraceError:
        raise TraceError(
            f"{op} of an uncoalesced sparse tensor coalesces it, which needs the indices' values "
            "that a graph does not have while it is built: pass a coalesced tensor (call "
            ".coalesce() outside the captured function)",
            op=op,
        ) from None
    vals = x._vals if dtype is None else E.cast(x._vals, dtype)
    sd = x.sparse_dim()
    if dim >= sd:  # a dense dimension: each specified entry's values along it
        out = (E.log_softmax if log else E.softmax)(vals, dim - sd + 1)
        return SparseTensor(x._idx, out, x._size, True)
    groups, n_groups = _slices(x, dim)
    dense = tuple(vals.shape[1:])
    index = groups.reshape((-1,) + (1,) * len(dense)).expand(*vals.shape) if dense else groups
    # the largest value of each slice (shift only: the softmax does not depend on it)
    peak = E.scatter_reduce(
        E.zeros((n_groups,) + dense, dtype=vals.dtype),
        0,
        index,
        E.detach(vals),
        "amax",
        include_self=False,
    )
    shifted = vals - E.index_select(peak, 0, groups)
    ex = E.exp(shifted)
    total = E.index_add(E.zeros((n_groups,) + dense, dtype=vals.dtype), 0, groups, ex)
    per_entry = E.index_select(total, 0, groups)
    out = shifted - E.log(per_entry) if log else ex / per_entry
    return SparseTensor(x._idx, out, x._size, True)


def _slices(x: SparseTensor, dim: int):
    """Each entry's slice along ``dim`` (an int64 tensor) and the number of slices: the
    distinct other indices, numbered, where the indices are known; while a graph is built (they
    are not), the other indices raveled, over every slice the size allows."""
    sd = x.sparse_dim()
    others = [d for d in range(sd) if d != dim]
    sizes = tuple(x._size[d] for d in others)
    try:
        idx = x._idx.detach().numpy()
    except TraceError:  # symbolic indices: a row-major key per entry, computed in the graph
        keys = E.zeros_like(x._idx[0])
        for d, size in zip(others, sizes):
            keys = keys * size + x._idx[d]
        return keys, int(np.prod(sizes, dtype=np.int64))
    keys = np.ravel_multi_index(tuple(idx[others]), sizes) if others else idx[0] * 0
    unique, inverse = np.unique(keys, return_inverse=True)
    return E.tensor(inverse.reshape(-1).astype(np.int64)), unique.size


def softmax(input, dim: int, dtype=None):
    """``torch.sparse.softmax``: softmax along ``dim`` over the specified entries."""
    return _softmax(input, dim, dtype, False, "sparse.softmax")


def log_softmax(input, dim: int, dtype=None):
    """``torch.sparse.log_softmax``: log-softmax along ``dim`` over the specified entries."""
    return _softmax(input, dim, dtype, True, "sparse.log_softmax")
