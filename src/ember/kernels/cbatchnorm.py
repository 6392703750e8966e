"""Compiled batch normalization over (N, C, *spatial) arrays, float32 and float64: the training
forward (batch statistics and the normalized, scaled and shifted result), its backward (the
input, weight and bias gradients), and the per-channel affine of evaluation mode.

Each kernel is bound by memory. The training kernels work on blocks of channels small enough
that a block's whole data (all samples) stays in the L2 cache, read sample by sample in memory
order (a block of channels of one sample is contiguous): the statistics pass reads the block
from memory, the pass that writes the result reads it again from the cache. So the forward
moves the input once and the result once, the backward the input and the output gradient once
and the input gradient once, as a one-pass kernel would, yet the variance is the mean of
squared deviations, from a shifted origin:

* statistics: per channel, sums of ``x - s`` and ``(x - s)^2`` in double, with ``s`` the
  channel's first element (a shift that keeps the cancellation in ``E[(x-s)^2] - E[x-s]^2``
  small when the mean is far from zero);
* the backward's two reductions, ``sum(dy)`` and ``sum(dy * (x - mean))``, the same way, then
  ``dx = w * invstd * (dy - sum(dy) / n - xhat * sum(dy * xhat) / n)``.

Planes shorter than a few vectors (BatchNorm1d's (N, C) and short (N, C, L) inputs) run along
each sample's contiguous run of a block's channels instead, element by element, the per-channel
terms spread into per-element rows (`forward_runs`, `backward_runs`), rather than a loop per
(sample, channel) that a one-element plane would leave scalar.

All arithmetic is in double, each result rounded once to the array's dtype as the reference
rounds it (memory, not arithmetic, bounds these loops). Half precision (bfloat16, float16) is
read and written in 16 bits (kernels/chalf.py's conversions; a double rounded as NumPy's and
ml_dtypes' casts round it), the per-channel weight, bias, scale and shift given in double, so
the evaluation affine too computes as the reference does; the graph runner's steps take
float32/float64 only.

The NumPy kernels of ops/batch_norm.py are the specification; these equal them within rounding.
Blocks of channels are shared over kernels/cpool.py's threads. Every entry returns None where it
does not apply (not float32/float64, no compiler, fewer than 2 dimensions, an empty tensor).
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from .. import dtypes as dt
from . import cache_sizes
from .cstep import data_address

__all__ = [
    "eval_forward",
    "eval_normalize",
    "eval_step",
    "fold_step",
    "train_backward",
    "train_forward",
]

_C = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
# the half-precision dtypes the training and affine kernels read and write: their conversions,
# a double rounded to them (bfloat16 through float, as ml_dtypes' cast; float16 once, through
# a float rounded to odd, as NumPy's)
_HALF = {
    np.dtype(dt.bfloat16.np): ("bf16_load", "bf16_store((float)(d))"),
    np.dtype(np.float16): ("f16_load", "f16_store(round_odd(d))"),
}
_P, _L = ctypes.c_void_p, ctypes.c_long
_SERIAL_BYTES = 1 << 16

_SOURCE = r"""
#include <math.h>
#include <stdlib.h>
#include <string.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
#ifndef S /* the storage type of x, dy and the result: T, or 16 bits (LDD and STD convert) */
#define S T
#define LDD(v) ((double)(v))
#define STD(d) ((T)(d))
#define LDF(v) (v)
#define STF(v) (v)
#endif
struct job {
  const S *x, *dy; const T *w, *b; S *out; double *stats; /* stats: per channel (mean, invstd) */
  long n, c, plane, block; double eps;
  double *sums; /* backward: per channel (sum dy, sum dy * xhat) */
};

/* sums of (p[i] - s) and of its square over `len` elements, in double (memory, not
   arithmetic, bounds these loops: double costs nothing here and rounds like the reference) */
static void shifted_sums(const S *p, long len, double s, double *sum, double *sq) {
  double a = 0, q = 0;
#pragma omp simd reduction(+ : a, q)
  for (long i = 0; i < len; i++) {
    double d = LDD(p[i]) - s;
    a += d;
    q += d * d;
  }
  *sum += a;
  *sq += q;
}

static void forward_blocks(void *job_, long lo, long hi) {
  const struct job *j = job_;
  const long C = j->c, P = j->plane, count = j->n * P;
  for (long blk = lo; blk < hi; blk++) {
    const long c0 = blk * j->block, c1 = c0 + j->block < C ? c0 + j->block : C;
    for (long c = c0; c < c1; c++) {
      const double s = LDD(j->x[c * P]);
      double sum = 0, sq = 0;
      for (long n = 0; n < j->n; n++) shifted_sums(j->x + (n * C + c) * P, P, s, &sum, &sq);
      const double dmean = sum / count;
      double var = sq / count - dmean * dmean;
      if (var < 0) var = 0;
      j->stats[2 * c] = s + dmean;
      j->stats[2 * c + 1] = var;
    }
    for (long n = 0; n < j->n; n++)
      for (long c = c0; c < c1; c++) {
        const double invstd = 1.0 / sqrt(j->stats[2 * c + 1] + j->eps);
        const double scale = invstd * (double)j->w[c], mean = j->stats[2 * c];
        const double shift = (double)j->b[c];
        const S *restrict xp = j->x + (n * C + c) * P;
        S *restrict yp = j->out + (n * C + c) * P;
#pragma omp simd
        for (long i = 0; i < P; i++) {
          const double d = (LDD(xp[i]) - mean) * scale + shift;
          yp[i] = STD(d);
        }
      }
  }
}

static void backward_blocks(void *job_, long lo, long hi) {
  const struct job *j = job_;
  const long C = j->c, P = j->plane, count = j->n * P;
  for (long blk = lo; blk < hi; blk++) {
    const long c0 = blk * j->block, c1 = c0 + j->block < C ? c0 + j->block : C;
    for (long c = c0; c < c1; c++) {
      const double mean = j->stats[2 * c];
      double sg = 0, sgx = 0;
      for (long n = 0; n < j->n; n++) {
        const S *restrict xp = j->x + (n * C + c) * P;
        const S *restrict gp = j->dy + (n * C + c) * P;
#pragma omp simd reduction(+ : sg, sgx)
        for (long i = 0; i < P; i++) {
          sg += LDD(gp[i]);
          sgx += LDD(gp[i]) * (LDD(xp[i]) - mean);
        }
      }
      j->sums[2 * c] = sg;
      j->sums[2 * c + 1] = sgx;
    }
    for (long n = 0; n < j->n; n++)
      for (long c = c0; c < c1; c++) {
        const double invstd = j->stats[2 * c + 1], w = (double)j->w[c];
        /* dx = k * (dy - sum(dy) / n) - k * invstd^2 * sum(dy (x - mean)) / n * (x - mean) */
        const double k = w * invstd, g0 = j->sums[2 * c] / count;
        const double r = invstd * invstd * j->sums[2 * c + 1] / count, mean = j->stats[2 * c];
        const S *restrict xp = j->x + (n * C + c) * P;
        const S *restrict gp = j->dy + (n * C + c) * P;
        S *restrict dp = j->out + (n * C + c) * P;
#pragma omp simd
        for (long i = 0; i < P; i++) {
          const double d = k * (LDD(gp[i]) - g0 - (LDD(xp[i]) - mean) * r);
          dp[i] = STD(d);
        }
      }
  }
}

/* The same two kernels for short planes (a channel's run in a sample shorter than a vector):
   along each sample's contiguous run of a block's channels, element by element, each element's
   per-channel terms spread into per-element rows (scratch: `rows` doubles per element), so the
   loops run along memory instead of a plane at a time. */
static void forward_runs(void *job_, long lo, long hi) {
  const struct job *j = job_;
  const long C = j->c, P = j->plane, count = j->n * P, most = j->block * P;
  double *rows = malloc(3 * most * sizeof(double));
  if (!rows) { forward_blocks(job_, lo, hi); return; }
  double *restrict a = rows, *restrict q = rows + most, *restrict m = rows + 2 * most;
  for (long blk = lo; blk < hi; blk++) {
    const long c0 = blk * j->block, c1 = c0 + j->block < C ? c0 + j->block : C;
    const long len = (c1 - c0) * P;
    for (long c = c0; c < c1; c++)
      for (long i = (c - c0) * P; i < (c - c0 + 1) * P; i++)
        a[i] = q[i] = 0, m[i] = LDD(j->x[c * P]);
    for (long n = 0; n < j->n; n++) {
      const S *restrict xp = j->x + (n * C + c0) * P;
#pragma omp simd
      for (long i = 0; i < len; i++) {
        const double d = LDD(xp[i]) - m[i];
        a[i] += d;
        q[i] += d * d;
      }
    }
    for (long c = c0; c < c1; c++) {
      const long at = (c - c0) * P;
      double sum = 0, sq = 0;
      for (long i = at; i < at + P; i++) sum += a[i], sq += q[i];
      const double dmean = sum / count, s = m[at];
      double var = sq / count - dmean * dmean;
      if (var < 0) var = 0;
      j->stats[2 * c] = s + dmean;
      j->stats[2 * c + 1] = var;
      const double scale = 1.0 / sqrt(var + j->eps) * (double)j->w[c];
      for (long i = at; i < at + P; i++) m[i] = s + dmean, a[i] = scale, q[i] = (double)j->b[c];
    }
    for (long n = 0; n < j->n; n++) {
      const S *restrict xp = j->x + (n * C + c0) * P;
      S *restrict yp = j->out + (n * C + c0) * P;
#pragma omp simd
      for (long i = 0; i < len; i++) {
        const double d = (LDD(xp[i]) - m[i]) * a[i] + q[i];
        yp[i] = STD(d);
      }
    }
  }
  free(rows);
}

static void backward_runs(void *job_, long lo, long hi) {
  const struct job *j = job_;
  const long C = j->c, P = j->plane, count = j->n * P, most = j->block * P;
  double *rows = malloc(4 * most * sizeof(double));
  if (!rows) { backward_blocks(job_, lo, hi); return; }
  double *restrict a = rows, *restrict q = rows + most, *restrict m = rows + 2 * most;
  double *restrict r = rows + 3 * most;
  for (long blk = lo; blk < hi; blk++) {
    const long c0 = blk * j->block, c1 = c0 + j->block < C ? c0 + j->block : C;
    const long len = (c1 - c0) * P;
    for (long c = c0; c < c1; c++)
      for (long i = (c - c0) * P; i < (c - c0 + 1) * P; i++)
        a[i] = q[i] = 0, m[i] = j->stats[2 * c];
    for (long n = 0; n < j->n; n++) {
      const S *restrict xp = j->x + (n * C + c0) * P;
      const S *restrict gp = j->dy + (n * C + c0) * P;
#pragma omp simd
      for (long i = 0; i < len; i++) {
        a[i] += LDD(gp[i]);
        q[i] += LDD(gp[i]) * (LDD(xp[i]) - m[i]);
      }
    }
    for (long c = c0; c < c1; c++) {
      const long at = (c - c0) * P;
      double sg = 0, sgx = 0;
      for (long i = at; i < at + P; i++) sg += a[i], sgx += q[i];
      j->sums[2 * c] = sg;
      j->sums[2 * c + 1] = sgx;
      const double invstd = j->stats[2 * c + 1], k = (double)j->w[c] * invstd;
      const double g0 = sg / count, rr = invstd * invstd * sgx / count;
      for (long i = at; i < at + P; i++) a[i] = k, q[i] = g0, r[i] = rr;
    }
    for (long n = 0; n < j->n; n++) {
      const S *restrict xp = j->x + (n * C + c0) * P;
      const S *restrict gp = j->dy + (n * C + c0) * P;
      S *restrict dp = j->out + (n * C + c0) * P;
#pragma omp simd
      for (long i = 0; i < len; i++) {
        const double d = a[i] * (LDD(gp[i]) - q[i] - (LDD(xp[i]) - m[i]) * r[i]);
        dp[i] = STD(d);
      }
    }
  }
  free(rows);
}

static void affine_planes(void *job_, long lo, long hi) {
  const struct job *j = job_;
  for (long p = lo; p < hi; p++) {
    const T scale = j->w[p % j->c], shift = j->b[p % j->c];
    const S *restrict xp = j->x + p * j->plane;
    S *restrict yp = j->out + p * j->plane;
#pragma omp simd
    for (long i = 0; i < j->plane; i++) yp[i] = STF(LDF(xp[i]) * scale + shift);
  }
}

static void run(ember_task task, struct job *j, long count, long bytes, ember_pool pool) {
  if (pool && bytes > SERIAL_BYTES && count > 1) pool(task, j, count, 1);
  else task(j, 0, count);
}

/* stats: double[c][2], out: (mean, biased variance); runs: along each sample's run of a block
   (forward_runs), else plane by plane */
void bn_forward(const S *x, const T *w, const T *b, S *y, double *stats, long n, long c,
                long plane, long block, double eps, long runs, ember_pool pool) {
  struct job j = {x, 0, w, b, y, stats, n, c, plane, block, eps, 0};
  const long blocks = (c + block - 1) / block;
  run(runs ? forward_runs : forward_blocks, &j, blocks, n * c * plane * sizeof(S), pool);
}

/* stats: double[c][2] in: (mean, invstd); sums: double[c][2] out: (sum dy, sum dy (x - mean)) */
void bn_backward(const S *x, const S *dy, const T *w, S *dx, double *stats, double *sums,
                 long n, long c, long plane, long block, long runs, ember_pool pool) {
  struct job j = {x, dy, w, 0, dx, stats, n, c, plane, block, 0, sums};
  const long blocks = (c + block - 1) / block;
  run(runs ? backward_runs : backward_blocks, &j, blocks, n * c * plane * sizeof(S), pool);
}

void bn_affine(const S *x, const T *scale, const T *shift, S *y, long n, long c, long plane,
               ember_pool pool) {
  struct job j = {x, 0, scale, shift, y, 0, n, c, plane, 1, 0, 0};
  run(affine_planes, &j, n * c, n * c * plane * sizeof(S), pool);
}

"""

# the graph runner's steps: float32/float64 only (their per-channel terms are in the data's type)
_STEP_SOURCE = r"""
/* ----------------------------------------------- the graph runner's steps (runtime/cgraph.py) */

/* channel ch's scale w / sqrt(var + eps) and shift b - mean * scale, in double, the reference's
   _scale_shift operation by operation: the product is rounded on its own (a volatile store: the
   compiler may not contract it into a fused multiply-add, which -march=native would otherwise
   emit and which rounds once, not twice), so the terms have NumPy's bits */
static void scale_shift(const T *mean, const T *var, const T *w, const T *b, double eps, long ch,
                        double *scale, double *shift) {
  double s = (double)w[ch] / sqrt((double)var[ch] + eps);
  volatile double product = (double)mean[ch] * s;
  *scale = s;
  *shift = (double)b[ch] - product;
}

/* batch_norm_eval in one call: the per-channel terms (rounded to T, as the eager fast rule
   rounds NumPy's), then the affine; terms: scratch for 2 * c values of T */
void bn_eval(const T *x, const T *mean, const T *var, const T *w, const T *b, T *y, T *terms,
             long n, long c, long plane, double eps, ember_pool pool) {
  for (long ch = 0; ch < c; ch++) {
    double s, t;
    scale_shift(mean, var, w, b, eps, ch, &s, &t);
    terms[ch] = (T)s, terms[c + ch] = (T)t;
  }
  bn_affine(x, terms, terms + c, y, n, c, plane, pool);
}

/* batch_norm_eval: args x, mean, var, weight, bias, out, n, c, plane, eps (a double's bits),
   scale and shift scratch (c each), the pool (or 0) */
void bn_eval_step(const long *a) {
  const T *mean = (const T *)a[1], *var = (const T *)a[2], *w = (const T *)a[3];
  const T *b = (const T *)a[4];
  long c = a[7];
  double eps;
  memcpy(&eps, &a[9], sizeof eps);
  T *scale = (T *)a[10], *shift = (T *)a[11];
  for (long ch = 0; ch < c; ch++) {
    double s, t;
    scale_shift(mean, var, w, b, eps, ch, &s, &t);
    scale[ch] = (T)s, shift[ch] = (T)t;
  }
  bn_affine((const T *)a[0], scale, shift, (T *)a[5], a[6], c, a[8], (ember_pool)a[12]);
}

/* batch_norm_train (ONNX InstanceNormalization and GroupNormalization import as it, so it runs
   at inference): args x, weight, bias, y, mean out, var out, n, c, plane, block, eps (a
   double's bits), runs, the statistics' scratch (2 * c doubles), the pool (or 0); the
   statistics rounded to T as train_forward's astype rounds them */
void bn_train_step(const long *a) {
  double eps;
  memcpy(&eps, &a[10], sizeof eps);
  double *stats = (double *)a[12];
  long c = a[7];
  bn_forward((const T *)a[0], (const T *)a[1], (const T *)a[2], (T *)a[3], stats, a[6], c, a[8],
             a[9], eps, a[11], (ember_pool)a[13]);
  T *mean = (T *)a[4], *var = (T *)a[5];
  for (long ch = 0; ch < c; ch++) mean[ch] = (T)stats[2 * ch], var[ch] = (T)stats[2 * ch + 1];
}

/* batch_norm_fold: the weight (groups x rows x C x cols, C its channels per group) scaled per
   channel by the rounded scale, and the shift (plus shift * scale where given: one value, or
   one per channel). args w, mean, var, weight, bias, shift (or 0), folded out, shift out,
   groups, rows, C, cols, eps (a double's bits), the given shift's count */
void bn_fold_step(const long *a) {
  const T *wt = (const T *)a[0], *mean = (const T *)a[1], *var = (const T *)a[2];
  const T *w = (const T *)a[3], *b = (const T *)a[4], *given = (const T *)a[5];
  T *folded = (T *)a[6], *out_t = (T *)a[7];
  long groups = a[8], rows = a[9], cc = a[10], cols = a[11], count = a[13];
  double eps;
  memcpy(&eps, &a[12], sizeof eps);
  for (long g = 0; g < groups; g++)
    for (long ch = 0; ch < cc; ch++) {
      long channel = g * cc + ch;
      double s, t;
      scale_shift(mean, var, w, b, eps, channel, &s, &t);
      if (given) t = t + (double)given[count == 1 ? 0 : channel] * s;
      out_t[channel] = (T)t;
      const T sf = (T)s;
      for (long r = 0; r < rows; r++) {
        long at = ((g * rows + r) * cc + ch) * cols;
        for (long i = 0; i < cols; i++) folded[at + i] = wt[at + i] * sf;
      }
    }
}
"""


def _source(dtype: np.dtype) -> str:
    head = f"#define SERIAL_BYTES {_SERIAL_BYTES}L\n"
    if dtype in _HALF:  # double per-channel terms, 16-bit data, double arithmetic
        load, store = _HALF[dtype]
        from .chalf import CONVERT

        head += f"#define T double\n#define S uint16_t\n#define LDD(v) ((double){load}(v))\n"
        head += f"#define STD(d) {store}\n#define LDF(v) LDD(v)\n#define STF(d) STD(d)\n"
        return CONVERT + head + _SOURCE
    return head + f"#define T {_C[dtype]}\n" + _SOURCE + _STEP_SOURCE


@functools.cache
def _functions(dtype: np.dtype):
    from . import ccompile, cpool

    if (dtype not in _C and dtype not in _HALF) or not ccompile.compiler_available():
        return None
    source = _source(dtype)
    p, n, d = _P, _L, ctypes.c_double
    try:
        forward = ccompile.load(source, "bn_forward", [p] * 5 + [n] * 4 + [d, n, p])
        backward = ccompile.load(source, "bn_backward", [p] * 6 + [n] * 5 + [p])
        affine = ccompile.load(source, "bn_affine", [p] * 4 + [n] * 3 + [p])
    except ccompile.CompileError:
        return None
    return forward, backward, affine, cpool.parallel_for()


def available(dtype) -> bool:
    """Whether the C kernels run for arrays of ``dtype`` (float32, float64 or half precision,
    with a compiler)."""
    dtype = np.dtype(dtype)
    return (dtype in _C or dtype in _HALF) and _functions(dtype) is not None


def _applies(x: np.ndarray, *per_channel) -> bool:
    """Whether the kernels take ``x`` and its per-channel operands: those in x's dtype, or in
    float32 beside 16-bit data (PyTorch's mixed types; the kernels read such terms in double)."""
    return (
        x.ndim >= 2
        and x.size > 0
        and (x.dtype in _C or x.dtype in _HALF)
        and all(
            o.dtype == x.dtype or (x.dtype in _HALF and o.dtype == np.float32) for o in per_channel
        )
        and _functions(x.dtype) is not None
    )


def _terms(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Per-channel terms as the kernels take them: in the data's dtype, double for half."""
    return np.ascontiguousarray(a, np.float64 if dtype in _HALF else dtype)


def _block(n: int, plane: int, itemsize: int, channels: int) -> int:
    """Channels per block: as many as keep a block's data (input and, in the backward, the
    gradient: two arrays) within half the L2 cache, at least one."""
    per_channel = 2 * n * plane * itemsize
    return max(1, min(channels, (cache_sizes.l2_bytes() // 2) // max(per_channel, 1)))


RUNS = None  # (tests and measurements: True or False forces one form of the training kernels)


def _runs(plane: int) -> int:
    """Whether the training kernels run along each sample's run of a block of channels rather
    than plane by plane: for planes too short to fill the plane loops' vectors (their
    arithmetic is in double: under four 64-byte vectors of doubles, 32 elements, whatever the
    storage type), where those loops would spend their time starting and ending."""
    if RUNS is not None:
        return int(RUNS)
    return int(plane < 32)


def train_forward(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float):
    """``(y, mean, var)``: the normalized ``x`` scaled by ``weight`` and shifted by ``bias``
    per channel (dimension 1), and the batch mean and biased variance (in the weight's dtype),
    or None."""
    if not _applies(x, weight, bias):
        return None
    forward, _, _, pool = _functions(x.dtype)
    x, channel = np.ascontiguousarray(x), weight.dtype
    weight, bias = _terms(weight, x.dtype), _terms(bias, x.dtype)
    n, c = x.shape[:2]
    plane = x.size // (n * c)
    y = np.empty_like(x)
    stats = np.empty((c, 2), np.float64)
    block = _block(n, plane, x.itemsize, c)
    a = data_address
    runs = _runs(plane)
    forward(a(x), a(weight), a(bias), a(y), a(stats), n, c, plane, block, float(eps), runs, pool)
    return y, stats[:, 0].astype(channel), stats[:, 1].astype(channel)


def train_backward(gy, x, mean, var, weight, eps: float):
    """``(gx, gweight, gbias)`` of `train_forward` given the output gradient ``gy`` and the
    saved ``mean`` and biased ``var`` (the parameters' gradients in the weight's dtype), or
    None."""
    if not _applies(x, mean, var, weight):
        return None
    if gy.dtype != x.dtype:
        return None
    _, backward, _, pool = _functions(x.dtype)
    x, gy, channel = np.ascontiguousarray(x), np.ascontiguousarray(gy), weight.dtype
    weight = _terms(weight, x.dtype)
    n, c = x.shape[:2]
    plane = x.size // (n * c)
    invstd = 1.0 / np.sqrt(var.astype(np.float64) + float(eps))
    stats = np.ascontiguousarray(np.stack([mean.astype(np.float64), invstd], axis=1))
    sums = np.empty((c, 2), np.float64)
    gx = np.empty_like(x)
    block = _block(n, plane, x.itemsize, c)
    a = data_address
    runs = _runs(plane)
    backward(a(x), a(gy), a(weight), a(gx), a(stats), a(sums), n, c, plane, block, runs, pool)
    gweight = (sums[:, 1] * invstd).astype(channel)
    return gx, gweight, sums[:, 0].astype(channel)


def eval_forward(x: np.ndarray, scale: np.ndarray, shift: np.ndarray):
    """``x * scale + shift`` with one (scale, shift) per channel (dimension 1; in any float
    dtype: rounded to x's, double for half precision), or None."""
    if not _applies(x):
        return None
    _, _, affine, pool = _functions(x.dtype)
    x = np.ascontiguousarray(x)
    scale, shift = _terms(scale, x.dtype), _terms(shift, x.dtype)
    n, c = x.shape[:2]
    y = np.empty_like(x)
    affine(data_address(x), data_address(scale), data_address(shift), data_address(y), n, c,
           x.size // (n * c), pool)  # fmt: skip
    return y


@functools.cache
def _eval_function(dtype: np.dtype):
    from . import ccompile

    if dtype not in _C or _functions(dtype) is None:  # (float32/float64, as the steps)
        return None
    try:
        args = [_P] * 7 + [_L] * 3 + [ctypes.c_double, _P]
        found = ccompile.load(_source(dtype), "bn_eval", args)
    except ccompile.CompileError:
        return None
    return found, _functions(dtype)[3]


def eval_normalize(x: np.ndarray, mean, var, weight, bias, eps: float):
    """``batch_norm_eval`` in one C call: the per-channel terms ``weight / sqrt(var + eps)``
    and ``bias - mean * scale`` computed in double as ops/batch_norm.py's ``_scale_shift``
    computes them (the same bits: no fused multiply-add), rounded to x's dtype, then the
    affine of `eval_forward`; or None (not float32/float64, the per-channel operands not of
    x's dtype or not contiguous, no compiler, fewer than 2 dimensions, an empty tensor)."""
    dtype = x.dtype
    if dtype not in _C or x.ndim < 2 or x.size == 0:
        return None
    c = x.shape[1]
    for a in (mean, var, weight, bias):
        if a.dtype != dtype or a.size != c or not a.flags.c_contiguous:
            return None
    found = _eval_function(dtype)
    if found is None:
        return None
    function, pool = found
    x = np.ascontiguousarray(x)
    y = np.empty_like(x)
    terms = np.empty(2 * c, dtype)
    n = x.shape[0]
    address = data_address
    function(address(x), address(mean), address(var), address(weight), address(bias),
             address(y), address(terms), n, c, x.size // (n * c), float(eps), pool)  # fmt: skip
    return y


@functools.cache
def _step(dtype: np.dtype, name: str):
    from . import ccompile

    if dtype not in _C or _functions(dtype) is None:  # (the steps: float32/float64)
        return None
    try:
        return ccompile.load(_source(dtype), name, [_P])
    except ccompile.CompileError:
        return None


def _eps_bits(eps: float) -> int:
    return int(np.array([eps], np.float64).view(np.int64)[0])


def eval_step(x_shape: tuple, dtype, eps: float):
    """The graph runner's step of ``batch_norm_eval`` on an (N, C, *spatial) ``x`` (inputs x,
    mean, var, weight, bias in slots 0 to 4, the result in 5), or None."""
    from .cstep import CStep, function_address

    dtype = np.dtype(dtype)
    step = _step(dtype, "bn_eval_step")
    if step is None or len(x_shape) < 2 or 0 in x_shape:
        return None
    n, c = x_shape[:2]
    terms = np.empty(2 * c, dtype)  # the rounded scale and shift
    args = [0] * 6 + [n, c, int(np.prod(x_shape[2:], dtype=np.int64)), _eps_bits(eps)]
    args += [
        data_address(terms),
        data_address(terms) + c * dtype.itemsize,
        _functions(dtype)[3] or 0,
    ]
    slots = [(i, "in", i) for i in range(5)] + [(5, "out", 0)]
    return CStep(function_address(step), np.array(args, np.int64), slots, (step, terms))


def train_step(x_shape: tuple, dtype, eps: float):
    """The graph runner's step of ``batch_norm_train`` on an (N, C, *spatial) ``x`` of
    float32/float64 with per-channel operands in its dtype (inputs x, weight, bias in slots 0
    to 2; outputs y, mean, var in 3 to 5): `train_forward`'s call, or None."""
    from .cstep import CStep, function_address

    dtype = np.dtype(dtype)
    step = _step(dtype, "bn_train_step")
    if step is None or len(x_shape) < 2 or 0 in x_shape:
        return None
    n, c = x_shape[:2]
    plane = int(np.prod(x_shape[2:], dtype=np.int64))
    stats = np.empty((c, 2), np.float64)
    args = [0] * 6 + [n, c, plane, _block(n, plane, dtype.itemsize, c), _eps_bits(eps)]
    args += [_runs(plane), data_address(stats), _functions(dtype)[3] or 0]
    slots = [(i, "in", i) for i in range(3)] + [(3 + i, "out", i) for i in range(3)]
    return CStep(function_address(step), np.array(args, np.int64), slots, (step, stats))


def fold_step(view: tuple, axis: int, dtype, eps: float, shifted: int):
    """The graph runner's step of ``batch_norm_fold`` (inputs w, mean, var, weight, bias and,
    where ``shifted`` is its element count (1 or the channels), the shift; outputs the folded
    weight and the shift), or None. ``view``: the weight as (groups, rows per group, ...),
    its channels along ``axis + 1`` (ops/batch_norm.py's ``_fold_view``)."""
    from .cstep import CStep, function_address

    dtype = np.dtype(dtype)
    step = _step(dtype, "bn_fold_step")
    if step is None or 0 in view:
        return None
    groups = view[0]
    rows = int(np.prod(view[1 : axis + 1], dtype=np.int64))
    cols = int(np.prod(view[axis + 2 :], dtype=np.int64))
    args = [0] * 8 + [groups, rows, view[axis + 1], cols, _eps_bits(eps), shifted]
    slots = [(i, "in", i) for i in range(5 + bool(shifted))] + [(6, "out", 0), (7, "out", 1)]
    return CStep(function_address(step), np.array(args, np.int64), slots, (step,))
