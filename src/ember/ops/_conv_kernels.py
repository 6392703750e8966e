"""NumPy kernels of the convolution family (see ops/conv.py): im2col through strided views, one
BLAS matmul per call (batched over groups), col2im through shifted adds.

Layout. Every matmul works on "column" matrices of shape (groups, rows, N * M): rows are the
(channel, kernel offset) pairs of one group, columns the batch times the output positions. One
large matmul per group is markedly faster than N small ones, and it leaves the batch inside the
columns, so the NCHW output is assembled by one copy that also transposes.

Three ways to enumerate output positions (`Plan.layout`), each a grid per sample whose
positions are the matmul's columns (output positions outside the real output are garbage,
cropped from the output and zero in gradients):

* "dense" (all strides 1, output no larger than the input: 'same' padding, the common case):
  the grid is the *unpadded input*; output position o reads input position ``o + offset(k)``
  for kernel offset k. With channels outermost, (C, N * prod(in_size)), every kernel offset is
  one contiguous slice over the whole batch, so im2col is one long copy per offset and col2im
  one long add per offset (NumPy runs slices of few elements far slower per element). Reads that
  fall outside the input (into the padding, or wrapped into a neighbouring row or sample) are
  zeroed afterwards by a few strided writes per offset. No matmul work is wasted with 'same'
  padding.
* "flat" (all strides 1, more column rows than output channels): the padded spatial dimensions
  are flattened per sample, over an *extended* grid (rows of the full padded width). It costs
  ``padded_width / out_width`` extra matmul work, so it is chosen only when that is small.
* "general": M = prod(out_size); the im2col view has the output grid as its innermost
  dimensions.

Scratch buffers (padded inputs, columns, accumulators) come from a small per-thread cache keyed by
shape: allocating a fresh multi-megabyte array per call costs page faults comparable to the
matmul itself. Kernels never return a view of a scratch buffer.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections import OrderedDict

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..kernels.conv_plan import (
    Plan,
    interior,
    scratch,
    source_region,
)

# im2col remembers the inputs of this many column buffers, per thread (see `im2col`)
_MEMO_ENTRIES = 4
_local = threading.local()
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _padded_input(x: np.ndarray, p: Plan) -> np.ndarray:
    """``x`` padded with zeros: (N, C, *padded) for the general layout, (N, C, flat_len) for the
    flat one. Returns ``x`` itself when no copy is needed."""
    n, c = x.shape[:2]
    exact = p.padded == p.in_size and not any(p.lo)
    if p.layout == "general":
        if exact:
            return x
        buf = scratch("xpad", (n, c) + p.padded, x.dtype, fill=0, key=p)
        buf[(slice(None), slice(None)) + interior(p)] = x[source_region(p)]
        return buf
    if exact and p.flat_len == math.prod(p.padded) and x.flags.c_contiguous:
        return x.reshape(n, c, p.flat_len)
    buf = scratch("xflat", (n, c, p.flat_len), x.dtype, fill=0, key=p)
    plane = buf[:, :, : math.prod(p.padded)].reshape((n, c) + p.padded)
    plane[(slice(None), slice(None)) + interior(p)] = x[source_region(p)]
    return buf


def _crop(p: Plan) -> tuple:
    """The real output inside the grid of matmul columns (spatial dimensions)."""
    return tuple(slice(0, o) for o in p.out_size)


def _zero_garbage(a: np.ndarray, p: Plan, n: int) -> None:
    """Zero the flat layout's garbage columns of ``a`` (..., N * m) in place. They are cropped
    from outputs, but a product sums over them: 0 * nan is nan, so an input's or a weight's
    non-finite value read there would reach gradients that PyTorch leaves finite."""
    grid = a.reshape(a.shape[:-1] + (n,) + p.grid)
    lead = (slice(None),) * (grid.ndim - len(p.grid))
    for i, (g, o) in enumerate(zip(p.grid, p.out_size)):
        if g != o:
            grid[lead + (slice(None),) * i + (slice(o, None),)] = 0


def _dense_input(x: np.ndarray, p: Plan) -> np.ndarray:
    """The dense layout's input: (C, margin + N * m + margin), channels outermost."""
    n, c = x.shape[:2]
    before, after = p.margin
    if c == 1 and before == after == 0 and x.flags.c_contiguous:
        return x.reshape(1, n * p.m)
    # the margins are read only where the result is zeroed: they may keep any values
    buf = scratch("xdense", (c, before + n * p.m + after), x.dtype, key=p)
    np.copyto(
        buf[:, before : before + n * p.m].reshape(c, n, p.m),
        x.reshape(n, c, p.m).transpose(1, 0, 2),
    )
    return buf


def _zero_invalid(rows: np.ndarray, p: Plan, k: int, n: int) -> None:
    """Zero the columns of ``rows`` (R, N * m) that kernel offset ``k`` of the dense layout must
    not read: outside the input, or outside the real output."""
    grid = rows.view()
    grid.shape = rows.shape[:1] + (n,) + p.grid  # raises rather than copy
    for axis, ((start, stop), size) in enumerate(zip(p.valid[k], p.grid), start=2):
        lead = (slice(None),) * axis
        if start > 0:
            grid[lead + (slice(0, start),)] = 0
        if stop < size:
            grid[lead + (slice(stop, None),)] = 0


# ------------------------------------------------------------------------------------ kernels


def im2col(x: np.ndarray, p: Plan, groups: int) -> np.ndarray:
    """Columns of ``x``: (groups, Cg * prod(kernel), N * m), in a scratch buffer of this plan.

    The weight gradient needs the columns its forward pass built. Rebuilding them costs a
    quarter of the matmul, so each buffer remembers (a copy of) the input it was built from:
    when the same values come again, the columns are returned as they are."""
    n, c = x.shape[:2]
    cols = scratch("cols", (groups, c // groups * math.prod(p.kernel), n * p.m), x.dtype, key=p)
    memo = _local.__dict__.setdefault("memo", OrderedDict())
    key = (p, cols.shape, cols.dtype)
    seen = memo.pop(key, None)
    bits = _UINT.get(x.dtype.itemsize) if x.flags.c_contiguous else None
    if seen is not None and seen[0]() is cols and bits is not None:
        if np.array_equal(seen[1].view(bits), x.view(bits)):
            memo[key] = seen
            return cols
    _fill_columns(cols, x, p, groups)
    if bits is not None:
        # the copy is scratch of this plan and column shape too, kept between calls as the
        # columns are: a fresh one per miss would be allocated (and the oldest of the memo's
        # dropped) within every call of a step with more geometries than the memo holds,
        # memory the planner does not see
        snapshot = scratch("im2col input", x.shape, x.dtype, key=(p, cols.shape))
        np.copyto(snapshot, x)
        memo[key] = (weakref.ref(cols), snapshot)
        while len(memo) > _MEMO_ENTRIES:
            memo.popitem(last=False)
    return cols


def _fill_columns(cols: np.ndarray, x: np.ndarray, p: Plan, groups: int) -> None:
    n, c = x.shape[:2]
    cg = c // groups
    kk = math.prod(p.kernel)
    if p.layout == "dense":
        xt = _dense_input(x, p)
        per_offset = cols.reshape(c, kk, n * p.m)
        for k, off in enumerate(p.offsets):
            start = p.margin[0] + off
            np.copyto(per_offset[:, k], xt[:, start : start + n * p.m])
            _zero_invalid(per_offset[:, k], p, k, n)
        return
    xp = _padded_input(x, p)
    if p.layout == "flat":
        sn, sc, s1 = xp.strides
        plane = tuple(math.prod(p.padded[i + 1 :]) * s1 for i in range(len(p.padded)))
        shape = (groups, cg) + p.kernel + (n, p.m)
        strides = (cg * sc, sc) + tuple(d * f for d, f in zip(p.dilation, plane)) + (sn, s1)
    else:
        sn, sc, *ss = xp.strides
        shape = (groups, cg) + p.kernel + (n,) + p.out_size
        strides = (
            (cg * sc, sc)
            + tuple(d * s for d, s in zip(p.dilation, ss))
            + (sn,)
            + tuple(st * s for st, s in zip(p.stride, ss))
        )
    np.copyto(cols.reshape(shape), as_strided(xp, shape, strides, writeable=False))
    if p.layout == "flat" and p.grid != p.out_size:
        _zero_garbage(cols, p, n)


def _grid_to_nchw(y: np.ndarray, p: Plan, n: int, out: np.ndarray) -> None:
    """Copy (groups, Cg, N * m) into ``out`` (N, groups * Cg, *out_size), cropping the
    garbage columns."""
    g, cg = y.shape[:2]
    grid = y.reshape((g, cg, n) + p.grid)
    if p.grid != p.out_size:
        grid = grid[(slice(None),) * 3 + _crop(p)]
    axes = (2, 0, 1) + tuple(range(3, grid.ndim))
    np.copyto(out.reshape((n, g, cg) + p.out_size), grid.transpose(axes))


def _nchw_to_grid(gy: np.ndarray, p: Plan, groups: int) -> np.ndarray:
    """(N, Cout, *out_size) -> (groups, Cout/groups, N * m) in a scratch buffer; the garbage
    columns are zero."""
    n, cout = gy.shape[:2]
    cog = cout // groups
    src = gy.reshape((n, groups, cog) + p.out_size)
    src = src.transpose((1, 2, 0) + tuple(range(3, src.ndim)))
    garbage = p.grid != p.out_size  # keyed by the plan, the garbage columns stay zero
    buf = scratch("gygrid", (groups, cog, n * p.m), gy.dtype, 0 if garbage else None, p)
    buf.reshape((groups, cog, n) + p.grid)[(slice(None),) * 3 + _crop(p)] = src
    return buf


def _per_sample(p: Plan, groups: int, rows: int, cout: int) -> bool:
    """Whether to run the matmul once per sample, on the NC* layout of the output (gradient):
    with few column rows (a first layer) the output is larger than the columns, and the copy
    that moves it between layouts costs more than one matmul per sample loses."""
    return groups == 1 and p.grid == p.out_size and rows < cout


def _sample_major(cols: np.ndarray, n: int, m: int) -> np.ndarray:
    """(rows, N * m) columns as a (N, rows, m) view."""
    return cols.reshape(cols.shape[0], n, m).transpose(1, 0, 2)


def conv_forward(x: np.ndarray, w: np.ndarray, p: Plan, groups: int) -> np.ndarray:
    """y = conv(x, w): im2col, one matmul per group, one copy into the NC* output."""
    n = x.shape[0]
    cout = w.shape[0]
    cols = im2col(x, p, groups)
    if _per_sample(p, groups, cols.shape[1], cout):
        # (N, Cout, m) is the NC* output already: no transposing copy
        out = np.matmul(w.reshape(cout, -1), _sample_major(cols[0], n, p.m))
        return out.reshape((n, cout) + p.out_size)
    wg = w.reshape(groups, cout // groups, -1)
    y = scratch("y", (groups, cout // groups, n * p.m), cols.dtype)
    np.matmul(wg, cols, out=y)
    out = np.empty((n, cout) + p.out_size, cols.dtype)
    _grid_to_nchw(y, p, n, out)
    return out


def conv_input_grad(gy: np.ndarray, w: np.ndarray, p: Plan, groups: int) -> np.ndarray:
    """The adjoint of `conv_forward` in x (a transposed convolution): matmul, then col2im."""
    n = gy.shape[0]
    cout, cg = w.shape[:2]
    kk = math.prod(p.kernel)
    grid = _nchw_to_grid(gy, p, groups)
    wt = w.reshape(groups, cout // groups, cg * kk).transpose(0, 2, 1)
    gcols = scratch("gcols", (groups, cg * kk, n * p.m), grid.dtype)
    np.matmul(wt, grid, out=gcols)
    if p.layout == "dense":
        return _dense_col2im(gcols, p, n)
    if p.flat_len:
        if p.grid != p.out_size:  # (a non-finite weight times their zero gradient)
            _zero_garbage(gcols, p, n)
        acc = scratch("acc", (groups, cg, n, p.flat_len), grid.dtype)
        parts = gcols.reshape(groups, cg, kk, n, p.m)
        # the first kernel offset is 0: assign its part instead of clearing and adding
        np.copyto(acc[..., : p.m], parts[:, :, 0])
        acc[..., p.m :] = 0
        for k, off in enumerate(p.offsets[1:], start=1):
            acc[..., off : off + p.m] += parts[:, :, k]
        plane = acc[..., : math.prod(p.padded)].reshape((groups, cg, n) + p.padded)
    else:
        plane = scratch("acc", (groups, cg, n) + p.padded, grid.dtype)
        plane.fill(0)
        parts = gcols.reshape((groups, cg, kk, n) + p.out_size)
        for k, idx in enumerate(np.ndindex(*p.kernel)):
            window = tuple(
                slice(i * d, i * d + (o - 1) * s + 1, s)
                for i, d, o, s in zip(idx, p.dilation, p.out_size, p.stride)
            )
            plane[(Ellipsis,) + window] += parts[:, :, k]
    source = source_region(p)
    covered = all(sl.stop == s for sl, s in zip(source[2:], p.in_size))
    # input positions that no window reads get a zero gradient
    out = (np.empty if covered else np.zeros)((n, groups * cg) + p.in_size, grid.dtype)
    inner = plane[(slice(None),) * 3 + interior(p)]
    target = out.reshape((n, groups, cg) + p.in_size)[(slice(None),) + source]
    np.copyto(target, inner.transpose((2, 0, 1) + tuple(range(3, inner.ndim))))
    return out


def _dense_col2im(gcols: np.ndarray, p: Plan, n: int) -> np.ndarray:
    """The dense layout's col2im: each kernel offset's part, its invalid columns zeroed, added
    at its offset; then the (C, N, *in_size) sum transposed into the NC* gradient."""
    c = gcols.shape[0] * gcols.shape[1] // len(p.offsets)
    size = n * p.m
    before, after = p.margin
    # the margins receive only zeros and are never read
    acc = scratch("dense_acc", (c, before + size + after), gcols.dtype, fill=0, key=p)
    inner = acc[:, before : before + size]
    parts = gcols.reshape(c, len(p.offsets), size)
    # an offset of 0 covers the whole input: assign its part instead of clearing and adding
    order = sorted(range(len(p.offsets)), key=lambda k: p.offsets[k] != 0)
    if p.offsets[order[0]] != 0:
        inner.fill(0)
    for k in order:
        _zero_invalid(parts[:, k], p, k, n)
        if k == order[0] and p.offsets[k] == 0:
            np.copyto(inner, parts[:, k])
        else:
            start = before + p.offsets[k]
            acc[:, start : start + size] += parts[:, k]
    out = np.empty((n, c) + p.in_size, gcols.dtype)
    np.copyto(out.reshape(n, c, p.m), inner.reshape(c, n, p.m).transpose(1, 0, 2))
    return out


def conv_weight_grad(x: np.ndarray, gy: np.ndarray, p: Plan, groups: int) -> np.ndarray:
    """The adjoint of `conv_forward` in w: one matmul of the output gradient by the columns."""
    cout = gy.shape[1]
    cols = im2col(x, p, groups)
    if _per_sample(p, groups, cols.shape[1], cout):
        n = x.shape[0]
        per_sample = np.matmul(
            gy.reshape(n, cout, p.m), _sample_major(cols[0], n, p.m).transpose(0, 2, 1)
        )
        return per_sample.sum(axis=0).reshape((cout, x.shape[1]) + p.kernel)
    grid = _nchw_to_grid(gy, p, groups)
    gw = np.matmul(grid, cols.transpose(0, 2, 1))
    return gw.reshape((cout, x.shape[1] // groups) + p.kernel)
