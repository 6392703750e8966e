"""The gated linear unit and its gradient in C, float32 and float64: one pass each over
(outer, 2, L) blocks, the halves ``a`` and ``b`` of the split axis each one contiguous run of L
values per block (L: half the axis times the sizes after it).

* forward: ``y = a * sigmoid(b)``;
* backward: ``ga = g * s`` and ``gb = g * a * s (1 - s)`` with ``s = sigmoid(b)``, written
  into one array of the input's shape; ``s (1 - s)`` as ``e / (1 + e)^2``, which no large b
  rounds to a difference of nearly equal terms.

The sigmoid is ops/elementwise.py's overflow-free form, ``n / (1 + e)`` with ``e = exp(-|b|)``
and ``n`` 1 where b >= 0, else e (so NaN stays NaN and large |b| neither overflows nor divides
infinities), its exp glibc's vector exp (as kernels/csoftmax.py's): results within a few ulps
of ops/glu.py's NumPy kernels, the specification. Each entry returns None where it does not
apply (another dtype, no compiler, an empty array) and the caller runs NumPy.
"""

from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from .cstep import data_address

__all__ = ["glu", "glu_backward"]

_SOURCE = r"""
#include <math.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
__attribute__((simd("notinbranch"))) T EXP(T);

struct job { const T *x, *g; T *y; long len; };

static inline T sigmoid(T b) {
  T e = EXP(-fabs{f}(b));
  T n = b >= 0 ? (T)1 : e;
  return n / (1 + e);
}

static void forward(void *job_, long lo, long hi) {
  const struct job *j = job_;
  const long len = j->len;
  for (long o = lo; o < hi; o++) {
    const T *restrict a = j->x + 2 * o * len, *restrict b = a + len;
    T *restrict y = j->y + o * len;
#pragma omp simd
    for (long i = 0; i < len; i++) y[i] = a[i] * sigmoid(b[i]);
  }
}

static void backward(void *job_, long lo, long hi) {
  const struct job *j = job_;
  const long len = j->len;
  for (long o = lo; o < hi; o++) {
    const T *restrict a = j->x + 2 * o * len, *restrict b = a + len;
    const T *restrict g = j->g + o * len;
    T *restrict ga = j->y + 2 * o * len, *restrict gb = ga + len;
#pragma omp simd
    for (long i = 0; i < len; i++) {
      /* s (1 - s) = e / (1 + e)^2 on either side of 0: no 1 - s cancelling for large b */
      T e = EXP(-fabs{f}(b[i])), d = 1 + e;
      T s = (b[i] >= 0 ? (T)1 : e) / d;
      ga[i] = g[i] * s;
      gb[i] = g[i] * a[i] * (e / (d * d));
    }
  }
}

static void run(ember_task task, struct job *j, long outer, ember_pool pool) {
  if (pool && outer > 1 && outer * j->len >= (1L << 15)) pool(task, j, outer, 1);
  else task(j, 0, outer);
}

void ember_glu(const T *x, T *y, long outer, long len, ember_pool pool) {
  struct job j = {x, 0, y, len};
  run(forward, &j, outer, pool);
}

void ember_glu_backward(const T *x, const T *g, T *gx, long outer, long len, ember_pool pool) {
  struct job j = {x, g, gx, len};
  run(backward, &j, outer, pool);
}
"""

_TYPES = {np.dtype(np.float32): ("float", "expf", "f"), np.dtype(np.float64): ("double", "exp", "")}
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fopenmp-simd", "-fno-math-errno")
_FLAGS += ("-fno-trapping-math", "-ffp-contract=off", "-std=gnu11")


@functools.cache
def _functions(dtype: np.dtype):
    """({symbol: function}, the pool) for ``dtype``, or None."""
    from . import ccompile, cpool

    if dtype not in _TYPES or not ccompile.compiler_available():
        return None
    c_type, exp, suffix = _TYPES[dtype]
    source = f"#define T {c_type}\n#define EXP {exp}\n" + _SOURCE.replace("{f}", suffix)
    p, n = ctypes.c_void_p, ctypes.c_long
    signatures = {"ember_glu": [p, p, n, n, p], "ember_glu_backward": [p, p, p, n, n, p]}
    found = ccompile.load_with_vector_math(source, signatures, flags=_FLAGS)
    return None if found is None else (found, cpool.parallel_for())


def _blocks(shape: tuple, axis: int) -> tuple[int, int]:
    """(outer, L) of an input of ``shape`` split in halves along ``axis``."""
    axis %= len(shape)
    return math.prod(shape[:axis]), shape[axis] // 2 * math.prod(shape[axis + 1 :])


def glu(x: np.ndarray, axis: int):
    """``a * sigmoid(b)`` of x's halves ``a, b`` along ``axis``, or None."""
    found = _functions(x.dtype) if x.size else None
    if found is None:
        return None
    fns, pool = found
    x = np.ascontiguousarray(x)
    shape = list(x.shape)
    shape[axis] //= 2
    y = np.empty(shape, x.dtype)
    outer, length = _blocks(x.shape, axis)
    fns["ember_glu"](data_address(x), data_address(y), outer, length, pool)
    return y


def glu_backward(x: np.ndarray, g: np.ndarray, axis: int):
    """The input's gradient of `glu` given the output gradient ``g``, or None."""
    found = _functions(x.dtype) if x.size and g.dtype == x.dtype else None
    if found is None:
        return None
    fns, pool = found
    x, g = np.ascontiguousarray(x), np.ascontiguousarray(g)
    gx = np.empty_like(x)
    outer, length = _blocks(x.shape, axis)
    address = data_address
    fns["ember_glu_backward"](address(x), address(g), address(gx), outer, length, pool)
    return gx
