"""Linear interpolation along one axis in C, the fast rules of ops/resample.py's two ops, one
pass each where their NumPy kernels take five:

* `resample(x, i0, i1, w0, w1, axis)`: ``take(x, i0) * w0 + take(x, i1) * w1`` along ``axis``,
  each product rounded to x's dtype, then the sum (the NumPy kernel's three roundings, in
  order; ``-ffp-contract=off`` keeps the compiler from fusing them into a multiply-add);
* `resample_backward(g, i0, i1, w0, w1, axis, size)`: zeros with ``g * w0``'s slices added at
  ``i0``, plus (a second sum, added last) ``g * w1``'s at ``i1``. Each result element starts at
  +0.0 and receives its slices in increasing order of the tap, as the NumPy kernel's
  ``add_slices`` sums them (ops/_scatter_kernels.py: a sparse product, or ``np.add.at``), so
  the two agree bit for bit: the taps that land on each input position are listed once per
  call (a counting sort of the indices, stable) and each input row sums its own.

Half precision (bfloat16, float16) computes each operation in float and rounds it to 16 bits
(kernels/chalf.py's conversions), as NumPy's arithmetic on ml_dtypes' arrays does: the same
bits too. The array is read as (outer, n, inner) around the axis; rows of ``outer`` are shared
over ember's thread pool (kernels/cpool.py) where there is enough work. Both return None where
they do not apply (no compiler, another dtype, an index out of range: NumPy then raises its
error) and the op runs its NumPy kernel.
"""

from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from . import chalf
from .axes import kernel_axis
from .cstep import data_address

__all__ = ["resample", "resample_backward"]

_C = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}

_SOURCE = r"""
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
#ifndef HALF
#define S T
#define LD(v) (v)
#define ST(v) (v)
#endif

struct job {
  const S *x;          /* forward: the values (outer, n, inner); backward: g (outer, m, inner) */
  const long long *i0, *i1;
  const S *w0, *w1;
  S *y;                /* forward: (outer, m, inner); backward: (outer, n, inner) */
  const long *start0, *taps0, *start1, *taps1; /* backward: the taps landing on each row */
  long n, m, inner;
};

static void forward(void *ctx, long lo, long hi) {
  const struct job *j = ctx;
  long n = j->n, m = j->m, inner = j->inner;
  if (inner == 1) { /* the last axis: a gather per tap, vectorized along the taps */
    const long long *i0 = j->i0, *i1 = j->i1;
    const S *w0 = j->w0, *w1 = j->w1;
    for (long o = lo; o < hi; o++) {
      const S *x = j->x + o * n;
      S *y = j->y + o * m;
      for (long k = 0; k < m; k++) {
        T p = LD(ST(LD(x[i0[k]]) * LD(w0[k]))), q = LD(ST(LD(x[i1[k]]) * LD(w1[k])));
        y[k] = ST(p + q);
      }
    }
    return;
  }
  for (long o = lo; o < hi; o++) {
    const S *x = j->x + o * n * inner;
    S *y = j->y + o * m * inner;
    for (long k = 0; k < m; k++) {
      const S *a = x + j->i0[k] * inner, *b = x + j->i1[k] * inner;
      T wa = LD(j->w0[k]), wb = LD(j->w1[k]);
      S *out = y + k * inner;
      for (long i = 0; i < inner; i++) {
        T p = LD(ST(LD(a[i]) * wa)), q = LD(ST(LD(b[i]) * wb));
        out[i] = ST(p + q);
      }
    }
  }
}

/* columns [c, c + len) of row r of the result's slab: +0.0, then each tap's g * w added in
   the order of the list */
static void sum_taps(const struct job *j, const S *g, S *row, const long *start,
                     const long *taps, const S *w, long r, long c, long len) {
  long inner = j->inner;
  for (long i = 0; i < len; i++) row[i] = ST((T)0);
  for (long t = start[r]; t < start[r + 1]; t++) {
    long k = taps[t];
    const S *src = g + k * inner + c;
    T wk = LD(w[k]);
    for (long i = 0; i < len; i++) row[i] = ST(LD(row[i]) + LD(ST(LD(src[i]) * wk)));
  }
}

#define BLOCK 512
/* narrow rows (the last axis: one element each) whose slab fits SCATTER: the taps scattered
   in increasing order into the result and a second slab, each element receiving its taps in
   the lists' order, without the lists' per-row loops */
#define SCATTER 2048
static void scatter_taps(const struct job *j, const S *g, S *y, S *second) {
  long n = j->n, m = j->m, inner = j->inner;
  for (long i = 0; i < n * inner; i++) y[i] = second[i] = ST((T)0);
  for (long k = 0; k < m; k++) {
    const S *src = g + k * inner;
    S *a = y + j->i0[k] * inner, *b = second + j->i1[k] * inner;
    T wa = LD(j->w0[k]), wb = LD(j->w1[k]);
    for (long i = 0; i < inner; i++) {
      a[i] = ST(LD(a[i]) + LD(ST(LD(src[i]) * wa)));
      b[i] = ST(LD(b[i]) + LD(ST(LD(src[i]) * wb)));
    }
  }
  for (long i = 0; i < n * inner; i++) y[i] = ST(LD(y[i]) + LD(second[i]));
}

/* the last axis (one element per row): V rows of the outer dimension at a time, their
   gradient rows first transposed into a block (m, V), so each position's taps are summed
   along the V rows in vector registers */
#define V 16
#define TAPS 512
static inline __attribute__((always_inline)) void sum_last(const struct job *j, const S *gt,
                                                          long stride, long nv, long r, S *a,
                                                          S *b) {
  for (long v = 0; v < V; v++) a[v] = b[v] = ST((T)0);
  for (long t = j->start0[r]; t < j->start0[r + 1]; t++) {
    long k = j->taps0[t];
    T w = LD(j->w0[k]);
    const S *src = gt + k * stride;
    for (long v = 0; v < nv; v++) a[v] = ST(LD(a[v]) + LD(ST(LD(src[v]) * w)));
  }
  for (long t = j->start1[r]; t < j->start1[r + 1]; t++) {
    long k = j->taps1[t];
    T w = LD(j->w1[k]);
    const S *src = gt + k * stride;
    for (long v = 0; v < nv; v++) b[v] = ST(LD(b[v]) + LD(ST(LD(src[v]) * w)));
  }
}

static void backward_last(const struct job *j, long lo, long hi) {
  long n = j->n, m = j->m;
  S gt[TAPS * V];
  for (long o = lo; o < hi; o += V) {
    long nv = hi - o < V ? hi - o : V;
    const S *g = j->x + o * m;
    S *y = j->y + o * n;
    for (long r = 0; r < n; r++) {
      S a[V], b[V];
      if (nv == V && m <= TAPS) {
        if (r == 0)
          for (long k = 0; k < m; k++)
            for (long v = 0; v < V; v++) gt[k * V + v] = g[v * m + k];
        sum_last(j, gt, V, V, r, a, b);
      } else {
        for (long v = 0; v < nv; v++) { /* (one row at a time: stride 1 along the taps) */
          S a1[V], b1[V];
          sum_last(j, g + v * m, 1, 1, r, a1, b1);
          a[v] = a1[0];
          b[v] = b1[0];
        }
      }
      for (long v = 0; v < nv; v++) y[v * n + r] = ST(LD(a[v]) + LD(b[v]));
    }
  }
}

static void backward(void *ctx, long lo, long hi) {
  const struct job *j = ctx;
  long n = j->n, m = j->m, inner = j->inner;
  if (inner == 1) {
    backward_last(j, lo, hi);
    return;
  }
  S second[inner < 16 && n * inner <= SCATTER ? SCATTER : BLOCK];
  for (long o = lo; o < hi; o++) {
    const S *g = j->x + o * m * inner;
    S *y = j->y + o * n * inner;
    if (inner < 16 && n * inner <= SCATTER) {
      scatter_taps(j, g, y, second);
      continue;
    }
    for (long r = 0; r < n; r++) {
      for (long c = 0; c < inner; c += BLOCK) {
        long len = inner - c < BLOCK ? inner - c : BLOCK;
        S *row = y + r * inner + c;
        sum_taps(j, g, row, j->start0, j->taps0, j->w0, r, c, len);
        sum_taps(j, g, second, j->start1, j->taps1, j->w1, r, c, len);
        for (long i = 0; i < len; i++) row[i] = ST(LD(row[i]) + LD(second[i]));
      }
    }
  }
}

void ember_resample(const S *x, const long long *i0, const long long *i1, const S *w0,
                    const S *w1, S *y, long outer, long n, long m, long inner, ember_pool pool,
                    long parallel_min) {
  struct job j = {x, i0, i1, w0, w1, y, 0, 0, 0, 0, n, m, inner};
  if (pool && outer > 1 && outer * m * inner >= parallel_min) pool(forward, &j, outer, 1);
  else forward(&j, 0, outer);
}

void ember_resample_backward(const S *g, const long long *i0, const long long *i1,
                             const long *start0, const long *taps0,
                             const long *start1, const long *taps1, const S *w0, const S *w1,
                             S *y, long outer, long n, long m, long inner, ember_pool pool,
                             long parallel_min) {
  struct job j = {g, i0, i1, w0, w1, y, start0, taps0, start1, taps1, n, m, inner};
  if (pool && outer > 1 && outer * m * inner >= parallel_min) pool(backward, &j, outer, 1);
  else backward(&j, 0, outer);
}
"""

_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fno-math-errno", "-fno-trapping-math")
_FLAGS += ("-ffp-contract=off", "-std=gnu11")
_P, _L = ctypes.c_void_p, ctypes.c_long


@functools.cache
def _functions(dtype: np.dtype):
    """(forward, backward, pool) for ``dtype``, or None (no compiler, another dtype)."""
    from . import ccompile, cpool

    if dtype in _C:
        source = f"#define T {_C[dtype]}\n"
    elif dtype in chalf.NAMES:
        source = chalf.storage_defines(dtype) + "#define T float\n"
    else:
        return None
    if not ccompile.compiler_available():
        return None
    try:
        forward = ccompile.load(
            source + _SOURCE, "ember_resample", [_P] * 6 + [_L] * 4 + [_P, _L], flags=_FLAGS
        )
        backward = ccompile.load(
            source + _SOURCE,
            "ember_resample_backward",
            [_P] * 10 + [_L] * 4 + [_P, _L],
            flags=_FLAGS,
        )
    except ccompile.CompileError:
        return None
    return forward, backward, cpool.parallel_for()


def _taps(index: np.ndarray, n: int):
    """The int64 indices, C-contiguous, or None where one is out of [0, n) (NumPy then wraps a
    negative one, or raises)."""
    index = np.ascontiguousarray(index, dtype=np.int64)
    if index.size and (index.min() < 0 or index.max() >= n):
        return None
    return index


def _ready(values, i0, i1, w0, w1, axis):
    """(outer, inner, functions) where the kernels apply, else None."""
    dtype = values.dtype
    if w0.dtype != dtype or w1.dtype != dtype or values.ndim == 0:
        return None
    if i0.ndim != 1 or i1.shape != i0.shape or w0.shape != i0.shape or w1.shape != i0.shape:
        return None
    functions = _functions(np.dtype(dtype))
    if functions is None:
        return None
    outer = math.prod(values.shape[:axis])
    inner = math.prod(values.shape[axis + 1 :])
    return outer, inner, functions


def resample(x, i0, i1, w0, w1, axis: int) -> np.ndarray | None:
    """``take(x, i0, axis) * w0 + take(x, i1, axis) * w1`` (weights along ``axis``), or None."""
    axis = kernel_axis(axis, np.ndim(x))  # (a graph file's axis: the extents come from it)
    if axis is None:
        return None
    ready = _ready(x, i0, i1, w0, w1, axis)
    if ready is None:
        return None
    outer, inner, (fn, _, pool) = ready
    n, m = x.shape[axis], i0.shape[0]
    i0, i1 = _taps(i0, n), _taps(i1, n)
    if i0 is None or i1 is None:
        return None
    shape = x.shape[:axis] + (m,) + x.shape[axis + 1 :]
    y = np.empty(shape, x.dtype)
    if y.size == 0:
        return y
    x, w0, w1 = (np.ascontiguousarray(a) for a in (x, w0, w1))
    from .cfuse import PARALLEL_MIN

    fn(
        data_address(x),  # (the taps are often read-only: interpolate's cached ones)
        data_address(i0),
        data_address(i1),
        data_address(w0),
        data_address(w1),
        data_address(y),
        outer,
        n,
        m,
        inner,
        pool,
        PARALLEL_MIN,
    )
    return y


def _lists(index: np.ndarray, n: int):
    """(start, taps): the taps k with ``index[k] == r`` are ``taps[start[r]:start[r + 1]]``,
    in increasing order."""
    taps = np.argsort(index, kind="stable").astype(np.int64)
    start = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(index, minlength=n), out=start[1:])
    return start, taps


def resample_backward(g, i0, i1, w0, w1, axis: int, size: int) -> np.ndarray | None:
    """Zeros with ``g * w0`` added at ``i0`` along ``axis``, plus ``g * w1`` added at ``i1``
    (each sum in the order of the taps), of ``size`` along the axis; or None."""
    axis = kernel_axis(axis, np.ndim(g))  # (a graph file's axis: the extents come from it)
    if axis is None:
        return None
    ready = _ready(g, i0, i1, w0, w1, axis)
    if ready is None or not isinstance(size, (int, np.integer)) or size < 0:
        return None
    outer, inner, (_, fn, pool) = ready
    n, m = int(size), i0.shape[0]
    if g.shape[axis] != m:
        return None
    i0, i1 = _taps(i0, n), _taps(i1, n)
    if i0 is None or i1 is None:
        return None
    shape = g.shape[:axis] + (n,) + g.shape[axis + 1 :]
    if math.prod(shape) == 0:
        return np.zeros(shape, g.dtype)
    (start0, taps0), (start1, taps1) = _lists(i0, n), _lists(i1, n)
    g, w0, w1 = (np.ascontiguousarray(a) for a in (g, w0, w1))
    y = np.empty(shape, g.dtype)
    from .cfuse import PARALLEL_MIN

    fn(
        data_address(g),
        data_address(i0),
        data_address(i1),
        data_address(start0),
        data_address(taps0),
        data_address(start1),
        data_address(taps1),
        data_address(w0),
        data_address(w1),
        data_address(y),
        outer,
        n,
        m,
        inner,
        pool,
        PARALLEL_MIN,
    )
    return y
