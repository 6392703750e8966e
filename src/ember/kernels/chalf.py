"""Half-precision values in C: the conversions between bfloat16 / float16 and float32 that
ember's low-precision kernels share (`CONVERT`, C source for an includer), and casts of whole
arrays between those dtypes (`cast`), shared over ember's pool.

NumPy has no fast half-precision arithmetic, and its conversions are slow too (a float32 to
float16 ``astype`` of 4M values took 10 ms; benchmarks/precision_kernels.py measures them):
half-precision tensors are stored in 16 bits and computed in float32 inside ember's C
kernels, which read and write the 16-bit values directly.

Semantics. Widening is exact. Narrowing rounds to nearest, ties to even, as NumPy's float16
and ml_dtypes' bfloat16 casts do, subnormals included (no flush to zero), overflow to
infinity; a NaN stays a NaN (bfloat16: its payload's top bits, quieted; float16: the
quiet NaN). Both are integer arithmetic written branch-free, so loops over them vectorize on
any CPU: GCC keeps ``_Float16``'s conversions scalar where the CPU lacks AVX512-FP16 (Zen 4
does), and AVX512_BF16's ``vcvtneps2bf16`` flushes subnormals, which NumPy's cast does not.

`cast(x, dtype)` returns None where it does not apply (no compiler, a pair of dtypes other
than float32 / bfloat16 / float16 between each other) and the caller runs NumPy.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from .. import dtypes as dt
from .cstep import data_address

__all__ = ["CONVERT", "HALF", "NAMES", "cast", "code_of", "from_float32"]
__all__ += ["storage_defines", "to_float32"]

# the half-precision NumPy dtypes and their codes in the C source
HALF = {np.dtype(dt.bfloat16.np): 1, np.dtype(np.float16): 2}
# their conversions' names in `CONVERT` (``bf16_load``, ``f16_store``, ...)
NAMES = {np.dtype(dt.bfloat16.np): "bf16", np.dtype(np.float16): "f16"}
_F32 = np.dtype(np.float32)

CONVERT = r"""
#include <stdint.h>
#include <string.h>
static inline float bf16_load(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t bf16_store(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)((u >> 16) | 0x40u) : (uint16_t)rounded;
}
/* float16 by integer arithmetic, branch-free so that loops over it vectorize (GCC keeps
   _Float16's conversions scalar without AVX512-FP16); narrowing after F. Giesen's
   round-to-nearest-even conversion: a float16 subnormal rounded by adding 0.5 (whose ulp is
   float16's smallest subnormal), a normal number by adding half an ulp less one, plus its
   last kept bit; from 65520 up, infinity (NaN: the quiet NaN) */
static inline float f16_load(uint16_t h) {
  uint32_t o = (uint32_t)(h & 0x7fffu) << 13, e = o & 0x0f800000u; /* exponent in place */
  o += 0x38000000u;                                                 /* rebiased: 15 to 127 */
  uint32_t wide = e == 0x0f800000u ? o + 0x38000000u : o;           /* inf and NaN */
  uint32_t tiny = o + 0x00800000u; /* a subnormal: as a normal number, less 2**-14 */
  float t;
  memcpy(&t, &tiny, 4);
  t -= 0x1p-14f;
  memcpy(&tiny, &t, 4);
  uint32_t u = (e == 0 ? tiny : wide) | (uint32_t)(h & 0x8000u) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t f16_store(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  u &= 0x7fffffffu;
  float magnitude, shifted;
  memcpy(&magnitude, &u, 4);
  shifted = magnitude + 0.5f;
  uint32_t subnormal;
  memcpy(&subnormal, &shifted, 4);
  subnormal -= 0x3f000000u;
  uint32_t normal = (u + 0xc8000fffu + ((u >> 13) & 1u)) >> 13;
  uint32_t large = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
  uint32_t o = u >= (143u << 23) ? large : u < (113u << 23) ? subnormal : normal;
  return (uint16_t)(o | sign);
}
/* a double as a float rounded to odd (toward zero, the last bit set where inexact): rounding
   that to a half type to nearest gives the double's own rounding, with no double rounding */
static inline float round_odd(double d) {
  float f = (float)d;
  if ((double)f == d || f != f) return f;
  uint32_t u;
  memcpy(&u, &f, 4);
  if (__builtin_fabs((double)f) > __builtin_fabs(d)) u -= 1;
  u |= 1;
  memcpy(&f, &u, 4);
  return f;
}
"""


def storage_defines(dtype) -> str:
    """The head of a C kernel written over a storage type ``S`` whose values it reads with
    ``LD(v)`` and writes with ``ST(v)``, for the half-precision ``dtype``: `CONVERT`, ``HALF``
    1, ``S`` 16 bits, ``LD`` widening to float and ``ST`` rounding from float (the kernels that
    take it: depthwise convolutions, GELU and layer norm, softmax and its gradient)."""
    name = NAMES[np.dtype(dtype)]
    return CONVERT + (
        "#define HALF 1\n#define S uint16_t\n"
        f"#define LD(v) {name}_load(v)\n#define ST(v) {name}_store(v)\n"
    )


_CAST_SOURCE = r"""
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
struct job { int from, to; const void *x; void *y; };

/* codes: 0 float32, 1 bfloat16, 2 float16; one loop per pair, each vectorized */
#define LOOP(name, S, D, expr) \
  static void name(const S *restrict x, D *restrict y, long lo, long hi) { \
    for (long i = lo; i < hi; i++) y[i] = expr(x[i]); \
  }
#define F32_BF16(v) bf16_store(v)
#define F32_F16(v) f16_store(v)
#define BF16_F16(v) f16_store(bf16_load(v))
#define F16_BF16(v) bf16_store(f16_load(v))
LOOP(f32_bf16, float, uint16_t, F32_BF16)
LOOP(f32_f16, float, uint16_t, F32_F16)
LOOP(bf16_f32, uint16_t, float, bf16_load)
LOOP(f16_f32, uint16_t, float, f16_load)
LOOP(bf16_f16, uint16_t, uint16_t, BF16_F16)
LOOP(f16_bf16, uint16_t, uint16_t, F16_BF16)

static void part(void *job_, long lo, long hi) {
  const struct job *j = job_;
  switch (j->from * 3 + j->to) {
    case 1: f32_bf16(j->x, j->y, lo, hi); break;
    case 2: f32_f16(j->x, j->y, lo, hi); break;
    case 3: bf16_f32(j->x, j->y, lo, hi); break;
    case 5: bf16_f16(j->x, j->y, lo, hi); break;
    case 6: f16_f32(j->x, j->y, lo, hi); break;
    case 7: f16_bf16(j->x, j->y, lo, hi); break;
  }
}

void ember_half_cast(int from, int to, long n, const void *x, void *y, ember_pool pool) {
  struct job j = {from, to, x, y};
  if (pool) pool(part, &j, n, 64);
  else part(&j, 0, n);
}
"""

# elements from which a cast is shared over the pool (kernels/cfuse.py's threshold for a loop
# of about this cost per element)
PARALLEL_MIN = 1 << 18


def code_of(dtype) -> int | None:
    """The C source's code of a NumPy dtype: 0 float32, 1 bfloat16, 2 float16, else None."""
    dtype = np.dtype(dtype)
    return 0 if dtype == _F32 else HALF.get(dtype)


@functools.cache
def _function():
    from . import ccompile

    if not ccompile.compiler_available():
        return None
    p, i, n = ctypes.c_void_p, ctypes.c_int, ctypes.c_long
    source = CONVERT + _CAST_SOURCE
    try:
        return ccompile.load(source, "ember_half_cast", [i, i, n, p, p, p])
    except ccompile.CompileError:
        return None


def cast(x: np.ndarray, dtype, out: np.ndarray | None = None) -> np.ndarray | None:
    """``x.astype(dtype)`` between float32, bfloat16 and float16 (exact: widening is, and a
    cast between the two half types rounds once, from the exact float32 value),
    written into ``out`` (C-contiguous, ``x``'s shape, ``dtype``) or a new C-contiguous array;
    None where it does not apply."""
    dtype = np.dtype(dtype)
    source, target = code_of(x.dtype), code_of(dtype)
    if source is None or target is None or source == target:
        return None
    fn = _function()
    if fn is None:
        return None
    if out is None:
        out = np.empty(x.shape, dtype)
    elif out.shape != x.shape or out.dtype != dtype or not out.flags.c_contiguous:
        return None
    if not x.size:
        return out
    if not x.flags.c_contiguous:  # (np.ascontiguousarray would make a 0-d array 1-d)
        x = np.ascontiguousarray(x)
    from . import cpool

    pool = cpool.parallel_for() if x.size >= PARALLEL_MIN else None
    fn(source, target, x.size, data_address(x), data_address(out), pool)
    return out


def to_float32(x: np.ndarray) -> np.ndarray:
    """``x`` (bfloat16 or float16) widened to a C-contiguous float32 array (NumPy's where C
    does not run)."""
    result = cast(x, _F32)
    # (astype, not np.ascontiguousarray, which makes a 0-d array 1-d)
    return x.astype(np.float32, order="C") if result is None else result


def from_float32(x: np.ndarray, dtype, out: np.ndarray | None = None) -> np.ndarray:
    """float32 ``x`` rounded to ``dtype`` (bfloat16 or float16), into ``out`` where given."""
    result = cast(x, dtype, out)
    if result is not None:
        return result
    if out is None:
        return x.astype(dtype)
    out[...] = x
    return out
