"""The C source of kernels/cinverted_residual.py: an expansion 1x1 convolution (+ bias, clamp)
and the depthwise convolution after it (+ bias, clamp), band of output rows by band of output
rows, so the expanded tensor never leaves the cache. Appended to kernels/cdepthwise_source.py's
source (compiled with its geometry's macros): the depthwise half frames and sums each plane's
band with that file's functions and tap loops, in their order.
"""

from __future__ import annotations

SOURCE = r"""
/* CB expanded channels at a time, NV vectors each: 24 accumulators of 32 registers where the
   vectors are 512 bits, 12 of 16 with 256 bits, leaving registers for the inputs */
#ifndef CB
#define CB (VBYTES == 64 ? 8 : 4)
#define NV 3
#endif
typedef T vec __attribute__((vector_size(VBYTES), aligned(sizeof(T))));

struct ir_job {
  const T *x, *w1, *b1, *w2, *b2;
  T *out;
  const double *c1, *c2; /* the clamps (kernels/cclamp.py's blocks), or 0 */
  long n, cin, cmid, h, w_, oh, ow, ph, pw, fw, band, bands;
};

/* the bias and clamp of an expanded row, in one pass: v + b, then clamped as clamp_plane
   clamps (NaN stays) */
static void bias_clamp(T *restrict e, long count, T b, const double *c) {
  if (!c) {
#pragma omp simd
    for (long i = 0; i < count; i++) e[i] += b;
    return;
  }
  const T lo = (T)c[0], hi = (T)c[1];
  const int lo_ties = c[2] != 0, hi_ties = c[3] != 0;
#pragma omp simd
  for (long i = 0; i < count; i++) {
    T v = e[i] + b;
    if (lo_ties ? v <= lo : v < lo) v = lo;
    if (hi_ties ? v >= hi : v > hi) v = hi;
    e[i] = v;
  }
}

/* one tile: out[c * pitch + v] = sum_k wt[k * CB + c] * xs[k * step + v] for the block's CB
   channels and NV vectors of the run, the sum over k in order from zero */
static inline __attribute__((always_inline)) void tile(const T *xs, long step, const T *wt,
                                                       long cin, T *out, long pitch) {
  vec acc[CB][NV];
#pragma GCC unroll 16
  for (int c = 0; c < CB; c++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) acc[c][v] = (vec){0};
  for (long k = 0; k < cin; k++) {
    vec xv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) xv[v] = *(const vec *)(xs + k * step + v * LANES);
    const T *wk = wt + k * CB;
#pragma GCC unroll 16
    for (int c = 0; c < CB; c++)
#pragma GCC unroll 4
      for (int v = 0; v < NV; v++) acc[c][v] += wk[c] * xv[v];
  }
#pragma GCC unroll 16
  for (int c = 0; c < CB; c++)
#pragma GCC unroll 4
    for (int v = 0; v < NV; v++) *(vec *)(out + c * pitch + v * LANES) = acc[c][v];
}

/* e[c][i] = clamp1(sum_k w1[c0 + c][k] * x[k * xstride + i] + b1[c0 + c]) for i < len and the
   block's channels (past cmid, the last channel again: computed, never read); the sum runs
   over k in order from zero, then the bias, as the unfused convolution's store adds it. The
   block's weights are packed k-major into `wt` (cin * CB), so the loop holds one pointer to
   them and its registers the NV * CB sums; a run's last values (fewer than NV vectors) are
   computed from a zero-padded copy `tail` (cin * NV * LANES, then CB * NV * LANES results) */
static void pointwise_block(const struct ir_job *j, const T *x, long xstride, long len, long c0,
                            T *restrict e, long epitch, T *restrict wt, T *restrict tail) {
  const long cin = j->cin, run = NV * LANES;
  for (int c = 0; c < CB; c++) {
    const long cc = c0 + c < j->cmid ? c0 + c : j->cmid - 1;
    for (long k = 0; k < cin; k++) wt[k * CB + c] = j->w1[cc * cin + k];
  }
  const int valid = j->cmid - c0 < CB ? (int)(j->cmid - c0) : CB;
  const long whole = len / run * run;
  for (long i = 0; i < whole; i += run) {
    tile(x + i, xstride, wt, cin, e + i, epitch);
    /* (the bias and clamp while the tile is in L1) */
    for (int c = 0; c < valid; c++)
      bias_clamp(e + c * epitch + i, run, j->b1 ? j->b1[c0 + c] : (T)-0.0, j->c1);
  }
  if (whole < len) { /* the run's last values, from the zero-padded copy */
    T *kept = tail + cin * run;
    memset(tail, 0, cin * run * sizeof(T));
    for (long k = 0; k < cin; k++)
      memcpy(tail + k * run, x + k * xstride + whole, (len - whole) * sizeof(T));
    tile(tail, run, wt, cin, kept, run);
    for (int c = 0; c < valid; c++) {
      memcpy(e + c * epitch + whole, kept + c * run, (len - whole) * sizeof(T));
      bias_clamp(e + c * epitch + whole, len - whole, j->b1 ? j->b1[c0 + c] : (T)-0.0, j->c1);
    }
  }
}

#if SW == 2
/* stride 2's framing (kernels/cdepthwise_source.py's frame_phased: column c at phase c % 2,
   index c / 2) with both phases in one loop, so its loads are one interleaved group, which
   the compiler vectorizes (one phase at a time stays scalar: most of the fused kernel's time
   on 112x112 planes) */
static void frame_band(T *frame, long fh, long fw, const T *src, long rows, long cols, long r0,
                       long c0) {
  const long pwid = (fw + 1) / 2, pitch = PITCH(fw);
  long ncols = cols;
  if (c0 + ncols > fw) ncols = fw - c0;
  if (ncols <= 0) return;
  const long q0 = c0 % 2, pairs = ncols / 2;
  for (long r = 0; r < rows && r0 + r < fh; r++) {
    const T *restrict from = src + r * cols;
    T *restrict pa = frame + (r0 + r) * pitch + q0 * pwid + c0 / 2;
    T *restrict pb = frame + (r0 + r) * pitch + (1 - q0) * pwid + (c0 + 1) / 2;
    for (long i = 0; i < pairs; i++) {
      pa[i] = from[2 * i];
      pb[i] = from[2 * i + 1];
    }
    if (ncols % 2) pa[pairs] = from[ncols - 1];
  }
}
#else
#define frame_band(frame, fh, fw, src, rows, cols, r0, c0) \
  FRAME(frame, fh, fw, src, rows, cols, r0, c0)
#endif

#if SW > 1
#define COL_AT(c, fw) (((c) % SW) * (((fw) + SW - 1) / SW) + (c) / SW)
#else
#define COL_AT(c, fw) (c)
#endif

/* items lo..hi: (sample, band of output rows). Each band copies the input rows it reads into
   `xp`, one frame per input channel (the depthwise frame's layout: zero padding, stride phases;
   the padding's columns stay zero from calloc, every band writing the same columns), so the
   expansion, pixel by pixel, writes each channel's depthwise frame directly: the expanded
   values are never copied (the input has a quarter of MobileNet's expanded channels). The
   expansion's values in the padding's columns (its bias, clamped) are zeroed after it, and the
   padding's rows are never computed. */
static void ir_bands(void *job_, long lo, long hi) {
  const struct ir_job *j = job_;
  const long H = j->h, W = j->w_, OH = j->oh, OW = j->ow, fw = j->fw, pitch = PITCH(fw);
  const long band = j->band, cmid = j->cmid, cin = j->cin, run = NV * LANES;
  const long pw = j->pw, fh_band = (band - 1) * SH + (KH - 1) * DH + 1; /* rows a band reads */
  const long area = fh_band * pitch;
  /* a channel's frame, then the slack a flat loop reads past its last row */
  const long epitch = (area + SLACK + LANES - 1) / LANES * LANES;
  T *xp = calloc(cin * area, sizeof(T));
  T *e = calloc(CB * epitch + cin * (CB + run) + CB * run + band * fw + LANES, sizeof(T));
  if (!xp || !e) {
    free(xp);
    free(e);
    return;
  }
  T *wt = e + CB * epitch, *tail = wt + cin * CB, *ext = tail + cin * run + CB * run;
  for (long p = lo; p < hi; p++) {
    const long n = p / j->bands, o0 = (p % j->bands) * band;
    const long o1 = o0 + band < OH ? o0 + band : OH, rows = o1 - o0;
    /* the band reads the padded plane's rows fr0 .. fr1 - 1: input rows r0 .. r1 - 1, at
       the frame's rows lr0 .. lr0 + nr - 1 */
    const long fr0 = o0 * SH, fr1 = (o1 - 1) * SH + (KH - 1) * DH + 1, lfh = fr1 - fr0;
    const long r0 = fr0 - j->ph > 0 ? fr0 - j->ph : 0;
    const long r1 = fr1 - j->ph < H ? fr1 - j->ph : H;
    const long nr = r1 > r0 ? r1 - r0 : 0, lr0 = r0 + j->ph - fr0;
    for (long k = 0; k < cin && nr; k++)
      frame_band(xp + k * area, lfh, fw, j->x + (n * cin + k) * H * W + r0 * W, nr, W, lr0, pw);
    for (long c0 = 0; c0 < cmid; c0 += CB) {
      if (nr) pointwise_block(j, xp + lr0 * pitch, area, nr * pitch, c0, e + lr0 * pitch,
                              epitch, wt, tail);
      const long ncb = cmid - c0 < CB ? cmid - c0 : CB;
      for (long ci = 0; ci < ncb; ci++) {
        const long c = c0 + ci;
        T *frame = e + ci * epitch;
        memset(frame, 0, lr0 * pitch * sizeof(T));
        memset(frame + (lr0 + nr) * pitch, 0, ((lfh - lr0 - nr) * pitch + SLACK) * sizeof(T));
        for (long r = lr0; r < lr0 + nr; r++) {
          T *row = frame + r * pitch;
          for (long col = 0; col < pw && col < fw; col++) row[COL_AT(col, fw)] = 0;
          for (long col = pw + W; col < fw; col++) row[COL_AT(col, fw)] = 0;
        }
        T wk[KK];
        for (int k = 0; k < KK; k++) wk[k] = j->w2[c * KK + k];
        T *y = j->out + ((n * cmid + c) * OH + o0) * OW;
        const T b = j->b2 ? j->b2[c] : (T)-0.0;
        if (FLAT(OW, fw)) {
          flat_taps(frame, fw, rows, OW, wk, ext, y, 0, b);
        } else {
          for (long oh = 0; oh < rows; oh++) {
            const T *xr = frame + oh * SH * pitch;
            T *restrict yr = y + oh * OW;
#pragma omp simd
            for (long ow = 0; ow < OW; ow++) {
              T s = 0;
#pragma GCC unroll 16
              for (int kh = 0; kh < KH; kh++)
#pragma GCC unroll 16
                for (int kw = 0; kw < KW; kw++)
                  s += wk[kh * KW + kw] * xr[kh * DH * pitch + TAP_COL(ow, kw, fw)];
              yr[ow] = s + b;
            }
          }
        }
        if (j->c2) clamp_plane(y, rows * OW, j->c2);
      }
    }
  }
  free(xp);
  free(e);
}

/* the graph runner's step (runtime/cgraph.py), also called with a block made by Python:
   x, w1, b1 (or 0), w2, b2 (or 0), out, the pool (or 0), then n, cin, cmid, h, w, oh, ow,
   ph, pw (the depthwise padding's low sides), fw (the frame's width), band (output rows per
   item), then the clamps (or 0) */
void ir_step(const long *a) {
  struct ir_job j = {(const T *)a[0], (const T *)a[1], (const T *)a[2], (const T *)a[3],
                     (const T *)a[4], (T *)a[5], (const double *)a[18], (const double *)a[19],
                     a[7], a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15], a[16], a[17],
                     0};
  j.bands = (j.oh + j.band - 1) / j.band;
  const long count = j.n * j.bands;
  const long work = j.n * j.cmid * (j.h * j.w_ * j.cin + j.oh * j.ow * KK);
  ember_pool pool = (ember_pool)a[6];
  if (pool && work > SERIAL_WORK && count > 1) pool(ir_bands, &j, count, 1);
  else ir_bands(&j, 0, count);
}
"""
