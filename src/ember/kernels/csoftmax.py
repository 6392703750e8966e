"""softmax and log_softmax along the last axis in C: one pass for the row's maximum, one for
the exponentials and their sum (glibc's vector exp, as kernels/cfuse.py's loops call it), one
to scale, each row in cache between them, rows shared over ember's pool.

The NumPy kernels of ops/softmax.py are the specification, and these follow their arithmetic
step by step, so the special values come out the same: a row holding NaN gives NaN throughout
(NumPy's maximum propagates it); ``safe`` shifts a row whose maximum is not finite by 0 and
gives a row whose exponentials sum to 0 zeros rather than NaN (a fully masked attention row).
Results differ from NumPy's only by the vector exp's few ulps, and where an exponential is
below the smallest normal number (taken as 0).

Half precision (bfloat16, float16) is read and written in 16 bits and computed as float32 is:
each row's shifted values and exponentials in a float row of the thread's, each result
rounded once (equal to the float32 kernel on widened copies).

`softmax(x, safe)` and `log_softmax(x)` return None where they do not apply (no compiler, a
dtype other than those above, a row length of 0) and the caller runs NumPy.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from . import chalf

__all__ = ["log_softmax", "softmax"]

_SOURCE = r"""
#include <math.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
__attribute__((simd("notinbranch"))) T EXP(T);
#ifndef HALF /* S: the storage type (T, or 16 bits that LD widens and ST rounds) */
#define HALF 0
#define S T
#define LD(v) (v)
#define ST(v) (v)
#endif
#include <stdlib.h>

struct job { const S *x; S *y; long n; int safe, log_form; };

/* The exponentials of the shifted row are taken as 0 below e^LOWEST (e^-80 in float: 1e-35
   beside the largest term, 1): the vector exp leaves its fast path for such arguments, and a
   causal mask's -inf fills half of every attention row with them (4x slower measured). The
   clamped arguments go through memory (y) on purpose: clamped and masked in one expression,
   GCC folds the clamp away and calls exp on the raw arguments. */
static void rows(void *job_, long lo, long hi) {
  const struct job *j = job_;
  long n = j->n;
#if HALF /* the row's float values (the 16-bit result is written once, rounded) */
  T *row = malloc((size_t)n * sizeof(T));
  if (!row) abort();
#endif
  for (long r = lo; r < hi; r++) {
    const S *x = j->x + r * n;
#if HALF
    T *y = row;
    S *out = j->y + r * n;
#define PUT(i, v) (out[i] = ST(v))
#else
    T *y = j->y + r * n;
#define PUT(i, v) (y[i] = (v))
#endif
    T top = -INFINITY;
    int nan = 0;
#pragma omp simd reduction(max : top) reduction(| : nan)
    for (long i = 0; i < n; i++) {
      T v = LD(x[i]);
      top = v > top ? v : top;
      nan |= v != v;
    }
    T shift = nan ? NAN : top;
    if (j->safe && !isfinite(shift)) shift = 0;
#pragma omp simd
    for (long i = 0; i < n; i++) {
      T d = LD(x[i]) - shift;
      y[i] = d < LOWEST ? LOWEST : d;
    }
    T total = 0;
    if (j->log_form) {
#pragma omp simd reduction(+ : total)
      for (long i = 0; i < n; i++) {
        T e = EXP(y[i]);
        total += y[i] <= LOWEST ? 0 : e;
      }
      T lse = LOG(total);
#pragma omp simd
      for (long i = 0; i < n; i++) PUT(i, (LD(x[i]) - shift) - lse);
    } else {
#pragma omp simd reduction(+ : total)
      for (long i = 0; i < n; i++) {
        T e = EXP(y[i]);
        y[i] = y[i] <= LOWEST ? 0 : e;
        total += y[i];
      }
      if (j->safe && total == 0) total = 1;
#pragma omp simd
      for (long i = 0; i < n; i++) PUT(i, y[i] / total);
    }
  }
#undef PUT
#if HALF
  free(row);
#endif
}

void ember_softmax(const S *x, S *y, long count, long n, int safe, int log_form,
                   ember_pool pool) {
  struct job j = {x, y, n, safe, log_form};
  if (pool && count > 1 && count * n >= (1L << 15)) pool(rows, &j, count, 1);
  else rows(&j, 0, count);
}
"""

_TYPES = {
    np.dtype(np.float32): ("float", "expf", "logf", "-80.0f"),
    np.dtype(np.float64): ("double", "exp", "log", "-700.0"),
}
# half precision: float arithmetic on 16-bit storage (kernels/chalf.py's conversions)
_TYPES.update(dict.fromkeys(chalf.NAMES, _TYPES[np.dtype(np.float32)]))
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fopenmp-simd", "-fno-math-errno")
_FLAGS += ("-fno-trapping-math", "-ffp-contract=off", "-std=gnu11")


@functools.cache
def _function(dtype: np.dtype):
    """(ember_softmax, the pool) for ``dtype``, or None (no compiler, or the build failed)."""
    from . import ccompile, cpool

    if dtype not in _TYPES or not ccompile.compiler_available():
        return None
    c_type, exp, log, lowest = _TYPES[dtype]
    source = (
        f"#define T {c_type}\n#define EXP {exp}\n#define LOG {log}\n#define LOWEST ({lowest})\n"
    )
    if dtype in chalf.NAMES:
        source = chalf.storage_defines(dtype) + source
    source += _SOURCE
    args = [ctypes.c_void_p] * 2 + [ctypes.c_long] * 2 + [ctypes.c_int] * 2 + [ctypes.c_void_p]
    found = ccompile.load_with_vector_math(source, {"ember_softmax": args}, flags=_FLAGS)
    return None if found is None else (found["ember_softmax"], cpool.parallel_for())


def _run(x: np.ndarray, safe: bool, log_form: bool) -> np.ndarray | None:
    if x.ndim == 0 or x.shape[-1] == 0:
        return None
    found = _function(x.dtype)
    if found is None:
        return None
    fn, pool = found
    x = np.ascontiguousarray(x)
    y = np.empty_like(x)
    n = x.shape[-1]
    fn(x.ctypes.data, y.ctypes.data, x.size // n, n, int(safe), int(log_form), pool)
    return y


def softmax(x: np.ndarray, safe: bool = False) -> np.ndarray | None:
    """softmax along the last axis, or None (see the module docstring)."""
    return _run(x, safe, False)


def log_softmax(x: np.ndarray) -> np.ndarray | None:
    """log_softmax along the last axis, or None (see the module docstring)."""
    return _run(x, False, True)
