"""Group normalization in C with its per-channel affine, forward and backward, one row pass
(or two) each: the kernels of ops/group_norm.py's ops.

An input (N, C, *spatial) is N * groups rows of K = (C / groups) * spatial values, each row
``C / groups`` runs of ``spatial`` values that share one channel's weight and bias. The formula
is the NumPy kernel's (ops/group_norm.py, the specification; PyTorch's CPU kernel's) operation
for operation, compiled with ``-ffp-contract=off``:

* forward: each row's mean and biased variance accumulated in double (two passes; in float32
  one, of the deviations from the row's first value), then ``(x - mean) * rstd * w[c] + b[c]``;
* backward: ``dx = rstd * ((u - mean(u)) - xhat * mean(u * xhat))`` with ``u = w[c] * g``, and
  ``dw[c] = sum(g * xhat)``, ``db[c] = sum(g)`` over the batch and the spatial positions, in
  double per block of rows and then over blocks. In float32 a row's four sums are gathered in
  one double-precision pass and a second writes dx (as layer norm's kernel does: the row is
  read twice, not four times); in float64 the statistics keep their two passes.

Half precision (bfloat16, float16) is read and written in 16 bits and computed as float32 is,
each result rounded once. Each function returns None where it does not apply (no compiler, a
dtype other than those) and the caller runs NumPy.
"""

from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from . import chalf
from .cnorm_act import ROW_STATS
from .cstep import data_address

__all__ = ["available", "group_norm", "group_norm_backward"]

_SOURCE = (
    r"""
#include <math.h>
#include <stdlib.h>
#include <string.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
#ifndef HALF /* S: the storage type (T, or 16 bits that LD widens and ST rounds) */
#define HALF 0
#define S T
#define LD(v) (v)
#define ST(v) (v)
#endif

struct gn {
  const S *x, *w, *b, *g;
  S *y;
  double *partial; /* per block: dw then db, 2 C doubles */
  long rows, groups, per_group, spatial, block;
  double eps;
};

"""
    + ROW_STATS
    + r"""

static inline void affine_run(const S *restrict x, S *restrict y, long n, T mean, T rstd, T w,
                              T b) {
#pragma omp simd
  for (long i = 0; i < n; i++) y[i] = ST((LD(x[i]) - mean) * rstd * w + b);
}

static void gn_rows(void *job_, long lo, long hi) {
  const struct gn *j = job_;
  long cg = j->per_group, sp = j->spatial, k = cg * sp;
  for (long r = lo; r < hi; r++) {
    const S *x = j->x + r * k;
    S *y = j->y + r * k;
    double m, rs;
#if ONE_PASS_STATS
    /* (float data: the row read once, the sums of (x - x[0]) and its square in double; the
       shift keeps E[d^2] - E[d]^2 from cancelling when the mean is far from zero) */
    const double shift = (double)LD(x[0]);
    double s = 0, q = 0;
#pragma omp simd reduction(+ : s, q)
    for (long i = 0; i < k; i++) {
      double v = (double)LD(x[i]) - shift;
      s += v;
      q += v * v;
    }
    const double dm = s / (double)k;
    m = shift + dm;
    double var = q / (double)k - dm * dm;
    rs = 1.0 / sqrt((var < 0 ? 0 : var) + j->eps); /* (rounding can make it negative) */
#else
    row_stats(x, k, j->eps, &m, &rs);
#endif
    long first = (r % j->groups) * cg;
    for (long c = 0; c < cg; c++)
      affine_run(x + c * sp, y + c * sp, sp, (T)m, (T)rs, LD(j->w[first + c]),
                 LD(j->b[first + c]));
  }
}

void ember_group_norm(const S *x, const S *w, const S *b, S *y, long rows, long groups,
                      long per_group, long spatial, double eps, ember_pool pool,
                      long parallel_min) {
  struct gn j = {x, w, b, 0, y, 0, rows, groups, per_group, spatial, 0, eps};
  if (pool && rows > 1 && rows * per_group * spatial >= parallel_min)
    pool(gn_rows, &j, rows, 1);
  else
    gn_rows(&j, 0, rows);
}

/* one channel's run of a row: dx, and its dw and db terms (returned through sw, sb) */
static inline void grad_run(const S *restrict x, const S *restrict g, S *restrict dx, long n,
                            T mean, T rstd, T w, T mu, T mux, double *sw, double *sb) {
  double a = 0, c = 0;
#pragma omp simd reduction(+ : a, c)
  for (long i = 0; i < n; i++) {
    T xhat = (LD(x[i]) - mean) * rstd;
    T gi = LD(g[i]);
    dx[i] = ST(rstd * ((w * gi - mu) - xhat * mux));
    a += (double)(gi * xhat);
    c += (double)gi;
  }
  *sw += a;
  *sb += c;
}

static void gn_grad_row(const struct gn *j, long r, double *restrict pw, double *restrict pb) {
  long cg = j->per_group, sp = j->spatial, k = cg * sp, first = (r % j->groups) * cg;
  const S *x = j->x + r * k, *g = j->g + r * k;
  S *dx = j->y + r * k;
  double inv_k = 1.0 / (double)k, m, rs, su = 0, sux = 0;
#if ONE_PASS_STATS
  double s = 0, q = 0;
  for (long c = 0; c < cg; c++) {
    const S *restrict xc = x + c * sp, *restrict gc = g + c * sp;
    T w = LD(j->w[first + c]);
#pragma omp simd reduction(+ : s, q, su, sux)
    for (long i = 0; i < sp; i++) {
      double v = (double)LD(xc[i]), u = (double)(w * LD(gc[i]));
      s += v;
      q += v * v;
      su += u;
      sux += u * v;
    }
  }
  m = s * inv_k;
  double var = q * inv_k - m * m;
  rs = 1.0 / sqrt((var < 0 ? 0 : var) + j->eps); /* (rounding can make it negative) */
  sux = rs * (sux - m * su);
#else
  row_stats(x, k, j->eps, &m, &rs);
  {
    T mean = (T)m, rstd = (T)rs;
    for (long c = 0; c < cg; c++) {
      const S *restrict xc = x + c * sp, *restrict gc = g + c * sp;
      T w = LD(j->w[first + c]);
#pragma omp simd reduction(+ : su, sux)
      for (long i = 0; i < sp; i++) {
        T u = w * LD(gc[i]);
        su += (double)u;
        sux += (double)(u * ((LD(xc[i]) - mean) * rstd));
      }
    }
  }
#endif
  T mean = (T)m, rstd = (T)rs;
  T mu = (T)(su * inv_k), mux = (T)(sux * inv_k);
  for (long c = 0; c < cg; c++)
    grad_run(x + c * sp, g + c * sp, dx + c * sp, sp, mean, rstd, LD(j->w[first + c]), mu, mux,
             pw + first + c, pb + first + c);
}

static void gn_grad_blocks(void *job_, long lo, long hi) {
  const struct gn *j = job_;
  long channels = j->groups * j->per_group;
  for (long blk = lo; blk < hi; blk++) {
    double *pw = j->partial + 2 * channels * blk, *pb = pw + channels;
    memset(pw, 0, sizeof(double) * 2 * channels);
    long r_end = (blk + 1) * j->block < j->rows ? (blk + 1) * j->block : j->rows;
    for (long r = blk * j->block; r < r_end; r++) gn_grad_row(j, r, pw, pb);
  }
}

int ember_group_norm_backward(const S *x, const S *w, const S *g, S *dx, S *dw, S *db,
                              long rows, long groups, long per_group, long spatial, double eps,
                              long blocks, ember_pool pool) {
  long channels = groups * per_group;
  double *partial = malloc(sizeof(double) * 2 * channels * blocks);
  if (!partial) return 1;
  long block = (rows + blocks - 1) / blocks;
  struct gn j = {x, w, 0, g, dx, partial, rows, groups, per_group, spatial, block, eps};
  if (pool && blocks > 1) pool(gn_grad_blocks, &j, blocks, 1);
  else gn_grad_blocks(&j, 0, blocks);
  for (long c = 0; c < channels; c++) {
    double sw = 0, sb = 0;
    for (long blk = 0; blk < blocks; blk++) {
      sw += partial[2 * channels * blk + c];
      sb += partial[2 * channels * blk + channels + c];
    }
    dw[c] = ST((T)sw);
    db[c] = ST((T)sb);
  }
  free(partial);
  return 0;
}
"""
)

_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_TYPES.update(dict.fromkeys(chalf.NAMES, "float"))  # (16-bit storage, float arithmetic)
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fopenmp-simd", "-fno-math-errno")
_FLAGS += ("-fno-trapping-math", "-ffp-contract=off", "-std=gnu11")
_P, _L, _D = ctypes.c_void_p, ctypes.c_long, ctypes.c_double
_SIGNATURES = {
    "ember_group_norm": [_P, _P, _P, _P, _L, _L, _L, _L, _D, _P, _L],
    "ember_group_norm_backward": [_P, _P, _P, _P, _P, _P, _L, _L, _L, _L, _D, _L, _P],
}


@functools.cache
def _functions(dtype: np.dtype):
    """({symbol: function}, the pool) for ``dtype``, or None (no compiler, a failed build)."""
    from . import ccompile, cpool

    if dtype not in _TYPES or not ccompile.compiler_available():
        return None
    c_type = _TYPES[dtype]
    source = f"#define T {c_type}\n#define ONE_PASS_STATS {int(c_type == 'float')}\n"
    if dtype in chalf.NAMES:
        source = chalf.storage_defines(dtype) + source
    source += _SOURCE
    try:
        found = {
            name: ccompile.load(source, name, args, flags=_FLAGS)
            for name, args in _SIGNATURES.items()
        }
    except ccompile.CompileError:
        return None
    # (load declares no result: the backward's is 1 when its workspace is not allocated)
    found["ember_group_norm_backward"].restype = ctypes.c_int
    return found, cpool.parallel_for()


def available(dtype) -> bool:
    """Whether the kernels run for arrays of ``dtype`` (a compiler is there, they built)."""
    return _functions(np.dtype(dtype)) is not None


def _geometry(x: np.ndarray, groups: int) -> tuple[int, int, int]:
    """(rows, channels per group, spatial size) of an (N, C, *spatial) input."""
    n, c = x.shape[:2]
    return n * groups, c // groups, math.prod(x.shape[2:])


def _prepare(*arrays):
    dtype = arrays[0].dtype
    if any(a.dtype != dtype for a in arrays):
        return None, arrays
    return _functions(dtype), [
        a if a.flags.c_contiguous else np.ascontiguousarray(a) for a in arrays
    ]


def group_norm(x, w, b, groups: int, eps: float):
    """``(x - mean) * rstd * w[c] + b[c]`` over each sample's groups, or None."""
    if x.ndim < 2 or x.size == 0:
        return None
    found, (x, w, b) = _prepare(x, w, b)
    if found is None:
        return None
    (fns, pool), (rows, per_group, spatial) = found, _geometry(x, groups)
    from .cfuse import PARALLEL_MIN  # the fused loops' threshold for waking threads

    y = np.empty_like(x)
    fns["ember_group_norm"](
        data_address(x), data_address(w), data_address(b), data_address(y),
        rows, groups, per_group, spatial, float(eps), pool, PARALLEL_MIN,
    )  # fmt: skip
    return y


def group_norm_backward(x, w, g, groups: int, eps: float):
    """``(dx, dw, db)`` of `group_norm` for the output gradient ``g``, or None."""
    if x.ndim < 2 or x.size == 0 or g.shape != x.shape:
        return None
    found, (x, w, g) = _prepare(x, w, g)
    if found is None:
        return None
    from . import cpool
    from .cfuse import PARALLEL_MIN

    (fns, pool), (rows, per_group, spatial) = found, _geometry(x, groups)
    # a few blocks of rows per thread, each with its own partial dw and db; one when serial
    parallel = pool is not None and rows > 1 and x.size >= PARALLEL_MIN
    blocks = min(rows, 4 * cpool.get_num_threads()) if parallel else 1
    dx = np.empty_like(x)
    dw, db = np.empty(w.shape, x.dtype), np.empty(w.shape, x.dtype)
    failed = fns["ember_group_norm_backward"](
        data_address(x), data_address(w), data_address(g), data_address(dx), data_address(dw),
        data_address(db), rows, groups, per_group, spatial, float(eps), blocks,
        pool if parallel else None,
    )  # fmt: skip
    return None if failed else (dx, dw, db)
