"""The C source of the convolution's weight gradients (kernels/cconv_weight.py runs them),
the second half of kernels/cconv_source.py's `SOURCE`: it is compiled in the same library,
after the forward's part (its types, ``copy_run``, the pairs' ``pair_run`` and micro-kernels).

* ``conv_weight_grad``: gw[co, r] = sum_n sum_l gy[n, co, l] * x[n * x_sample + roff[r] + l]
  over an extended output grid (rows of the padded input's width, stride 1) in which gy is
  zero outside the real output: a dot-product micro-kernel (4 x 6 accumulators) over rows both
  contiguous along l (with bfloat16 pairs, two positions per lane);
* ``conv_weight_grad_cl``: one GEMM per kernel offset over a channels-last copy of the input
  (``to_channels_last``), reducing over the real output positions only, KC at a time; or per
  kernel row, its offsets' channels side by side in the product's columns (few channels).
"""

WEIGHT_SOURCE = r"""/* ------------------------------------------------------- weight gradient */

#define WA 4 /* output channels per tile */
#define WB 6 /* (channel, kernel offset) rows per tile */

/* gy's output positions inside the extended grid: each of `segs` segments of `seg_len`
   elements at seg_src[s] in a (sample, channel) plane of gy goes to seg_dst[s] of its row */
struct segments {
  const long *src, *dst;
  long count, len, plane; /* plane: gy's channel stride */
};

/* XW: the weight gradient's element of x and of gy's laid-out rows: T, or with bfloat16 pairs
   the 16-bit values themselves (consecutive positions are the pairs the dot products sum) */
#if PAIRS
typedef S XW;
#define XW_OF(v) (v)
#else
typedef T XW;
#define XW_OF(v) LD(v)
#endif

/* the rows (len long, zero outside the output) of channels [0, cout) of one gy sample (16-bit
   values widened, but for the pairs) */
static void extend(const S *gy, const struct segments *sg, long cout, long len, XW *ext) {
  for (long co = 0; co < cout; co++) {
    XW *row = ext + co * len;
    const S *plane = gy + co * sg->plane;
    memset(row, 0, (size_t)len * sizeof(XW));
    for (long s = 0; s < sg->count; s++)
#if HALF && !PAIRS
      copy_run(row + sg->dst[s], plane + sg->src[s], sg->len);
#else
      memcpy(row + sg->dst[s], plane + sg->src[s], (size_t)sg->len * sizeof(XW));
#endif
  }
}

struct wgt {
  const S *gy;
  const XW *x;
  T *partial; /* blocks x cout x rows */
  const long *roff;
  long n, cout, rows, len, gy_sample, x_sample, per_block;
  struct segments sg;
};

static T lanes_sum(vec v) {
  T s = 0;
  for (long i = 0; i < VL; i++) s += v[i];
  return s;
}

#if PAIRS
/* `wgt_blocks` on bfloat16 pairs: the rows' consecutive positions summed two at a time by
   vdpbf16ps (len a multiple of 32), each sum's 16 lanes added at the end */
static void wgt_blocks(void *ctx, long lo, long hi) {
  const struct wgt *g = ctx;
  size_t bytes = (size_t)(g->per_block * g->cout * g->len) * sizeof(XW);
  XW *ext = aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!ext) abort();
  for (long blk = lo; blk < hi; blk++) {
    long n0 = blk * g->per_block, n1 = n0 + g->per_block < g->n ? n0 + g->per_block : g->n;
    T *part = g->partial + blk * g->cout * g->rows;
    for (long n = n0; n < n1; n++)
      extend(g->gy + n * g->gy_sample, &g->sg, g->cout, g->len, ext + (n - n0) * g->cout * g->len);
    for (long co0 = 0; co0 < g->cout; co0 += WA) {
      long a_idx[WA];
      for (int i = 0; i < WA; i++) a_idx[i] = co0 + i < g->cout ? co0 + i : g->cout - 1;
      for (long r0 = 0; r0 < g->rows; r0 += WB) {
        long b_off[WB];
        for (int j = 0; j < WB; j++) b_off[j] = g->roff[r0 + j < g->rows ? r0 + j : g->rows - 1];
        __m512 c[WA][WB];
        for (int i = 0; i < WA; i++)
          for (int j = 0; j < WB; j++) c[i][j] = _mm512_setzero_ps();
        for (long n = n0; n < n1; n++) {
          const XW *ga[WA];
          for (int i = 0; i < WA; i++) ga[i] = ext + ((n - n0) * g->cout + a_idx[i]) * g->len;
          const XW *xs = g->x + n * g->x_sample;
          for (long l = 0; l < g->len; l += 2 * VL) {
            __m512bh a0 = (__m512bh)_mm512_loadu_si512(ga[0] + l);
            __m512bh a1 = (__m512bh)_mm512_loadu_si512(ga[1] + l);
            __m512bh a2 = (__m512bh)_mm512_loadu_si512(ga[2] + l);
            __m512bh a3 = (__m512bh)_mm512_loadu_si512(ga[3] + l);
#pragma GCC unroll 6
            for (int j = 0; j < WB; j++) {
              __m512bh b = (__m512bh)_mm512_loadu_si512(xs + b_off[j] + l);
              c[0][j] = _mm512_dpbf16_ps(c[0][j], a0, b);
              c[1][j] = _mm512_dpbf16_ps(c[1][j], a1, b);
              c[2][j] = _mm512_dpbf16_ps(c[2][j], a2, b);
              c[3][j] = _mm512_dpbf16_ps(c[3][j], a3, b);
            }
          }
        }
        for (int i = 0; i < WA && co0 + i < g->cout; i++)
          for (int j = 0; j < WB && r0 + j < g->rows; j++)
            part[(co0 + i) * g->rows + r0 + j] = _mm512_reduce_add_ps(c[i][j]);
      }
    }
  }
  free(ext);
}
#else
static void wgt_blocks(void *ctx, long lo, long hi) {
  const struct wgt *g = ctx;
  T *ext = aligned_alloc(64, (size_t)(g->per_block * g->cout * g->len) * sizeof(T));
  if (!ext) abort();
  for (long blk = lo; blk < hi; blk++) {
    long n0 = blk * g->per_block, n1 = n0 + g->per_block < g->n ? n0 + g->per_block : g->n;
    T *part = g->partial + blk * g->cout * g->rows;
    for (long n = n0; n < n1; n++)
      extend(g->gy + n * g->gy_sample, &g->sg, g->cout, g->len, ext + (n - n0) * g->cout * g->len);
    for (long co0 = 0; co0 < g->cout; co0 += WA) {
      long a_idx[WA];
      for (int i = 0; i < WA; i++) a_idx[i] = co0 + i < g->cout ? co0 + i : g->cout - 1;
      for (long r0 = 0; r0 < g->rows; r0 += WB) {
        long b_off[WB];
        for (int j = 0; j < WB; j++) b_off[j] = g->roff[r0 + j < g->rows ? r0 + j : g->rows - 1];
        vec c[WA][WB];
        for (int i = 0; i < WA; i++)
          for (int j = 0; j < WB; j++) c[i][j] = (vec){0};
        for (long n = n0; n < n1; n++) {
          const T *ga[WA];
          for (int i = 0; i < WA; i++) ga[i] = ext + ((n - n0) * g->cout + a_idx[i]) * g->len;
          const T *xs = g->x + n * g->x_sample;
          for (long l = 0; l < g->len; l += VL) {
            vec a0 = *(const uvec *)(ga[0] + l), a1 = *(const uvec *)(ga[1] + l);
            vec a2 = *(const uvec *)(ga[2] + l), a3 = *(const uvec *)(ga[3] + l);
#pragma GCC unroll 6
            for (int j = 0; j < WB; j++) {
              vec b = *(const uvec *)(xs + b_off[j] + l);
              /* in a register: left to itself, GCC folds this load into each of the four
                 multiply-adds below, four loads (each split across two cache lines, x's
                 rows being unaligned) where one does */
              __asm__("" : "+v"(b));
              c[0][j] += a0 * b;
              c[1][j] += a1 * b;
              c[2][j] += a2 * b;
              c[3][j] += a3 * b;
            }
          }
        }
        for (int i = 0; i < WA && co0 + i < g->cout; i++)
          for (int j = 0; j < WB && r0 + j < g->rows; j++)
            part[(co0 + i) * g->rows + r0 + j] = lanes_sum(c[i][j]);
      }
    }
  }
  free(ext);
}
#endif

/* gw (cout x rows) = the sum over blocks of samples of gy x X^T over the extended grid (rows
   `len` long, a multiple of VL; of 2 VL for the pairs), x rows read at roff[r] */
void conv_weight_grad(const S *gy, const XW *x, T *gw, T *partial, const long *roff, long n,
                      long cout, long rows, long len, long gy_sample, long x_sample,
                      long per_block, const long *seg_src, const long *seg_dst, long segs,
                      long seg_len, long plane, ember_pool pool) {
  long blocks = (n + per_block - 1) / per_block;
  struct wgt g = {gy,        x,        partial,   roff, n, cout, rows, len, gy_sample,
                  x_sample, per_block, {seg_src, seg_dst, segs, seg_len, plane}};
  if (pool && blocks > 1 && cout * rows * len * n > (1L << 20)) pool(wgt_blocks, &g, blocks, 1);
  else wgt_blocks(&g, 0, blocks);
  long size = cout * rows;
  memcpy(gw, partial, (size_t)size * sizeof(T));
  for (long b = 1; b < blocks; b++)
    for (long i = 0; i < size; i++) gw[i] += partial[b * size + i];
}

/* ------------------------------------------- weight gradient over channels-last input */

#define MW 8        /* output channels per tile */
#define NW (2 * VL) /* input channels per tile */

/* acc (MW x NW, row stride ldc) += a (rows x MW packed) * b, whose rows come in `nseg`
   segments: cnt[s] rows (row stride ldb) from b + off[s], after pre[s] rows of a skipped and
   before post[s] (the positions whose kernel offset reads the zero padding) */
static void micro_w(int nseg, const long *off, const long *cnt, const long *pre,
                    const long *post, const T *restrict a, const T *restrict b, long ldb,
                    T *restrict acc, long ldc) {
  vec c[MW][2];
#pragma GCC unroll 8
  for (int i = 0; i < MW; i++) {
    c[i][0] = *(const uvec *)(acc + i * ldc);
    c[i][1] = *(const uvec *)(acc + i * ldc + VL);
  }
  for (int sg = 0; sg < nseg; sg++) {
    const T *bs = b + off[sg];
    a += pre[sg] * MW;
    for (long p = 0; p < cnt[sg]; p++) {
      vec b0 = *(const uvec *)bs, b1 = *(const uvec *)(bs + VL);
#pragma GCC unroll 8
      for (int i = 0; i < MW; i++) {
        T s = a[i];
        c[i][0] += s * b0;
        c[i][1] += s * b1;
      }
      a += MW;
      bs += ldb;
    }
    a += post[sg] * MW;
  }
#pragma GCC unroll 8
  for (int i = 0; i < MW; i++) {
    *(uvec *)(acc + i * ldc) = c[i][0];
    *(uvec *)(acc + i * ldc + VL) = c[i][1];
  }
}

struct wcl {
  const S *gy;
  const XW *x;
  T *partial; /* blocks x kk x (m_panels * MW) x cp */
  const long *koff;
  long n, cout, kk, cp, gy_sample, x_sample, per_block, m_panels;
  long xstep;         /* positions between consecutive outputs of a row: the stride */
  long cw; /* values of x read from each kernel offset's position (a multiple of NW: cp, or a
               kernel row's offsets side by side, cp apart) */
  struct segments sg; /* sg.dst: each output row's first position in the padded input */
  /* per kernel offset (or kernel row): whether each output row's window reads a real input
     row (rows x one byte), and the output columns [col_lo, col_hi) whose windows read real
     input columns, the positions a chunk of finite gy values sums (the padding's products
     are +0 or -0 there); NULL: every position is summed */
  const unsigned char *row_ok;
  const long *col_lo, *col_hi;
};

/* The reduction runs over the real output positions of a block of samples (no extended grid),
   KC of them at a time across rows and samples, so that the partial sums (kk x cout x cp, as
   large as the weight) are read and written once per KC positions, not once per sample. */
#if PAIRS
/* acc (MW x NW, row stride ldc) += a (k2 pairs x MW) . b (k2 pairs of NW channels, row stride
   ldb): each lane of b one channel's pair of positions, summed by vdpbf16ps */
static void micro_w_pairs(long k2, const uint32_t *restrict a, const uint32_t *restrict b,
                          long ldb, T *restrict acc, long ldc) {
  __m512 c[MW][2];
#pragma GCC unroll 8
  for (int i = 0; i < MW; i++) {
    c[i][0] = _mm512_loadu_ps(acc + i * ldc);
    c[i][1] = _mm512_loadu_ps(acc + i * ldc + VL);
  }
  for (long q = 0; q < k2; q++) {
    __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + VL);
#pragma GCC unroll 8
    for (int i = 0; i < MW; i++) {
      __m512bh s = (__m512bh)_mm512_set1_epi32((int)a[i]);
      c[i][0] = _mm512_dpbf16_ps(c[i][0], s, b0);
      c[i][1] = _mm512_dpbf16_ps(c[i][1], s, b1);
    }
    a += MW;
    b += ldb;
  }
#pragma GCC unroll 8
  for (int i = 0; i < MW; i++) {
    _mm512_storeu_ps(acc + i * ldc, c[i][0]);
    _mm512_storeu_ps(acc + i * ldc + VL, c[i][1]);
  }
}

/* `wcl_blocks` on bfloat16 pairs: a chunk's positions taken two at a time (the i-th pair: its
   positions 2i and 2i + 1, whatever rows or samples they come from), gy's values and, per
   kernel offset, x's channels packed as those pairs */
static void wcl_blocks(void *ctx, long lo, long hi) {
  const struct wcl *g = ctx;
  long mp = g->m_panels, rows = mp * MW, cp = g->cp, cw = g->cw, k2max = (KC + 1) / 2;
  long per_sample = g->sg.count * g->sg.len;
  uint32_t *ap = aligned_alloc(64, (size_t)(mp * k2max * MW) * sizeof(uint32_t));
  uint32_t *bp = aligned_alloc(64, (size_t)(k2max * cw) * sizeof(uint32_t));
  long *at = malloc(2 * (KC + 1) * sizeof(long)); /* per position: x offset, gy offset */
  if (!ap || !bp || !at) abort();
  long *x_at = at, *gy_at = at + KC + 1;
  for (long blk = lo; blk < hi; blk++) {
    long n0 = blk * g->per_block, n1 = n0 + g->per_block < g->n ? n0 + g->per_block : g->n;
    T *part = g->partial + blk * g->kk * rows * cw;
    memset(part, 0, (size_t)(g->kk * rows * cw) * sizeof(T));
    long total = (n1 - n0) * per_sample;
    for (long i0 = 0; i0 < total; i0 += KC) {
      long kc = total - i0 < KC ? total - i0 : KC, k2 = (kc + 1) / 2;
      for (long i = i0; i < i0 + kc; i++) {
        long s = i / per_sample, within = i - s * per_sample;
        long row = within / g->sg.len, t = within - row * g->sg.len, nn = n0 + s;
        x_at[i - i0] = nn * g->x_sample + (g->sg.dst[row] + t * g->xstep) * cp;
        gy_at[i - i0] = nn * g->gy_sample + g->sg.src[row] + t;
      }
      for (long ip = 0; ip < mp; ip++)
        for (int m = 0; m < MW; m++) {
          long co = ip * MW + m;
          uint32_t *to = ap + ip * k2max * MW + m;
          const S *plane = g->gy + co * g->sg.plane;
          for (long q = 0; q < k2; q++, to += MW) {
            uint32_t lo_ = co < g->cout ? plane[gy_at[2 * q]] : 0;
            uint32_t hi_ = co < g->cout && 2 * q + 1 < kc ? plane[gy_at[2 * q + 1]] : 0;
            *to = lo_ | hi_ << 16;
          }
        }
      for (long k = 0; k < g->kk; k++) {
        const XW *xs = g->x + g->koff[k] * cp;
        for (long q = 0; q < k2; q++)
          pair_run(bp + q * cw, xs + x_at[2 * q], 2 * q + 1 < kc ? xs + x_at[2 * q + 1] : 0, cw);
        for (long ip = 0; ip < mp; ip++)
          for (long c0 = 0; c0 < cw; c0 += NW)
            micro_w_pairs(k2, ap + ip * k2max * MW, bp + c0, cw,
                          part + (k * rows + ip * MW) * cw + c0, cw);
      }
    }
  }
  free(at);
  free(bp);
  free(ap);
}
#else
static void wcl_blocks(void *ctx, long lo, long hi) {
  const struct wcl *g = ctx;
  long mp = g->m_panels, rows = mp * MW, cp = g->cp, cw = g->cw;
  long per_sample = g->sg.count * g->sg.len;
  T *ap = aligned_alloc(64, (size_t)(mp * KC * MW) * sizeof(T));
  /* per segment: x offset, count, gy offset, output row, first column; a kernel offset's x
     offset, count and positions skipped before and after; zeros */
  long *seg = calloc(10 * (KC + 2), sizeof(long));
  if (!ap || !seg) abort();
  long *s_off = seg, *s_cnt = seg + KC + 2, *s_gy = seg + 2 * (KC + 2);
  long *s_row = seg + 3 * (KC + 2), *s_t = seg + 4 * (KC + 2), *k_off = seg + 5 * (KC + 2);
  long *k_cnt = seg + 6 * (KC + 2), *k_pre = seg + 7 * (KC + 2), *k_post = seg + 8 * (KC + 2);
  const long *zero = seg + 9 * (KC + 2);
  for (long blk = lo; blk < hi; blk++) {
    long n0 = blk * g->per_block, n1 = n0 + g->per_block < g->n ? n0 + g->per_block : g->n;
    T *part = g->partial + blk * g->kk * rows * cw;
    memset(part, 0, (size_t)(g->kk * rows * cw) * sizeof(T));
    long total = (n1 - n0) * per_sample;
    for (long i0 = 0; i0 < total; i0 += KC) {
      long kc = total - i0 < KC ? total - i0 : KC;
      /* the chunk's segments: pieces of output rows */
      int nseg = 0;
      for (long i = i0; i < i0 + kc;) {
        long s = i / per_sample, within = i - s * per_sample;
        long row = within / g->sg.len, t = within - row * g->sg.len;
        long count = g->sg.len - t < i0 + kc - i ? g->sg.len - t : i0 + kc - i;
        long nn = n0 + s;
        s_off[nseg] = (nn * g->x_sample + (g->sg.dst[row] + t * g->xstep) * cp);
        s_gy[nseg] = nn * g->gy_sample + g->sg.src[row] + t;
        s_cnt[nseg] = count;
        s_row[nseg] = row;
        s_t[nseg] = t;
        nseg++;
        i += count;
      }
      /* gy's chunk, packed in panels of MW output channels; whether its values are all
         finite (inf or NaN times the padding's zeros is NaN: such a chunk skips nothing) */
      int finite = 1;
      for (long ip = 0; ip < mp; ip++)
        for (int m = 0; m < MW; m++) {
          long co = ip * MW + m;
          T *to = ap + ip * KC * MW + m;
          if (co < g->cout) {
            for (int sg = 0; sg < nseg; sg++) {
              const S *from = g->gy + s_gy[sg] + co * g->sg.plane;
              for (long p = 0; p < s_cnt[sg]; p++, to += MW) {
                T v = LD(from[p]);
                *to = v;
                finite &= v - v == 0;
              }
            }
          } else {
            for (long p = 0; p < kc; p++, to += MW) *to = 0;
          }
        }
      for (long k = 0; k < g->kk; k++) {
        const T *xs = g->x + g->koff[k] * cp;
        const long *off = s_off, *cnt = s_cnt, *pre = zero, *post = zero;
        if (g->row_ok && finite) { /* the segments' pieces whose windows read real input */
          const unsigned char *ok = g->row_ok + k * g->sg.count;
          long lo_ = g->col_lo[k], hi_ = g->col_hi[k];
          for (int sg = 0; sg < nseg; sg++) {
            long t0 = s_t[sg], t1 = t0 + s_cnt[sg];
            long a0 = t0 > lo_ ? t0 : lo_, a1 = t1 < hi_ ? t1 : hi_;
            if (!ok[s_row[sg]] || a1 <= a0) a0 = a1 = t1;
            k_pre[sg] = a0 - t0;
            k_cnt[sg] = a1 - a0;
            k_post[sg] = t1 - a1;
            k_off[sg] = s_off[sg] + (a0 - t0) * g->xstep * cp;
          }
          off = k_off, cnt = k_cnt, pre = k_pre, post = k_post;
        }
        for (long ip = 0; ip < mp; ip++)
          for (long c0 = 0; c0 < cw; c0 += NW)
            micro_w(nseg, off, cnt, pre, post, ap + ip * KC * MW, xs + c0, cp * g->xstep,
                    part + (k * rows + ip * MW) * cw + c0, cw);
      }
    }
  }
  free(seg);
  free(ap);
}
#endif

/* out (blocks summed: kk x rows x cw) from gy (n x cout x plane) and the channels-last padded
   input x (n x positions x cp), read at an output row's first position seg_dst[r] plus the
   kernel offset's koff[k], then every xstep positions along the row (a strided convolution);
   cw values from each (cw == cp: one kernel offset's channels; cw > cp: a kernel row's
   offsets, adjacent positions, side by side, the values past them never used) */
void conv_weight_grad_cl(const S *gy, const XW *x, T *out, T *partial, const long *koff, long n,
                         long cout, long kk, long cp, long gy_sample, long x_sample,
                         long per_block, long xstep, long cw, const long *seg_src,
                         const long *seg_dst, long segs, long seg_len, long plane,
                         const unsigned char *row_ok, const long *col_lo, const long *col_hi,
                         ember_pool pool) {
  long mp = (cout + MW - 1) / MW, blocks = (n + per_block - 1) / per_block;
  struct wcl g = {gy,        x,  partial, koff,  n, cout, kk, cp, gy_sample, x_sample,
                  per_block, mp, xstep,   cw,    {seg_src, seg_dst, segs, seg_len, plane},
                  row_ok,    col_lo, col_hi};
  if (pool && blocks > 1 && cout * kk * cw * plane * n > (1L << 20))
    pool(wcl_blocks, &g, blocks, 1);
  else
    wcl_blocks(&g, 0, blocks);
  long size = kk * mp * MW * cw;
  memcpy(out, partial, (size_t)size * sizeof(T));
  for (long b = 1; b < blocks; b++)
    for (long i = 0; i < size; i++) out[i] += partial[b * size + i];
}
/* the channels-last copy the kernel above reads: dst (n x hp x wp x cp, its border and its
   channels past c left as they are) at (lo_h + i, lo_w + j, ch) = x (n x c x in_h x in_w) at
   (ch, i, j), for i < rows, j < cols; blocks of BW positions of a row, so that each channel's
   piece is one contiguous read and the block's writes stay in L1 */
#define BW 16
#if !HALF && defined(__GNUC__) && !defined(__clang__)
/* VL channels' runs of VL positions (from, ld apart) stored as VL positions' runs of VL
   channels (to, cp apart), transposed in registers: log2(VL) rounds, each interleaving the
   first half of the rows with the second (a shuffle a row, where the copy below stores an
   element at a time); the first nb positions stored (the others read, never used) */
#define TILE_TRANSPOSE 1
#if T_FLOAT
typedef int32_t tmask __attribute__((vector_size(64)));
#define TLO {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23}
#define THI {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31}
#define TROUNDS 4
#else
typedef int64_t tmask __attribute__((vector_size(64)));
#define TLO {0, 8, 1, 9, 2, 10, 3, 11}
#define THI {4, 12, 5, 13, 6, 14, 7, 15}
#define TROUNDS 3
#endif
static inline void transpose_tile(const T *from, long ld, T *to, long cp, long nb) {
  vec r[VL], t[VL];
  const tmask lo = TLO, hi = THI;
#pragma GCC unroll 16
  for (int i = 0; i < VL; i++) r[i] = *(const uvec *)(from + i * ld);
#pragma GCC unroll 4
  for (int round = 0; round < TROUNDS; round++) {
#pragma GCC unroll 8
    for (int i = 0; i < VL / 2; i++) {
      t[2 * i] = __builtin_shuffle(r[i], r[i + VL / 2], lo);
      t[2 * i + 1] = __builtin_shuffle(r[i], r[i + VL / 2], hi);
    }
#pragma GCC unroll 16
    for (int i = 0; i < VL; i++) r[i] = t[i];
  }
  for (long j = 0; j < nb; j++) *(uvec *)(to + j * cp) = r[j];
}
#endif
struct tcl {
  const S *x, *end; /* end: past x's last value (a tile's reads past a short row stop there) */
  XW *dst;
  long c, in_h, in_w, rows, cols, cp, hp, wp, lo_h, lo_w;
};
static void tcl_rows(void *ctx, long lo, long hi) {
  const struct tcl *t = ctx;
  for (long r = lo; r < hi; r++) { /* r: sample * rows + row */
    long n = r / t->rows, i = r - n * t->rows;
    const S *src = t->x + (n * t->c * t->in_h + i) * t->in_w;
    XW *row = t->dst + ((n * t->hp + t->lo_h + i) * t->wp + t->lo_w) * t->cp;
    for (long j0 = 0; j0 < t->cols; j0 += BW) {
      long nb = t->cols - j0 < BW ? t->cols - j0 : BW, ch = 0;
#ifdef TILE_TRANSPOSE
      long plane = t->in_h * t->in_w;
      if (nb % VL == 0)
        for (; ch + VL <= t->c; ch += VL)
          for (long jj = 0; jj < nb; jj += VL)
            transpose_tile(src + ch * plane + j0 + jj, plane, row + (j0 + jj) * t->cp + ch, t->cp,
                           VL);
      else if (nb < VL) /* a short row: whole vectors read from it, where x goes on that far */
        for (; ch + VL <= t->c && src + (ch + VL - 1) * plane + j0 + VL <= t->end; ch += VL)
          transpose_tile(src + ch * plane + j0, plane, row + j0 * t->cp + ch, t->cp, nb);
#endif
      for (; ch < t->c; ch++) {
        const S *from = src + ch * t->in_h * t->in_w + j0;
        XW *to = row + j0 * t->cp + ch;
        for (long j = 0; j < nb; j++) to[j * t->cp] = XW_OF(from[j]);
      }
    }
  }
}
void to_channels_last(const S *x, XW *dst, long n, long c, long in_h, long in_w, long rows,
                      long cols, long cp, long hp, long wp, long lo_h, long lo_w,
                      ember_pool pool) {
  struct tcl t = {x, x + n * c * in_h * in_w, dst, c, in_h, in_w, rows, cols, cp, hp, wp, lo_h,
                  lo_w};
  if (pool && n * rows > 1 && n * c * rows * cols > (1L << 16)) pool(tcl_rows, &t, n * rows, 1);
  else tcl_rows(&t, 0, n * rows);
}
"""
