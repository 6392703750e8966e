"""Grid sampling in C, forward and backward: the kernels of ops/grid_sample.py's ops.

The NumPy kernels (ops/_grid_sample_kernels.py, with the tap rules of ops/_grid_taps.py) are
the specification; this C follows them operation for operation, compiled with
``-ffp-contract=off``, so the forward and, with one channel block, the gradients are their
bits. The layout is PyTorch's CPU kernel's: positions along the vectors, channels in the outer
loop. A block of 128 grid points has its taps computed once (each tap's offset in a plane, whether
it lies inside the image, its weight and, for the backward, its weight's derivative along each
axis); then every channel reads its plane at those offsets (a gather the compiler vectorizes):

* forward: ``acc = 0; acc += W_k * v_k`` over the taps (nearest copies its one tap);
* backward: ``dx[offset_k] += W_k * g`` point after point, tap after tap (a scatter, in the
  NumPy kernel's order), and per axis ``acc_a += g * sum_k D_ak v_k`` channel after channel,
  ``dgrid_a = acc_a * mult_a``.

Work is shared over the pool by (sample, block of points) forward and (sample, block of
channels) backward, each task writing its own part of dx; a small batch splits its channels
into a few blocks (chosen from the shapes, not the thread count, so results do not depend on
the threads) whose grid gradients are summed afterwards. Half precision is widened to float32
first and the results rounded once, as the NumPy kernel computes it. Each function returns None
where it does not apply (no compiler, another dtype, planes past 2^31 values) and the caller
runs NumPy.
"""

from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from . import chalf
from .cstep import data_address

__all__ = ["available", "grid_sample", "grid_sample_backward"]

_SOURCE = r"""
#include <tgmath.h>
#include <stdlib.h>
#include <string.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);

#define BLOCK 128
#define MAXK 16
#define A (-0.75)
enum { BILINEAR = 0, NEAREST = 1, BICUBIC = 2 };
enum { ZEROS = 0, BORDER = 1, REFLECTION = 2 };

struct gs {
  const T *x, *grid, *g;
  T *y, *dx, *dgrid, *partial;
  long n, c, dims, len, points, cblocks, cper, pblocks;
  long size[3], stride[3];
  int mode, padding, align, want_dx, want_dgrid;
};

/* one block's taps: K per point, the point index inner */
struct taps {
  int off[MAXK][BLOCK];
  unsigned char ok[MAXK][BLOCK];
  T w[MAXK][BLOCK];
  T d[3][MAXK][BLOCK];
  T mult[3][BLOCK];
};

/* one axis's taps of a block of points (ops/_grid_taps.py's axis_taps), the point inner */
struct axis {
  T pos[4][BLOCK], w[4][BLOCK], dw[4][BLOCK], mult[BLOCK];
  unsigned char ok[4][BLOCK];
  int k;
};

/* the padding mode's move of c[0..m) in place; mult[i] *= its derivative's factor */
static inline void move_block(T *restrict c, T *restrict mult, long m, long size, int padding,
                              int align) {
  T hi = (T)(size - 1);
  if (padding == BORDER) {
#pragma omp simd
    for (long i = 0; i < m; i++) {
      T v = c[i];
      int inside = v > 0 && v < hi;
      c[i] = v > 0 ? (v < hi ? v : hi) : (T)0;
      mult[i] = (inside ? (T)1 : (T)0) * mult[i];
    }
    return;
  }
  if (align && size <= 1) {
    for (long i = 0; i < m; i++) c[i] = 0, mult[i] = (T)0 * mult[i];
    return;
  }
  T low = align ? (T)0 : (T)-0.5;
  T twice = align ? (T)(2.0 * (double)(size - 1)) : (T)(2.0 * (double)size);
#pragma omp simd
  for (long i = 0; i < m; i++) {
    T a = align ? c[i] : c[i] - low;
    int negative = a < 0;
    T r = fabs(a);
    T extra = r - trunc(r / twice) * twice;
    int flip = extra > twice - extra;
    T v = flip ? twice - extra : extra;
    v = align ? v : v + low;
    int inside = v > 0 && v < hi;
    c[i] = v > 0 ? (v < hi ? v : hi) : (T)0;
    mult[i] = (inside ? (flip != negative ? (T)-1 : (T)1) : (T)0) * mult[i];
  }
}

static void axis_block(struct axis *t, const T *restrict u, long dims, long m, long size,
                       int mode, int padding, int align) {
  T scale = align ? (T)((double)(size - 1) / 2.0) : (T)((double)size / 2.0);
  T hi = (T)(size - 1);
  T c[BLOCK];
  if (align) {
#pragma omp simd
    for (long i = 0; i < m; i++) c[i] = (u[i * dims] + 1) * scale;
  } else {
#pragma omp simd
    for (long i = 0; i < m; i++) c[i] = (u[i * dims] + 1) * scale - (T)0.5;
  }
  for (long i = 0; i < m; i++) t->mult[i] = scale;
  if (mode == BICUBIC) {
    t->k = 4;
#pragma omp simd
    for (long i = 0; i < m; i++) {
      T base = floor(c[i]), s = c[i] - base;
      T x0 = s + 1, x2 = 1 - s, x3 = 2 - s;
      t->w[0][i] = (((T)A * x0 - (T)(5 * A)) * x0 + (T)(8 * A)) * x0 - (T)(4 * A);
      t->w[1][i] = (((T)(A + 2) * s - (T)(A + 3)) * s) * s + 1;
      t->w[2][i] = (((T)(A + 2) * x2 - (T)(A + 3)) * x2) * x2 + 1;
      t->w[3][i] = (((T)A * x3 - (T)(5 * A)) * x3 + (T)(8 * A)) * x3 - (T)(4 * A);
      t->dw[0][i] = ((T)(3 * A) * x0 - (T)(10 * A)) * x0 + (T)(8 * A);
      t->dw[1][i] = ((T)(3 * (A + 2)) * s - (T)(2 * (A + 3))) * s;
      t->dw[2][i] = -(((T)(3 * (A + 2)) * x2 - (T)(2 * (A + 3))) * x2);
      t->dw[3][i] = -(((T)(3 * A) * x3 - (T)(10 * A)) * x3 + (T)(8 * A));
      for (int k = 0; k < 4; k++) t->pos[k][i] = base + (T)(k - 1);
    }
    for (int k = 0; k < 4; k++) {
      if (padding != ZEROS) {
        T ignored[BLOCK] = {0};
        move_block(t->pos[k], ignored, m, size, padding, align);
#pragma omp simd
        for (long i = 0; i < m; i++) t->pos[k][i] = trunc(t->pos[k][i]);
      }
#pragma omp simd
      for (long i = 0; i < m; i++) t->ok[k][i] = t->pos[k][i] >= 0 && t->pos[k][i] <= hi;
    }
    return;
  }
  if (padding != ZEROS) move_block(c, t->mult, m, size, padding, align);
  if (mode == NEAREST) {
    t->k = 1;
#pragma omp simd
    for (long i = 0; i < m; i++) {
      T p = rint(c[i]);
      t->pos[0][i] = p;
      t->ok[0][i] = p >= 0 && p <= hi;
      t->w[0][i] = 1;
    }
    return;
  }
  t->k = 2;
#pragma omp simd
  for (long i = 0; i < m; i++) {
    T base = floor(c[i]), s = c[i] - base;
    t->pos[0][i] = base;
    t->pos[1][i] = base + 1;
    t->w[0][i] = 1 - s;
    t->w[1][i] = s;
    t->dw[0][i] = -1;
    t->dw[1][i] = 1;
    t->ok[0][i] = base >= 0 && base <= hi;
    t->ok[1][i] = base + 1 >= 0 && base + 1 <= hi;
  }
}

/* the taps of points [p0, p0 + m) of sample n; returns the number of taps per point */
static int block_taps(const struct gs *j, long n, long p0, long m, struct taps *b,
                      struct axis *ax, int deriv) {
  long dims = j->dims;
  const T *u = j->grid + (n * j->points + p0) * dims;
  for (long a = 0; a < dims; a++)
    axis_block(&ax[a], u + dims - 1 - a, dims, m, j->size[a], j->mode, j->padding, j->align);
  int kk = 1;
  for (long a = 0; a < dims; a++) kk *= ax[a].k;
  for (int k = 0; k < kk; k++) {
    int idx[3] = {0, 0, 0}, rest = k;
    for (long a = dims - 1; a >= 0; a--) idx[a] = rest % ax[a].k, rest /= ax[a].k;
    const struct axis *a0 = &ax[0], *a1 = &ax[1], *a2 = &ax[dims == 3 ? 2 : 1];
    int k0 = idx[0], k1 = idx[1], k2 = idx[2];
    long s0 = j->stride[0], s1 = j->stride[1];
    if (dims == 2) {
#pragma omp simd
      for (long i = 0; i < m; i++) {
        int ok = a0->ok[k0][i] & a1->ok[k1][i];
        b->ok[k][i] = (unsigned char)ok;
        b->off[k][i] = ok ? (int)a0->pos[k0][i] * (int)s0 + (int)a1->pos[k1][i] : 0;
        b->w[k][i] = a0->w[k0][i] * a1->w[k1][i];
      }
      if (deriv)
#pragma omp simd
        for (long i = 0; i < m; i++) {
          b->d[0][k][i] = a0->dw[k0][i] * a1->w[k1][i];
          b->d[1][k][i] = a0->w[k0][i] * a1->dw[k1][i];
        }
    } else {
#pragma omp simd
      for (long i = 0; i < m; i++) {
        int ok = a0->ok[k0][i] & a1->ok[k1][i] & a2->ok[k2][i];
        b->ok[k][i] = (unsigned char)ok;
        b->off[k][i] = ok ? (int)a0->pos[k0][i] * (int)s0 + (int)a1->pos[k1][i] * (int)s1 +
                                (int)a2->pos[k2][i]
                          : 0;
        b->w[k][i] = a0->w[k0][i] * a1->w[k1][i] * a2->w[k2][i];
      }
      if (deriv)
#pragma omp simd
        for (long i = 0; i < m; i++) {
          b->d[0][k][i] = a0->dw[k0][i] * a1->w[k1][i] * a2->w[k2][i];
          b->d[1][k][i] = a0->w[k0][i] * a1->dw[k1][i] * a2->w[k2][i];
          b->d[2][k][i] = a0->w[k0][i] * a1->w[k1][i] * a2->dw[k2][i];
        }
    }
  }
  for (long a = 0; a < dims; a++) memcpy(b->mult[a], ax[a].mult, sizeof(T) * m);
  return kk;
}

/* every channel's plane read at a block's K taps a point (K a constant: the sum stays in a
   register); an outside tap reads offset 0 and drops it */
#define SAMPLE_K(K)                                                                          \
  static void sample_##K(const T *restrict x, T *restrict y, long len, long points, long c, \
                         const struct taps *restrict b, long m) {                            \
    for (long ch = 0; ch < c; ch++) {                                                        \
      const T *restrict xc = x + ch * len;                                                   \
      T *restrict yc = y + ch * points;                                                      \
      _Pragma("omp simd") for (long i = 0; i < m; i++) {                                     \
        T acc = 0;                                                                           \
        for (int k = 0; k < K; k++) {                                                        \
          T v = xc[b->off[k][i]];                                                            \
          acc = acc + b->w[k][i] * (b->ok[k][i] ? v : (T)0);                                 \
        }                                                                                    \
        yc[i] = acc;                                                                         \
      }                                                                                      \
    }                                                                                        \
  }
SAMPLE_K(4)
SAMPLE_K(8)
SAMPLE_K(16)

/* nearest: a copy of its one tap */
static void sample_nearest(const T *restrict x, T *restrict y, long len, long points, long c,
                           const struct taps *b, long m) {
  for (long ch = 0; ch < c; ch++) {
    const T *restrict xc = x + ch * len;
    T *restrict yc = y + ch * points;
#pragma omp simd
    for (long i = 0; i < m; i++) yc[i] = b->ok[0][i] ? xc[b->off[0][i]] : (T)0;
  }
}

static void forward_items(void *job_, long lo, long hi) {
  const struct gs *j = job_;
  struct taps *b = malloc(sizeof(struct taps) + 3 * sizeof(struct axis));
  if (!b) return;
  struct axis *ax = (struct axis *)(b + 1);
  for (long item = lo; item < hi; item++) {
    long n = item / j->pblocks, p0 = (item % j->pblocks) * BLOCK;
    long m = j->points - p0 < BLOCK ? j->points - p0 : BLOCK;
    int kk = block_taps(j, n, p0, m, b, ax, 0);
    const T *x = j->x + n * j->c * j->len;
    T *y = j->y + n * j->c * j->points + p0;
    if (j->mode == NEAREST) sample_nearest(x, y, j->len, j->points, j->c, b, m);
    else if (kk == 4) sample_4(x, y, j->len, j->points, j->c, b, m);
    else if (kk == 8) sample_8(x, y, j->len, j->points, j->c, b, m);
    else sample_16(x, y, j->len, j->points, j->c, b, m);
  }
  free(b);
}

int ember_grid_sample(const T *x, const T *grid, T *y, long n, long c, long dims,
                      const long *size, long points, int mode, int padding, int align,
                      ember_pool pool, long parallel_min) {
  struct gs j = {0};
  j.x = x, j.grid = grid, j.y = y, j.n = n, j.c = c, j.dims = dims, j.points = points;
  j.mode = mode, j.padding = padding, j.align = align;
  j.len = 1;
  for (long a = dims - 1; a >= 0; a--) j.size[a] = size[a], j.stride[a] = j.len, j.len *= size[a];
  j.pblocks = (points + BLOCK - 1) / BLOCK;
  long items = n * j.pblocks;
  if (pool && items > 1 && n * c * points >= parallel_min) pool(forward_items, &j, items, 1);
  else forward_items(&j, 0, items);
  return 0;
}

static void backward_items(void *job_, long lo, long hi) {
  const struct gs *j = job_;
  struct taps *b = malloc(sizeof(struct taps) + 3 * sizeof(struct axis) + sizeof(T) * MAXK * BLOCK);
  if (!b) return;
  struct axis *ax = (struct axis *)(b + 1);
  T(*wg)[BLOCK] = (T(*)[BLOCK])(ax + 3); /* one channel's weighted gradients */
  long dims = j->dims;
  int grid_grad = j->want_dgrid && j->mode != NEAREST;
  for (long item = lo; item < hi; item++) {
    long n = item / j->cblocks, cb = item % j->cblocks;
    long c0 = cb * j->cper, c1 = c0 + j->cper < j->c ? c0 + j->cper : j->c;
    for (long p0 = 0; p0 < j->points; p0 += BLOCK) {
      long m = j->points - p0 < BLOCK ? j->points - p0 : BLOCK;
      int kk = block_taps(j, n, p0, m, b, ax, grid_grad);
      T acc[3][BLOCK];
      for (long a = 0; a < dims; a++)
        for (long i = 0; i < m; i++) acc[a][i] = 0;
      for (long c = c0; c < c1; c++) {
        const T *restrict gc = j->g + (n * j->c + c) * j->points + p0;
        if (j->want_dx) {
          T *restrict dxc = j->dx + (n * j->c + c) * j->len;
          if (j->mode == NEAREST) {
            for (long i = 0; i < m; i++)
              if (b->ok[0][i]) dxc[b->off[0][i]] += gc[i];
          } else {
            for (int k = 0; k < kk; k++)
#pragma omp simd
              for (long i = 0; i < m; i++) wg[k][i] = b->w[k][i] * gc[i];
            for (long i = 0; i < m; i++)
              for (int k = 0; k < kk; k++)
                if (b->ok[k][i]) dxc[b->off[k][i]] += wg[k][i];
          }
        }
        if (!grid_grad) continue;
        const T *restrict xc = j->x + (n * j->c + c) * j->len;
        T s[3][BLOCK];
        for (long a = 0; a < dims; a++)
          for (long i = 0; i < m; i++) s[a][i] = 0;
        for (int k = 0; k < kk; k++) {
          T v[BLOCK];
#pragma omp simd
          for (long i = 0; i < m; i++) v[i] = b->ok[k][i] ? xc[b->off[k][i]] : (T)0;
          for (long a = 0; a < dims; a++)
#pragma omp simd
            for (long i = 0; i < m; i++) s[a][i] = s[a][i] + b->d[a][k][i] * v[i];
        }
        for (long a = 0; a < dims; a++)
#pragma omp simd
          for (long i = 0; i < m; i++) acc[a][i] = acc[a][i] + gc[i] * s[a][i];
      }
      if (!grid_grad) continue;
      T *out = j->cblocks > 1 ? j->partial + (cb * j->n * j->points) * dims : j->dgrid;
      out += (n * j->points + p0) * dims;
      for (long i = 0; i < m; i++)
        for (long a = 0; a < dims; a++) out[i * dims + dims - 1 - a] = acc[a][i] * b->mult[a][i];
    }
  }
  free(b);
}

int ember_grid_sample_backward(const T *x, const T *grid, const T *g, T *dx, T *dgrid, long n,
                               long c, long dims, const long *size, long points, int mode,
                               int padding, int align, int want_dx, int want_dgrid,
                               long cblocks, ember_pool pool, long parallel_min) {
  struct gs j = {0};
  j.x = x, j.grid = grid, j.g = g, j.dx = dx, j.dgrid = dgrid, j.n = n, j.c = c;
  j.dims = dims, j.points = points, j.mode = mode, j.padding = padding, j.align = align;
  j.want_dx = want_dx, j.want_dgrid = want_dgrid;
  j.len = 1;
  for (long a = dims - 1; a >= 0; a--) j.size[a] = size[a], j.stride[a] = j.len, j.len *= size[a];
  j.cblocks = cblocks;
  j.cper = (c + cblocks - 1) / cblocks;
  long values = n * points * dims;
  if (cblocks > 1 && want_dgrid && mode != NEAREST) {
    j.partial = malloc(sizeof(T) * cblocks * values);
    if (!j.partial) return 1;
  }
  long items = n * cblocks;
  if (pool && items > 1 && n * c * points >= parallel_min) pool(backward_items, &j, items, 1);
  else backward_items(&j, 0, items);
  if (j.partial) {
    for (long i = 0; i < values; i++) {
      T total = j.partial[i];
      for (long cb = 1; cb < cblocks; cb++) total = total + j.partial[cb * values + i];
      dgrid[i] = total;
    }
    free(j.partial);
  }
  return 0;
}
"""

_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fopenmp-simd", "-fno-math-errno")
_FLAGS += ("-fno-trapping-math", "-ffp-contract=off", "-std=gnu11")
_P, _L, _I = ctypes.c_void_p, ctypes.c_long, ctypes.c_int
_SIGNATURES = {
    "ember_grid_sample": [_P, _P, _P, _L, _L, _L, _P, _L, _I, _I, _I, _P, _L],
    "ember_grid_sample_backward": [_P, _P, _P, _P, _P, _L, _L, _L, _P, _L, _I, _I, _I, _I, _I]
    + [_L, _P, _L],
}
_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
_PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}
_TAPS = {"bilinear": 2, "nearest": 1, "bicubic": 4}


@functools.cache
def _functions(dtype: np.dtype):
    """({symbol: function}, the pool) for ``dtype``, or None (no compiler, a failed build)."""
    from . import ccompile, cpool

    if dtype not in _TYPES or not ccompile.compiler_available():
        return None
    source = f"#define T {_TYPES[dtype]}\n" + _SOURCE
    try:
        found = {
            name: ccompile.load(source, name, args, flags=_FLAGS)
            for name, args in _SIGNATURES.items()
        }
    except ccompile.CompileError:
        return None
    for fn in found.values():
        fn.restype = ctypes.c_int
    return found, cpool.parallel_for()


def _compute(dtype) -> np.dtype | None:
    dtype = np.dtype(dtype)
    if dtype in _TYPES:
        return dtype
    return np.dtype(np.float32) if dtype in chalf.NAMES else None


def available(dtype) -> bool:
    """Whether the kernels run for arrays of ``dtype`` (a compiler is there, they built)."""
    compute = _compute(dtype)
    return compute is not None and _functions(compute) is not None


def _prepare(*arrays):
    """(the functions and pool, the arrays C-contiguous in the compute dtype), or None."""
    dtype = arrays[0].dtype
    compute = _compute(dtype)
    if compute is None or any(a.dtype != dtype for a in arrays):
        return None
    found = _functions(compute)
    if found is None:
        return None
    if compute != dtype:
        arrays = [chalf.to_float32(a) for a in arrays]
    return found, [a if a.flags.c_contiguous else np.ascontiguousarray(a) for a in arrays]


def _geometry(x, grid):
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    points = math.prod(grid.shape[1:-1])
    return n, c, spatial, points


def _fits(x, grid) -> bool:
    """The kernels' offsets are 32-bit within one plane."""
    return x.ndim in (4, 5) and math.prod(x.shape[2:]) < 2**31 and x.size > 0 and grid.size > 0


def _finish(result, dtype):
    return result if result.dtype == dtype else chalf.from_float32(result, dtype)


def grid_sample(x, grid, mode: str, padding_mode: str, align_corners: bool):
    """The sampled (N, C, *grid's spatial) values, or None."""
    if not _fits(x, grid):
        return None
    prepared = _prepare(x, grid)
    if prepared is None:
        return None
    (fns, pool), (xc, gc) = prepared
    from .cfuse import PARALLEL_MIN

    n, c, spatial, points = _geometry(x, grid)
    y = np.empty((n, c, *grid.shape[1:-1]), dtype=xc.dtype)
    sizes = (ctypes.c_long * len(spatial))(*spatial)
    taps = _TAPS[mode] ** len(spatial)
    fns["ember_grid_sample"](
        data_address(xc), data_address(gc), data_address(y), n, c, len(spatial), sizes, points,
        _MODES[mode], _PADDINGS[padding_mode], int(align_corners), pool,
        max(PARALLEL_MIN // taps, 1),
    )  # fmt: skip
    return _finish(y, x.dtype)


def channel_blocks(n: int, c: int) -> int:
    """How many blocks of channels a sample's backward splits into: enough tasks for a few
    threads when the batch is small, blocks of 8 channels at least; from the shapes alone, so
    the grid gradient's sums do not depend on the thread count."""
    if n >= 4:
        return 1
    return max(1, min(-(-4 // max(n, 1)), c // 8))


def grid_sample_backward(x, grid, g, mode, padding_mode, align_corners, output_mask):
    """``(dx, dgrid)`` of `grid_sample` for the output gradient ``g``, or None."""
    if not _fits(x, grid) or g.shape != (*x.shape[:2], *grid.shape[1:-1]):
        return None
    prepared = _prepare(x, grid, g)
    if prepared is None:
        return None
    (fns, pool), (xc, gridc, gc) = prepared
    from .cfuse import PARALLEL_MIN

    n, c, spatial, points = _geometry(x, grid)
    dx = np.zeros(xc.shape, dtype=xc.dtype)
    dgrid = np.zeros(gridc.shape, dtype=xc.dtype)
    sizes = (ctypes.c_long * len(spatial))(*spatial)
    taps = _TAPS[mode] ** len(spatial)
    failed = fns["ember_grid_sample_backward"](
        *map(data_address, (xc, gridc, gc, dx, dgrid)),
        n, c, len(spatial), sizes, points, _MODES[mode], _PADDINGS[padding_mode],
        int(align_corners), int(bool(output_mask[0])), int(bool(output_mask[1])),
        channel_blocks(n, c), pool, max(PARALLEL_MIN // (2 * taps), 1),
    )  # fmt: skip
    if failed:
        return None
    return _finish(dx, x.dtype), _finish(dgrid, x.dtype)
