"""Compiled depthwise convolutions: the forward, its input gradient and its weight gradient for
``groups == in_channels`` (each output channel reads one input channel; a channel multiplier
``out_channels / groups`` above 1 included), 1-d and 2-d, any stride, padding and dilation.

The grouped path of kernels/cconv.py runs a depthwise convolution as one tiny GEMM per channel
(one output row padded to a panel of eight): mostly padding. A depthwise convolution does a few
multiply-adds per element it moves, so it is bound by memory, and these kernels touch each
element once: per (sample, channel) plane, the plane is copied into a zero-framed scratch that
stays in the L1/L2 cache, and each output row is one loop over its width with the kernel's taps
unrolled (the geometry is compiled in: one small library per kernel size, stride and dilation,
cached on disk by kernels/ccompile.py), so no bounds are checked inside a row and the loop is
vectorized over the width.

* forward: ``y[oh, ow] = sum_k w[k] * framed_x[oh * s + kh * d, ow * s + kw * d]``; where
  strided along the width the frame's columns are stored phase by phase (column c at phase
  c % s), so each tap's inputs are read at unit stride;
* input gradient: stride 1 is the forward of the framed output gradient with the flipped
  kernel (a gather, vectorized; finite weights only); larger strides and non-finite weights
  add each gradient row into the framed input plane tap by tap (a strided scatter) and crop
  the frame;
* weight gradient: blocks of samples in parallel, each plane's taps as lane sums as wide as
  an output row (vectorized over the width, in the operands' dtype), summed per plane into
  the block's double partial sums, which are added at the end.

Sums run in another order than the NumPy kernels of ops/_conv_kernels.py (the specification),
so results equal them within rounding; the zero frame makes padding behave as theirs does (a
non-finite weight or gradient times a padded zero is NaN in both). Planes (forward, input
gradient) or blocks of samples (weight gradient) are shared over kernels/cpool.py's threads.
Half precision (bfloat16, float16) is read and written in 16 bits and computed in float32:
planes are widened as they are framed, weights as they are read, each result rounded once as
it is stored (the input gradient of a channel multiplier above 1 adds its channels into the
result: in 16 bits it would round each sum, so that one declines). The forward and the input
gradient take an optional bias per channel, added to the float sums before the store (in half
precision before its one rounding, as PyTorch's convolutions round).

Planes too narrow for these row-wide loops (mostly remainder lanes: 7 or 14 wide) go to
kernels/cdepthwise_wide.py's channels-wide kernels (multiplier 1, float32 and float64), which
put a block of channels along the vectors; `_wide` asks its counted choice per geometry, the
same for the eager kernels and the graph runner's step, and these run where it declines.

Every entry returns None where it does not apply (not depthwise, 3-d, not a float dtype above,
no compiler, a negative low padding, an empty tensor) and the caller runs the grouped path.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from . import cdepthwise_wide, chalf
from .cstep import data_address

__all__ = ["conv_forward", "conv_input_grad", "conv_weight_grad", "multiplier"]

_C = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
# half precision: stored in 16 bits, computed in float (kernels/chalf.py's conversions)
_HALF = chalf.NAMES
_P, _L = ctypes.c_void_p, ctypes.c_long
# x, w, y, pool; N, Cin, M, H, W, OH, OW, PH, PW (lo padding), H-extent, W-extent of the frame;
# then the bias (or None), or the weight gradient's count of blocks
_ARGS = [_P, _P, _P, _P] + [_L] * 11
_WEIGHT_TAIL = {"dw_weight_grad": _L}
# work (multiply-adds) below which a call stays on the calling thread
_SERIAL_WORK = 1 << 15

_SOURCE = r"""
#include <stdlib.h>
#include <string.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
#define KK (KH * KW)
#ifndef S /* the storage type of the operands and results: T, or 16 bits (LD, ST convert) */
#define HALF 0
#define S T
#define LD(v) (v)
#define ST(v) (v)
#endif
struct job {
  const S *a; const S *w; S *out;
  long n, cin, m, h, w_, oh, ow, ph, pw, fh, fw, blocks;
  const S *bias; /* (forward, input gradient) one per output channel, or 0 */
};
/* the bias of channel c as the stores add it to the float sums: -0.0, the identity, if none
   (half precision: added before the one rounding, as PyTorch's convolutions round) */
#define BIAS(j, c) ((j)->bias ? LD((j)->bias[c]) : (T)-0.0)

/* copy plane src (rows x cols) into the zeroed frame (fh rows of pitch fw) at (r0, c0),
   clipped to fh rows and `limit` columns (columns past it stay zero) */
static void frame_rows(T *frame, long fh, long fw, long limit, const S *src, long rows,
                       long cols, long r0, long c0) {
  long ncols = cols;
  if (c0 + ncols > limit) ncols = limit - c0;
  if (ncols <= 0) return;
  for (long r = 0; r < rows && r0 + r < fh; r++) {
#if HALF /* widened as framed */
    T *restrict to = frame + (r0 + r) * fw + c0;
    const S *restrict from = src + r * cols;
#pragma omp simd
    for (long c = 0; c < ncols; c++) to[c] = LD(from[c]);
#else
    memcpy(frame + (r0 + r) * fw + c0, src + r * cols, ncols * sizeof(T));
#endif
  }
}

static void frame_plane(T *frame, long fh, long fw, const S *src, long rows, long cols,
                        long r0, long c0) {
  frame_rows(frame, fh, fw, fw, src, rows, cols, r0, c0);
}

/* the bytes of one vector register, for the choice of a flat loop below */
#if defined(__AVX512F__)
#define VBYTES 64
#elif defined(__AVX__)
#define VBYTES 32
#else
#define VBYTES 16
#endif
#define LANES (VBYTES / (long)sizeof(T))

/* The loops over a kernel's taps carry `#pragma GCC unroll 16` (a side is at most 16 taps,
   `_geometry`): the loop over the row's outputs around them vectorizes only where they are
   unrolled whole, and GCC unrolls whole on its own only loops of up to 16 iterations in all,
   so a 5x5 or 7x7 kernel (25, 49 taps) ran that loop one output at a time. */

/* stride 1 on rows whose outputs leave a long remainder after the row's whole vectors (rows
   narrower than a vector, or 28 wide: `FLAT`): the taps over the frame as one flat loop of
   rows * fw results (each row's last fw - cols are read past its end and dropped), then the
   rows copied out (added to `out` when `add`) with b added; a loop per row would run mostly
   remainders */
static void flat_taps(const T *restrict frame, long fw, long rows, long cols, const T *wk,
                      T *restrict ext, S *restrict out, int add, T b) {
  /* whole vectors: the last one's extra results read the frame's slack and are dropped */
  const long len = (rows * fw + LANES - 1) / LANES * LANES;
#pragma omp simd
  for (long i = 0; i < len; i++) {
    T s = 0;
#pragma GCC unroll 16
    for (int kh = 0; kh < KH; kh++)
#pragma GCC unroll 16
      for (int kw = 0; kw < KW; kw++) s += wk[kh * KW + kw] * frame[i + kh * DH * fw + kw * DW];
    ext[i] = s;
  }
  for (long r = 0; r < rows; r++) {
#if HALF /* (never adding: a multiplier's input gradient declines half precision) */
    for (long c = 0; c < cols; c++) out[r * cols + c] = ST(ext[r * fw + c] + b);
#else
    if (add)
      for (long c = 0; c < cols; c++) out[r * cols + c] += ext[r * fw + c] + b;
    else
      for (long c = 0; c < cols; c++) out[r * cols + c] = ext[r * fw + c] + b;
#endif
  }
}
/* Stride 1 takes the flat loop where it runs fewer vector iterations a row, fw / LANES, than
   the loop over a row's outputs: its whole vectors, then one scalar iteration for each output
   left over (GCC's epilogue; a 28-wide row under a 7x7 kernel ran 12 of its 28 outputs one
   at a time, each with its 49 taps). */
#define FLAT(cols, fw) \
  (SH == 1 && SW == 1 && (fw) < LANES * ((cols) / LANES + (cols) % LANES))
/* a flat loop reads up to (KW - 1) * DW past the frame's last row, and its last vector up to
   LANES - 1 further: zeros (the results after it, `ext`, take rows * fw + LANES values) */
#define SLACK ((KW - 1) * DW + 1 + LANES)

#if SW > 1
/* A strided forward frames its plane's columns phase by phase (column c at phase c % SW,
   index c / SW, each phase a run of `pwid` values in a row of pitch SW * pwid), so that an
   output row reads each tap's inputs at unit stride: output ow's tap kw reads column
   ow * SW + kw * DW, phase (kw * DW) % SW, index ow + (kw * DW) / SW; read at stride SW, the
   loop over the row's outputs would gather. */
static void frame_phased(T *frame, long fh, long pitch, long pwid, long limit, const S *src,
                         long rows, long cols, long r0, long c0) {
  long ncols = cols;
  if (c0 + ncols > limit) ncols = limit - c0;
  if (ncols <= 0) return;
  for (long r = 0; r < rows && r0 + r < fh; r++) {
    const S *restrict from = src + r * cols;
    for (long q = 0; q < SW; q++) {  /* the source columns of phase q: c0 + c = q (mod SW) */
      const long first = ((q - c0 % SW) % SW + SW) % SW;
      if (first >= ncols) continue;
      const long count = (ncols - first + SW - 1) / SW;
      T *restrict to = frame + (r0 + r) * pitch + q * pwid + (c0 + first) / SW;
      const S *restrict at = from + first;
      for (long i = 0; i < count; i++) to[i] = LD(at[i * SW]);
    }
  }
}

/* a framed row's pitch and the column of output ow's tap kw in it */
#define PITCH(fw) (SW * (((fw) + SW - 1) / SW))
#define TAP_COL(ow, kw, fw) ((((kw) * DW) % SW) * (((fw) + SW - 1) / SW) + ((kw) * DW) / SW + (ow))
#define FRAME(frame, fh, fw, src, rows, cols, r0, c0) \
  frame_phased(frame, fh, PITCH(fw), ((fw) + SW - 1) / SW, fw, src, rows, cols, r0, c0)
#else
#define PITCH(fw) (fw)
#define TAP_COL(ow, kw, fw) ((ow) + (kw) * DW)
#define FRAME(frame, fh, fw, src, rows, cols, r0, c0) \
  frame_plane(frame, fh, fw, src, rows, cols, r0, c0)
#endif

/* forward: out planes (n, co), input plane (n, co / m) */
static void forward_planes(void *job_, long lo, long hi) {
  const struct job *j = job_;
  const long fh = j->fh, fw = j->fw, pitch = PITCH(fw), OH = j->oh, OW = j->ow;
  const long cout = j->cin * j->m;
  T *frame = calloc(fh * pitch + SLACK + OH * fw + LANES, sizeof(T));
  if (!frame) return;
  T *ext = frame + fh * pitch + SLACK;
  for (long p = lo; p < hi; p++) {
    const long n = p / cout, co = p % cout;
    FRAME(frame, fh, fw, j->a + (n * j->cin + co / j->m) * j->h * j->w_, j->h, j->w_, j->ph,
          j->pw);
    T wk[KK];
    for (int k = 0; k < KK; k++) wk[k] = LD(j->w[co * KK + k]);
    S *y = j->out + p * OH * OW;
    const T b = BIAS(j, co);
    if (FLAT(OW, fw)) {  /* (stride 1 only: the pitch is fw) */
      flat_taps(frame, fw, OH, OW, wk, ext, y, 0, b);
      continue;
    }
    for (long oh = 0; oh < OH; oh++) {
      const T *xr = frame + oh * SH * pitch;
      S *restrict yr = y + oh * OW;
#pragma omp simd
      for (long ow = 0; ow < OW; ow++) {
        T s = 0;
#pragma GCC unroll 16
        for (int kh = 0; kh < KH; kh++)
#pragma GCC unroll 16
          for (int kw = 0; kw < KW; kw++)
            s += wk[kh * KW + kw] * xr[kh * DH * pitch + TAP_COL(ow, kw, fw)];
        yr[ow] = ST(s + b);
      }
    }
  }
  free(frame);
}

/* input gradient, stride 1: dx plane (n, ci) = sum over its m output channels of the forward
   of the framed gradient (frame offset (KH-1)*DH - ph, (KW-1)*DW - pw) with the flipped taps */
static void input_grad_gather(void *job_, long lo, long hi) {
  const struct job *j = job_;
  const long fh = j->fh, fw = j->fw, H = j->h, W = j->w_, OH = j->oh, OW = j->ow;
  const long r0 = (KH - 1) * DH - j->ph, c0 = (KW - 1) * DW - j->pw, cout = j->cin * j->m;
  T *frame = calloc(fh * fw + SLACK + H * fw + LANES, sizeof(T));
  if (!frame) return;
  T *ext = frame + fh * fw + SLACK;
  for (long p = lo; p < hi; p++) {
    const long n = p / j->cin, ci = p % j->cin;
    S *dx = j->out + p * H * W;
    for (long c = 0; c < j->m; c++) {
      const long co = ci * j->m + c;
      frame_plane(frame, fh, fw, j->a + (n * cout + co) * OH * OW, OH, OW, r0, c0);
      T wk[KK];
      for (int k = 0; k < KK; k++) wk[k] = LD(j->w[co * KK + (KK - 1 - k)]);
      /* the bias joins the plane's last channel's sums */
      const T b = c == j->m - 1 ? BIAS(j, ci) : (T)-0.0;
      if (FLAT(W, fw)) {
        flat_taps(frame, fw, H, W, wk, ext, dx, c > 0, b);
        continue;
      }
      for (long ih = 0; ih < H; ih++) {
        const T *gr = frame + ih * fw;
        S *restrict xr = dx + ih * W;
#pragma omp simd
        for (long iw = 0; iw < W; iw++) {
          T s = c ? LD(xr[iw]) : 0; /* (half precision: c is 0, the multiplier 1) */
#pragma GCC unroll 16
          for (int kh = 0; kh < KH; kh++)
#pragma GCC unroll 16
            for (int kw = 0; kw < KW; kw++)
              s += wk[kh * KW + kw] * gr[kh * DH * fw + iw + kw * DW];
          xr[iw] = ST(s + b);
        }
      }
    }
  }
  free(frame);
}

/* input gradient, any stride: each gradient row added into the framed input plane tap by tap,
   then the plane cropped out of the frame. The frame's columns are kept de-interleaved by
   their phase modulo the stride (column c at phase c % SW, index c / SW), so that a tap's
   contributions, SW columns apart, land in consecutive elements: a vectorized add instead of
   a strided scatter. The crop re-interleaves them. */
static void input_grad_scatter(void *job_, long lo, long hi) {
  const struct job *j = job_;
  const long fh = j->fh, fw = j->fw, H = j->h, W = j->w_, OH = j->oh, OW = j->ow;
  const long cout = j->cin * j->m, qw = fw / SW + 1;
  T *frame = malloc((fh + 1) * SW * qw * sizeof(T));
  if (!frame) return;
  for (long p = lo; p < hi; p++) {
    const long n = p / j->cin, ci = p % j->cin;
    memset(frame, 0, fh * SW * qw * sizeof(T));
    for (long c = 0; c < j->m; c++) {
      const long co = ci * j->m + c;
      const S *g = j->a + (n * cout + co) * OH * OW;
      for (long oh = 0; oh < OH; oh++) {
        const S *restrict gr = g + oh * OW;
        for (int kh = 0; kh < KH; kh++)
          for (int kw = 0; kw < KW; kw++) {
            const T wv = LD(j->w[co * KK + kh * KW + kw]);
            const long col = kw * DW;
            T *restrict fr = frame + ((oh * SH + kh * DH) * SW + col % SW) * qw + col / SW;
#pragma omp simd
            for (long ow = 0; ow < OW; ow++) fr[ow] += wv * LD(gr[ow]);
          }
      }
    }
    S *dx = j->out + p * H * W;
    const T b = BIAS(j, ci);
    for (long ih = 0; ih < H; ih++) {
      const T *restrict row = frame + (ih + j->ph) * SW * qw;
      T *restrict line = frame + fh * SW * qw; /* (one interleaved row past the frame) */
      for (long q = 0; q < qw; q++)
        for (int r = 0; r < SW; r++) line[q * SW + r] = row[r * qw + q];
      for (long c = 0; c < W; c++) dx[ih * W + c] = ST(line[j->pw + c] + b);
    }
  }
  free(frame);
}

/* weight gradient: block b of samples, all channels, planes in memory order (a channel's planes
   lie a whole sample apart: walking them channel by channel was several times slower). Per
   plane, per stretch of V output columns (one vector), the taps' products summed over the
   rows in V lanes each (registers), added to the channel's V lanes kept over the block, which
   are summed into the block's double partial sums (out_partial[b][co][k]) at its end: float32
   sums run over the block's rows (a horizontal sum per plane cost more than the plane's
   products on small planes). The gradient plane is
   copied into rows padded to whole vectors and the input frame is as wide as those vectors
   read; the products of lanes past the output's width are dropped by a select (never added
   as 0 * x, which is NaN where x is not finite) */
#define V (VBYTES / (long)sizeof(T))
static void weight_grad_blocks(void *job_, long lo, long hi) {
  const struct job *j = job_;
  const long fh = j->fh, fw = j->fw, OH = j->oh, OW = j->ow, cout = j->cin * j->m;
  const long blocks = j->blocks, OWp = (OW + V - 1) / V * V;
  const long pitch = (OWp - 1) * SW + (KW - 1) * DW + 1;
  T *frame = calloc(fh * pitch + OH * OWp + cout * KK * V, sizeof(T));
  if (!frame) return;
  T *gframe = frame + fh * pitch;
  T *kept = gframe + OH * OWp; /* per channel and tap, V lane sums over the block */
  double *partial = (double *)j->out;
  for (long b = lo; b < hi; b++) {
    double *acc = partial + b * cout * KK;
    memset(kept, 0, cout * KK * V * sizeof(T));
    for (long n = b * j->n / blocks; n < (b + 1) * j->n / blocks; n++)
      for (long co = 0; co < cout; co++) {
        frame_rows(frame, fh, pitch, fw, j->a + (n * j->cin + co / j->m) * j->h * j->w_, j->h,
                   j->w_, j->ph, j->pw);
        frame_rows(gframe, OH, OWp, OW, j->w + (n * cout + co) * OH * OW, OH, OW, 0, 0);
        for (long ow0 = 0; ow0 < OWp; ow0 += V) {
          T lanes[KK][V];
          memset(lanes, 0, sizeof lanes);
          const long valid = OW - ow0; /* lanes past it only read (their products dropped) */
          for (long oh = 0; oh < OH; oh++) {
            const T *gr = gframe + oh * OWp + ow0;
            const T *xr = frame + oh * SH * pitch + ow0 * SW;
            for (int kh = 0; kh < KH; kh++)
              for (int kw = 0; kw < KW; kw++) {
                const T *xk = xr + kh * DH * pitch + kw * DW;
#pragma omp simd
                for (long v = 0; v < V; v++) {
                  const T p = xk[v * SW] * gr[v];
                  lanes[kh * KW + kw][v] += v < valid ? p : 0;
                }
              }
          }
          T *restrict into = kept + co * KK * V;
          for (int k = 0; k < KK; k++)
#pragma omp simd
            for (long v = 0; v < V; v++) into[k * V + v] += lanes[k][v];
        }
      }
    for (long i = 0; i < cout * KK; i++) {
      double s = 0;
      for (long v = 0; v < V; v++) s += kept[i * V + v];
      acc[i] = s;
    }
  }
  free(frame);
}

static void run(ember_task task, struct job *j, long count, long work, ember_pool pool) {
  if (pool && work > SERIAL_WORK && count > 1) pool(task, j, count, 1);
  else task(j, 0, count);
}

#define ENTRY(name, task, count, work)                                                      \
  void name(const S *a, const S *w, S *out, ember_pool pool, long n, long cin, long m,      \
            long h, long w_, long oh, long ow, long ph, long pw, long fh, long fw,         \
            const S *bias) {                                                                \
    struct job j = {a, w, out, n, cin, m, h, w_, oh, ow, ph, pw, fh, fw, 0, bias};          \
    run(task, &j, count, work, pool);                                                      \
  }
ENTRY(dw_forward, forward_planes, n * cin * m, n * cin * m * oh * ow * KK)
/* the graph runner's step (runtime/cgraph.py): args x, w, out, the pool (or 0), then
   dw_forward's eleven sizes, then the bias (or 0) */
void dw_forward_step(const long *a) {
  dw_forward((const S *)a[0], (const S *)a[1], (S *)a[2], (ember_pool)a[3], a[4], a[5], a[6],
             a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], (const S *)a[15]);
}
ENTRY(dw_input_grad_gather, input_grad_gather, n * cin, n * cin * m * h * w_ * KK)
ENTRY(dw_input_grad_scatter, input_grad_scatter, n * cin, n * cin * m * oh * ow * KK)
/* the weight gradient's partial sums, double[blocks][cin * m][KK], go to out */
void dw_weight_grad(const S *x, const S *g, double *out, ember_pool pool, long n, long cin,
                    long m, long h, long w_, long oh, long ow, long ph, long pw, long fh, long fw,
                    long blocks) {
  struct job j = {x, g, (S *)out, n, cin, m, h, w_, oh, ow, ph, pw, fh, fw, blocks, 0};
  run(weight_grad_blocks, &j, blocks, n * cin * m * oh * ow * KK, pool);
}
"""


def multiplier(x_channels: int, w_shape: tuple, groups: int) -> int | None:
    """The channel multiplier of a depthwise convolution (``groups`` equal to the input
    channels, more than one; one input channel per filter), or None for any other."""
    if groups <= 1 or groups != x_channels or w_shape[1] != 1 or w_shape[0] % groups:
        return None
    return w_shape[0] // groups


def _head(dtype: np.dtype, kernel: tuple, stride: tuple, dilation: tuple) -> str:
    """The defines that specialise the source to a dtype and a 2-d geometry."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    return (
        f"#define KH {kh}\n#define KW {kw}\n#define SH {sh}\n"
        f"#define SW {sw}\n#define DH {dh}\n#define DW {dw}\n#define SERIAL_WORK {_SERIAL_WORK}L\n"
    ) + _types(dtype)


def _types(dtype: np.dtype) -> str:
    """The storage and compute types (half precision: 16 bits, computed in float)."""
    if dtype in _HALF:
        return chalf.storage_defines(dtype) + "#define T float\n"
    return f"#define T {_C[dtype]}\n"


@functools.cache
def _functions(dtype: np.dtype, kernel: tuple, stride: tuple, dilation: tuple):
    from . import ccompile, cpool

    if (dtype not in _C and dtype not in _HALF) or not ccompile.compiler_available():
        return None
    head = _head(dtype, kernel, stride, dilation)
    names = ("dw_forward", "dw_input_grad_gather", "dw_input_grad_scatter", "dw_weight_grad")
    try:
        found = {
            name: ccompile.load(head + _SOURCE, name, _ARGS + [_WEIGHT_TAIL.get(name, _P)])
            for name in names
        }
    except ccompile.CompileError:
        return None
    return found, cpool.parallel_for()


def _geometry(a: np.ndarray, b: np.ndarray, p, groups: int, x_channels: int, w_shape: tuple):
    """(functions, pool, 2-d plan fields) or None where these kernels do not apply."""
    if a.dtype != b.dtype or (a.dtype not in _C and a.dtype not in _HALF):
        return None
    if a.ndim not in (3, 4) or not a.size:
        return None
    if multiplier(x_channels, w_shape, groups) is None or any(lo < 0 for lo in p.lo):
        return None
    if not b.size or any(k > 16 for k in p.kernel) or any(s > 8 for s in p.stride):
        return None  # (one library per geometry: keep the set of geometries small)
    two = (lambda t: tuple(t)) if a.ndim == 4 else (lambda t: (1,) + tuple(t))
    kernel, stride, dilation = two(p.kernel), two(p.stride), two(p.dilation)
    found = _functions(a.dtype, kernel, stride, dilation)
    if found is None:
        return None
    lo = two(p.lo) if a.ndim == 4 else (0,) + tuple(p.lo)
    return found, kernel, stride, dilation, two(p.in_size), two(p.out_size), lo


def _wide(op: str, m: int, geometry: tuple, n: int, c: int, in_size, out_size, frame, top):
    """Whether ``op`` runs kernels/cdepthwise_wide.py's channels-wide kernels (multiplier 1,
    float32 and float64, where they count fewer vector instructions than these); ``top``:
    the frame row of the source's first row."""
    from . import cpool

    dtype, kernel, stride, dilation = geometry
    if dtype in _HALF and op == "weight_grad":
        # (16-bit operands' weight gradient: the float32 one's choice, so the same sums)
        dtype = np.dtype(np.float32)
    if m != 1 or dtype not in _C:
        return False
    threads = cpool.get_num_threads()
    return cdepthwise_wide.wins(
        op, n, c, in_size, out_size, kernel, stride, dilation, frame, top, dtype, threads
    )


def _measured_wide(key: tuple, m: int, geometry: tuple, counted: bool, wide, rows) -> bool:
    """Whether an eager forward or input gradient runs the channels-wide kernels: where they
    apply, the counted choice unless the other way measured clearly faster on this geometry's
    first call (kernels/cdepthwise_choice.py; the two give the same bits)."""
    from . import cdepthwise_choice, cpool

    if m != 1 or geometry[0] not in _C:
        return False
    threads = cpool.get_num_threads()
    return cdepthwise_choice.wide_runs(key + (threads,), counted, wide, rows, threads)


def _frame(out_size, kernel, stride, dilation) -> tuple:
    """The extent of the framed input that the output reads."""
    return tuple(
        (o - 1) * s + d * (k - 1) + 1 for o, k, s, d in zip(out_size, kernel, stride, dilation)
    )


def _bias(bias, dtype):
    """The bias as the kernels read it (contiguous, the operands' dtype), or None."""
    return None if bias is None else np.ascontiguousarray(bias, dtype)


def conv_forward(x: np.ndarray, w: np.ndarray, p, groups: int, bias=None):
    """The depthwise ``conv(x, w)`` (+ ``bias`` per output channel, added to the float sums
    before the one rounding of half precision) of plan ``p``, or None where it does not
    apply."""
    g = _geometry(x, w, p, groups, x.shape[1], w.shape)
    if g is None:
        return None
    bias = _bias(bias, x.dtype)
    (fns, pool), kernel, stride, dilation, in_size, out_size, lo = g
    x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
    n, cin = x.shape[:2]
    y = np.empty((n, w.shape[0]) + tuple(p.out_size), x.dtype)
    fh, fw = _frame(out_size, kernel, stride, dilation)
    m = w.shape[0] // cin
    geometry = (x.dtype, kernel, stride, dilation)
    counted = _wide("forward", m, geometry, n, cin, in_size, out_size, (fh, fw), lo[0])

    def wide():
        return cdepthwise_wide.forward(x, w, y, geometry, in_size, out_size, lo, (fh, fw), bias)

    def rows():
        fns["dw_forward"](
            data_address(x),
            data_address(w),
            data_address(y),
            pool,
            n,
            cin,
            m,
            *in_size,
            *out_size,
            *lo,
            fh,
            fw,
            None if bias is None else data_address(bias),
        )

    key = ("forward", x.shape, w.shape, geometry, lo, bias is None)
    if _measured_wide(key, m, geometry, counted, wide, rows) and wide():
        return y
    rows()
    return y


def forward_step(x_shape: tuple, w_shape: tuple, p, groups: int, dtype, bias: bool = False):
    """The graph runner's step of a 2-d depthwise forward convolution (slots: x 0, w 1, the
    result 2, and the node's operand 2, its bias, where ``bias``), or None where
    `conv_forward` would not run."""
    from . import ccompile
    from .cstep import CStep, function_address

    dtype = np.dtype(dtype)
    if len(x_shape) != 4 or (dtype not in _C and dtype not in _HALF):
        return None
    # (arrays of the shapes, for the geometry's checks: no memory behind them)
    x, w = (np.broadcast_to(np.zeros((), dtype), s) for s in (x_shape, w_shape))
    g = _geometry(x, w, p, groups, x_shape[1], w_shape)
    if g is None:
        return None
    (_, pool), kernel, stride, dilation, in_size, out_size, lo = g
    n, cin = x_shape[:2]
    m = w_shape[0] // cin
    fh, fw = _frame(out_size, kernel, stride, dilation)
    geometry = (dtype, kernel, stride, dilation)
    if _wide("forward", m, geometry, n, cin, in_size, out_size, (fh, fw), lo[0]):
        # (the channels-wide kernels: the same choice as `conv_forward`'s, the same bits)
        source = cdepthwise_wide.source(*geometry)
        sizes = [n, cin, *in_size, *out_size, *lo, fh, fw]
        args, bias_slot = [0, 0, 0, pool or 0, *sizes, 0, 0], 14
        name = "dw_wide_forward_step"
    else:
        source = _head(dtype, kernel, stride, dilation) + _SOURCE
        args = [0, 0, 0, pool or 0, n, cin, m, *in_size, *out_size, *lo, fh, fw, 0]
        bias_slot, name = 15, "dw_forward_step"
    try:
        step = ccompile.load(source, name, [_P])
    except ccompile.CompileError:
        return None
    slots = [(0, "in", 0), (1, "in", 1), (2, "out", 0)] + [(bias_slot, "in", 2)] * bias
    return CStep(function_address(step), np.array(args, np.int64), slots, (step,))


def conv_input_grad(gy: np.ndarray, w: np.ndarray, p, groups: int, bias=None):
    """The depthwise ``conv_input_grad(gy, w)`` (+ ``bias`` per channel of the result, as
    `conv_forward` adds it) of plan ``p``, or None."""
    g = _geometry(gy, w, p, groups, groups, w.shape)
    if g is None:
        return None
    bias = _bias(bias, gy.dtype)
    (fns, pool), kernel, stride, dilation, in_size, out_size, lo = g
    gy, w = np.ascontiguousarray(gy), np.ascontiguousarray(w)
    n, cin = gy.shape[0], groups
    m = w.shape[0] // cin
    if m > 1 and gy.dtype in _HALF:  # (its channels' sums would be rounded one by one)
        return None
    gx = np.empty((n, cin) + tuple(p.in_size), gy.dtype)
    reach = tuple(d * (k - 1) for k, d in zip(kernel, dilation))
    shift = tuple(r - low for r, low in zip(reach, lo))
    # (the gather multiplies the frame's zeros by the weights: a non-finite weight would make
    # NaN where the adjoint adds nothing)
    gather = stride == (1, 1) and all(s >= 0 for s in shift) and np.isfinite(w).all()
    if gather:
        # the framed gradient: offset ``shift``, extent the input plus the kernel's reach
        fh, fw = (i + r for i, r in zip(in_size, reach))
        fn = fns["dw_input_grad_gather"]
    else:
        fh, fw = (
            max(f, low + i)
            for f, low, i in zip(_frame(out_size, kernel, stride, dilation), lo, in_size)
        )
        fn = fns["dw_input_grad_scatter"]
    geometry = (gy.dtype, kernel, stride, dilation)
    op = "gather" if gather else "scatter"
    top = shift[0] if gather else lo[0]
    counted = _wide(op, m, geometry, n, cin, in_size, out_size, (fh, fw), top)

    def wide():
        return cdepthwise_wide.input_grad(
            gy, w, gx, geometry, in_size, out_size, shift if gather else lo, (fh, fw), gather, bias
        )

    def rows():
        fn(
            data_address(gy),
            data_address(w),
            data_address(gx),
            pool,
            n,
            cin,
            m,
            *in_size,
            *out_size,
            *lo,
            fh,
            fw,
            None if bias is None else data_address(bias),
        )

    key = (op, gy.shape, w.shape, tuple(p.in_size), geometry, lo, bias is None)
    if _measured_wide(key, m, geometry, counted, wide, rows) and wide():
        return gx
    rows()
    return gx


def _weight_grad_wide(g: tuple, dtype, x_shape: tuple, cout: int) -> bool:
    """Whether the weight gradient of geometry ``g`` (`_geometry`'s) runs the channels-wide
    kernels (the count: both ways round differently, so no timing picks between them)."""
    _, kernel, stride, dilation, in_size, out_size, lo = g
    n, cin = x_shape[:2]
    frame = _frame(out_size, kernel, stride, dilation)
    geometry = (np.dtype(dtype), kernel, stride, dilation)
    return _wide("weight_grad", cout // cin, geometry, n, cin, in_size, out_size, frame, lo[0])


def weight_grad_wide(x_shape: tuple, gy_shape: tuple, p, groups: int, dtype) -> bool:
    """Whether `conv_weight_grad` of operands of these shapes and ``dtype`` runs the
    channels-wide kernels, which allocate only a float32 gradient for 16-bit operands (the
    workspace rule's question: ops/conv.py)."""
    dtype = np.dtype(dtype)
    x, gy = (np.broadcast_to(np.zeros((), dtype), s) for s in (x_shape, gy_shape))
    w_shape = (gy_shape[1], x_shape[1] // groups) + tuple(p.kernel)
    g = _geometry(x, gy, p, groups, x_shape[1], w_shape)
    return g is not None and _weight_grad_wide(g, dtype, x_shape, gy_shape[1])


def conv_weight_grad(x: np.ndarray, gy: np.ndarray, p, groups: int):
    """The depthwise ``conv_weight_grad(x, gy)`` of plan ``p``, or None."""
    cout = gy.shape[1]
    w_shape = (cout, 1) + tuple(p.kernel)
    g = _geometry(x, gy, p, groups, x.shape[1], w_shape)
    if g is None:
        return None
    (fns, pool), kernel, stride, dilation, in_size, out_size, lo = g
    x, gy = np.ascontiguousarray(x), np.ascontiguousarray(gy)
    n, cin = x.shape[:2]
    fh, fw = _frame(out_size, kernel, stride, dilation)
    geometry = (x.dtype, kernel, stride, dilation)
    if _weight_grad_wide(g, x.dtype, x.shape, cout):
        gw = np.empty(w_shape, np.float32 if x.dtype in _HALF else x.dtype)
        if cdepthwise_wide.weight_grad(x, gy, gw, geometry, in_size, out_size, lo, (fh, fw)):
            return gw.astype(x.dtype, copy=False)  # (16 bits: rounded once from float32's)
    # blocks of samples summed in parallel (a few per thread, so a thread whose core is busy
    # delays the call by one block), then their double partial sums added here
    from . import cpool

    blocks = max(1, min(n, 4 * cpool.get_num_threads()))
    partial = np.empty((blocks, cout) + tuple(p.kernel), np.float64)
    fns["dw_weight_grad"](
        data_address(x),
        data_address(gy),
        data_address(partial),
        pool,
        n,
        cin,
        cout // cin,
        *in_size,
        *out_size,
        *lo,
        fh,
        fw,
        blocks,
    )
    total = partial.sum(axis=0)
    if x.dtype in _HALF:  # (through float32, as the widened operands' kernel rounds it)
        total = total.astype(np.float32)
    return total.astype(x.dtype).reshape(w_shape)
