"""ember.cdist's direct algorithm in C: ops/cdist_direct.py's ``cdist_direct`` and
``cdist_direct_backward``, float32 and float64, rows of the result over ember's thread pool.

The forward takes x2 transposed (B, M, R), so a row i of the result is R running values
advanced column by column, ``acc[j] += f(x1[i, m] - x2[j, m])``: a vectorized loop over j, each
value accumulated in the NumPy kernel's column order. The backward advances a row of x1's
gradient over the rows j of x2 in order, ``out[m] += term(x1[i, m] - x2[j, m])``, vectorized
over m, as the NumPy kernel adds them. The formulas are the NumPy kernel's, operation by
operation (no fused multiply-adds), so p = 0, 1, 2 and inf give its bits; other p call the C
library's ``pow`` where NumPy may call its own vector power: within a few ulps.

Returns None where it does not apply (no compiler, another dtype) and the caller runs NumPy.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from .cstep import data_address

__all__ = ["cdist", "cdist_backward"]

_SOURCE = r"""
#include <math.h>
#include <stdlib.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);

struct job {
  const T *a, *bt, *g, *dist, *b;
  T *y;
  long p_rows, r_rows, m;
  T p;
};

#if KIND_zero
#define TERM(acc, d) (acc) += (T)((d) != 0)
#elif KIND_one
#define TERM(acc, d) (acc) += FABS(d)
#elif KIND_two
#define TERM(acc, d) (acc) += (d) * (d)
#elif KIND_inf
#define TERM(acc, d) { T a_ = FABS(d); (acc) = (a_ > (acc) || a_ != a_) ? a_ : (acc); }
#else
#define TERM(acc, d) (acc) += POW(FABS(d), p)
#endif

static void forward(void *job_, long lo, long hi) {
  const struct job *j = job_;
  long P = j->p_rows, R = j->r_rows, M = j->m;
  T p = j->p;
  (void)p;
  for (long row = lo; row < hi; row++) {
    long b = row / P;
    const T *x = j->a + row * M;
    const T *bt = j->bt + b * M * R;
    T *acc = j->y + row * R;
    for (long k = 0; k < R; k++) acc[k] = 0;
    for (long m = 0; m < M; m++) {
      T v = x[m];
      const T *col = bt + m * R;
      for (long k = 0; k < R; k++) {
        T d = v - col[k];
        TERM(acc[k], d);
      }
    }
#if KIND_two
    for (long k = 0; k < R; k++) acc[k] = SQRT(acc[k]);
#elif KIND_lt_two || KIND_gt_two
    T inv = (T)1 / p;
    for (long k = 0; k < R; k++) acc[k] = POW(acc[k], inv);
#endif
  }
}

void ember_cdist(const T *a, const T *bt, T *y, long batch, long p_rows, long r_rows, long m,
                 T p, ember_pool pool, long parallel_min) {
  struct job j = {a, bt, 0, 0, 0, y, p_rows, r_rows, m, p};
  long rows = batch * p_rows;
  if (pool && rows > 1 && rows * r_rows * m >= parallel_min) pool(forward, &j, rows, 1);
  else forward(&j, 0, rows);
}

static inline T sign_of(T d) { return (T)(d > 0) - (T)(d < 0); }

static void backward(void *job_, long lo, long hi) {
  const struct job *j = job_;
  long P = j->p_rows, R = j->r_rows, M = j->m;
  T p = j->p;
  (void)p;
  for (long row = lo; row < hi; row++) {
    long b = row / P;
    const T *x = j->a + row * M;
    T *out = j->y + row * M;
    for (long m = 0; m < M; m++) out[m] = 0;
    for (long k = 0; k < R; k++) {
      const T *z = j->b + (b * R + k) * M;
      T w = j->g[row * R + k], dist = j->dist[row * R + k];
      (void)w;
      (void)dist;
#if KIND_one
      for (long m = 0; m < M; m++) out[m] += w * sign_of(x[m] - z[m]);
#elif KIND_two
      for (long m = 0; m < M; m++) {
        T d = x[m] - z[m];
        out[m] += dist == 0 ? (T)0 : w * d / dist;
      }
#elif KIND_inf
      for (long m = 0; m < M; m++) {
        T d = x[m] - z[m];
        T c = CEIL(FABS(FABS(d) - dist)); /* (NumPy's minimum(1, c): NaN stays NaN) */
        T tied = (T)1 - ((c < 1 || c != c) ? c : (T)1);
        out[m] += w * sign_of(d) * tied;
      }
#elif KIND_lt_two
      T scale = POW(dist, p - (T)1);
      for (long m = 0; m < M; m++) {
        T d = x[m] - z[m];
        T value = sign_of(d) * POW(FABS(d), p - (T)1) * w / scale;
        out[m] += (dist == 0 || (d == 0 && p < 1)) ? (T)0 : value;
      }
#elif KIND_gt_two
      T scale = POW(dist, p - (T)1);
      for (long m = 0; m < M; m++) {
        T d = x[m] - z[m];
        T value = d * POW(FABS(d), p - (T)2) * w / scale;
        out[m] += dist == 0 ? (T)0 : value;
      }
#endif
    }
  }
}

void ember_cdist_backward(const T *g, const T *a, const T *b, const T *dist, T *y, long batch,
                          long p_rows, long r_rows, long m, T p, ember_pool pool,
                          long parallel_min) {
  struct job j = {a, 0, g, dist, b, y, p_rows, r_rows, m, p};
  long rows = batch * p_rows;
  if (pool && rows > 1 && rows * r_rows * m >= parallel_min) pool(backward, &j, rows, 1);
  else backward(&j, 0, rows);
}
"""

_TYPES = {
    np.dtype(np.float32): ("float", "fabsf", "powf", "sqrtf", "ceilf"),
    np.dtype(np.float64): ("double", "fabs", "pow", "sqrt", "ceil"),
}
_KINDS = ("zero", "one", "two", "inf", "lt_two", "gt_two")
# (no trapping math: ceil inlined as a vector rounding; no errno: sqrt as an instruction)
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-ffp-contract=off", "-std=gnu11")
_FLAGS += ("-fno-trapping-math", "-fno-math-errno")
_P, _L = ctypes.c_void_p, ctypes.c_long


@functools.cache
def _functions(dtype: np.dtype, kind: str):
    """(forward, backward, pool) for ``dtype`` and the norm's ``kind``, or None."""
    from . import ccompile, cpool

    if dtype not in _TYPES or not ccompile.compiler_available():
        return None
    c, fabs, power, sqrt, ceil = _TYPES[dtype]
    scalar = ctypes.c_float if dtype == np.float32 else ctypes.c_double
    source = f"typedef {c} T;\n" + "".join(f"#define KIND_{k} {int(k == kind)}\n" for k in _KINDS)
    source += f"#define FABS {fabs}\n#define POW {power}\n#define SQRT {sqrt}\n"
    source += f"#define CEIL {ceil}\n"
    try:
        forward = ccompile.load(
            source + _SOURCE, "ember_cdist", [_P] * 3 + [_L] * 4 + [scalar, _P, _L], flags=_FLAGS
        )
        backward = ccompile.load(
            source + _SOURCE,
            "ember_cdist_backward",
            [_P] * 5 + [_L] * 4 + [scalar, _P, _L],
            flags=_FLAGS,
        )
    except ccompile.CompileError:
        return None
    return forward, backward, cpool.parallel_for()


def cdist(a: np.ndarray, b: np.ndarray, p: float, kind: str, batch) -> np.ndarray | None:
    """The distances (``*batch``, P, R) between the rows of ``a`` (B, P, M) and ``b`` (B, R, M),
    or None."""
    found = _functions(a.dtype, kind) if a.dtype == b.dtype else None
    if found is None:
        return None
    forward, _, pool = found
    from .cfuse import PARALLEL_MIN

    a = np.ascontiguousarray(a)
    bt = np.ascontiguousarray(b.transpose(0, 2, 1))
    B, P, M = a.shape
    R = b.shape[1]
    y = np.empty((B, P, R), a.dtype)
    if y.size:
        forward(data_address(a), data_address(bt), data_address(y), B, P, R, M, p, pool,
                PARALLEL_MIN)  # fmt: skip
    return y.reshape((*batch, P, R))


def cdist_backward(g, a, b, dist, p: float, kind: str) -> np.ndarray | None:
    """The gradient (B, P, M) with respect to ``a`` of the distances ``dist`` (B, P, R)
    between the rows of ``a`` and ``b`` (B, R, M), given their gradient ``g``; or None."""
    dtype = a.dtype
    if any(t.dtype != dtype for t in (g, b, dist)):
        return None
    found = _functions(dtype, kind)
    if found is None:
        return None
    _, backward, pool = found
    from .cfuse import PARALLEL_MIN

    g, a, b, dist = (np.ascontiguousarray(t) for t in (g, a, b, dist))
    B, P, M = a.shape
    R = b.shape[1]
    y = np.empty(a.shape, dtype)
    if y.size:
        backward(data_address(g), data_address(a), data_address(b), data_address(dist),
                 data_address(y), B, P, R, M, p, pool, PARALLEL_MIN)  # fmt: skip
    return y
