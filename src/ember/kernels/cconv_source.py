"""The C source of the convolution kernels (kernels/cconv.py compiles it, once per dtype).

Two kernels, both register-blocked for 64-byte vectors written with GCC's vector extension (so
the compiler emits AVX-512 where the CPU has it, and two or four narrower vectors elsewhere):

* ``conv_forward``: an implicit-GEMM convolution. out[co, j] = sum_p W[co, p] * X[p, j] where
  p runs over (input channel, kernel offset) and j over output positions; X is never built: its
  element (p, j) is ``x[roff[p] + src[j]]`` of the zero-padded input, so a block of columns is
  packed straight from the input (consecutive columns are mostly consecutive in memory, copied
  as runs; where a panel's runs are many and short, a small plane's output rows or a stride's
  columns, its rows are gathered a vector at a time instead, each column's offset from the
  panel's first in a table, where a copy per run would cost more than the gathers), or not
  packed at all where a panel is one contiguous run of the input in every row
  (a stride-1 plane's rows, the flat layout's extended ones): ``micro_rows`` reads it in place,
  the same sums in the same order. Outer-product micro-kernel, MR x NR = 8 x 3 vectors; W is
  packed by the caller.
  The store writes column j to ``dst[j]`` (its NC* offset, or -1 for a column outside the
  output), adding ``bias[co]`` and clamping when asked (a convolution epilogue: ReLU, ReLU6,
  hardtanh; ``clamp``: lo, hi and whether each takes ties, ops/_rules.py's `Clamp`).
* ``conv_weight_grad``: gw[co, r] = sum_n sum_l gy[n, co, l] * x[n * x_sample + roff[r] + l]
  over an extended output grid (rows of the padded input's width, stride 1) in which gy is
  zero outside the real output (each block of samples lays its gy out so, in cache). Both
  operands are contiguous along l, so a dot-product micro-kernel (4 x 6 vector accumulators,
  summed across lanes once per block of samples) needs no packing. With many input channels,
  ``conv_weight_grad_cl`` instead runs one GEMM per kernel offset over a channels-last copy
  of the input (outer products, 8 output channels x 2 vectors of input channels), reducing
  over the real output positions only, KC at a time across rows and samples.

Both share work over ember's thread pool (kernels/cpool.py) when given one. The weight
gradients' C is kernels/cconv_weight_source.py's, appended here: one library holds both.
"""

from .cconv_activation import C_ACTIVATE
from .cconv_side import SIDE_SOURCE
from .cconv_split import SPLIT_SOURCE
from .cconv_weight_source import WEIGHT_SOURCE
from .cmicro import MICRO, MICRO_PAIRS, MICRO_ROWS

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
#define NO_BIAS ((T)-0.0) /* what a store adds without a bias: the identity, -0.0 kept */
#else
#define NO_BIAS (T)0
#define LD(v) (v)
#define ST(v) (v)
#define RND(v) (v)
#endif

"""
    + C_ACTIVATE
    + MICRO
    + MICRO_ROWS
    + r"""
struct fwd {
  const S *x, *bias;
  const void *wp; /* P: T, or bfloat16 pairs */
  S *out;
  unsigned char *mask; /* out > 0 or out != 0 (the ReLU's gradient mask: `mask_one`), or NULL */
  const double *clamp; /* lo, hi, lo takes ties, hi takes ties, mask v != 0 (`mask_one`); or NULL */
  const long *src, *dst, *roff; /* src, dst: per column of one sample */
  long m_panels, k, cols, cout, chan; /* chan: the output's channel stride */
  long grid, x_sample, out_sample;    /* columns per sample; the sample strides */
  long group; /* column panels per group (see fwd_panels) */
  const S *res; /* a residual added before the clamp, laid out as out; or NULL */
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
#define STOREU _mm512_storeu_ps
#define ADD _mm512_add_ps
#define CMP _mm512_cmp_ps_mask
#define MOV _mm512_mask_mov_ps
#define STORE _mm512_mask_storeu_ps
#define MLOAD _mm512_maskz_loadu_ps
#define EXPAND _mm512_maskz_expand_ps
#define EVEN_LANES ((MASK)0x5555)
#define EVENS(lo, hi)                                                                     \
  _mm512_permutex2var_ps(                                                                 \
      lo, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), hi)
#else
#define V __m512d
#define MASK __mmask8
#define SET1 _mm512_set1_pd
#define LOAD _mm512_loadu_pd
#define STOREU _mm512_storeu_pd
#define ADD _mm512_add_pd
#define CMP _mm512_cmp_pd_mask
#define MOV _mm512_mask_mov_pd
#define STORE _mm512_mask_storeu_pd
#define MLOAD _mm512_maskz_loadu_pd
#define EXPAND _mm512_maskz_expand_pd
#define EVEN_LANES ((MASK)0x55)
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
  long t = 0;
  for (; t + VL <= n; t += VL) STOREU(dst + t, LOAD(from + t));
  if (t < n) {
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
    V lo = used >= VL ? LOAD(from + 2 * t) : MLOAD(lanes(used), from + 2 * t);
    V hi = MLOAD(used > VL ? lanes(used - VL) : (MASK)0, from + 2 * t + VL);
    if (n - t >= VL) STOREU(dst + t, EVENS(lo, hi));
    else STORE(dst + t, lanes(n - t), EVENS(lo, hi));
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

/* the epilogue's clamp of one value (c: lo, hi, lo takes ties, hi takes ties), each bound's
   comparison the unfused op's: ordered, so NaN stays; ties decide the sign of a zero bound's
   result (maximum(x, 0.0) makes -0.0 0.0, hardtanh keeps it) */
static inline T clamp_bounds(T v, const double *c) {
  T lo = (T)c[0], hi = (T)c[1];
  if (c[2] ? v <= lo : v < lo) v = lo;
  if (c[3] ? v >= hi : v > hi) v = hi;
  return v;
}
/* the bounds, then the store's activation where the block has one (kernels/cconv_activation.py;
   one value: stores of many call `activate_row`) */
static inline T clamp_one(T v, const double *c) {
  v = clamp_bounds(v, c);
#if !HALF
  if (act_on(c)) activate(c, &v, 1);
#endif
  return v;
}
/* vals[0..n) activated in place as whole vectors (n at most `room`, the buffer's length, a
   multiple of VL: the lanes past n zeroed first), so the loop never takes its scalar tail (a
   vector math call per value) */
static inline void activate_row(const double *c, T *vals, long n, long room) {
  long whole = (n + VL - 1) / VL * VL;
  if (whole > room) whole = n;
  for (long k = n; k < whole; k++) vals[k] = 0;
  activate(c, vals, whole);
}
/* the ReLU gradient's mask of a stored value as the graph's comparison computes it: v > 0 (NaN
   false), or, where the clamp block's fifth entry says so, v != 0 (NaN true: ``ne(relu(x), 0)``,
   the mask a graph's ReLU gradient reads) */
static inline unsigned char mask_one(T v, const double *c) { return c && c[4] ? v != 0 : v > 0; }
#if HAVE_MASKS
static inline MASK mask_vec(V v, V zero, const double *c) {
  return c && c[4] ? CMP(v, zero, _CMP_NEQ_UQ) : CMP(v, zero, _CMP_GT_OQ);
}
static inline V clamp_vec(V v, const double *c) {
  V lo = SET1((T)c[0]), hi = SET1((T)c[1]);
  v = MOV(v, c[2] ? CMP(v, lo, _CMP_LE_OQ) : CMP(v, lo, _CMP_LT_OQ), lo);
  return MOV(v, c[3] ? CMP(v, hi, _CMP_GE_OQ) : CMP(v, hi, _CMP_GT_OQ), hi);
}
#endif

/* to[t] = from[t] + b (+ res[t], a residual of the output's shape, where res is given) (then
   clamped), mask[t] = mask_one(to[t]); ``from`` may be read up to a whole
   vector past n. Runs are short (an output row: 7 to 28 elements here), so AVX-512 stores them
   as masked vectors; elsewhere the loops are plain. 16-bit storage rounds once, as PyTorch's
   half-precision convolutions do: the float32 sum plus the bias (-0.0, the identity, where
   there is none), rounded (the clamp and the mask then read the rounded value); a loop the
   compiler vectorizes. */
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
static inline void store_run(const T *from, T b, const S *res, const double *clamp, S *to,
                             unsigned char *mask, long n) {
  V bias = SET1(b), zero = SET1(0);
  __m128i ones = _mm_set1_epi8(1);
  for (long t = 0; t < n; t += VL) {
    MASK keep = lanes(n - t);
    __m256i h = narrow(ADD(LOAD(from + t), bias));
    V v = widen(h);
    if (res) { /* (the residual added to the rounded value, rounded again: two 16-bit adds) */
      h = narrow(ADD(v, widen(_mm256_maskz_loadu_epi16(keep, res + t))));
      v = widen(h);
    }
    if (clamp) { /* (the bounds are 16-bit values: narrowed exactly; a NaN as it was) */
      v = clamp_vec(v, clamp);
      h = narrow(v);
    }
    _mm256_mask_storeu_epi16(to + t, keep, h);
    if (mask)
      _mm_mask_storeu_epi8(mask + t, keep, _mm_maskz_mov_epi8(mask_vec(v, zero, clamp), ones));
  }
}
#elif HALF
static inline void store_run(const T *from, T b, const S *res, const double *clamp, S *to,
                             unsigned char *mask, long n) {
  for (long t = 0; t < n; t++) {
    T v = RND(from[t] + b);
    if (res) v = RND(v + LD(res[t]));
    if (clamp) v = clamp_one(v, clamp);
    to[t] = ST(v);
    if (mask) mask[t] = mask_one(v, clamp);
  }
}
#elif defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
/* the store's activation (kernels/cconv_activation.py) of one vector, then its kept lanes
   stored: a whole vector through the compiled loop, so it never takes the loop's scalar tail
   (a vector math call per value) on a run's last lanes */
static inline void store_activated(V v, MASK keep, T *to, const double *clamp) {
  T lane[VL] __attribute__((aligned(64)));
  STOREU(lane, v);
  activate(clamp, lane, VL);
  STORE(to, keep, LOAD(lane));
}
static inline void store_run(const T *from, T b, const T *res, const double *clamp, T *to,
                             unsigned char *mask, long n) {
  V bias = SET1(b), zero = SET1(0);
  __m128i ones = _mm_set1_epi8(1);
  for (long t = 0; t < n; t += VL) {
    MASK keep = n - t >= VL ? (MASK)~0 : (MASK)((1u << (n - t)) - 1);
    V v = ADD(LOAD(from + t), bias);
    /* (whole vectors unmasked: masked loads of the residual measured slower than plain ones
       on AMD Zen 5, benchmarks/conv_epilogue_stores.py; only a run's tail is masked) */
    if (res) v = ADD(v, n - t >= VL ? LOAD(res + t) : MLOAD(keep, res + t));
    if (clamp) v = clamp_vec(v, clamp);
    if (act_on(clamp)) { /* (no mask with it: ops/conv_epilogue.py) */
      store_activated(v, keep, to + t, clamp);
      continue;
    }
    if (n - t >= VL) STOREU(to + t, v);
    else STORE(to + t, keep, v);
    if (mask)
      _mm_mask_storeu_epi8(mask + t, keep, _mm_maskz_mov_epi8(mask_vec(v, zero, clamp), ones));
  }
}
#else
static inline void store_run(const T *from, T b, const T *res, const double *clamp, T *to,
                             unsigned char *mask, long n) {
  for (long t = 0; t < n; t++) {
    T v = from[t] + b;
    if (res) v += res[t];
    if (clamp) v = clamp_bounds(v, clamp);
    to[t] = v;
    if (mask) mask[t] = mask_one(v, clamp);
  }
  if (act_on(clamp)) activate(clamp, to, n); /* (no mask with it: ops/conv_epilogue.py) */
}
#endif

/* store_run's to[t * step] (and res[t * step]): a run of columns that lands every step-th
   element (a phase of a strided convolution's input gradient written in place; two columns
   of a panel in two samples) */
static inline void store_steps(const T *from, T b, const S *res, const double *clamp, S *to,
                               unsigned char *mask, long n, long step) {
#if !HALF
  if (act_on(clamp)) { /* the store's activation (no mask with it) */
    T vals[NR] __attribute__((aligned(64)));
    for (long t0 = 0; t0 < n; t0 += NR) { /* (a run's values activated at once, NR at most) */
      long m = n - t0 < NR ? n - t0 : NR;
      for (long t = 0; t < m; t++)
        vals[t] = clamp_bounds(from[t0 + t] + b + (res ? res[(t0 + t) * step] : 0), clamp);
      activate_row(clamp, vals, m, NR);
      for (long t = 0; t < m; t++) to[(t0 + t) * step] = vals[t];
    }
    return;
  }
#endif
#if HAVE_MASKS && !HALF
  /* (a stride-2 phase) VL / 2 values spread over a vector's even lanes */
  if (step == 2 && !res) {
    V bias = SET1(b), zero = SET1(0);
    __m128i ones = _mm_set1_epi8(1);
    for (long t = 0; t < n; t += VL / 2) {
      long m = n - t < VL / 2 ? n - t : VL / 2;
      MASK keep = EVEN_LANES & lanes(2 * m - 1);
      V v = ADD(MLOAD(lanes(m), from + t), bias);
      if (clamp) v = clamp_vec(v, clamp);
      V spread = EXPAND(EVEN_LANES, v);
      STORE(to + 2 * t, keep, spread);
      if (mask)
        _mm_mask_storeu_epi8(mask + 2 * t, keep,
                             _mm_maskz_mov_epi8(mask_vec(spread, zero, clamp), ones));
    }
    return;
  }
#endif
  for (long t = 0; t < n; t++) {
    T v = RND(from[t] + b); /* (16 bits: rounded once, the bias included) */
    if (res) v = RND(v + LD(res[t * step]));
    if (clamp) v = clamp_one(v, clamp);
    to[t * step] = ST(v);
    if (mask) mask[t * step] = mask_one(v, clamp);
  }
}

/* a panel's rows packed by gathers (many short runs: a small plane's output rows, a stride's
   columns): row p's column jj is x[roff[p] + idx[jj]], columns past nj zero */
#if HAVE_MASKS && !HALF && !defined(NO_GATHERS)
#define GATHERS 1
#ifndef GATHER_COST
#define GATHER_COST 3
#endif
static void pack_gather(const T *restrict x, const long *roff, long kc, long nj, const int *idx,
                        T *restrict bp) {
#if T_FLOAT
  __m512i i0 = _mm512_loadu_si512(idx), i1 = _mm512_loadu_si512(idx + VL),
          i2 = _mm512_loadu_si512(idx + 2 * VL);
#define GATHER(m, i, from) _mm512_mask_i32gather_ps(zero, m, i, from, 4)
#define STORE_ALIGNED _mm512_store_ps
#else
  __m256i i0 = _mm256_loadu_si256((const __m256i *)idx),
          i1 = _mm256_loadu_si256((const __m256i *)(idx + VL)),
          i2 = _mm256_loadu_si256((const __m256i *)(idx + 2 * VL));
#define GATHER(m, i, from) _mm512_mask_i32gather_pd(zero, m, i, from, 8)
#define STORE_ALIGNED _mm512_store_pd
#endif
  MASK m0 = lanes(nj), m1 = nj > VL ? lanes(nj - VL) : 0, m2 = nj > 2 * VL ? lanes(nj - 2 * VL) : 0;
  V zero = SET1(0);
  for (long p = 0; p < kc; p++) {
    const T *from = x + roff[p];
    T *to = bp + p * NR;
    STORE_ALIGNED(to, GATHER(m0, i0, from));
    STORE_ALIGNED(to + VL, GATHER(m1, i1, from));
    STORE_ALIGNED(to + 2 * VL, GATHER(m2, i2, from));
  }
#undef GATHER
#undef STORE_ALIGNED
}
#else
#define GATHERS 0
#endif

/* one column panel's tables: its runs in the input (contiguous, and evenly stepping) and in
   the output (evenly stepping: contiguous but for a phase's scattered store) */
struct panel_runs {
  long nj;
  int s_count, d_count, t_count;
  long s_start[NR], s_len[NR], s_first[NR], d_start[NR], d_len[NR], d_first[NR], d_step[NR];
  long t_start[NR], t_len[NR], t_first[NR], t_step[NR];
  int gather; /* packed by gathers: idx[jj], column jj's offset from s_first[0] */
  int idx[NR];
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
  r->gather = 0;
#if GATHERS
  /* gathered where the runs' copies cost more: a contiguous run's copy a masked vector move per
     vector, a stride 2's three (two loads and a permute), another stride's an element at a
     time, against GATHER_COST per gathered vector */
  int strided = r->t_count < r->s_count;
  int count = strided ? r->t_count : r->s_count;
  const long *len = strided ? r->t_len : r->s_len, *step = strided ? r->t_step : 0;
  long copies = 0;
  for (int i = 0; i < count; i++) {
    long st = step ? step[i] : 1, vectors = (len[i] + VL - 1) / VL;
    copies += st == 1 ? vectors : st == 2 ? 3 * vectors : len[i];
  }
  if (copies > GATHER_COST * ((nj + VL - 1) / VL) && src[nj - 1] - src[0] < (1L << 30)) {
    r->gather = 1;
    for (long jj = 0; jj < nj; jj++) r->idx[jj] = (int)(src[jj] - src[0]);
    for (long jj = nj; jj < NR; jj++) r->idx[jj] = 0;
  }
#endif
}

/* whether a panel's columns are read in place (micro_rows) rather than packed: one contiguous
   run of the input, the whole panel wide (16-bit storage is widened as packed: always packed) */
#if HALF
#define IN_PLACE(r) 0
#else
#define IN_PLACE(r) ((r)->s_count == 1 && (r)->nj == NR)
#endif

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
        if (IN_PLACE(r)) continue; /* (micro_rows reads it from the input) */
#if GATHERS
        if (r->gather) {
          pack_gather(f->x + r->s_first[0], f->roff + pc, kc, r->nj, r->idx, bp);
          continue;
        }
#endif
        if (r->t_count < r->s_count)
          pack_strided(f->x, f->roff + pc, kc, r->t_count, r->t_start, r->t_len, r->t_first,
                       r->t_step, bp);
        else
          pack_columns(f->x, f->roff + pc, kc, r->nj, r->s_count, r->s_start, r->s_len,
                       r->s_first, bp);
      }
      for (long ip = 0; ip < mp; ip++)
        for (long q = 0; q < count; q++) {
          const P *a = wp + (ip * kp + PACKED_K(pc)) * MR;
          T *tile = tiles + (q * mp + ip) * MR * NR;
#if !HALF
          if (IN_PLACE(&runs[q])) {
            micro_rows(kc, a, f->x + runs[q].s_first[0], f->roff + pc, tile, pc == 0);
            continue;
          }
#endif
          MICRO_RUN(kc, a, bps + q * KC * NR, tile, pc == 0);
        }
    }
    for (long q = 0; q < count; q++) {
      const struct panel_runs *r = &runs[q];
      int activated = 0;
#if !HALF
      if (act_on(f->clamp) && !f->res) { /* the store's activation over the panel's whole
                                            tile at once, in cache (no mask with it): each
                                            row biased and bounded, then one call */
        T *rows = tiles + q * mp * MR * NR;
        for (long co = 0; co < f->cout; co++) {
          T b = f->bias ? LD(f->bias[co]) : NO_BIAS;
          T *row = rows + co * NR;
          for (long j = 0; j < NR; j++) row[j] = clamp_bounds(row[j] + b, f->clamp);
        }
        activate(f->clamp, rows, f->cout * NR);
        activated = 1;
      }
#endif
      for (long co = 0; co < f->cout; co++) {
        const T *acc = tiles + q * mp * MR * NR + co * NR;
        T b = f->bias ? LD(f->bias[co]) : NO_BIAS;
        S *base = f->out + co * f->chan;
        const S *res = f->res ? f->res + co * f->chan : 0;
        const double *clamp = f->clamp;
        if (activated) { /* (its values final: -0.0 added, the identity) */
          b = (T)-0.0;
          clamp = 0;
        }
        unsigned char *mask = f->mask ? f->mask + co * f->chan : 0;
        /* (the residual's runs lie a plane apart per channel, more streams than the hardware
           prefetchers follow: each run's loads would wait on memory, so the next block of MR
           channels' runs are fetched while this one stores) */
        if (res && co + MR < f->cout)
          for (int i = 0; i < r->d_count; i++)
            for (long e = 0; e < r->d_len[i] * r->d_step[i]; e += 64 / (long)sizeof(S))
              __builtin_prefetch(res + MR * f->chan + r->d_first[i] + e, 0, 3);
        for (int i = 0; i < r->d_count; i++) {
          if (r->d_step[i] == 1)
            store_run(acc + r->d_start[i], b, res ? res + r->d_first[i] : 0, clamp,
                      base + r->d_first[i], mask ? mask + r->d_first[i] : 0, r->d_len[i]);
          else
            store_steps(acc + r->d_start[i], b, res ? res + r->d_first[i] : 0, clamp,
                        base + r->d_first[i], mask ? mask + r->d_first[i] : 0, r->d_len[i],
                        r->d_step[i]);
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
                  const double *clamp, ember_pool pool, long group, const S *res) {
  long panels = (cols + NR - 1) / NR;
  int shared = pool && panels > 1 && m_panels * MR * k * cols > (1L << 20);
  /* (each thread gets whole groups where there are enough panels to go round) */
  long per_thread = group < 1 ? 1 : group;
  struct fwd f = {x,    bias, wp,   out,  mask,     clamp,    src,        dst,       roff,
                  m_panels, k, cols, cout, chan, grid, x_sample, out_sample, per_thread, res};
  if (shared) pool(fwd_panels, &f, panels, 1);
  else fwd_panels(&f, 0, panels);
}

/* the graph runner's step (runtime/cgraph.py): one group's forward convolution with its
   epilogue, on the pool where it is free (a run on one thread), else on this thread. The input
   is copied into the step's own zero-bordered scratch (none when the convolution reads it
   unpadded) and the weight packed into its own, as the caller of conv_forward does. args: x,
   w, bias, out, mask, xp (or 0), wp, src, dst, roff, then the copy (planes, rows and columns
   copied, the input's rows and columns, the padding before, the padded rows and columns), the
   packing (cout, rows, panels), conv_forward's eight sizes, the clamp (or 0), the pool (or 0),
   the panel group, whether the weight is the graph's constant, the weight packed last (0:
   none), then the weight's gather (0: none; a strided input gradient's phase,
   kernels/cconv_phases.py): its output channel's stride and a table of each row's offset, w's
   values read in place; then the relayout copy's description (0: the padded copy;
   kernels/cconv_split.py, kernels/cconv_side.py), then the residual the store adds (0: none;
   laid out as the output) */
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

"""
    + SPLIT_SOURCE
    + SIDE_SOURCE
    + r"""
void conv_forward_step(const long *a) {
  const S *x = (const S *)a[0], *w = (const S *)a[1];
  S *xp = (S *)a[5];
  P *wp = (P *)a[6];
  /* (a[37]: the input's relayout: a strided input split by its phases, kernels/cconv_split.py,
     or a batch side by side, kernels/cconv_side.py) */
  const long *relayout = (const long *)a[37];
  if (xp && relayout && relayout[0] == 1) copy_side(x, xp, relayout);
  else if (xp && relayout) copy_phases(x, xp, relayout);
  else if (xp) copy_padded(x, xp, a + 10);
  long cout = a[19], rows = a[20], panels = a[21], kp = PACKED_K(rows);
  /* value q of output channel co: w[co * rows + q], or the gather's */
  const long *woff = (const long *)a[36];
  long wco = woff ? a[35] : rows;
#define W_AT(co, q) w[(co) * wco + (woff ? woff[q] : (q))]
  /* a graph's constant weight (a[33]) is packed once: a[34] is the one packed last */
  if (!(a[33] && a[34] == a[1]))
    for (long pn = 0; pn < panels; pn++)
      for (long q = 0; q < kp; q++)
        for (long i = 0; i < MR; i++) {
          long co = pn * MR + i;
#if PAIRS
          P lo = co < cout ? W_AT(co, 2 * q) : 0;
          P hi = co < cout && 2 * q + 1 < rows ? W_AT(co, 2 * q + 1) : 0;
          wp[(pn * kp + q) * MR + i] = lo | hi << 16;
#else
          wp[(pn * kp + q) * MR + i] = co < cout ? LD(W_AT(co, q)) : 0;
#endif
        }
#undef W_AT
  if (a[33]) ((long *)a)[34] = a[1];
  conv_forward(xp ? xp : x, wp, (const S *)a[2], (S *)a[3], (unsigned char *)a[4],
               (const long *)a[7], (const long *)a[8], (const long *)a[9], a[22], a[23], a[24],
               a[25], a[26], a[27], a[28], a[29], (const double *)a[30], (ember_pool)a[31], a[32],
               (const S *)a[38]);
}

"""
    + WEIGHT_SOURCE
)
