"""Half-precision values in C: the conversions between bfloat16 / float16 and float32 that
ember's low-precision kernels share (`CONVERT`, C source for an includer), and casts of whole
arrays between those dtypes (`cast`), shared over ember's pool.

NumPy has no fast half-precision arithmetic, and its conversions are slow too (a float32 to
float16 ``astype`` ran at about 0.4 GB/s, ml_dtypes' bfloat16 at a few; benchmarks/
precision_kernels.py measures them): half-precision tensors are stored in 16 bits and computed
in float32 inside ember's C kernels, which read and write the 16-bit values directly.

Semantics. Widening is exact. Narrowing rounds to nearest, ties to even, as NumPy's float16
and ml_dtypes' bfloat16 casts do, subnormals included (no flush to zero), overflow to
infinity; a NaN stays a NaN (bfloat16: its payload's top bits, quieted; float16: the
compiler's conversion, or the portable one below: the quiet NaN). float16 goes through GCC's
``_Float16`` where the compiler has it (the F16C / AVX-512 conversion instructions under
``-march=native``), else through integer arithmetic (F. Giesen's round-to-nearest-even
conversion; ``EMBER_PORTABLE_F16=1`` forces it, for tests). bfloat16 is always integer
arithmetic: AVX512_BF16's ``vcvtneps2bf16`` flushes subnormals, which NumPy's cast does not.

`cast(x, dtype)` returns None where it does not apply (no compiler, a pair of dtypes other
than float32 / bfloat16 / float16 between each other) and the caller runs NumPy.
"""

from __future__ import annotations

import ctypes
import functools
import os

import numpy as np

from .. import dtypes as dt

__all__ = ["CONVERT", "HALF", "cast", "code_of", "from_float32", "portable_f16"]
__all__ += ["to_float32"]

# the half-precision NumPy dtypes and their codes in the C source
HALF = {np.dtype(dt.bfloat16.np): 1, np.dtype(np.float16): 2}
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
#if defined(__FLT16_MAX__) && !defined(EMBER_PORTABLE_F16)
static inline float f16_load(uint16_t h) {
  _Float16 x;
  memcpy(&x, &h, 2);
  return (float)x;
}
static inline uint16_t f16_store(float f) {
  _Float16 x = (_Float16)f;
  uint16_t h;
  memcpy(&h, &x, 2);
  return h;
}
#else
static inline float f16_load(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, u;
  if (e == 0x1f) u = s | 0x7f800000u | (m << 13);
  else if (e) u = s | ((e + 112) << 23) | (m << 13);
  else {
    float v = (float)m * 0x1p-24f; /* a subnormal (or zero): exact in float */
    return s ? -v : v;
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint16_t f16_store(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u, o;
  u &= 0x7fffffffu;
  if (u >= (143u << 23)) o = u > 0x7f800000u ? 0x7e00u : 0x7c00u; /* >= 65536: inf (or NaN) */
  else if (u < (113u << 23)) { /* a float16 subnormal: rounded by the addition of 0.5 */
    float v;
    memcpy(&v, &u, 4);
    v += 0.5f;
    memcpy(&o, &v, 4);
    o -= 0x3f000000u;
  } else {
    o = (u + 0xc8000fffu + ((u >> 13) & 1u)) >> 13;
  }
  return (uint16_t)(o | sign);
}
#endif
"""

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


def portable_f16() -> bool:
    """Whether ``EMBER_PORTABLE_F16=1`` asks for the integer float16 conversions even where the
    compiler has ``_Float16`` (tests compare the two)."""
    return os.environ.get("EMBER_PORTABLE_F16", "") == "1"


@functools.cache
def _function(portable: bool):
    from . import ccompile

    if not ccompile.compiler_available():
        return None
    p, i, n = ctypes.c_void_p, ctypes.c_int, ctypes.c_long
    source = ("#define EMBER_PORTABLE_F16\n" if portable else "") + CONVERT + _CAST_SOURCE
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
    fn = _function(portable_f16())
    if fn is None:
        return None
    if out is None:
        out = np.empty(x.shape, dtype)
    elif out.shape != x.shape or out.dtype != dtype or not out.flags.c_contiguous:
        return None
    if not x.size:
        return out
    x = np.ascontiguousarray(x)
    from . import cpool

    pool = cpool.parallel_for() if x.size >= PARALLEL_MIN else None
    fn(source, target, x.size, x.ctypes.data, out.ctypes.data, pool)
    return out


def to_float32(x: np.ndarray) -> np.ndarray:
    """``x`` (bfloat16 or float16) widened to a C-contiguous float32 array (NumPy's where C
    does not run)."""
    result = cast(x, _F32)
    return np.ascontiguousarray(x, np.float32) if result is None else result


def from_float32(x: np.ndarray, dtype, out: np.ndarray | None = None) -> np.ndarray:
    """float32 ``x`` rounded to ``dtype`` (bfloat16 or float16), into ``out`` where given."""
    result = cast(x, dtype, out)
    if result is not None:
        return result
    if out is None:
        return x.astype(dtype)
    out[...] = x
    return out
