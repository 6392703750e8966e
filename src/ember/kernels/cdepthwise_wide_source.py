"""The C of kernels/cdepthwise_wide.py: depthwise convolutions with channels along the vectors.

A block of V channels (V: the lanes of one vector register of the dtype, from the ISA the
compiler targets) is transposed into a zero-framed scratch of ``fh x fw`` positions, each
position one vector of the block's V channels, so each tap of an output position is one
vector multiply-add whatever the plane's width. Rows of outputs are computed RB at a time in
registers: along a row, consecutive outputs read overlapping inputs, so each input vector
is loaded once for all the outputs and taps of the block that read it (register blocking;
RB from the register count, so that RB sums, a kernel row's weights and an input fit).

Sums run in the row-wide kernels' order (kernels/cdepthwise.py: taps row by row from zero,
each a fused multiply-add, then the bias; the scatter's contributions by output row, tap,
output column), so the forward and the input gradient give those kernels' bits (kernel rows
reading only the frame's zero rows are skipped where the weights are finite: they would add
+-0 to sums that are never -0); the weight gradient sums a plane's products per tap in
registers (a few sums a tap, so that enough multiply-add chains run at once) and the planes
in double, as they do in another grouping. Transposes move VxV tiles through registers
(GCC's vector shuffles, log2(V) rounds of interleaving); partial tiles (a plane's last
positions, a last block of fewer than V channels) move element by element. 16-bit operands
(``S``, read with ``LD``) have the weight gradient only, widened as transposed, its result
in float. Entries return 0, or 1 where a scratch could not be allocated (the caller then
runs the row-wide kernels; the graph runner's step cannot, and leaves its result unwritten,
as kernels/cdepthwise.py's steps do).
"""

from .cconv_activation import C_ACTIVATE

SOURCE = (
    r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
#define KK (KH * KW)
#ifndef S /* the operands' storage type: T, or 16 bits (the weight gradient only: LD widens) */
#define HALF 0
#define S T
#define LD(v) (v)
#endif
"""
    + C_ACTIVATE
    + r"""
#if defined(__AVX512F__)
#define VBYTES 64
#define NREGS 32
#elif defined(__AVX__)
#define VBYTES 32
#define NREGS 16
#else
#define VBYTES 16
#define NREGS 16
#endif
#define V (VBYTES / TBYTES) /* (TBYTES: sizeof(T), for the preprocessor) */
typedef T vec __attribute__((vector_size(VBYTES)));
typedef T uvec __attribute__((vector_size(VBYTES), aligned(sizeof(T))));
/* outputs (forward) or gradient vectors (weight gradient) held in registers beside a kernel
   row's KW weights or sums and one input: at least one, at most 16 */
#define RB_FIT (NREGS - KW - 3)
#define RB (RB_FIT < 1 ? 1 : RB_FIT > 16 ? 16 : RB_FIT)
/* input columns read by nr outputs of a row */
#define SPAN(nr) (((nr) - 1) * SW + (KW - 1) * DW + 1)

int dw_wide_vector_bytes(void) { return VBYTES; }

static void *scratch(long vectors) {
  void *p = aligned_alloc(VBYTES, (size_t)(vectors > 0 ? vectors : 1) * VBYTES);
  if (p) memset(p, 0, (size_t)(vectors > 0 ? vectors : 1) * VBYTES);
  return p;
}

/* ------------------------------------------------------------------------------ transposes */
#if defined(__GNUC__) && !defined(__clang__) && (V == 2 || V == 4 || V == 8 || V == 16)
#define TILES 1
#if TBYTES == 4
typedef int32_t imask __attribute__((vector_size(VBYTES)));
#else
typedef int64_t imask __attribute__((vector_size(VBYTES)));
#endif
#define ROUNDS (V == 16 ? 4 : V == 8 ? 3 : V == 4 ? 2 : 1)
/* r[i] = lane i of every r[j] (a VxV tile transposed): log2(V) rounds, each interleaving the
   first half of the vectors with the second (a perfect shuffle of the tile's rows) */
static inline void transpose(vec r[V]) {
  imask lo, hi;
  for (int i = 0; i < V; i++) {
    lo[i] = i / 2 + (i % 2) * V;
    hi[i] = V / 2 + i / 2 + (i % 2) * V;
  }
  vec t[V];
#pragma GCC unroll 4
  for (int round = 0; round < ROUNDS; round++) {
#pragma GCC unroll 16
    for (int i = 0; i < V / 2; i++) {
      t[2 * i] = __builtin_shuffle(r[i], r[i + V / 2], lo);
      t[2 * i + 1] = __builtin_shuffle(r[i], r[i + V / 2], hi);
    }
#pragma GCC unroll 16
    for (int i = 0; i < V; i++) r[i] = t[i];
  }
}
#endif

/* cv channel planes (src, `plane` apart, rows x cols each) into F at row r0, column c0 (F:
   fh rows of fw vectors), clipped to the frame; lanes past cv are left as they are */
static void to_block(const S *src, long plane, int cv, long rows, long cols, vec *F, long fh,
                     long fw, long r0, long c0) {
  const long count = rows * cols;
  long p = 0;
#ifdef TILES
  long row = r0, col = c0; /* position p's, kept as p advances (no division a vector) */
  if (cv == V)
    for (; p + V <= count; p += V) {
      vec r[V];
#if HALF /* (widened as read) */
      for (int v = 0; v < V; v++)
        for (int l = 0; l < V; l++) r[v][l] = LD(src[v * plane + p + l]);
#else
#pragma GCC unroll 16
      for (int v = 0; v < V; v++) r[v] = *(const uvec *)(src + v * plane + p);
#endif
      transpose(r);
      for (int j = 0; j < V; j++) {
        if (row < fh && col < fw) F[row * fw + col] = r[j];
        if (++col == c0 + cols) col = c0, row++;
      }
    }
#endif
  for (; p < count; p++) {
    const long row = p / cols + r0, col = p % cols + c0;
    if (row >= fh || col >= fw) continue;
    T *to = (T *)(F + row * fw + col);
    for (int v = 0; v < cv; v++) to[v] = LD(src[v * plane + p]);
  }
}

/* count positions of O (a vector of V channels each) into cv channel planes of dst */
static void from_block(const vec *O, long count, int cv, T *dst, long plane) {
  long p = 0;
#ifdef TILES
  if (cv == V)
    for (; p + V <= count; p += V) {
      vec r[V];
#pragma GCC unroll 16
      for (int j = 0; j < V; j++) r[j] = O[p + j];
      transpose(r);
#pragma GCC unroll 16
      for (int v = 0; v < V; v++) *(uvec *)(dst + v * plane + p) = r[v];
    }
#endif
  for (; p < count; p++)
    for (int v = 0; v < cv; v++) dst[v * plane + p] = ((const T *)(O + p))[v];
}

struct job {
  const S *a, *w, *bias; /* (S: T, but for the weight gradient of 16-bit operands) */
  T *out;
  long n, c, ih, iw, oh, ow, r0, c0, fh, fw, flip;
  int failed;
  const double *clamp; /* (forward) the epilogue's clamp, or 0 (see clamp_values) */
};

/* the epilogue's clamp (lo, hi, whether lo and hi take ties: ops/_rules.py's Clamp) of a
   block's outputs before they are transposed out; compared ordered, so NaN stays, as the
   unfused op (kernels/cconv_source.py's clamp_one) */
static inline void clamp_values(T *v, long count, const double *c) {
  const T lo = (T)c[0], hi = (T)c[1];
  const int lo_ties = c[2] != 0, hi_ties = c[3] != 0;
#pragma omp simd
  for (long i = 0; i < count; i++) {
    T x = v[i];
    if (lo_ties ? x <= lo : x < lo) x = lo;
    if (hi_ties ? x >= hi : x > hi) x = hi;
    v[i] = x;
  }
#if !HALF /* then the store's activation, where the block has one (kernels/cconv_activation.py) */
  if (act_on(c)) activate(c, v, count);
#endif
}

#if !HALF /* (16-bit operands: their forward and input gradient run the row-wide kernels)*/
/* the block's weights (channels c0..c0+cv of w, KK taps each) as KK vectors, taps reversed
   where `flip` (the input gradient's kernel), lanes past cv zero */
static int weight_block(const T *w, long c0, int cv, int flip, vec *wk) {
  int finite = 1; /* (returned: whether every weight is finite) */
  for (int k = 0; k < KK; k++) {
    T *to = (T *)(wk + k);
    for (int v = 0; v < V; v++) {
      to[v] = v < cv ? w[(c0 + v) * KK + (flip ? KK - 1 - k : k)] : 0;
      finite &= to[v] - to[v] == 0;
    }
  }
  return finite;
}

/* the bias lanes: -0.0 (the identity of the sums' last addition) where there is none */
static vec bias_block(const T *bias, long c0, int cv) {
  vec b;
  for (int v = 0; v < V; v++) b[v] = bias && v < cv ? bias[c0 + v] : (T)-0.0;
  return b;
}

/* ----------------------------------------------------------------------------- forward */
/* nr outputs of one row: F at the row's first input (frame row oh * SH, column ow0 * SW),
   O at its first output; each input vector loaded once for every (output, tap) reading it */
static inline __attribute__((always_inline)) void fwd_block(const vec *F, long fw,
                                                            const vec *wk, vec *O, vec b,
                                                            int kh0, int kh1, long i0, long i1,
                                                            const int nr) {
  vec acc[16];
#pragma GCC unroll 16
  for (int r = 0; r < nr; r++) acc[r] = (vec){0};
  for (int kh = kh0; kh < kh1; kh++) {
    const vec *row = F + kh * DH * fw;
    vec wr[KW];
#pragma GCC unroll 16
    for (int kw = 0; kw < KW; kw++) wr[kw] = wk[kh * KW + kw];
#pragma GCC unroll 128
    for (int i = 0; i < SPAN(nr); i++) {
      if (i < i0 || i >= i1) continue; /* (a zero column, skipped as zero rows are) */
      const vec x = row[i];
#pragma GCC unroll 16
      for (int kw = 0; kw < KW; kw++) {
        const int t = i - kw * DW; /* output t / SW reads column i at tap kw */
        if (t >= 0 && t % SW == 0 && t / SW < nr) acc[t / SW] += wr[kw] * x;
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < nr; r++) O[r] = acc[r] + b;
}

#define FWD_CASE(k) \
  case k:           \
    if (k < RB) fwd_block(F, fw, wk, O, b, kh0, kh1, c0 - ow0 * SW, c1 - ow0 * SW, k); \
    break;
/* a row of OW outputs (kernel rows kh0 to kh1 - 1, frame columns c0 to c1 - 1): blocks of
   RB, then the remainder as one block of its own size */
static void fwd_row(const vec *F, long fw, const vec *wk, vec *O, long OW, vec b, int kh0,
                    int kh1, long c0, long c1) {
  long ow0 = 0;
  for (; ow0 + RB <= OW; ow0 += RB)
    fwd_block(F + ow0 * SW, fw, wk, O + ow0, b, kh0, kh1, c0 - ow0 * SW, c1 - ow0 * SW, RB);
  F += ow0 * SW;
  O += ow0;
  switch (OW - ow0) {
    FWD_CASE(1) FWD_CASE(2) FWD_CASE(3) FWD_CASE(4) FWD_CASE(5) FWD_CASE(6) FWD_CASE(7)
    FWD_CASE(8) FWD_CASE(9) FWD_CASE(10) FWD_CASE(11) FWD_CASE(12) FWD_CASE(13) FWD_CASE(14)
    FWD_CASE(15)
    default: break;
  }
}


/* forward (and the stride-1 input gradient, a forward of the framed gradient with the
   flipped kernel): tasks (sample, block of V channels); the source planes (ih x iw) framed at
   (r0, c0), outputs oh x ow */
static void forward_blocks(void *job_, long lo, long hi) {
  struct job *j = job_;
  const long OH = j->oh, OW = j->ow, fw = j->fw;
  vec *F = scratch(j->fh * fw + OH * OW + KK);
  if (!F) {
    __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
    return;
  }
  vec *O = F + j->fh * fw, *wk = O + OH * OW;
  long last = -1;
  int finite = 0;
  for (long t = lo; t < hi; t++) { /* (block-major: a block's weights laid out once) */
    const long n = t % j->n, c0 = (t / j->n) * V;
    const int cv = j->c - c0 < V ? (int)(j->c - c0) : V;
    if (c0 != last) finite = weight_block(j->w, c0, cv, (int)j->flip, wk);
    last = c0;
    const vec b = bias_block(j->bias, c0, cv);
    to_block(j->a + (n * j->c + c0) * j->ih * j->iw, j->ih * j->iw, cv, j->ih, j->iw, F, j->fh,
             fw, j->r0, j->c0);
    for (long oh = 0; oh < OH; oh++) {
      /* kernel rows (and frame columns) reading the frame's zero rows (columns) add finite
         products of zero: +-0 to sums that started at +0 and so are never -0, which leaves
         them as they are; skipped (an infinite weight times a padded zero is NaN: then every
         row and column runs) */
      int kh0 = 0, kh1 = KH;
      long col0 = 0, col1 = fw; /* (the columns read: all, or the source's only) */
      if (finite) {
        col0 = j->c0, col1 = j->c0 + j->iw;
        while (kh0 < KH && oh * SH + kh0 * DH < j->r0) kh0++;
        while (kh1 > kh0 && oh * SH + (kh1 - 1) * DH >= j->r0 + j->ih) kh1--;
      }
      fwd_row(F + oh * SH * fw, fw, wk, O + oh * OW, OW, b, kh0, kh1, col0, col1);
    }
    if (j->clamp) clamp_values((T *)O, OH * OW * V, j->clamp);
    from_block(O, OH * OW, cv, j->out + (n * j->c + c0) * OH * OW, OH * OW);
  }
  free(F);
}

/* -------------------------------------------------------------- input gradient, scattered */
/* any stride or non-finite weights: each gradient vector added into the framed input tap by
   tap (output row, tap, output column: the row-wide scatter's order), the frame cropped at
   (r0, c0) = the low padding */
static void scatter_blocks(void *job_, long lo, long hi) {
  struct job *j = job_;
  const long OH = j->oh, OW = j->ow, H = j->ih, W = j->iw;
  const long fh = j->fh, fw = j->fw;
  vec *G = scratch(fh * fw + OH * OW + H * W + KK);
  if (!G) {
    __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
    return;
  }
  vec *GY = G + fh * fw, *O = GY + OH * OW, *wk = O + H * W;
  long last = -1;
  for (long t = lo; t < hi; t++) { /* (block-major: a block's weights laid out once) */
    const long n = t % j->n, c0 = (t / j->n) * V;
    const int cv = j->c - c0 < V ? (int)(j->c - c0) : V;
    if (c0 != last) weight_block(j->w, c0, cv, 0, wk);
    last = c0;
    const vec b = bias_block(j->bias, c0, cv);
    to_block(j->a + (n * j->c + c0) * OH * OW, OH * OW, cv, OH, OW, GY, OH, OW, 0, 0);
    memset(G, 0, (size_t)(fh * fw) * VBYTES);
    for (long oh = 0; oh < OH; oh++)
      for (int kh = 0; kh < KH; kh++)
        for (int kw = 0; kw < KW; kw++) {
          const vec wv = wk[kh * KW + kw];
          vec *to = G + (oh * SH + kh * DH) * fw + kw * DW;
          const vec *g = GY + oh * OW;
          for (long ow = 0; ow < OW; ow++) to[ow * SW] += wv * g[ow];
        }
    for (long ih = 0; ih < H; ih++)
      for (long iw = 0; iw < W; iw++) O[ih * W + iw] = G[(ih + j->r0) * fw + iw + j->c0] + b;
    from_block(O, H * W, cv, j->out + (n * j->c + c0) * H * W, H * W);
  }
  free(G);
}

#endif

/* ---------------------------------------------------------------------- weight gradient */
/* A tap's sum is one chain of multiply-adds, each waiting for the last: SETS sums a tap
   (output r of a block adds into set r % SETS), so that at least 8 chains run side by side,
   as many as two multiply-add units of four cycles' latency keep busy; KW sums alone (3 for
   a 3x3 kernel) left the units mostly idle */
#define SETS ((8 + KW - 1) / KW)

/* nr gradient vectors of one output row (g) against the framed input row at its first
   column (X): acc[r % SETS][kw] += X[r * SW + kw * DW] * g[r], each input loaded once */
static inline __attribute__((always_inline)) void wgrad_block(const vec *X, const vec *g,
                                                              vec acc[SETS][KW], const int nr) {
  vec gv[16];
#pragma GCC unroll 16
  for (int r = 0; r < nr; r++) gv[r] = g[r];
#pragma GCC unroll 128
  for (int i = 0; i < SPAN(nr); i++) {
    const vec x = X[i];
#pragma GCC unroll 16
    for (int kw = 0; kw < KW; kw++) {
      const int t = i - kw * DW;
      if (t >= 0 && t % SW == 0 && t / SW < nr) acc[(t / SW) % SETS][kw] += x * gv[t / SW];
    }
  }
}

#define WG_CASE(k) \
  case k:          \
    if (k < RB) wgrad_block(X, g, acc, k); \
    break;
static inline __attribute__((always_inline)) void wgrad_row(const vec *X, const vec *g,
                                                            long OW, vec acc[SETS][KW]) {
  long ow0 = 0;
  for (; ow0 + RB <= OW; ow0 += RB) wgrad_block(X + ow0 * SW, g + ow0, acc, RB);
  X += ow0 * SW;
  g += ow0;
  switch (OW - ow0) {
    WG_CASE(1) WG_CASE(2) WG_CASE(3) WG_CASE(4) WG_CASE(5) WG_CASE(6) WG_CASE(7) WG_CASE(8)
    WG_CASE(9) WG_CASE(10) WG_CASE(11) WG_CASE(12) WG_CASE(13) WG_CASE(14) WG_CASE(15)
    default: break;
  }
}

/* tasks: blocks of V channels, each over every sample (a block's sums complete in one task:
   no partial sums between threads); per plane and kernel row, the KW taps' sums in registers
   over the plane, then added to the block's double sums */
static void weight_grad_blocks(void *job_, long lo, long hi) {
  struct job *j = job_;
  const long OH = j->oh, OW = j->ow, fh = j->fh, fw = j->fw, H = j->ih, W = j->iw;
  vec *F = scratch(fh * fw + OH * OW);
  double *kept = malloc(sizeof(double) * KK * V);
  if (!F || !kept) {
    free(F);
    free(kept);
    __atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
    return;
  }
  vec *GY = F + fh * fw;
  for (long blk = lo; blk < hi; blk++) {
    const long c0 = blk * V;
    const int cv = j->c - c0 < V ? (int)(j->c - c0) : V;
    memset(kept, 0, sizeof(double) * KK * V);
    for (long n = 0; n < j->n; n++) {
      to_block(j->a + (n * j->c + c0) * H * W, H * W, cv, H, W, F, fh, fw, j->r0, j->c0);
      to_block(j->w + (n * j->c + c0) * OH * OW, OH * OW, cv, OH, OW, GY, OH, OW, 0, 0);
      for (int kh = 0; kh < KH; kh++) {
        vec acc[SETS][KW];
#pragma GCC unroll 16
        for (int q = 0; q < SETS; q++)
#pragma GCC unroll 16
          for (int kw = 0; kw < KW; kw++) acc[q][kw] = (vec){0};
        for (long oh = 0; oh < OH; oh++)
          wgrad_row(F + (oh * SH + kh * DH) * fw, GY + oh * OW, OW, acc);
#pragma GCC unroll 16
        for (int q = 1; q < SETS; q++)
#pragma GCC unroll 16
          for (int kw = 0; kw < KW; kw++) acc[0][kw] += acc[q][kw];
        for (int kw = 0; kw < KW; kw++)
          for (int v = 0; v < V; v++) kept[(kh * KW + kw) * V + v] += acc[0][kw][v];
      }
    }
    for (int v = 0; v < cv; v++)
      for (int k = 0; k < KK; k++) j->out[(c0 + v) * KK + k] = (T)kept[k * V + v];
  }
  free(F);
  free(kept);
}

static int run(ember_task task, struct job *j, long count, long work, ember_pool pool) {
  if (pool && work > SERIAL_WORK && count > 1) pool(task, j, count, 1);
  else task(j, 0, count);
  return j->failed;
}

#if !HALF
/* x (n, c, ih, iw) framed at (r0, c0) in fh x fw; out (n, c, oh, ow); flip: the taps reversed
   (the stride-1 input gradient) */
int dw_wide_forward(const T *x, const T *w, T *out, ember_pool pool, long n, long c, long ih,
                    long iw, long oh, long ow, long r0, long c0, long fh, long fw,
                    const T *bias, long flip) {
  struct job j = {x, w, bias, out, n, c, ih, iw, oh, ow, r0, c0, fh, fw, flip, 0};
  return run(forward_blocks, &j, n * ((c + V - 1) / V), n * c * oh * ow * KK, pool);
}
/* dw_wide_forward (no flip) with the epilogue's clamp: its address, or 0 */
int dw_wide_forward_clamp(const T *x, const T *w, T *out, ember_pool pool, long n, long c,
                          long ih, long iw, long oh, long ow, long r0, long c0, long fh, long fw,
                          const T *bias, long clamp) {
  struct job j = {x, w, bias, out, n, c, ih, iw, oh, ow, r0, c0, fh, fw, 0, 0,
                  (const double *)clamp};
  return run(forward_blocks, &j, n * ((c + V - 1) / V), n * c * oh * ow * KK, pool);
}
/* the graph runner's step (runtime/cgraph.py): x, w, out, pool, then dw_wide_forward's ten
   sizes, the bias (or 0), flip (0) and the clamp (or 0) */
void dw_wide_forward_step(const long *a) {
  dw_wide_forward_clamp((const T *)a[0], (const T *)a[1], (T *)a[2], (ember_pool)a[3], a[4],
                        a[5], a[6], a[7], a[8], a[9], a[10], a[11], a[12], a[13],
                        (const T *)a[14], a[16]);
}
/* gy (n, c, oh, ow) into gx (n, c, ih, iw): the frame fh x fw cropped at (ph, pw) */
int dw_wide_input_scatter(const T *gy, const T *w, T *gx, ember_pool pool, long n, long c,
                          long ih, long iw, long oh, long ow, long ph, long pw, long fh, long fw,
                          const T *bias, long unused) {
  struct job j = {gy, w, bias, gx, n, c, ih, iw, oh, ow, ph, pw, fh, fw, unused, 0};
  return run(scatter_blocks, &j, n * ((c + V - 1) / V), n * c * oh * ow * KK, pool);
}
#endif
/* x (n, c, ih, iw) framed at (ph, pw) in fh x fw, gy (n, c, oh, ow); out (c, KK), in T */
int dw_wide_weight_grad(const S *x, const S *gy, T *out, ember_pool pool, long n, long c,
                        long ih, long iw, long oh, long ow, long ph, long pw, long fh, long fw,
                        const S *unused_bias, long unused) {
  struct job j = {x, gy, 0, out, n, c, ih, iw, oh, ow, ph, pw, fh, fw, unused, 0};
  (void)unused_bias;
  return run(weight_grad_blocks, &j, (c + V - 1) / V, n * c * oh * ow * KK, pool);
}
"""
)
