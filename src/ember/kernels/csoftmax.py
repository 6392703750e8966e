"""softmax and log_softmax along an axis in C: one pass for the row's maximum, one for
the exponentials and their sum (glibc's vector exp, as kernels/cfuse.py's loops call it), one
to scale, each row in cache between them, rows shared over ember's pool. Along an axis that
is not the last, the same passes run over each block of rows in memory order, the columns
side by side in the vector lanes (Softmax2d's channels).

The NumPy kernels of ops/softmax.py are the specification, and these follow their arithmetic
step by step, so the special values come out the same: a row holding NaN gives NaN throughout
(NumPy's maximum propagates it); ``safe`` shifts a row whose maximum is not finite by 0 and
gives a row whose exponentials sum to 0 zeros rather than NaN (a fully masked attention row).
Results differ from NumPy's only by the vector exp's few ulps, and where an exponential is
below the smallest normal number (taken as 0).

Half precision (bfloat16, float16) is read and written in 16 bits and computed as float32 is:
each row's shifted values and exponentials in a float row of the thread's, each result
rounded once (equal to the float32 kernel on widened copies); log_softmax of 16-bit values
widened to float32 (``dtype``) reads them in 16 bits and writes float32: the float32 kernel's
bits on the widened copy it never makes.

`softmax(x, safe, axis)` and `log_softmax(x, axis)` return None where they do not apply (no
compiler, a dtype other than those above, an empty array) and the caller runs NumPy.
"""

from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from . import chalf
from .cstep import data_address

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
#ifndef SI /* the input's storage: S, or 16 bits LD widens where the result is T itself */
#define SI S
#endif
#include <stdlib.h>

struct job { const SI *x; S *y; long n; int safe, log_form; };

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
    const SI *x = j->x + r * n;
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

/* The same along an axis that is not the last: each of `count` blocks is n rows of `inner`
   values, and each of its `inner` columns is a softmax of n values; the passes run along the
   rows (memory order), one column per vector lane, the columns' maxima and sums in rows of
   `inner` values. */
struct cjob { const SI *x; S *y; long n, inner; int safe, log_form; };

static void blocks(void *job_, long lo, long hi) {
  const struct cjob *j = job_;
  const long n = j->n, m = j->inner;
  T *top = malloc(2 * (size_t)m * sizeof(T));
  int *nan = malloc((size_t)m * sizeof(int));
  if (!top || !nan) abort();
  T *total = top + m;
#if HALF
  T *block = malloc((size_t)n * m * sizeof(T));
  if (!block) abort();
#endif
  for (long b = lo; b < hi; b++) {
    const SI *x = j->x + b * n * m;
#if HALF
    T *y = block;
    S *out = j->y + b * n * m;
#define PUT(i, v) (out[i] = ST(v))
#else
    T *y = j->y + b * n * m;
#define PUT(i, v) (y[i] = (v))
#endif
    for (long i = 0; i < m; i++) top[i] = -INFINITY, nan[i] = 0, total[i] = 0;
    for (long k = 0; k < n; k++) {
      const SI *row = x + k * m;
#pragma omp simd
      for (long i = 0; i < m; i++) {
        T v = LD(row[i]);
        top[i] = v > top[i] ? v : top[i];
        nan[i] |= v != v;
      }
    }
    for (long i = 0; i < m; i++) {
      T shift = nan[i] ? NAN : top[i];
      if (j->safe && !isfinite(shift)) shift = 0;
      top[i] = shift;
    }
    for (long k = 0; k < n; k++) {
      const SI *row = x + k * m;
      T *to = y + k * m;
#pragma omp simd
      for (long i = 0; i < m; i++) {
        T d = LD(row[i]) - top[i];
        to[i] = d < LOWEST ? LOWEST : d;
      }
    }
    if (j->log_form) {
      for (long k = 0; k < n; k++) {
        const T *from = y + k * m;
#pragma omp simd
        for (long i = 0; i < m; i++) {
          T e = EXP(from[i]);
          total[i] += from[i] <= LOWEST ? 0 : e;
        }
      }
      for (long i = 0; i < m; i++) total[i] = LOG(total[i]);
      for (long k = 0; k < n; k++) {
        const SI *row = x + k * m;
#pragma omp simd
        for (long i = 0; i < m; i++) PUT(k * m + i, (LD(row[i]) - top[i]) - total[i]);
      }
    } else {
      for (long k = 0; k < n; k++) {
        T *at = y + k * m;
#pragma omp simd
        for (long i = 0; i < m; i++) {
          T e = EXP(at[i]);
          at[i] = at[i] <= LOWEST ? 0 : e;
          total[i] += at[i];
        }
      }
      if (j->safe)
        for (long i = 0; i < m; i++) total[i] = total[i] == 0 ? 1 : total[i];
      for (long k = 0; k < n; k++)
#pragma omp simd
        for (long i = 0; i < m; i++) PUT(k * m + i, y[k * m + i] / total[i]);
    }
#undef PUT
  }
#if HALF
  free(block);
#endif
  free(top);
  free(nan);
}

void ember_softmax(const SI *x, S *y, long count, long n, long inner, int safe, int log_form,
                   ember_pool pool) {
  if (inner > 1) {
    struct cjob j = {x, y, n, inner, safe, log_form};
    if (pool && count > 1 && count * n * inner >= (1L << 15)) pool(blocks, &j, count, 1);
    else blocks(&j, 0, count);
    return;
  }
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
def _function(dtype: np.dtype, out: np.dtype | None = None):
    """(ember_softmax, the pool) for ``dtype`` (a result of dtype ``out``: float32 from half
    precision, or ``dtype``), or None (no compiler, or the build failed)."""
    from . import ccompile, cpool

    if dtype not in _TYPES or not ccompile.compiler_available():
        return None
    widened = out is not None and out != dtype
    if widened and not (dtype in chalf.NAMES and out == np.dtype(np.float32)):
        return None
    c_type, exp, log, lowest = _TYPES[dtype]
    source = (
        f"#define T {c_type}\n#define EXP {exp}\n#define LOG {log}\n#define LOWEST ({lowest})\n"
    )
    if widened:  # 16 bits read and widened, the float32 kernel's arithmetic and result
        load = f"{chalf.NAMES[dtype]}_load"
        source = chalf.CONVERT + f"#define SI uint16_t\n#define LD(v) {load}(v)\n" + source
        source += "#define HALF 0\n#define S T\n#define ST(v) (v)\n"
    elif dtype in chalf.NAMES:
        source = chalf.storage_defines(dtype) + source
    source += _SOURCE
    args = [ctypes.c_void_p] * 2 + [ctypes.c_long] * 3 + [ctypes.c_int] * 2 + [ctypes.c_void_p]
    found = ccompile.load_with_vector_math(source, {"ember_softmax": args}, flags=_FLAGS)
    return None if found is None else (found["ember_softmax"], cpool.parallel_for())


def _run(x: np.ndarray, safe: bool, log_form: bool, axis: int, out=None) -> np.ndarray | None:
    if x.ndim == 0 or x.size == 0:
        return None
    axis = axis % x.ndim
    out = x.dtype if out is None else np.dtype(out)
    found = _function(x.dtype, out if out != x.dtype else None)
    if found is None:
        return None
    fn, pool = found
    x = np.ascontiguousarray(x)
    y = np.empty(x.shape, out)
    n = x.shape[axis]
    inner = math.prod(x.shape[axis + 1 :])
    count = x.size // (n * inner)
    fn(data_address(x), data_address(y), count, n, inner, int(safe), int(log_form), pool)
    return y


def softmax(x: np.ndarray, safe: bool = False, axis: int = -1) -> np.ndarray | None:
    """softmax along ``axis``, or None (see the module docstring)."""
    return _run(x, safe, False, axis)


def log_softmax(x: np.ndarray, axis: int = -1, dtype=None) -> np.ndarray | None:
    """log_softmax along ``axis`` (of ``x`` widened to ``dtype``: float32 from half
    precision, read in 16 bits, never copied), or None (see the module docstring)."""
    return _run(x, False, True, axis, dtype)
