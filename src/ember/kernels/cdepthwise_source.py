"""The C source of kernels/cdepthwise.py's depthwise convolutions (forward, input gradient,
weight gradient), compiled once per dtype, kernel size, stride and dilation: kernels/cdepthwise.py
prepends the geometry's macros (``_head``) and says what each function computes.
"""

from __future__ import annotations

from .cconv_activation import C_ACTIVATE

SOURCE = (
    r"""
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
"""
    + C_ACTIVATE
    + r"""struct job {
  const S *a; const S *w; S *out;
  long n, cin, m, h, w_, oh, ow, ph, pw, fh, fw, blocks;
  const S *bias; /* (forward, input gradient) one per output channel, or 0 */
  const double *clamp; /* (forward) the epilogue's clamp, or 0 (see clamp_plane) */
};

/* the epilogue's clamp (lo, hi, whether lo and hi take ties: ops/_rules.py's Clamp) over a
   plane just stored, in place while it is in cache; each bound compared ordered, so NaN stays,
   as the unfused op (kernels/cconv_source.py's clamp_one); half precision clamps the rounded
   values, as the unfused op reads them (the bounds are 16-bit values: stored exactly) */
static void clamp_plane(S *y, long count, const double *c) {
  const T lo = (T)c[0], hi = (T)c[1];
  const int lo_ties = c[2] != 0, hi_ties = c[3] != 0;
#pragma omp simd
  for (long i = 0; i < count; i++) {
    T v = LD(y[i]);
    if (lo_ties ? v <= lo : v < lo) v = lo;
    if (hi_ties ? v >= hi : v > hi) v = hi;
    y[i] = ST(v);
  }
#if !HALF /* then the store's activation, where the block has one (kernels/cconv_activation.py) */
  if (act_on(c)) activate(c, y, count);
#endif
}
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
      if (j->clamp) clamp_plane(y, OH * OW, j->clamp);
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
    if (j->clamp) clamp_plane(y, OH * OW, j->clamp);
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
    struct job j = {a, w, out, n, cin, m, h, w_, oh, ow, ph, pw, fh, fw, 0, bias, 0};       \
    run(task, &j, count, work, pool);                                                      \
  }
ENTRY(dw_forward, forward_planes, n * cin * m, n * cin * m * oh * ow * KK)
/* dw_forward with the epilogue's clamp (or 0) */
void dw_forward_clamp(const S *a, const S *w, S *out, ember_pool pool, long n, long cin, long m,
                      long h, long w_, long oh, long ow, long ph, long pw, long fh, long fw,
                      const S *bias, const double *clamp) {
  struct job j = {a, w, out, n, cin, m, h, w_, oh, ow, ph, pw, fh, fw, 0, bias, clamp};
  run(forward_planes, &j, n * cin * m, n * cin * m * oh * ow * KK, pool);
}
/* the graph runner's step (runtime/cgraph.py): args x, w, out, the pool (or 0), then
   dw_forward's eleven sizes, then the bias (or 0), the clamp (or 0) */
void dw_forward_step(const long *a) {
  dw_forward_clamp((const S *)a[0], (const S *)a[1], (S *)a[2], (ember_pool)a[3], a[4], a[5],
                   a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], (const S *)a[15],
                   (const double *)a[16]);
}
ENTRY(dw_input_grad_gather, input_grad_gather, n * cin, n * cin * m * h * w_ * KK)
ENTRY(dw_input_grad_scatter, input_grad_scatter, n * cin, n * cin * m * oh * ow * KK)
/* the weight gradient's partial sums, double[blocks][cin * m][KK], go to out */
void dw_weight_grad(const S *x, const S *g, double *out, ember_pool pool, long n, long cin,
                    long m, long h, long w_, long oh, long ow, long ph, long pw, long fh, long fw,
                    long blocks) {
  struct job j = {x, g, (S *)out, n, cin, m, h, w_, oh, ow, ph, pw, fh, fw, blocks, 0, 0};
  run(weight_grad_blocks, &j, blocks, n * cin * m * oh * ow * KK, pool);
}
"""
)
