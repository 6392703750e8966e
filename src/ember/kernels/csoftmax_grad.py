"""The backward passes of softmax and log_softmax along the last axis in C, one row at a time
(the row in cache between its two passes), rows shared over ember's pool:

* softmax:      ``dx = y * (g - sum(g * y))``
* log_softmax:  ``dx = g - exp(y) * sum(g)``

The row sums accumulate in double and are rounded once; otherwise the arithmetic is the NumPy
kernels' (ops/softmax.py) in the arrays' dtype, ``exp`` from the vector math library (a few ulps
from NumPy's). `softmax_backward` and `log_softmax_backward` return None where they do not
apply (no compiler, a dtype other than float32/float64 and the half types, mismatched shapes,
an empty row) and the caller runs NumPy. Half precision (bfloat16, float16) is read and written
in 16 bits with float32's arithmetic, each result rounded once (equal to the float32 kernel on
widened copies).
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from . import chalf
from .cstep import data_address

__all__ = ["log_softmax_backward", "softmax_backward"]

_SOURCE = r"""
#include <math.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
__attribute__((simd("notinbranch"))) T EXP(T);
#ifndef HALF /* S: the storage type (T, or 16 bits that LD widens and ST rounds) */
#define S T
#define LD(v) (v)
#define ST(v) (v)
#endif

struct job { const S *y, *g; S *dx; long n; int log_form; };

static void rows(void *job_, long lo, long hi) {
  const struct job *j = job_;
  long n = j->n;
  for (long r = lo; r < hi; r++) {
    const S *y = j->y + r * n, *g = j->g + r * n;
    S *dx = j->dx + r * n;
    double total = 0;
    if (j->log_form) {
#pragma omp simd reduction(+ : total)
      for (long i = 0; i < n; i++) total += (double)LD(g[i]);
      T s = (T)total;
#pragma omp simd
      for (long i = 0; i < n; i++) dx[i] = ST(LD(g[i]) - EXP(LD(y[i])) * s);
    } else {
#pragma omp simd reduction(+ : total)
      for (long i = 0; i < n; i++) total += (double)(LD(g[i]) * LD(y[i]));
      T s = (T)total;
#pragma omp simd
      for (long i = 0; i < n; i++) dx[i] = ST(LD(y[i]) * (LD(g[i]) - s));
    }
  }
}

void ember_softmax_backward(const S *y, const S *g, S *dx, long count, long n, int log_form,
                            ember_pool pool, long parallel_min) {
  struct job j = {y, g, dx, n, log_form};
  if (pool && count > 1 && count * n >= parallel_min) pool(rows, &j, count, 1);
  else rows(&j, 0, count);
}
"""

_TYPES = {
    np.dtype(np.float32): ("float", "expf"),
    np.dtype(np.float64): ("double", "exp"),
}
# half precision: float arithmetic on 16-bit storage (kernels/chalf.py's conversions)
_TYPES.update(dict.fromkeys(chalf.NAMES, _TYPES[np.dtype(np.float32)]))
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fopenmp-simd", "-fno-math-errno")
_FLAGS += ("-fno-trapping-math", "-ffp-contract=off", "-std=gnu11")
_ARGS = [ctypes.c_void_p] * 3 + [ctypes.c_long] * 2 + [ctypes.c_int, ctypes.c_void_p]
_ARGS += [ctypes.c_long]


@functools.cache
def _function(dtype: np.dtype):
    """(ember_softmax_backward, the pool) for ``dtype``, or None."""
    from . import ccompile, cpool

    if dtype not in _TYPES or not ccompile.compiler_available():
        return None
    c_type, exp = _TYPES[dtype]
    source = f"#define T {c_type}\n#define EXP {exp}\n"
    if dtype in chalf.NAMES:
        source = chalf.storage_defines(dtype) + source
    source += _SOURCE
    name = "ember_softmax_backward"
    found = ccompile.load_with_vector_math(source, {name: _ARGS}, flags=_FLAGS)
    return None if found is None else (found[name], cpool.parallel_for())


def _run(y: np.ndarray, g: np.ndarray, log_form: bool) -> np.ndarray | None:
    if y.ndim == 0 or y.shape[-1] == 0 or y.shape != g.shape or y.dtype != g.dtype:
        return None
    found = _function(y.dtype)
    if found is None:
        return None
    from .cfuse import PARALLEL_MIN  # the fused elementwise loops' threshold for threads

    fn, pool = found
    y, g = np.ascontiguousarray(y), np.ascontiguousarray(g)
    dx = np.empty_like(y)
    n = y.shape[-1]
    fn(
        data_address(y),
        data_address(g),
        data_address(dx),
        y.size // n,
        n,
        int(log_form),
        pool,
        PARALLEL_MIN,
    )
    return dx


def softmax_backward(y: np.ndarray, g: np.ndarray) -> np.ndarray | None:
    """``y * (g - sum(g * y))`` along the last axis, or None (see the module docstring)."""
    return _run(y, g, False)


def log_softmax_backward(y: np.ndarray, g: np.ndarray) -> np.ndarray | None:
    """``g - exp(y) * sum(g)`` along the last axis, or None (see the module docstring)."""
    return _run(y, g, True)
