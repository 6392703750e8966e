"""NumPy kernels of the convolution family (see ops/conv.py): im2col through strided views, one
BLAS matmul per call (batched over groups), col2im through shifted adds.

Layout. Every matmul works on "column" matrices of shape (groups, rows, N * M): rows are the
(channel, kernel offset) pairs of one group, columns the batch times the output positions. One
large matmul per group is markedly faster than N small ones, and it leaves the batch inside the
columns, so the NCHW output is assembled by one copy that also transposes.

Two ways to enumerate output positions (`Plan.flat`):

* general: M = prod(out_size); the im2col view has the output grid as its innermost dimensions.
* flat (all strides 1, more column rows than output channels: the common case): the padded
  spatial dimensions are flattened, and output
  position o reads input position ``base(o) + offset(k)`` for kernel offset k. Over an
  *extended* grid (rows of the full padded width; the extra columns are garbage, cropped from
  the output and zero in gradients) every kernel offset is one contiguous slice, so im2col copies
  and col2im adds run over long contiguous rows instead of rows of a few elements. It costs
  ``padded_width / out_width`` extra matmul work, so it is chosen only when that is small.

Scratch buffers (padded inputs, columns, accumulators) come from a small per-thread cache keyed by
shape: allocating a fresh multi-megabyte array per call costs page faults comparable to the
matmul itself. Kernels never return a view of a scratch buffer.
"""

from __future__ import annotations

import functools
import math
import threading
from collections import OrderedDict
from typing import NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .. import dtypes as dt

# the flat layout is used when it adds at most this much matmul work (garbage columns)
_FLAT_MAX_WASTE = 1.5

# ------------------------------------------------------------------------------- scratch space

_SCRATCH_LIMIT_BYTES = 256 * 2**20
_SCRATCH_LIMIT_ENTRIES = 32
_local = threading.local()


def scratch(tag: str, shape: tuple, dtype, fill=None, key=()) -> np.ndarray:
    """A reusable work array. With ``fill``, the array is created filled with that value and the
    caller promises to write only the region that ``key`` determines, so the rest keeps ``fill``
    (the zero border of a padded input, for example)."""
    cache = getattr(_local, "cache", None)
    if cache is None:
        cache = _local.cache = OrderedDict()
    dtype = np.dtype(dtype)
    k = (tag, shape, dtype, fill, key)
    buf = cache.get(k)
    if buf is not None:
        cache.move_to_end(k)
        return buf
    buf = np.empty(shape, dtype) if fill is None else np.full(shape, fill, dtype)
    cache[k] = buf
    total = sum(b.nbytes for b in cache.values())
    while cache and (total > _SCRATCH_LIMIT_BYTES or len(cache) > _SCRATCH_LIMIT_ENTRIES):
        _, old = cache.popitem(last=False)
        total -= old.nbytes
    return buf


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """Half-precision types are computed in float32 (NumPy has no fast half matmul)."""
    if dtype in (dt.float16.np, dt.bfloat16.np):
        return np.dtype(np.float32)
    return dtype


# ------------------------------------------------------------------------------------ geometry


def conv_out_size(in_size, kernel, stride, padding, dilation) -> tuple:
    """Output size of a convolution per spatial dimension (may be < 1 for invalid inputs)."""
    return tuple(
        (s + lo + hi - d * (k - 1) - 1) // st + 1
        for s, k, st, (lo, hi), d in zip(in_size, kernel, stride, padding, dilation)
    )


class Plan(NamedTuple):
    in_size: tuple
    kernel: tuple
    stride: tuple
    lo: tuple  # padding before each spatial dimension
    dilation: tuple
    out_size: tuple
    padded: tuple  # spatial size of the padded input (only the padding that is read)
    flat: bool
    m: int  # output positions per sample (extended grid for the flat layout)
    flat_len: int  # flat layout: length of one padded plane plus read-ahead slack
    offsets: tuple  # flat layout: offset of each kernel position in the flat plane


@functools.lru_cache(maxsize=512)
def plan(in_size, kernel, stride, padding, dilation, rows: int = 1, out_rows: int = 1) -> Plan:
    """The layout for a convolution; ``rows`` = (input channels per group) * prod(kernel), the
    height of the column matrix, and ``out_rows`` = output channels per group."""
    out = conv_out_size(in_size, kernel, stride, padding, dilation)
    lo = tuple(p[0] for p in padding)
    # a negative high padding crops: nothing past the last window is ever read
    padded = tuple(
        min(s + lo_ + max(hi, 0), (o - 1) * st + d * (k - 1) + 1)
        for s, lo_, (_, hi), o, st, d, k in zip(in_size, lo, padding, out, stride, dilation, kernel)
    )
    strides = tuple(math.prod(padded[i + 1 :]) for i in range(len(padded)))
    waste = math.prod(padded[1:]) / max(math.prod(out[1:]), 1)
    # the flat layout saves on im2col (cost ~ rows) but its output and gradient copies crop
    # short rows (cost ~ out_rows): with few column rows (a first layer) the general one wins
    flat = all(s == 1 for s in stride) and waste <= _FLAT_MAX_WASTE and rows >= out_rows
    if flat:
        m = out[0] * strides[0]
        offsets = tuple(
            sum(i * d * f for i, d, f in zip(idx, dilation, strides)) for idx in np.ndindex(*kernel)
        )
        slack = sum(d * (k - 1) * f for d, k, f in zip(dilation[1:], kernel[1:], strides[1:]))
        flat_len = math.prod(padded) + slack
    else:
        m, offsets, flat_len = math.prod(out), (), 0
    return Plan(in_size, kernel, stride, lo, dilation, out, padded, flat, m, flat_len, offsets)


def _interior(p: Plan) -> tuple:
    """Index of the unpadded input inside the padded one (spatial dimensions)."""
    return tuple(slice(lo, min(lo + s, n)) for lo, s, n in zip(p.lo, p.in_size, p.padded))


def _source(p: Plan) -> tuple:
    """The part of the input that lands inside the padded buffer (all of it unless the padded
    extent stops early: trailing rows no window reads, or a negative high padding)."""
    return (slice(None), slice(None)) + tuple(
        slice(0, min(s, n - lo)) for lo, s, n in zip(p.lo, p.in_size, p.padded)
    )


def _padded_input(x: np.ndarray, p: Plan) -> np.ndarray:
    """``x`` padded with zeros: (N, C, *padded) for the general layout, (N, C, flat_len) for the
    flat one. Returns ``x`` itself when no copy is needed."""
    n, c = x.shape[:2]
    exact = p.padded == p.in_size and not any(p.lo)
    if not p.flat:
        if exact:
            return x
        buf = scratch("xpad", (n, c) + p.padded, x.dtype, fill=0, key=p)
        buf[(slice(None), slice(None)) + _interior(p)] = x[_source(p)]
        return buf
    if exact and p.flat_len == math.prod(p.padded) and x.flags.c_contiguous:
        return x.reshape(n, c, p.flat_len)
    buf = scratch("xflat", (n, c, p.flat_len), x.dtype, fill=0, key=p)
    plane = buf[:, :, : math.prod(p.padded)].reshape((n, c) + p.padded)
    plane[(slice(None), slice(None)) + _interior(p)] = x[_source(p)]
    return buf


def _ext_shape(p: Plan) -> tuple:
    """The flat layout's extended output grid: the first dimension, then full padded rows."""
    return (p.out_size[0],) + p.padded[1:]


def _crop(p: Plan) -> tuple:
    return tuple(slice(0, o) for o in p.out_size[1:])


# ------------------------------------------------------------------------------------ kernels


def im2col(x: np.ndarray, p: Plan, groups: int) -> np.ndarray:
    """Columns of ``x``: (groups, Cg * prod(kernel), N * m), in a scratch buffer."""
    n, c = x.shape[:2]
    cg = c // groups
    xp = _padded_input(x, p)
    if p.flat:
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
    view = as_strided(xp, shape, strides, writeable=False)
    cols = scratch("cols", (groups, cg * math.prod(p.kernel), n * p.m), xp.dtype)
    np.copyto(cols.reshape(shape), view)
    return cols


def _grid_to_nchw(y: np.ndarray, p: Plan, n: int, out: np.ndarray) -> None:
    """Copy (groups, Cg, N * m) into ``out`` (N, groups * Cg, *out_size), cropping the flat
    layout's garbage columns."""
    g, cg = y.shape[:2]
    if p.flat:
        grid = y.reshape((g, cg, n) + _ext_shape(p))[(Ellipsis, slice(None)) + _crop(p)]
    else:
        grid = y.reshape((g, cg, n) + p.out_size)
    axes = (2, 0, 1) + tuple(range(3, grid.ndim))
    np.copyto(out.reshape((n, g, cg) + p.out_size), grid.transpose(axes))


def _nchw_to_grid(gy: np.ndarray, p: Plan, groups: int) -> np.ndarray:
    """(N, Cout, *out_size) -> (groups, Cout/groups, N * m) in a scratch buffer; the flat
    layout's garbage columns are zero."""
    n, cout = gy.shape[:2]
    cog = cout // groups
    src = gy.reshape((n, groups, cog) + p.out_size)
    src = src.transpose((1, 2, 0) + tuple(range(3, src.ndim)))
    if p.flat:
        buf = scratch("gygrid", (groups, cog, n * p.m), gy.dtype, fill=0, key=p)
        grid = buf.reshape((groups, cog, n) + _ext_shape(p))
        grid[(Ellipsis, slice(None)) + _crop(p)] = src
    else:
        buf = scratch("gygrid", (groups, cog, n * p.m), gy.dtype)
        buf.reshape((groups, cog, n) + p.out_size)[...] = src
    return buf


def conv_forward(x: np.ndarray, w: np.ndarray, p: Plan, groups: int) -> np.ndarray:
    """y = conv(x, w): im2col, one matmul per group, one copy into the NC* output."""
    n = x.shape[0]
    cout = w.shape[0]
    cols = im2col(x, p, groups)
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
    if p.flat:
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
    source = _source(p)
    covered = all(sl.stop == s for sl, s in zip(source[2:], p.in_size))
    # input positions that no window reads get a zero gradient
    out = (np.empty if covered else np.zeros)((n, groups * cg) + p.in_size, grid.dtype)
    inner = plane[(slice(None),) * 3 + _interior(p)]
    target = out.reshape((n, groups, cg) + p.in_size)[(slice(None),) + source]
    np.copyto(target, inner.transpose((2, 0, 1) + tuple(range(3, inner.ndim))))
    return out


def conv_weight_grad(x: np.ndarray, gy: np.ndarray, p: Plan, groups: int) -> np.ndarray:
    """The adjoint of `conv_forward` in w: one matmul of the output gradient by the columns."""
    cout = gy.shape[1]
    cols = im2col(x, p, groups)
    grid = _nchw_to_grid(gy, p, groups)
    gw = np.matmul(grid, cols.transpose(0, 2, 1))
    return gw.reshape((cout, x.shape[1] // groups) + p.kernel)
