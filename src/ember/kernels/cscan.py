"""The running sum (``cumsum``) and product (``cumprod``) in C along any axis, accumulated as
PyTorch's CPU scans and ops/cumulative.py's NumPy kernels (the specification) do: float32 in
double, float64 in double, half precision (read and written in 16 bits) in float; each output
the running sum or product rounded once. The sums and products are sequential, element after
element, from the first value itself, as NumPy's ``cumsum`` and ``cumprod`` combine them, so
the results are NumPy's bits (a leading -0.0 stays -0.0).

An input is seen as (outer, n, inner), the scan along n. Where inner is 1 (the last axis) four
rows run interleaved, so four independent chains of additions (or multiplications) overlap in
the pipeline (one chain waits on each one's latency); otherwise a row of ``inner`` running values
advances
along n, a vectorized loop. The outer rows are shared over ember's pool.

Returns None where it does not apply (no compiler, another dtype: integers and bools stay
NumPy's int64 sums and products) and the caller runs NumPy.
"""

from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from . import chalf
from .axes import kernel_axis
from .cstep import data_address

__all__ = ["available", "cumprod", "cumsum"]

_SOURCE = r"""
#include <stdlib.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
#ifndef HALF
#define HALF 0
#define S T
#define LD(v) (v)
#define ST(v) (v)
#endif

struct job { const S *x; S *y; long n, inner; };

/* each running sum starts at the first value itself, as NumPy's (0 + -0.0 would be +0.0) */
static void scan_rows(const S *restrict x, S *restrict y, long n) {
  ACC a = (ACC)LD(x[0]);
  y[0] = ST((T)a);
  for (long k = 1; k < n; k++) {
    COMBINE(a, (ACC)LD(x[k]));
    y[k] = ST((T)a);
  }
}

static void rows(void *job_, long lo, long hi) {
  const struct job *j = job_;
  long n = j->n, inner = j->inner;
  if (inner == 1) {
    long o = lo;
    for (; o + 4 <= hi; o += 4) {  /* four chains of additions overlapping */
      const S *x0 = j->x + o * n, *x1 = x0 + n, *x2 = x1 + n, *x3 = x2 + n;
      S *y0 = j->y + o * n, *y1 = y0 + n, *y2 = y1 + n, *y3 = y2 + n;
      ACC a0 = (ACC)LD(x0[0]), a1 = (ACC)LD(x1[0]), a2 = (ACC)LD(x2[0]), a3 = (ACC)LD(x3[0]);
      y0[0] = ST((T)a0);
      y1[0] = ST((T)a1);
      y2[0] = ST((T)a2);
      y3[0] = ST((T)a3);
      for (long k = 1; k < n; k++) {
        COMBINE(a0, (ACC)LD(x0[k]));
        COMBINE(a1, (ACC)LD(x1[k]));
        COMBINE(a2, (ACC)LD(x2[k]));
        COMBINE(a3, (ACC)LD(x3[k]));
        y0[k] = ST((T)a0);
        y1[k] = ST((T)a1);
        y2[k] = ST((T)a2);
        y3[k] = ST((T)a3);
      }
    }
    for (; o < hi; o++) scan_rows(j->x + o * n, j->y + o * n, n);
    return;
  }
  ACC *acc = malloc(sizeof(ACC) * inner);
  if (!acc) {  /* (no memory for the running sums: one column at a time) */
    for (long o = lo; o < hi; o++)
      for (long i = 0; i < inner; i++) {
        ACC a = (ACC)LD(j->x[o * n * inner + i]);
        j->y[o * n * inner + i] = ST((T)a);
        for (long k = 1; k < n; k++) {
          long at = (o * n + k) * inner + i;
          COMBINE(a, (ACC)LD(j->x[at]));
          j->y[at] = ST((T)a);
        }
      }
    return;
  }
  for (long o = lo; o < hi; o++) {
    const S *x = j->x + o * n * inner;
    S *y = j->y + o * n * inner;
    for (long i = 0; i < inner; i++) {
      acc[i] = (ACC)LD(x[i]);
      y[i] = ST((T)acc[i]);
    }
    for (long k = 1; k < n; k++) {
      const S *restrict xk = x + k * inner;
      S *restrict yk = y + k * inner;
#pragma omp simd
      for (long i = 0; i < inner; i++) {
        COMBINE(acc[i], (ACC)LD(xk[i]));
        yk[i] = ST((T)acc[i]);
      }
    }
  }
  free(acc);
}

void ember_scan(const S *x, S *y, long outer, long n, long inner, ember_pool pool,
                  long parallel_min) {
  struct job j = {x, y, n, inner};
  if (pool && outer > 1 && outer * n * inner >= parallel_min) pool(rows, &j, outer, 4);
  else rows(&j, 0, outer);
}
"""

# the C type of a value, and of the running sum (PyTorch's accumulation types on the CPU)
_TYPES = {
    np.dtype(np.float32): ("float", "double"),
    np.dtype(np.float64): ("double", "double"),
}
_TYPES.update(dict.fromkeys(chalf.NAMES, ("float", "float")))
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fopenmp-simd", "-fno-math-errno")
_FLAGS += ("-fno-trapping-math", "-ffp-contract=off", "-std=gnu11")
_P, _L = ctypes.c_void_p, ctypes.c_long


# how a running value takes the next element in: NumPy's ``+=`` and ``*=``
_COMBINE = {
    "cumsum": "#define COMBINE(a, v) ((a) += (v))\n",
    "cumprod": "#define COMBINE(a, v) ((a) *= (v))\n",
}


@functools.cache
def _function(dtype: np.dtype, op: str = "cumsum"):
    """(the function, the pool) scanning ``op`` over ``dtype``, or None (no compiler, a failed
    build)."""
    from . import ccompile, cpool

    if dtype not in _TYPES or not ccompile.compiler_available():
        return None
    value, acc = _TYPES[dtype]
    source = f"#define T {value}\n#define ACC {acc}\n" + _COMBINE[op]
    if dtype in chalf.NAMES:
        source = chalf.storage_defines(dtype) + source
    try:
        fn = ccompile.load(
            source + _SOURCE, "ember_scan", [_P, _P, _L, _L, _L, _P, _L], flags=_FLAGS
        )
    except ccompile.CompileError:
        return None
    return fn, cpool.parallel_for()


def available(dtype) -> bool:
    """Whether the scan runs for arrays of ``dtype`` (a compiler is there, it built)."""
    return _function(np.dtype(dtype)) is not None


def cumsum(x: np.ndarray, axis: int) -> np.ndarray | None:
    """The running sums of ``x`` along ``axis`` (of its dtype), or None."""
    return _scan(x, axis, "cumsum")


def cumprod(x: np.ndarray, axis: int) -> np.ndarray | None:
    """The running products of ``x`` along ``axis`` (of its dtype), or None."""
    return _scan(x, axis, "cumprod")


def _scan(x: np.ndarray, axis: int, op: str) -> np.ndarray | None:
    found = _function(x.dtype, op)
    if found is None or x.ndim == 0 or x.size == 0:
        return None
    axis = kernel_axis(axis, x.ndim)  # (a graph file's axis: the loop's extents come from it)
    if axis is None:
        return None
    fn, pool = found
    from .cfuse import PARALLEL_MIN  # (the fused loops' threshold for waking the pool)

    x = np.ascontiguousarray(x)
    n = x.shape[axis]
    outer = math.prod(x.shape[:axis])
    inner = math.prod(x.shape[axis + 1 :])
    y = np.empty_like(x)
    fn(data_address(x), data_address(y), outer, n, inner, pool, PARALLEL_MIN)
    return y
