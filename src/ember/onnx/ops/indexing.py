"""Indexing ONNX operators: Gather(Elements, ND), Scatter(Elements, ND), TensorScatter,
OneHot, Compress, NonZero, Unique, TopK, ArgMax/ArgMin, CumSum/CumProd, ReverseSequence and
Einsum.

Indices are normalized the ONNX way (a negative index counts from the end of its axis) with
ember ops, so a converter works on dynamic indices while a graph is captured. NonZero, Compress
and Unique have data-dependent output sizes: ember's ``nonzero``/``unique`` need the data, which
a graph being captured lacks (they raise `TraceError`), so a model using them on dynamic values
runs eagerly. Static data of an element type ember has no tensors for moves through
`shape.move` (positions moved by ember ops, elements picked in NumPy); orderings of unsigned
types ember lacks use an order-preserving signed proxy.
"""

from __future__ import annotations

import numpy as np

from ... import dtypes as _dt
from .._convert import converter, is_static
from ._common import E, axis, dtype_np
from .shape import foreign, move, shape_of

# ---------------------------------------------------------------------------------------------
# indices


def _indices(ctx, index, size, what="indices"):
    """``index`` as an int64 tensor with negative entries counted from the end of an axis of
    ``size`` (a static index is normalized and checked in NumPy)."""
    if is_static(index):
        i = np.asarray(index).astype(np.int64)
        if i.size and (i.min() < -size or i.max() >= size):
            raise ctx.error(f"{what} out of range [-{size}, {size - 1}]")
        return ctx.tensor(np.where(i < 0, i + size, i))
    i = ctx.tensor(index)
    if i.dtype != _dt.int64:
        i = E.cast(i, _dt.int64)
    return E.where(E.lt(i, 0), E.add(i, size), i)


def _sortable(ctx, x):
    """(tensor that orders like ``x``, original static array or None): an unsigned static
    array of a width ember lacks is widened, or for uint64 has its top bit flipped and is
    viewed as int64, which keeps its order; strings become their ranks."""
    if not foreign(x):
        return ctx.tensor(x), None
    if x.dtype.kind == "u" and x.dtype.itemsize < 8:
        return ctx.tensor(x.astype(np.int64)), x
    if x.dtype == np.uint64:
        return ctx.tensor((x ^ np.uint64(1 << 63)).view(np.int64)), x
    if "float" in x.dtype.name:  # float8 and the like order as their float32 values do
        return ctx.tensor(x.astype(np.float32)), x
    if x.dtype.kind in "OSU":  # strings: their ranks among the distinct strings
        codes = np.unique(x.reshape(-1), return_inverse=True)[1]
        return ctx.tensor(codes.reshape(x.shape).astype(np.int64)), x
    raise ctx.error(f"ember cannot order {x.dtype.name} values")


@converter("Gather", 1)
def _gather(ctx, data, indices):
    dims = shape_of(ctx, data)
    a = axis(ctx.attr("axis", 0), len(dims), ctx)
    if is_static(indices):
        idx = _indices(ctx, indices, dims[a])
    else:  # ember's indexing counts a negative index from the end itself, and checks bounds
        idx = ctx.tensor(indices)
        idx = idx if idx.dtype == _dt.int64 else E.cast(idx, _dt.int64)
    lead = (slice(None),) * a
    if is_static(indices) and np.ndim(indices) == 0 and isinstance(dims[a], (int, np.integer)):
        # one fixed position: basic indexing (a view, as ``x[:, 2]``), not a gather's copy
        idx = int(np.asarray(indices)) % dims[a]
    return move(ctx, lambda t: E.getitem(t, lead + (idx,)), data)


@converter("GatherElements", 11)
def _gather_elements(ctx, data, indices):
    dims = shape_of(ctx, data)
    a = axis(ctx.attr("axis", 0), len(dims), ctx)
    idx = _indices(ctx, indices, dims[a])
    return move(ctx, lambda t: E.gather(t, a, idx), data)


def _nd_positions(ctx, indices, outer: tuple[int, ...]):
    """The linear positions in a block of shape ``outer`` that ``indices``' last axis points
    at (each component normalized for its own axis)."""
    index = indices if is_static(indices) else ctx.tensor(indices)
    k = shape_of(ctx, indices)[-1]
    linear = None
    stride = 1
    for j in reversed(range(k)):
        part = index[..., j] if is_static(index) else E.getitem(index, (Ellipsis, j))
        part = _indices(ctx, part, outer[j])
        term = E.mul(part, stride) if stride != 1 else part
        linear = term if linear is None else E.add(linear, term)
        stride *= outer[j]
    return linear


@converter("GatherND", 11)
def _gather_nd(ctx, data, indices):
    dims = shape_of(ctx, data)
    ishape = shape_of(ctx, indices)
    b = int(ctx.attr("batch_dims", 0)) if ctx.opset >= 12 else 0
    if not ishape or ishape[:b] != dims[:b]:
        raise ctx.error(f"indices {ishape} do not match data {dims} in the {b} batch dimensions")
    k = ishape[-1]
    if b + k > len(dims):
        raise ctx.error(
            f"indices of depth {k} exceed data of rank {len(dims)} after {b} batch dims"
        )
    batch = int(np.prod(dims[:b], dtype=np.int64))
    outer = dims[b : b + k]
    tail = dims[b + k :]
    middle = ishape[b:-1]
    if k == 0:
        linear = ctx.tensor(np.zeros((batch, int(np.prod(middle, dtype=np.int64))), np.int64))
    else:
        linear = E.reshape(_nd_positions(ctx, indices, outer), (batch, -1))
    rows = ctx.tensor(np.arange(batch, dtype=np.int64).reshape(batch, 1))
    size = int(np.prod(outer, dtype=np.int64))

    def gathered(t):
        t = E.reshape(t, (batch, size, *tail))
        return E.reshape(E.getitem(t, (rows, linear)), (*dims[:b], *middle, *tail))

    return move(ctx, gathered, data)


# ---------------------------------------------------------------------------------------------
# scatters

_REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


def _scatter_along(ctx, data, a, index, updates, reduction):
    if reduction == "none":
        return move(ctx, lambda d, u: E.scatter(d, a, index, u), data, updates)
    if reduction not in _REDUCE:
        raise ctx.error(f"unknown reduction {reduction!r}")
    if foreign(data):
        raise ctx.error(f"ember cannot reduce {data.dtype.name} values")
    d, u = ctx.tensor(data), ctx.tensor(updates)
    return E.scatter_reduce(d, a, index, u, _REDUCE[reduction], include_self=True)


@converter("ScatterElements", 11)
def _scatter_elements(ctx, data, indices, updates):
    dims = shape_of(ctx, data)
    a = axis(ctx.attr("axis", 0), len(dims), ctx)
    index = _indices(ctx, indices, dims[a])
    reduction = ctx.attr("reduction", "none") if ctx.opset >= 16 else "none"
    return _scatter_along(ctx, data, a, index, updates, reduction)


converter("Scatter", 9)(_scatter_elements)


@converter("ScatterND", 11)
def _scatter_nd(ctx, data, indices, updates):
    dims = shape_of(ctx, data)
    ishape = shape_of(ctx, indices)
    k = ishape[-1] if ishape else 0
    if not ishape or k > len(dims):
        raise ctx.error(f"indices of shape {ishape} do not fit data of rank {len(dims)}")
    outer, tail = dims[:k], dims[k:]
    count = int(np.prod(ishape[:-1], dtype=np.int64))
    width = int(np.prod(tail, dtype=np.int64))
    if shape_of(ctx, updates) != tuple(ishape[:-1]) + tuple(tail):
        raise ctx.error(f"updates must have shape {tuple(ishape[:-1]) + tuple(tail)}")
    # as a scatter along axis 0 of data viewed as (positions, rest)
    if k == 0:
        linear = ctx.tensor(np.zeros((count,), np.int64))
    else:
        linear = E.reshape(_nd_positions(ctx, indices, outer), (count, 1))
    index = E.broadcast_to(E.reshape(linear, (count, 1)), (count, width))
    size = int(np.prod(outer, dtype=np.int64))
    reduction = ctx.attr("reduction", "none") if ctx.opset >= 16 else "none"
    flat_data = move(ctx, lambda t: E.reshape(t, (size, width)), data)
    flat_updates = move(ctx, lambda t: E.reshape(t, (count, width)), updates)
    out = _scatter_along(ctx, flat_data, 0, index, flat_updates, reduction)
    return move(ctx, lambda t: E.reshape(t, dims), out)


@converter("TensorScatter", 24)
def _tensor_scatter(ctx, cache, update, write_indices=None):
    dims, udims = shape_of(ctx, cache), shape_of(ctx, update)
    if len(dims) != len(udims) or len(dims) < 2:
        raise ctx.error(f"past_cache {dims} and update {udims} must have one rank, at least 2")
    a = axis(ctx.attr("axis", -2), len(dims), ctx)
    if a == 0:
        raise ctx.error("axis cannot be the batch axis 0")
    mode = ctx.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise ctx.error(f"unknown mode {mode!r}")
    if any(d != u for i, (d, u) in enumerate(zip(dims, udims)) if i != a) or udims[a] > dims[a]:
        raise ctx.error(f"update {udims} does not fit past_cache {dims} along axis {a}")
    batch, length, capacity = dims[0], udims[a], dims[a]
    if write_indices is None:
        start = ctx.tensor(np.zeros((batch,), np.int64))
    else:
        start = E.cast(ctx.tensor(write_indices), _dt.int64)
    positions = E.add(
        E.reshape(start, (batch, 1)), ctx.tensor(np.arange(length, dtype=np.int64)[None])
    )
    if mode == "circular":
        positions = E.remainder(positions, capacity)
    elif is_static(write_indices) and np.any(np.asarray(write_indices) + length > capacity):
        raise ctx.error(f"writing {length} entries past a capacity of {capacity}")
    shape = [1] * len(dims)
    shape[0], shape[a] = batch, length
    index = E.broadcast_to(E.reshape(positions, tuple(shape)), udims)
    return move(ctx, lambda c, u: E.scatter(c, a, index, u), cache, update)


# ---------------------------------------------------------------------------------------------
# one-hot, selections


@converter("OneHot", 9)
def _one_hot(ctx, indices, depth, values):
    depth = np.asarray(ctx.static(depth, "OneHot's depth")).reshape(-1)
    if depth.size != 1:
        raise ctx.error("depth must hold one value")
    n = int(depth[0])
    if n < 1:
        raise ctx.error(f"depth {n} must be positive")
    rank = len(shape_of(ctx, indices)) + 1
    ctx.check_size([*shape_of(ctx, indices), n], dtype_np(values))
    a = axis(ctx.attr("axis", -1), rank, ctx)
    if foreign(indices):  # an unsigned width ember lacks
        indices = indices.astype(np.float64 if indices.dtype.kind == "f" else np.int64)
    idx = ctx.tensor(indices)
    if idx.dtype.is_floating_point:
        idx = E.trunc(idx)
    idx = E.cast(idx, _dt.int64)
    idx = E.where(E.lt(idx, 0), E.add(idx, n), idx)  # out of [-n, n) matches no class
    classes = [1] * rank
    classes[a] = n
    hot = E.eq(E.unsqueeze(idx, a), ctx.tensor(np.arange(n, dtype=np.int64).reshape(classes)))
    if foreign(values):
        return np.where(ctx.static(hot), values.reshape(-1)[1], values.reshape(-1)[0])
    v = ctx.tensor(values)
    off, on = E.getitem(v, 0), E.getitem(v, 1)
    return E.where(hot, on, off)


@converter("Compress", 9)
def _compress(ctx, x, condition):
    dims = shape_of(ctx, x)
    a = ctx.attr("axis", None)
    a = None if a is None else axis(a, len(dims), ctx)
    n = int(np.prod(dims, dtype=np.int64)) if a is None else dims[a]
    cshape = shape_of(ctx, condition)
    if len(cshape) != 1 or cshape[0] > n:
        raise ctx.error(f"condition of shape {cshape} does not fit {n} slices")
    if is_static(condition):  # known while importing: the model stays capturable
        chosen = ctx.tensor(np.flatnonzero(condition).astype(np.int64))
    else:  # data-dependent size: ember's nonzero runs eagerly only
        cond = ctx.tensor(condition)
        cond = cond if cond.dtype == _dt.bool_ else E.ne(cond, 0)
        chosen = E.reshape(E.nonzero(cond), (-1,))

    def pick(t):
        if a is None:
            return E.index_select(E.reshape(t, (-1,)), 0, chosen)
        return E.index_select(t, a, chosen)

    return move(ctx, pick, x)


@converter("NonZero", 9)
def _nonzero(ctx, x):
    t = ctx.tensor(x != 0) if foreign(x) else ctx.tensor(x)
    if not t.shape:  # a scalar counts as one element of a 1-D tensor (onnxruntime's)
        t = E.reshape(t, (1,))
    return E.permute(E.nonzero(t), (1, 0))


@converter("Unique", 11)
def _unique(ctx, x):
    dims = shape_of(ctx, x)
    a = ctx.attr("axis", None)
    a = None if a is None else axis(a, len(dims), ctx)
    if foreign(x):
        proxy, _ = _sortable(ctx, x)
    else:
        proxy = ctx.tensor(x)
    values, inverse, counts = E.unique(
        proxy, sorted=True, return_inverse=True, return_counts=True, dim=a
    )
    inverse = E.reshape(inverse, (-1,))
    n = int(np.prod(dims, dtype=np.int64)) if a is None else dims[a]
    count = int(counts.shape[0])
    # each distinct value's first occurrence: the smallest position mapped to it
    positions = ctx.tensor(np.arange(n, dtype=np.int64))
    first = E.scatter_reduce(
        E.full((count,), n, dtype=_dt.int64), 0, inverse, positions, "amin", include_self=True
    )
    if not ctx.attr("sorted", 1):  # in the order of first occurrence
        order = E.argsort(first)
        rank = E.argsort(order)
        values = E.index_select(values, 0 if a is None else a, order)
        first, counts = E.index_select(first, 0, order), E.index_select(counts, 0, order)
        inverse = E.index_select(rank, 0, inverse)
    if foreign(x):  # the values themselves, picked at their first occurrences
        flat = x.reshape(-1) if a is None else x
        values = np.take(flat, ctx.static(first), axis=0 if a is None else a)
    return values, first, inverse, counts


# ---------------------------------------------------------------------------------------------
# orderings


@converter("TopK", 1)
def _top_k(ctx, x, k=None):
    dims = shape_of(ctx, x)
    a = axis(ctx.attr("axis", -1), len(dims), ctx)
    if ctx.opset < 10:
        count = int(ctx.attr("k"))
    else:
        count = ctx.ints(k, "TopK's K")
        if len(count) != 1:
            raise ctx.error("K must hold one value")
        count = count[0]
    if not 0 <= count <= dims[a]:
        raise ctx.error(f"k {count} is out of range for a dimension of {dims[a]}")
    largest = bool(ctx.attr("largest", 1)) if ctx.opset >= 11 else True
    proxy, original = _sortable(ctx, x)
    # ONNX orders equal elements by index: the stable sort's first k (PyTorch's topk, which
    # ember.topk gives, picks among ties by its selection's steps)
    values, indices = E.sort(proxy, a, largest, stable=True)
    values, indices = E.narrow(values, a, 0, count), E.narrow(indices, a, 0, count)
    if original is not None:
        values = np.take_along_axis(original, ctx.static(indices), a)
    return values, indices


def _arg(which):
    def convert(ctx, x):
        dims = shape_of(ctx, x)
        a = axis(ctx.attr("axis", 0), len(dims), ctx)
        keep = bool(ctx.attr("keepdims", 1))
        t, _ = _sortable(ctx, x)
        if dims[a] == 0:  # no extreme to find: only an empty result has an answer
            out = tuple(1 if i == a else d for i, d in enumerate(dims) if keep or i != a)
            if 0 not in out:
                raise ctx.error(f"cannot find the extreme of an empty axis (shape {dims})")
            return E.zeros(out, dtype=_dt.int64)
        if ctx.opset >= 12 and ctx.attr("select_last_index", 0):
            # the last extreme: the first one of the reversed axis, counted back
            out = which(E.flip(t, (a,)), a, keep)
            return E.sub(ctx.tensor(np.asarray(dims[a] - 1, np.int64)), out)
        return which(t, a, keep)

    return convert


converter("ArgMax", 1)(_arg(E.argmax))
converter("ArgMin", 1)(_arg(E.argmin))


def _cumulative(fn, identity):
    def convert(ctx, x, axis_value):
        t = ctx.tensor(x)
        rank = len(t.shape)
        a = ctx.ints(axis_value, "the axis")
        if len(a) != 1:
            raise ctx.error("axis must hold one value")
        a = axis(a[0], rank, ctx)
        reverse, exclusive = ctx.attr("reverse", 0), ctx.attr("exclusive", 0)
        if reverse:
            t = E.flip(t, (a,))
        if exclusive and t.shape[a]:  # shifted by one, the identity first (exact)
            n = t.shape[a]
            lead = (slice(None),) * a
            t = E.getitem(t, lead + (slice(0, max(n - 1, 0)),))
            pads = [0, 0] * (rank - 1 - a) + [1, 0]
            t = E.pad(t, pads, "constant", identity)
        out = fn(t, a)
        if out.dtype != ctx.tensor(x).dtype:  # (ember accumulates integers in int64)
            out = E.cast(out, ctx.tensor(x).dtype)
        return E.flip(out, (a,)) if reverse else out

    return convert


converter("CumSum", 11)(_cumulative(E.cumsum, 0))
converter("CumProd", 26)(_cumulative(E.cumprod, 1))


@converter("ReverseSequence", 10)
def _reverse_sequence(ctx, x, sequence_lens):
    dims = shape_of(ctx, x)
    b, t = ctx.attr("batch_axis", 1), ctx.attr("time_axis", 0)
    if len(dims) < 2 or {b, t} != {0, 1}:
        raise ctx.error("batch_axis and time_axis must be 0 and 1 (in either order)")
    batch, steps = dims[b], dims[t]
    lens = E.reshape(E.cast(ctx.tensor(sequence_lens), _dt.int64), (batch, 1))
    time = ctx.tensor(np.arange(steps, dtype=np.int64).reshape(1, steps))
    # the first lens[i] steps of sequence i reversed, the rest where they are
    source = E.where(E.lt(time, lens), E.sub(E.sub(lens, 1), time), time)  # (batch, steps)
    if t == 0:
        source = E.permute(source, (1, 0))
    source = E.reshape(source, tuple(dims[:2]) + (1,) * (len(dims) - 2))
    index = E.broadcast_to(source, dims)
    return move(ctx, lambda v: E.gather(v, t, index), x)


@converter("Einsum", 12)
def _einsum(ctx, *xs):
    equation = ctx.attr("equation")
    tensors = [ctx.tensor(v) for v in xs if v is not None]
    return E.einsum(equation.replace(" ", ""), *tensors)
