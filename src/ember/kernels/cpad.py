"""Reflect, replicate and circular padding in C, and its adjoint (ops/pad.py's ``pad`` and
``pad_backward`` for those modes), row by row over ember's thread pool.

The NumPy kernels copy the middle and then each border as strided slice copies, axis by axis
(a border of the last axis three elements wide is a copy of three-element pieces), and the
adjoint adds the borders back with one slice addition per padded position: 2-3x PyTorch's time
on a 4-D activation. Here each output row (the last axis) is one pass: its source row found
through every leading axis's table of copied positions (ops/pad.py's ``_source_index``), the
middle one ``memcpy``, the borders read through the last axis's table. A copy, so NumPy's bits,
for any dtype (one library per element size).

The adjoint, float32 and float64 only, sums in the NumPy kernel's order, so its bits too: that
kernel reduces axis by axis from the first, each result starting from the interior's copy and
receiving the padded positions that copy it in increasing order; a result row here is that
nesting evaluated recursively (the last leading axis outermost), into one scratch row per axis,
then the last axis's borders added in the same order.

Adjacent unpadded axes are merged first (a contiguous array's reshape), so a 4-D (N, C, H, W)
padded on H and W is rows of W over tables of (N C, H). Returns None where it does not apply (no
compiler, another dtype for the adjoint) and the caller runs NumPy.
"""

from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from .cstep import data_address

__all__ = ["pad", "pad_backward"]

_SOURCE = r"""
#include <stdlib.h>
#include <string.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);

/* m leading axes (out/in sizes, and the copied input position of each output position along
   each, concatenated), then the last axis: n input, w output positions, lo before */
struct job {
  const T *x;
  T *y;
  int m;
  const long *out_shape, *in_shape, *tables;
  const long *last; /* the last axis's table */
  long n, w, lo;
};

static void copy_rows(void *job_, long lo_row, long hi_row) {
  const struct job *j = job_;
  long n = j->n, w = j->w, lo = j->lo;
  for (long r = lo_row; r < hi_row; r++) {
    /* the source row: each leading coordinate through its table, from the last axis up */
    long rest = r, src = 0, stride = 1;
    const long *table = j->tables;
    for (int a = 0; a < j->m; a++) table += j->out_shape[a];
    for (int a = j->m - 1; a >= 0; a--) {
      table -= j->out_shape[a];
      long o = rest % j->out_shape[a];
      rest /= j->out_shape[a];
      src += table[o] * stride;
      stride *= j->in_shape[a];
    }
    const T *xr = j->x + src * n;
    T *yr = j->y + r * w;
    for (long k = 0; k < lo; k++) yr[k] = xr[j->last[k]];
    memcpy(yr + lo, xr, sizeof(T) * n);
    for (long k = lo + n; k < w; k++) yr[k] = xr[j->last[k]];
  }
}

void ember_pad(const T *x, T *y, int m, const long *out_shape, const long *in_shape,
               const long *tables, const long *last, long n, long w, long lo, long rows,
               ember_pool pool, long parallel_min) {
  struct job j = {x, y, m, out_shape, in_shape, tables, last, n, w, lo};
  if (pool && rows > 1 && rows * w >= parallel_min) pool(copy_rows, &j, rows, 1);
  else copy_rows(&j, 0, rows);
}
"""

_ADJOINT = r"""
#include <stdlib.h>
#include <string.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);

struct job {
  const T *g;
  T *y;
  int m;
  const long *out_shape, *in_shape, *lows, *tables;
  const long *last;
  long n, w, lo;
  int *failed;
};

/* The gradient's rows summed over leading axes 0..k as the NumPy kernel's stages do, at the
   result coordinates h[0..k] and the gradient's coordinates o[k+1..m-1], into dst (w values):
   the interior's row first, then each padded position copying h[k], in increasing order. */
static void stage(const struct job *j, int k, const long *h, long *o, const long *table_at,
                  T *dst, T *scratch) {
  if (k < 0) {
    long row = 0;
    for (int a = 0; a < j->m; a++) row = row * j->out_shape[a] + o[a];
    memcpy(dst, j->g + row * j->w, sizeof(T) * j->w);
    return;
  }
  long size = j->out_shape[k], lo = j->lows[k], n = j->in_shape[k];
  const long *table = j->tables + table_at[k];
  o[k] = lo + h[k];
  stage(j, k - 1, h, o, table_at, dst, scratch);
  T *term = scratch + k * j->w;
  for (int side = 0; side < 2; side++) { /* the positions before the interior, then after */
    long from = side ? lo + n : 0, to = side ? size : lo;
    for (long p = from; p < to; p++) {
      if (table[p] != h[k]) continue;
      o[k] = p;
      stage(j, k - 1, h, o, table_at, term, scratch);
      for (long q = 0; q < j->w; q++) dst[q] += term[q];
    }
  }
}

static void rows(void *job_, long lo_row, long hi_row) {
  const struct job *j = job_;
  int m = j->m;
  long h[64], o[64], table_at[64];
  T *scratch = malloc(sizeof(T) * j->w * (m + 1));
  if (!scratch) { /* (rows left unwritten: the call reports it) */
    __atomic_store_n(j->failed, 1, __ATOMIC_RELAXED);
    return;
  }
  T *row = scratch + m * j->w;
  long at = 0;
  for (int a = 0; a < m; a++) {
    table_at[a] = at;
    at += j->out_shape[a];
  }
  for (long r = lo_row; r < hi_row; r++) {
    long rest = r;
    for (int a = m - 1; a >= 0; a--) {
      h[a] = rest % j->in_shape[a];
      rest /= j->in_shape[a];
    }
    stage(j, m - 1, h, o, table_at, row, scratch);
    T *yr = j->y + r * j->n;
    memcpy(yr, row + j->lo, sizeof(T) * j->n);
    for (long p = 0; p < j->lo; p++) yr[j->last[p]] += row[p];
    for (long p = j->lo + j->n; p < j->w; p++) yr[j->last[p]] += row[p];
  }
  free(scratch);
}

int ember_pad_backward(const T *g, T *y, int m, const long *out_shape, const long *in_shape,
                       const long *lows, const long *tables, const long *last, long n, long w,
                       long lo, long rows_, ember_pool pool, long parallel_min) {
  int failed = 0;
  struct job j = {g, y, m, out_shape, in_shape, lows, tables, last, n, w, lo, &failed};
  if (pool && rows_ > 1 && rows_ * w >= parallel_min) pool(rows, &j, rows_, 1);
  else rows(&j, 0, rows_);
  return failed;
}
"""

# an element size's C type for copies (16 bytes: a pair of doubles, complex128)
_COPY_TYPES = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long"}
_SUM_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-ffp-contract=off", "-std=gnu11")
_P, _L, _I = ctypes.c_void_p, ctypes.c_long, ctypes.c_int
# (leading axes a result row is decoded over: the adjoint's fixed coordinate arrays)
_MAX_AXES = 64


@functools.cache
def _copy_function(itemsize: int):
    from . import ccompile, cpool

    if not ccompile.compiler_available():
        return None
    if itemsize == 16:
        source = "typedef struct { double re, im; } T;\n"
    elif itemsize in _COPY_TYPES:
        source = f"typedef {_COPY_TYPES[itemsize]} T;\n"
    else:
        return None
    args = [_P, _P, _I, _P, _P, _P, _P, _L, _L, _L, _L, _P, _L]
    try:
        fn = ccompile.load(source + _SOURCE, "ember_pad", args, flags=_FLAGS)
    except ccompile.CompileError:
        return None
    return fn, cpool.parallel_for()


@functools.cache
def _adjoint_function(dtype: np.dtype):
    from . import ccompile, cpool

    if dtype not in _SUM_TYPES or not ccompile.compiler_available():
        return None
    source = f"typedef {_SUM_TYPES[dtype]} T;\n"
    args = [_P, _P, _I, _P, _P, _P, _P, _P, _L, _L, _L, _L, _P, _L]
    try:
        fn = ccompile.load(source + _ADJOINT, "ember_pad_backward", args, flags=_FLAGS)
    except ccompile.CompileError:
        return None
    fn.restype = ctypes.c_int
    return fn, cpool.parallel_for()


def _merged(in_shape, pads):
    """Adjacent unpadded axes as one (their sizes multiplied), for a contiguous array: the
    shape and pads the kernels see."""
    shape, merged = [], []
    for n, (lo, hi) in zip(in_shape, pads):
        if merged and not (lo or hi) and not any(merged[-1]):
            shape[-1] *= n
        else:
            shape.append(n)
            merged.append((lo, hi))
    return tuple(shape), tuple(merged)


def _tables(in_shape, pads, mode, source_index):
    """The leading axes' output sizes, input sizes, lows and concatenated tables (int64, as C's
    long), and the last axis's table."""
    tables = [source_index(n, lo, hi, mode) for n, (lo, hi) in zip(in_shape, pads)]
    lead = tables[:-1]
    out_shape = np.array([len(t) for t in lead], np.int64)
    lows = np.array([lo for lo, _ in pads[:-1]], np.int64)
    concat = np.ascontiguousarray(np.concatenate(lead) if lead else np.zeros(0), np.int64)
    return out_shape, lows, concat, np.ascontiguousarray(tables[-1], np.int64)


def _ready(in_shape, pads, mode):
    """Whether the shapes suit the kernels: a non-constant mode, no empty axis, at most
    `_MAX_AXES` leading axes once merged, and longs of 64 bits."""
    return (
        mode != "constant"
        and all(in_shape)
        and len(in_shape) - 1 <= _MAX_AXES
        and ctypes.sizeof(ctypes.c_long) == 8
    )


def pad(x: np.ndarray, pads, mode: str, source_index) -> np.ndarray | None:
    """``x`` padded (ops/pad.py's pads and non-constant mode; ``source_index(n, lo, hi, mode)``
    its table of copied positions), or None."""
    if x.ndim == 0 or not _ready(x.shape, pads, mode):
        return None
    found = _copy_function(x.dtype.itemsize)
    if found is None:
        return None
    fn, pool = found
    from .cfuse import PARALLEL_MIN

    out_full = tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, pads))
    shape, merged = _merged(x.shape, pads)
    x = np.ascontiguousarray(x).reshape(shape)
    out_shape, _, tables, last = _tables(shape, merged, mode, source_index)
    in_lead = np.array(shape[:-1], np.int64)
    y = np.empty(out_full, x.dtype)
    rows = math.prod(int(s) for s in out_shape)
    n, lo = shape[-1], merged[-1][0]
    fn(data_address(x), data_address(y), len(shape) - 1, data_address(out_shape),
       data_address(in_lead), data_address(tables), data_address(last), n, len(last), lo,
       rows, pool, PARALLEL_MIN)  # fmt: skip
    return y


def pad_backward(g: np.ndarray, pads, mode: str, in_shape, source_index) -> np.ndarray | None:
    """The adjoint of ``pad`` (the padded positions' gradients summed into the positions they
    copy, in the NumPy kernel's order), or None."""
    if g.ndim == 0 or not _ready(in_shape, pads, mode):
        return None
    found = _adjoint_function(g.dtype)
    if found is None:
        return None
    fn, pool = found
    from .cfuse import PARALLEL_MIN

    shape, merged = _merged(in_shape, pads)
    out_shape, lows, tables, last = _tables(shape, merged, mode, source_index)
    g = np.ascontiguousarray(g)
    in_lead = np.array(shape[:-1], np.int64)
    y = np.empty(tuple(in_shape), g.dtype)
    rows = math.prod(shape[:-1])
    n, lo = shape[-1], merged[-1][0]
    failed = fn(data_address(g), data_address(y), len(shape) - 1, data_address(out_shape),
                data_address(in_lead), data_address(lows), data_address(tables),
                data_address(last), n, len(last), lo, rows, pool, PARALLEL_MIN)  # fmt: skip
    return None if failed else y
