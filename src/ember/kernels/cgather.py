"""A gather along one axis as a C graph-runner step (ops/indexing.py's ``index`` with one index
tensor: an embedding lookup's ``x[ids]``, an imported ONNX Gather): ``out[o, i, :] = x[o,
idx[i], :]``, whole runs of the trailing axes copied, negative indices counted from the end as
np.take counts them. Every index is checked before anything is written; one out of range sets
the step's ``failed`` flag (kernels/cstep.py) and the runner raises the kernel's own error.
Byte copies: any dtype of x; int32 or int64 indices."""

from __future__ import annotations

import ctypes
import math

import numpy as np

from .cstep import CStep, data_address, function_address

__all__ = ["gather_c_step"]

_SOURCE = r"""
#include <stdint.h>
#include <string.h>
typedef struct { uint64_t lo, hi; } ember_u128;
/* each outer block's m units of TYPE picked by the indices (made non-negative once per block
   of the indices' types: the loop the compiler unrolls has no branch on the index width) */
#define GATHER_UNITS(TYPE)                                                         \
  for (long o = 0; o < outer; o++) {                                               \
    const TYPE *src = (const TYPE *)x + o * n;                                     \
    TYPE *dst = (TYPE *)out + o * m;                                               \
    if (wide)                                                                      \
      for (long i = 0; i < m; i++) {                                               \
        long k = (long)((const long long *)ix)[i];                                 \
        dst[i] = src[k < 0 ? k + n : k];                                           \
      }                                                                            \
    else                                                                           \
      for (long i = 0; i < m; i++) {                                               \
        long k = (long)((const int *)ix)[i];                                       \
        dst[i] = src[k < 0 ? k + n : k];                                           \
      }                                                                            \
  }
/* each source unit written rep times in a row: the indices are 0, .., 0, 1, .., 1, ..., a
   nearest upsampling by a whole factor (its columns: the compiler's vector shuffles, not a
   load per output unit) */
#define REPLICATE_UNITS(TYPE)                                                      \
  for (long o = 0; o < outer; o++) {                                               \
    const TYPE *restrict src = (const TYPE *)x + o * n;                            \
    TYPE *restrict dst = (TYPE *)out + o * m;                                      \
    if (rep == 2)                                                                  \
      for (long j = 0; j < n; j++) {                                               \
        TYPE v = src[j];                                                           \
        dst[2 * j] = v;                                                            \
        dst[2 * j + 1] = v;                                                        \
      }                                                                            \
    else                                                                           \
      for (long j = 0; j < n; j++)                                                 \
        for (long r = 0; r < rep; r++) dst[j * rep + r] = src[j];                  \
  }
/* a: x, idx, out, outer, n (x's size along the axis), m (the indices), chunk (bytes of the
   trailing axes), idx's itemsize (4 or 8), the failed flag's address */
void gather_step(const long *a) {
  const char *x = (const char *)a[0];
  const void *ix = (const void *)a[1];
  char *out = (char *)a[2];
  const long outer = a[3], n = a[4], m = a[5], chunk = a[6], wide = a[7] == 8;
  long *failed = (long *)a[8];
  /* rep > 1 while every index is i / rep (checked as they are) */
  long rep = n > 0 && m % n == 0 && m / n > 1 ? m / n : 0;
  for (long i = 0; i < m; i++) {
    long k = wide ? (long)((const long long *)ix)[i] : (long)((const int *)ix)[i];
    if (k < -n || k >= n) {
      *failed = 1;
      return;
    }
    if (rep && k != i / rep) rep = 0;
  }
  if (rep) switch (chunk) {
      case 4: REPLICATE_UNITS(uint32_t) return;
      case 8: REPLICATE_UNITS(uint64_t) return;
    }
  /* runs of 1 to 16 bytes (a gather along the last axis: nearest resizing's columns, a
     lookup of scalars) copied as one load and store each, not a call of memcpy each */
  switch (chunk) {
    case 1: GATHER_UNITS(uint8_t) return;
    case 2: GATHER_UNITS(uint16_t) return;
    case 4: GATHER_UNITS(uint32_t) return;
    case 8: GATHER_UNITS(uint64_t) return;
    case 16: GATHER_UNITS(ember_u128) return;
  }
  for (long o = 0; o < outer; o++)
    for (long i = 0; i < m; i++) {
      long k = wide ? (long)((const long long *)ix)[i] : (long)((const int *)ix)[i];
      if (k < 0) k += n;
      memcpy(out + (o * m + i) * chunk, x + (o * n + k) * chunk, chunk);
    }
}
"""

_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


def gather_c_step(x_shape: tuple, x_dtype, idx_shape: tuple, idx_dtype, axis: int):
    """The step of ``np.take(x, idx, axis)`` (inputs x, idx in slots 0 and 1; the result in 2),
    or None (another index dtype, an empty operand, no compiler)."""
    from . import ccompile

    idx_dtype, x_dtype = np.dtype(idx_dtype), np.dtype(x_dtype)
    if idx_dtype not in _INDEX_DTYPES or x_dtype.hasobject or not ccompile.compiler_available():
        return None
    if 0 in x_shape or not x_shape or not all(isinstance(d, int) for d in (*x_shape, *idx_shape)):
        return None
    try:
        step = ccompile.load(_SOURCE, "gather_step", [ctypes.c_void_p])
    except ccompile.CompileError:
        return None
    axis %= len(x_shape)
    outer, n = math.prod(x_shape[:axis]), x_shape[axis]
    chunk = math.prod(x_shape[axis + 1 :]) * x_dtype.itemsize
    failed = np.zeros(1, np.int64)
    args = [0, 0, 0, outer, n, math.prod(idx_shape), chunk, idx_dtype.itemsize]
    args.append(data_address(failed))
    slots = [(0, "in", 0), (1, "in", 1), (2, "out", 0)]
    return CStep(function_address(step), np.array(args, np.int64), slots, (step,), failed=failed)
