"""The positions of cummax's and cummin's running extremes in C (ops/extra_reduce.py's
``select_index`` for those kinds), along any axis, rows over ember's pool.

The NumPy kernel steps along the axis in Python, three array operations a step: 40x PyTorch's
time on a (256, 1024) input along its last axis. Here a running extreme and its position
advance element by element, by the NumPy kernel's rule: the position moves to k where
``x[k] >= best`` (cummax; ``<=`` for cummin) or ``x[k]`` is NaN, so ties take the later
position and NaN propagates; the same comparisons, so its positions exactly.

An input is seen as (outer, n, inner), the scan along n; where inner > 1 a row of ``inner``
running extremes advances along n, and along the last axis eight rows run side by side (one
chain waits on each comparison). Float32, float64, int32 and int64 (others: None, and the
caller runs NumPy; so too without a compiler).
"""

from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from .axes import kernel_axis
from .cstep import data_address

__all__ = ["positions"]

_SOURCE = r"""
#include <stdlib.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);

struct job { const T *x; long *y; long n, inner; int *failed; };

/* (a NaN compares unequal to itself: integers never take that branch) */
#define TAKES(v, best) (BETTER(v, best) || (v) != (v))

static void rows(void *job_, long lo, long hi) {
  const struct job *j = job_;
  long n = j->n, inner = j->inner;
  if (inner == 1) {
    long o = lo;
    for (; o + 8 <= hi; o += 8) { /* eight rows side by side: their chains overlap */
      const T *x = j->x + o * n;
      long *y = j->y + o * n, pos[8];
      T best[8];
      for (int r = 0; r < 8; r++) {
        best[r] = x[r * n];
        pos[r] = 0;
        y[r * n] = 0;
      }
      for (long k = 1; k < n; k++) {
        for (int r = 0; r < 8; r++) {
          T v = x[r * n + k];
          int take = TAKES(v, best[r]);
          best[r] = take ? v : best[r];
          pos[r] = take ? k : pos[r];
          y[r * n + k] = pos[r];
        }
      }
    }
    for (; o < hi; o++) {
      const T *x = j->x + o * n;
      long *y = j->y + o * n, pos = 0;
      T best = x[0];
      y[0] = 0;
      for (long k = 1; k < n; k++) {
        T v = x[k];
        if (TAKES(v, best)) { best = v; pos = k; }
        y[k] = pos;
      }
    }
    return;
  }
  T *best = malloc(sizeof(T) * inner);
  long *pos = malloc(sizeof(long) * inner);
  if (!best || !pos) {
    free(best);
    free(pos);
    __atomic_store_n(j->failed, 1, __ATOMIC_RELAXED);
    return;
  }
  for (long o = lo; o < hi; o++) {
    const T *x = j->x + o * n * inner;
    long *y = j->y + o * n * inner;
    for (long i = 0; i < inner; i++) {
      best[i] = x[i];
      pos[i] = 0;
      y[i] = 0;
    }
    for (long k = 1; k < n; k++) {
      const T *xk = x + k * inner;
      long *yk = y + k * inner;
      for (long i = 0; i < inner; i++) {
        T v = xk[i];
        int take = TAKES(v, best[i]);
        best[i] = take ? v : best[i];
        pos[i] = take ? k : pos[i];
        yk[i] = pos[i];
      }
    }
  }
  free(best);
  free(pos);
}

int ember_running(const T *x, long *y, long outer, long n, long inner, ember_pool pool,
                  long parallel_min) {
  int failed = 0;
  struct job j = {x, y, n, inner, &failed};
  if (pool && outer > 1 && outer * n * inner >= parallel_min) pool(rows, &j, outer, 1);
  else rows(&j, 0, outer);
  return failed;
}
"""

_TYPES = {
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
    np.dtype(np.int32): "int",
    np.dtype(np.int64): "long long",
}
_BETTER = {"cummax": "((v) >= (best))", "cummin": "((v) <= (best))"}
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-std=gnu11")
_P, _L = ctypes.c_void_p, ctypes.c_long


@functools.cache
def _function(dtype: np.dtype, kind: str):
    from . import ccompile, cpool

    if dtype not in _TYPES or not ccompile.compiler_available():
        return None
    if ctypes.sizeof(ctypes.c_long) != 8:
        return None
    source = f"typedef {_TYPES[dtype]} T;\n#define BETTER(v, best) {_BETTER[kind]}\n"
    try:
        fn = ccompile.load(source + _SOURCE, "ember_running", [_P, _P, _L, _L, _L, _P, _L],
                           flags=_FLAGS)  # fmt: skip
    except ccompile.CompileError:
        return None
    fn.restype = ctypes.c_int
    return fn, cpool.parallel_for()


def positions(x: np.ndarray, axis: int, kind: str) -> np.ndarray | None:
    """The positions (int64, ``x``'s shape) of ``kind``'s ("cummax", "cummin") running
    extremes along ``axis``, or None."""
    found = _function(x.dtype, kind)
    if found is None or x.ndim == 0:
        return None
    axis = kernel_axis(axis, x.ndim)  # (a graph file's axis: the loop's extents come from it)
    if axis is None:
        return None
    fn, pool = found
    from .cfuse import PARALLEL_MIN

    x = np.ascontiguousarray(x)
    y = np.empty(x.shape, np.int64)
    n = x.shape[axis]
    if y.size == 0:
        return y
    outer, inner = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1 :])
    failed = fn(data_address(x), data_address(y), outer, n, inner, pool, PARALLEL_MIN)
    return None if failed else y
