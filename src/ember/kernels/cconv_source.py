"""The C source of the convolution kernels (kernels/cconv.py compiles it, once per dtype).

Two kernels, both register-blocked for 64-byte vectors written with GCC's vector extension (so
the compiler emits AVX-512 where the CPU has it, and two or four narrower vectors elsewhere):

* ``conv_forward``: an implicit-GEMM convolution. out[co, j] = sum_p W[co, p] * X[p, j] where
  p runs over (input channel, kernel offset) and j over output positions; X is never built: its
  element (p, j) is ``x[roff[p] + src[j]]`` of the zero-padded input, so a block of columns is
  packed straight from the input (consecutive columns are mostly consecutive in memory, copied
  as runs). Outer-product micro-kernel, MR x NR = 8 x 3 vectors; W is packed by the caller.
  The store writes column j to ``dst[j]`` (its NC* offset, or -1 for a column outside the
  output), adding ``bias[co]`` and applying ReLU when asked (a convolution epilogue).
* ``conv_weight_grad``: gw[co, r] = sum_n sum_l gy[n, co, l] * x[n * x_sample + roff[r] + l]
  over an extended output grid (rows of the padded input's width, stride 1) in which gy is
  zero outside the real output (each block of samples lays its gy out so, in cache). Both
  operands are contiguous along l, so a dot-product micro-kernel (4 x 6 vector accumulators,
  summed across lanes once per block of samples) needs no packing. With many input channels,
  ``conv_weight_grad_cl`` instead runs one GEMM per kernel offset over a channels-last copy
  of the input (outer products, 8 output channels x 2 vectors of input channels), reducing
  over the real output positions only, KC at a time across rows and samples.

Both share work over ember's thread pool (kernels/cpool.py) when given one.
"""

from .cmicro import MICRO, MICRO_PAIRS

SOURCE = (
    r"""
#include <stdlib.h>
#include <string.h>
typedef void (*ember_task)(void *ctx, long lo, long hi);
typedef void (*ember_pool)(ember_task, void *ctx, long n, long align);
#ifndef HALF /* S: the storage type of the forward's input, bias and output (T, or 16 bits) */
#define HALF 0
#define S T
#endif
#if HALF /* 16-bit values widened as they are packed, rounded as they are stored */
#define LD(v) HALF_LOAD(v)
#define ST(v) HALF_STORE(v)
#define RND(v) HALF_LOAD(HALF_STORE(v)) /* a value rounded to the storage precision */
#else
#define LD(v) (v)
#define ST(v) (v)
#define RND(v) (v)
#endif

"""
    + MICRO
    + r"""
struct fwd {
  const S *x, *bias;
  const void *wp; /* P: T, or bfloat16 pairs */
  S *out;
  unsigned char *mask; /* out > 0 (the ReLU's gradient mask), or NULL */
  const long *src, *dst, *roff; /* src, dst: per column of one sample */
  long m_panels, k, cols, cout, chan; /* chan: the output's channel stride */
  long grid, x_sample, out_sample;    /* columns per sample; the sample strides */
  int relu;
  long group; /* column panels per group (see fwd_panels) */
};

/* runs of consecutive columns: start, length and first offset (into the input for `src`,
   the output for `dst`; columns at -1 are skipped); returns how many */
static int runs_of(const long *off, long nj, long *start, long *len, long *first) {
  int count = 0;
  for (long jj = 0; jj < nj;) {
    if (off[jj] < 0) { jj++; continue; }
    long run = 1;
    while (jj + run < nj && off[jj + run] == off[jj] + run) run++;
    start[count] = jj, len[count] = run, first[count] = off[jj], count++;
    jj += run;
  }
  return count;
}

/* runs of columns whose input offsets step evenly (a strided convolution's columns along an
   output row step by the stride): start, length, first offset and step; returns how many */
static int strided_runs_of(const long *off, long nj, long *start, long *len, long *first,
                           long *step) {
  int count = 0;
  for (long jj = 0; jj < nj;) {
    if (off[jj] < 0) { jj++; continue; }
    long st = jj + 1 < nj && off[jj + 1] > off[jj] ? off[jj + 1] - off[jj] : 1, run = 1;
    while (jj + run < nj && off[jj + run] == off[jj] + run * st) run++;
    start[count] = jj, len[count] = run, first[count] = off[jj], step[count] = st, count++;
    jj += run;
  }
  return count;
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#if T_FLOAT
#define V __m512
#define MASK __mmask16
#define SET1 _mm512_set1_ps
#define LOAD _mm512_loadu_ps
#define ADD _mm512_add_ps
#define CMP _mm512_cmp_ps_mask
#define MOV _mm512_mask_mov_ps
#define STORE _mm512_mask_storeu_ps
#define MLOAD _mm512_maskz_loadu_ps
#define EVENS(lo, hi)                                                                     \
  _mm512_permutex2var_ps(                                                                 \
      lo, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), hi)
#else
#define V __m512d
#define MASK __mmask8
#define SET1 _mm512_set1_pd
#define LOAD _mm512_loadu_pd
#define ADD _mm512_add_pd
#define CMP _mm512_cmp_pd_mask
#define MOV _mm512_mask_mov_pd
#define STORE _mm512_mask_storeu_pd
#define MLOAD _mm512_maskz_loadu_pd
#define EVENS(lo, hi) _mm512_permutex2var_pd(lo, _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14), hi)
#endif
#define HAVE_MASKS 1
/* the first n lanes (n < 2 * VL) */
static inline MASK lanes(long n) { return n >= VL ? (MASK)~0 : (MASK)((1ull << n) - 1); }
#else
#define HAVE_MASKS 0
#endif

#if HAVE_MASKS && HALF /* VL 16-bit values widened (exactly) to float32 */
static inline V widen(__m256i h) {
#if HALF_BF16
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
#else
  return _mm512_cvtph_ps(h);
#endif
}
#endif

/* dst[t] = from[t] (t < n): short runs (an output row of a small plane, a piece of a panel)
   copied a vector at a time, the last one masked (16-bit values widened); elementwise without
   AVX-512 */
static inline void copy_run(T *restrict dst, const S *restrict from, long n) {
#if HAVE_MASKS && HALF
  for (long t = 0; t < n; t += VL) {
    MASK keep = lanes(n - t);
    STORE(dst + t, keep, widen(_mm256_maskz_loadu_epi16(keep, from + t)));
  }
#elif HAVE_MASKS
  for (long t = 0; t < n; t += VL) {
    MASK keep = lanes(n - t);
    STORE(dst + t, keep, MLOAD(keep, from + t));
  }
#else
  for (long t = 0; t < n; t++) dst[t] = LD(from[t]);
#endif
}

/* dst[t] = from[2 * t] (t < n): a stride-2 convolution's columns, two vectors of the input
   de-interleaved per vector of the panel (reading only the 2n - 1 elements used) */
static inline void copy_evens(T *restrict dst, const S *restrict from, long n) {
#if HAVE_MASKS && !HALF
  for (long t = 0; t < n; t += VL) {
    long used = 2 * (n - t < VL ? n - t : VL) - 1;
    V lo = MLOAD(lanes(used), from + 2 * t);
    V hi = MLOAD(used > VL ? lanes(used - VL) : (MASK)0, from + 2 * t + VL);
    STORE(dst + t, lanes(n - t), EVENS(lo, hi));
  }
#else
  for (long t = 0; t < n; t++) dst[t] = LD(from[2 * t]);
#endif
}

/* *out = whether copy_run moves a vector at a time (kernels/cconv.py's layout rule asks) */
void conv_masked_runs(int *out) { *out = HAVE_MASKS; }

/* bfloat16 where the CPU has AVX512_BF16: the forward's panels keep the 16-bit values, two
   consecutive (channel, kernel offset) rows in each 32-bit lane (an odd count's last row
   paired with zero), and `micro_pairs` adds both products per float32 lane with one
   vdpbf16ps (which reads subnormal values as zero) */
#if HALF && HALF_BF16 && HAVE_MASKS && defined(__AVX512BF16__) && !defined(EMBER_NO_BF16_DOT)
#define PAIRS 1
typedef uint32_t P; /* a packed element: a pair of rows */
"""
    + MICRO_PAIRS
    + r"""
/* dst[t] = lo[t] | hi[t] << 16 (hi NULL: zero), t < n, a masked vector at a time */
static inline void pair_run(uint32_t *restrict dst, const S *restrict lo, const S *restrict hi,
                            long n) {
  for (long t = 0; t < n; t += VL) {
    MASK keep = lanes(n - t);
    __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(keep, lo + t));
    if (hi)
      v = _mm512_or_si512(
          v, _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(keep, hi + t)), 16));
    _mm512_mask_storeu_epi32(dst + t, keep, v);
  }
}
#define MICRO_RUN(kc, a, b, acc, first) micro_pairs(((kc) + 1) / 2, a, b, acc, first)
#define PACKED_K(k) (((k) + 1) / 2)
#else
#define PAIRS 0
typedef T P;
#define MICRO_RUN(kc, a, b, acc, first) micro(kc, a, b, acc, first)
#define PACKED_K(k) (k)
#endif
/* *out = whether the forward's panels are bfloat16 pairs (kernels/cconv.py packs its weight
   so) */
void conv_pairs(int *out) { *out = PAIRS; }

/* the strided runs' columns: a copy per run, specialised for the common steps */
#if PAIRS
static void pack_strided(const S *restrict x, const long *roff, long kc, int count,
                         const long *start, const long *len, const long *first,
                         const long *step, P *restrict bp) {
  long covered = 0;
  for (int r = 0; r < count; r++) covered += len[r];
  for (long q = 0; q < (kc + 1) / 2; q++) {
    P *to = bp + q * NR;
    if (covered < NR) memset(to, 0, NR * sizeof(P));
    int odd = 2 * q + 1 < kc;
    for (int r = 0; r < count; r++) {
      const S *lo = x + roff[2 * q] + first[r], *hi = odd ? x + roff[2 * q + 1] + first[r] : 0;
      long n = len[r], st = step[r];
      if (st == 1)
        pair_run(to + start[r], lo, hi, n);
      else
        for (long t = 0; t < n; t++)
          to[start[r] + t] = (P)lo[t * st] | (hi ? (P)hi[t * st] << 16 : 0);
    }
  }
}
#else
static void pack_strided(const S *restrict x, const long *roff, long kc, int count,
                         const long *start, const long *len, const long *first,
                         const long *step, T *restrict bp) {
  long covered = 0;
  for (int r = 0; r < count; r++) covered += len[r];
  for (long p = 0; p < kc; p++) {
    T *to = bp + p * NR;
    if (covered < NR) memset(to, 0, NR * sizeof(T));
    for (int r = 0; r < count; r++) {
      const S *restrict from = x + roff[p] + first[r];
      T *restrict dst = to + start[r];
      long n = len[r], st = step[r];
      if (st == 1)
        copy_run(dst, from, n);
      else if (st == 2)
        copy_evens(dst, from, n);
      else
        for (long t = 0; t < n; t++) dst[t] = LD(from[t * st]);
    }
  }
}
#endif

#if PAIRS
static void pack_columns(const S *restrict x, const long *roff, long kc, long nj, int count,
                         const long *start, const long *len, const long *first, P *restrict bp) {
  long covered = 0;
  for (int r = 0; r < count; r++) covered += len[r];
  for (long q = 0; q < (kc + 1) / 2; q++) {
    P *to = bp + q * NR;
    int odd = 2 * q + 1 < kc;
    if (covered < nj || nj < NR) memset(to, 0, NR * sizeof(P));
    for (int r = 0; r < count; r++)
      pair_run(to + start[r], x + roff[2 * q] + first[r],
               odd ? x + roff[2 * q + 1] + first[r] : 0, len[r]);
  }
}
#else
static void pack_columns(const S *restrict x, const long *roff, long kc, long nj, int count,
                         const long *start, const long *len, const long *first, T *restrict bp) {
  if (count == 1 && nj == NR) { /* the common case: one run over the whole panel */
    for (long p = 0; p < kc; p++) {
      const S *from = x + roff[p] + first[0];
      T *to = bp + p * NR;
#if HALF
      copy_run(to, from, NR);
#else
      *(vec *)to = *(const uvec *)from;
      *(vec *)(to + VL) = *(const uvec *)(from + VL);
      *(vec *)(to + 2 * VL) = *(const uvec *)(from + 2 * VL);
#endif
    }
    return;
  }
  long covered = 0;
  for (int r = 0; r < count; r++) covered += len[r];
  for (long p = 0; p < kc; p++) {
    T *to = bp + p * NR;
    if (covered < nj || nj < NR) memset(to, 0, NR * sizeof(T));
    for (int r = 0; r < count; r++) copy_run(to + start[r], x + roff[p] + first[r], len[r]);
  }
}
#endif

/* to[t] = from[t] + b (then ReLU), mask[t] = to[t] > 0; ``from`` may be read up to a whole
   vector past n. Runs are short (an output row: 7 to 28 elements here), so AVX-512 stores them
   as masked vectors; elsewhere the loops are plain. 16-bit storage rounds as the unfused ops
   would: the convolution's result, then its sum with the bias (ReLU and its mask then read
   the rounded value); a loop the compiler vectorizes. */
#if HALF && HAVE_MASKS
/* VL float32 values rounded to 16 bits as kernels/chalf.py's HALF_STORE rounds them (to
   nearest even; a NaN quieted: bfloat16 keeps its payload's top bits, float16 is 0x7e00) */
static inline __m256i narrow(V v) {
  __m512i u = _mm512_castps_si512(v);
  MASK nan = CMP(v, v, _CMP_UNORD_Q);
#if HALF_BF16
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  r = _mm512_mask_mov_epi32(_mm512_srli_epi32(r, 16), nan,
                            _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
  return _mm512_cvtepi32_epi16(r);
#else
  __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256i quiet = _mm512_cvtepi32_epi16(_mm512_or_si512(
      _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x8000)),
      _mm512_set1_epi32(0x7e00)));
  return _mm256_mask_mov_epi16(h, nan, quiet);
#endif
}
static inline void store_run(const T *from, T b, int relu, S *to, unsigned char *mask, long n) {
  V bias = SET1(b), zero = SET1(0);
  __m128i ones = _mm_set1_epi8(1);
  for (long t = 0; t < n; t += VL) {
    MASK keep = lanes(n - t);
    __m256i h = narrow(LOAD(from + t));
    V v = widen(h);
    if (b != 0) v = widen(h = narrow(ADD(v, bias))); /* (adding 0 changes only -0.0) */
    if (relu) { /* NaN and -0.0 stay */
      MASK negative = CMP(v, zero, _CMP_LT_OQ);
      v = MOV(v, negative, zero);
      h = _mm256_mask_mov_epi16(h, negative, _mm256_setzero_si256());
    }
    _mm256_mask_storeu_epi16(to + t, keep, h);
    if (mask)
      _mm_mask_storeu_epi8(mask + t, keep, _mm_maskz_mov_epi8(CMP(v, zero, _CMP_GT_OQ), ones));
  }
}
#elif HALF
static inline void store_run(const T *from, T b, int relu, S *to, unsigned char *mask, long n) {
  for (long t = 0; t < n; t++) {
    T v = RND(from[t]);
    if (b != 0) v = RND(v + b); /* (adding 0 changes only -0.0) */
    if (relu) v = v < 0 ? 0 : v; /* NaN and -0.0 stay, like np.maximum */
    to[t] = ST(v);
    if (mask) mask[t] = v > 0;
  }
}
#elif defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
static inline void store_run(const T *from, T b, int relu, T *to, unsigned char *mask, long n) {
  V bias = SET1(b), zero = SET1(0);
  __m128i ones = _mm_set1_epi8(1);
  for (long t = 0; t < n; t += VL) {
    MASK keep = n - t >= VL ? (MASK)~0 : (MASK)((1u << (n - t)) - 1);
    V v = ADD(LOAD(from + t), bias);
    if (relu) v = MOV(v, CMP(v, zero, _CMP_LT_OQ), zero); /* NaN and -0.0 stay */
    STORE(to + t, keep, v);
    if (mask)
      _mm_mask_storeu_epi8(mask + t, keep, _mm_maskz_mov_epi8(CMP(v, zero, _CMP_GT_OQ), ones));
  }
}
#else
static inline void store_run(const T *from, T b, int relu, T *to, unsigned char *mask, long n) {
  for (long t = 0; t < n; t++) {
    T v = from[t] + b;
    if (relu) v = v < 0 ? 0 : v; /* NaN and -0.0 stay, like np.maximum */
    to[t] = v;
    if (mask) mask[t] = v > 0;
  }
}
#endif

/* store_run's to[t * step] (a run of columns that lands every step-th element: a phase of a
   strided convolution's input gradient written in place) */
static inline void store_steps(const T *from, T b, int relu, S *to, unsigned char *mask, long n,
                               long step) {
  for (long t = 0; t < n; t++) {
    T v = RND(from[t]);
    if (HALF && b != 0) v = RND(v + b); /* (16 bits: the sum rounded too) */
    else if (!HALF) v += b;
    if (relu) v = v < 0 ? 0 : v;
    to[t * step] = ST(v);
    if (mask) mask[t * step] = v > 0;
  }
}

/* one column panel's tables: its runs in the input (contiguous, and evenly stepping) and in
   the output (evenly stepping: contiguous but for a phase's scattered store) */
struct panel_runs {
  long nj;
  int s_count, d_count, t_count;
  long s_start[NR], s_len[NR], s_first[NR], d_start[NR], d_len[NR], d_first[NR], d_step[NR];
  long t_start[NR], t_len[NR], t_first[NR], t_step[NR];
};

static void panel_tables(const struct fwd *f, long panel, struct panel_runs *r) {
  long j0 = panel * NR, nj = f->cols - j0 < NR ? f->cols - j0 : NR;
  long src[NR], dst[NR];
  for (long jj = 0; jj < nj; jj++) {
    long j = j0 + jj, n = j / f->grid, l = j - n * f->grid;
    src[jj] = n * f->x_sample + f->src[l];
    dst[jj] = f->dst[l] < 0 ? -1 : n * f->out_sample + f->dst[l];
  }
  r->nj = nj;
  r->s_count = runs_of(src, nj, r->s_start, r->s_len, r->s_first);
  r->d_count = strided_runs_of(dst, nj, r->d_start, r->d_len, r->d_first, r->d_step);
  /* columns that do not come in long contiguous runs may step evenly (a stride) */
  r->t_count = r->s_count > 1
                   ? strided_runs_of(src, nj, r->t_start, r->t_len, r->t_first, r->t_step)
                   : NR + 1;
}

/* Column panels run `group` at a time: each block of the packed weight (MR x KC) is read once
   per group of panels rather than once per panel (the caller sizes the group so that the
   group's packed columns and accumulators stay in L2). */
static void fwd_panels(void *ctx, long lo, long hi) {
  const struct fwd *f = ctx;
  long mp = f->m_panels, k = f->k, group = f->group < hi - lo ? f->group : hi - lo;
  if (group < 1) group = 1;
  T *tiles = aligned_alloc(64, (size_t)(group * (mp * MR * NR + KC * NR)) * sizeof(T));
  struct panel_runs *runs = malloc((size_t)group * sizeof(struct panel_runs));
  if (!tiles || !runs) abort();
  P *bps = (P *)(tiles + group * mp * MR * NR);
  const P *wp = f->wp;
  long kp = PACKED_K(k);
  for (long g0 = lo; g0 < hi; g0 += group) {
    long count = hi - g0 < group ? hi - g0 : group;
    for (long q = 0; q < count; q++) panel_tables(f, g0 + q, &runs[q]);
    for (long pc = 0; pc < k; pc += KC) {
      long kc = k - pc < KC ? k - pc : KC;
      for (long q = 0; q < count; q++) {
        const struct panel_runs *r = &runs[q];
        P *bp = bps + q * KC * NR;
        if (r->t_count < r->s_count)
          pack_strided(f->x, f->roff + pc, kc, r->t_count, r->t_start, r->t_len, r->t_first,
                       r->t_step, bp);
        else
          pack_columns(f->x, f->roff + pc, kc, r->nj, r->s_count, r->s_start, r->s_len,
                       r->s_first, bp);
      }
      for (long ip = 0; ip < mp; ip++)
        for (long q = 0; q < count; q++)
          MICRO_RUN(kc, wp + (ip * kp + PACKED_K(pc)) * MR, bps + q * KC * NR,
                    tiles + (q * mp + ip) * MR * NR, pc == 0);
    }
    for (long q = 0; q < count; q++) {
      const struct panel_runs *r = &runs[q];
      for (long co = 0; co < f->cout; co++) {
        const T *acc = tiles + q * mp * MR * NR + co * NR;
        T b = f->bias ? LD(f->bias[co]) : (T)0;
        S *base = f->out + co * f->chan;
        unsigned char *mask = f->mask ? f->mask + co * f->chan : 0;
        for (int i = 0; i < r->d_count; i++) {
          if (r->d_step[i] == 1)
            store_run(acc + r->d_start[i], b, f->relu, base + r->d_first[i],
                      mask ? mask + r->d_first[i] : 0, r->d_len[i]);
          else
            store_steps(acc + r->d_start[i], b, f->relu, base + r->d_first[i],
                        mask ? mask + r->d_first[i] : 0, r->d_len[i], r->d_step[i]);
        }
      }
    }
  }
  free(runs);
  free(tiles);
}

void conv_forward(const S *x, const void *wp, const S *bias, S *out, unsigned char *mask,
                  const long *src, const long *dst, const long *roff, long m_panels, long k,
                  long cols, long cout, long chan, long grid, long x_sample, long out_sample,
                  int relu, ember_pool pool, long group) {
  long panels = (cols + NR - 1) / NR;
  int shared = pool && panels > 1 && m_panels * MR * k * cols > (1L << 20);
  /* (each thread gets whole groups where there are enough panels to go round) */
  long per_thread = group < 1 ? 1 : group;
  struct fwd f = {x,    bias, wp,   out,  mask, src,  dst,      roff,       m_panels,
                  k,    cols, cout, chan, grid, x_sample, out_sample, relu, per_thread};
  if (shared) pool(fwd_panels, &f, panels, 1);
  else fwd_panels(&f, 0, panels);
}

/* the graph runner's step (runtime/cgraph.py): one group's forward convolution with its
   epilogue, on the pool where it is free (a run on one thread), else on this thread. The input
   is copied into the step's own zero-bordered scratch (none when the convolution reads it
   unpadded) and the weight packed into its own, as the caller of conv_forward does. args: x,
   w, bias, out, mask, xp (or 0), wp, src, dst, roff, then the copy (planes, rows and columns
   copied, the input's rows and columns, the padding before, the padded rows and columns), the
   packing (cout, rows, panels), conv_forward's eight sizes, relu, the pool (or 0), the panel
   group, whether the weight is the graph's constant, the weight packed last (0: none) */
/* the steps' copy of x into the zero-bordered scratch xp: c[0..8] = planes, rows and
   columns copied, the input's rows and columns, the padding before, the padded rows and
   columns */
static void copy_padded(const S *x, S *xp, const long *c) {
  long planes = c[0], h = c[1], wd = c[2], in_h = c[3], in_w = c[4];
  long lo_h = c[5], lo_w = c[6], hp = c[7], wpd = c[8];
  for (long p = 0; p < planes; p++)
    for (long r = 0; r < h; r++)
      memcpy(xp + (p * hp + r + lo_h) * wpd + lo_w, x + (p * in_h + r) * in_w,
             (size_t)wd * sizeof(S));
}

/* copy_padded into a scratch of T (16-bit values widened): the weight gradient's input; the
   same nine sizes */
void copy_padded_wide(const S *x, T *xp, const long *c) {
  long planes = c[0], h = c[1], wd = c[2], in_h = c[3], in_w = c[4];
  long lo_h = c[5], lo_w = c[6], hp = c[7], wpd = c[8];
  for (long p = 0; p < planes; p++)
    for (long r = 0; r < h; r++)
      copy_run(xp + (p * hp + r + lo_h) * wpd + lo_w, x + (p * in_h + r) * in_w, wd);
}

void conv_forward_step(const long *a) {
  const S *x = (const S *)a[0], *w = (const S *)a[1];
  S *xp = (S *)a[5];
  P *wp = (P *)a[6];
  if (xp) copy_padded(x, xp, a + 10);
  long cout = a[19], rows = a[20], panels = a[21], kp = PACKED_K(rows);
  /* a graph's constant weight (a[33]) is packed once: a[34] is the one packed last */
  if (!(a[33] && a[34] == a[1]))
    for (long pn = 0; pn < panels; pn++)
      for (long q = 0; q < kp; q++)
        for (long i = 0; i < MR; i++) {
          long co = pn * MR + i;
#if PAIRS
          P lo = co < cout ? w[co * rows + 2 * q] : 0;
          P hi = co < cout && 2 * q + 1 < rows ? w[co * rows + 2 * q + 1] : 0;
          wp[(pn * kp + q) * MR + i] = lo | hi << 16;
#else
          wp[(pn * kp + q) * MR + i] = co < cout ? LD(w[co * rows + q]) : 0;
#endif
        }
  if (a[33]) ((long *)a)[34] = a[1];
  conv_forward(xp ? xp : x, wp, (const S *)a[2], (S *)a[3], (unsigned char *)a[4],
               (const long *)a[7], (const long *)a[8], (const long *)a[9], a[22], a[23], a[24],
               a[25], a[26], a[27], a[28], a[29], (int)a[30], (ember_pool)a[31], a[32]);
}

/* ------------------------------------------------------------------ weight gradient */

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
   segments: cnt[s] rows (row stride ldb) from b + off[s] */
static void micro_w(int nseg, const long *off, const long *cnt, const T *restrict a,
                    const T *restrict b, long ldb, T *restrict acc, long ldc) {
  vec c[MW][2];
#pragma GCC unroll 8
  for (int i = 0; i < MW; i++) {
    c[i][0] = *(const uvec *)(acc + i * ldc);
    c[i][1] = *(const uvec *)(acc + i * ldc + VL);
  }
  for (int sg = 0; sg < nseg; sg++) {
    const T *bs = b + off[sg];
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
  struct segments sg; /* sg.dst: each output row's first position in the padded input */
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
  long mp = g->m_panels, rows = mp * MW, cp = g->cp, k2max = (KC + 1) / 2;
  long per_sample = g->sg.count * g->sg.len;
  uint32_t *ap = aligned_alloc(64, (size_t)(mp * k2max * MW) * sizeof(uint32_t));
  uint32_t *bp = aligned_alloc(64, (size_t)(k2max * cp) * sizeof(uint32_t));
  long *at = malloc(2 * (KC + 1) * sizeof(long)); /* per position: x offset, gy offset */
  if (!ap || !bp || !at) abort();
  long *x_at = at, *gy_at = at + KC + 1;
  for (long blk = lo; blk < hi; blk++) {
    long n0 = blk * g->per_block, n1 = n0 + g->per_block < g->n ? n0 + g->per_block : g->n;
    T *part = g->partial + blk * g->kk * rows * cp;
    memset(part, 0, (size_t)(g->kk * rows * cp) * sizeof(T));
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
          pair_run(bp + q * cp, xs + x_at[2 * q], 2 * q + 1 < kc ? xs + x_at[2 * q + 1] : 0, cp);
        for (long ip = 0; ip < mp; ip++)
          for (long c0 = 0; c0 < cp; c0 += NW)
            micro_w_pairs(k2, ap + ip * k2max * MW, bp + c0, cp,
                          part + (k * rows + ip * MW) * cp + c0, cp);
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
  long mp = g->m_panels, rows = mp * MW, cp = g->cp;
  long per_sample = g->sg.count * g->sg.len;
  T *ap = aligned_alloc(64, (size_t)(mp * KC * MW) * sizeof(T));
  long *seg = malloc(4 * (KC + 2) * sizeof(long)); /* x offset, count, gy offset, sample */
  if (!ap || !seg) abort();
  long *s_off = seg, *s_cnt = seg + KC + 2, *s_gy = seg + 2 * (KC + 2);
  for (long blk = lo; blk < hi; blk++) {
    long n0 = blk * g->per_block, n1 = n0 + g->per_block < g->n ? n0 + g->per_block : g->n;
    T *part = g->partial + blk * g->kk * rows * cp;
    memset(part, 0, (size_t)(g->kk * rows * cp) * sizeof(T));
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
        nseg++;
        i += count;
      }
      /* gy's chunk, packed in panels of MW output channels */
      for (long ip = 0; ip < mp; ip++)
        for (int m = 0; m < MW; m++) {
          long co = ip * MW + m;
          T *to = ap + ip * KC * MW + m;
          if (co < g->cout) {
            for (int sg = 0; sg < nseg; sg++) {
              const S *from = g->gy + s_gy[sg] + co * g->sg.plane;
              for (long p = 0; p < s_cnt[sg]; p++, to += MW) *to = LD(from[p]);
            }
          } else {
            for (long p = 0; p < kc; p++, to += MW) *to = 0;
          }
        }
      for (long k = 0; k < g->kk; k++) {
        const T *xs = g->x + g->koff[k] * cp;
        for (long ip = 0; ip < mp; ip++)
          for (long c0 = 0; c0 < cp; c0 += NW)
            micro_w(nseg, s_off, s_cnt, ap + ip * KC * MW, xs + c0, cp * g->xstep,
                    part + (k * rows + ip * MW) * cp + c0, cp);
      }
    }
  }
  free(seg);
  free(ap);
}
#endif

/* out (blocks summed: kk x rows x cp) from gy (n x cout x plane) and the channels-last padded
   input x (n x positions x cp), read at an output row's first position seg_dst[r] plus the
   kernel offset's koff[k], then every xstep positions along the row (a strided convolution) */
void conv_weight_grad_cl(const S *gy, const XW *x, T *out, T *partial, const long *koff, long n,
                         long cout, long kk, long cp, long gy_sample, long x_sample,
                         long per_block, long xstep, const long *seg_src, const long *seg_dst,
                         long segs, long seg_len, long plane, ember_pool pool) {
  long mp = (cout + MW - 1) / MW, blocks = (n + per_block - 1) / per_block;
  struct wcl g = {gy,        x,  partial, koff,  n, cout, kk, cp, gy_sample, x_sample,
                  per_block, mp, xstep,   {seg_src, seg_dst, segs, seg_len, plane}};
  if (pool && blocks > 1 && cout * kk * cp * plane * n > (1L << 20))
    pool(wcl_blocks, &g, blocks, 1);
  else
    wcl_blocks(&g, 0, blocks);
  long size = kk * mp * MW * cp;
  memcpy(out, partial, (size_t)size * sizeof(T));
  for (long b = 1; b < blocks; b++)
    for (long i = 0; i < size; i++) out[i] += partial[b * size + i];
}
/* the channels-last copy the kernel above reads: dst (n x hp x wp x cp, its border and its
   channels past c left as they are) at (lo_h + i, lo_w + j, ch) = x (n x c x in_h x in_w) at
   (ch, i, j), for i < rows, j < cols; blocks of BW positions of a row, so that each channel's
   piece is one contiguous read and the block's writes stay in L1 */
#define BW 16
struct tcl {
  const S *x;
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
      long nb = t->cols - j0 < BW ? t->cols - j0 : BW;
      for (long ch = 0; ch < t->c; ch++) {
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
  struct tcl t = {x, dst, c, in_h, in_w, rows, cols, cp, hp, wp, lo_h, lo_w};
  if (pool && n * rows > 1 && n * c * rows * cols > (1L << 16)) pool(tcl_rows, &t, n * rows, 1);
  else tcl_rows(&t, 0, n * rows);
}
"""
)
