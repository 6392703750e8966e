"""PyTorch's float32 Box-Muller step in C: ember/random_box_muller.py's steps (avx_mathfun's
Cephes log, sine and cosine, in the C source's order, the products the compiler fuses as
``fmaf``), compiled with contraction off so no other pair is fused. The NumPy version is the
specification; its fused steps round through double, which can differ from ``fmaf``'s single
rounding about once in 2^29 operations (both equal PyTorch's on every value tested).

`box_muller_16_float32` returns None where it does not apply (no compiler, a failed build)
and the caller runs the NumPy version.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from .cstep import data_address

__all__ = ["available", "box_muller_16_float32"]

_SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline int32_t bits_of(float x) { int32_t b; memcpy(&b, &x, 4); return b; }
static inline float float_of(int32_t b) { float x; memcpy(&x, &b, 4); return x; }

/* log256_ps on (0, 1]: the mantissa m in [0.5, 1), x = m - 1 (+ m below sqrt(1/2)) */
static inline float cephes_log(float u) {
  int32_t b = bits_of(u);
  float e = (float)((b >> 23) - 126);
  float m = float_of((b & ~0x7f800000) | 0x3f000000);
  float x = m - 1.0f;
  if (m < 0.707106781186547524f) { x = x + m; e = e - 1.0f; }
  float z = x * x;
  float y = 7.0376836292E-2f;
  y = fmaf(y, x, -1.1514610310E-1f);
  y = fmaf(y, x, 1.1676998740E-1f);
  y = fmaf(y, x, -1.2420140846E-1f);
  y = fmaf(y, x, 1.4249322787E-1f);
  y = fmaf(y, x, -1.6668057665E-1f);
  y = fmaf(y, x, 2.0000714765E-1f);
  y = fmaf(y, x, -2.4999993993E-1f);
  y = fmaf(y, x, 3.3333331174E-1f);
  y = y * x;
  y = fmaf(y, z, e * -2.12194440e-4f);
  y = y - z * 0.5f;
  x = x + y;
  return fmaf(e, 0.693359375f, x);
}

/* sincos256_ps of a non-negative angle */
static inline void cephes_sincos(float theta, float *s, float *c) {
  float x = theta;
  int32_t j = (int32_t)(x * 1.27323954473516f);
  j = (j + 1) & ~1;
  float y = (float)j;
  x = fmaf(y, -0.78515625f, x);
  x = fmaf(y, -2.4187564849853515625e-4f, x);
  x = fmaf(y, -3.77489497744594108e-8f, x);
  float z = x * x;
  float yc = 2.443315711809948E-005f;
  yc = fmaf(yc, z, -1.388731625493765E-003f);
  yc = fmaf(yc, z, 4.166664568298827E-002f);
  yc = yc * z;
  yc = fmaf(yc, z, z * -0.5f);
  yc = yc + 1.0f;
  float ys = -1.9515295891E-4f;
  ys = fmaf(ys, z, 8.3321608736E-3f);
  ys = fmaf(ys, z, -1.6666654611E-1f);
  ys = ys * z;
  ys = fmaf(ys, x, x);
  float sv = (j & 2) ? yc : ys, cv = (j & 2) ? ys : yc;
  *s = (j & 4) ? -sv : sv;
  *c = ((j - 2) & 4) ? cv : -cv;
}

void ember_box_muller_16(float *data, long rows, float mean, float std) {
  const float two_pi = (float)(2.0 * 3.14159265358979323846);
  for (long r = 0; r < rows; r++) {
    float *d = data + 16 * r;
#pragma omp simd
    for (int k = 0; k < 8; k++) {
      float radius = sqrtf(-2.0f * cephes_log(1.0f - d[k]));
      float s, c;
      cephes_sincos(two_pi * d[k + 8], &s, &c);
      d[k] = fmaf(radius * c, std, mean);
      d[k + 8] = fmaf(radius * s, std, mean);
    }
  }
}
"""

_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fopenmp-simd", "-fno-math-errno")
_FLAGS += ("-fno-trapping-math", "-ffp-contract=off", "-std=gnu11")


@functools.cache
def _function():
    from . import ccompile

    if not ccompile.compiler_available():
        return None
    c = ctypes
    try:
        return ccompile.load(
            _SOURCE,
            "ember_box_muller_16",
            [c.c_void_p, c.c_long, c.c_float, c.c_float],
            flags=_FLAGS,
        )
    except ccompile.CompileError:
        return None


def available() -> bool:
    """Whether the C step runs (a compiler is there, it built)."""
    return _function() is not None


def box_muller_16_float32(block: np.ndarray, mean: float, std: float) -> bool | None:
    """PyTorch's ``normal_fill_16_AVX2`` on each row of the C-contiguous (rows, 16) float32
    array ``block``, in place: True, or None where it does not apply."""
    fn = _function()
    if fn is None or block.dtype != np.float32 or not block.flags.c_contiguous:
        return None
    fn(data_address(block), block.shape[0], float(mean), float(std))
    return True
