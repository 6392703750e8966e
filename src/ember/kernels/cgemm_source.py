"""The C source of ember's GEMM (kernels/cgemm.py compiles it, per dtype, with ``T`` and
``BLAS_INT`` defined): `OWN_GEMM`, ember's single-threaded GEMM on the shared micro-kernel
(kernels/cmicro.py), and `DISPATCH`, which splits a product over ember's thread pool with BLAS
(or ember's own kernel) single-threaded in each thread, plus the few-rows kernel ``ember_skinny``.
"""

from . import cache_sizes

__all__ = ["DISPATCH", "OWN_GEMM", "TILES"]

DISPATCH = r"""
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
typedef int (*set_local_fn)(int);
typedef void (*gemm_fn)(int, int, int, BLAS_INT, BLAS_INT, BLAS_INT, T, const T *, BLAS_INT,
                        const T *, BLAS_INT, T, T *, BLAS_INT);

/* BLAS's thread count is one while ember's products run. `set_local` sets the calling
   thread's count, or in some OpenBLAS builds the whole process's (process_wide): there the
   first of the products running at once sets it and the last one out restores it */
#include <pthread.h>
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;
static int blas_users = 0, blas_saved = 0;

static int blas_enter(set_local_fn set_local, int process_wide) {
  if (!set_local) return 0;
  if (!process_wide) return set_local(1);
  pthread_mutex_lock(&blas_lock);
  if (blas_users++ == 0) blas_saved = set_local(1);
  pthread_mutex_unlock(&blas_lock);
  return 0;
}

static void blas_leave(set_local_fn set_local, int process_wide, int previous) {
  if (!set_local) return;
  if (!process_wide) {
    set_local(previous);
    return;
  }
  pthread_mutex_lock(&blas_lock);
  if (--blas_users == 0) set_local(blas_saved);
  pthread_mutex_unlock(&blas_lock);
}

/* split: 0 over batch entries, 1 over the result's rows, 2 over its columns */
struct job {
  gemm_fn gemm; set_local_fn set_local;
  int process_wide, ta, tb, split;
  long m, n, k, lda, ldb, ldc, sa, sb, sc, piece;
  const T *a, *b; T *c;
};

static void call(const struct job *j, long m, long n, const T *a, const T *b, T *c) {
  j->gemm(101, j->ta ? 112 : 111, j->tb ? 112 : 111, m, n, j->k, (T)1, a, j->lda, b, j->ldb,
          (T)0, c, j->ldc);
}

static void part(void *job_, long lo, long hi) {
  const struct job *j = job_;
  /* (a pool thread is ember's own: it stays single-threaded for BLAS from now on) */
  if (j->set_local && !j->process_wide) j->set_local(1);
  if (j->split == 0) {
    for (long i = lo; i < hi; i++)
      call(j, j->m, j->n, j->a + i * j->sa, j->b + i * j->sb, j->c + i * j->sc);
  } else if (j->piece > 0 && hi - lo > j->piece) {
    /* a BLAS's product of a block rounds by the block's size: the pool's blocks, one call
       each, whether the pool shares them or (busy) hands the caller all of them */
    for (long at = lo; at < hi; at += j->piece)
      part(job_, at, at + j->piece < hi ? at + j->piece : hi);
  } else if (j->split == 1) {  /* rows lo..hi of op(A) and of C */
    call(j, hi - lo, j->n, j->a + (j->ta ? lo : lo * j->lda), j->b, j->c + lo * j->ldc);
  } else {                      /* columns lo..hi of op(B) and of C */
    call(j, j->m, hi - lo, j->a, j->b + (j->tb ? lo * j->ldb : lo), j->c + lo);
  }
}

/* the widest vectors the compiler targets here: the micro-kernel's 64-byte vectors fit 512 */
void ember_gemm_vector_bits(int *bits) {
#ifdef __AVX512F__
  *bits = 512;
#else
  *bits = 0;
#endif
}

/* gemm: a CBLAS gemm's address, or NULL for ember_own_gemm */
void ember_gemm(void *gemm, void *set_local, int process_wide, int ta, int tb, int split, long m,
                long n, long k, const T *a, long lda, const T *b, long ldb, T *c, long ldc,
                long sa, long sb, long sc, long count, long align, ember_pool pool) {
  /* (ember's own GEMM sums each result in one order whatever the blocks: one call per range) */
  long piece = gemm && pool && split != 0 ? align : 0;
  struct job j = {gemm ? (gemm_fn)gemm : ember_own_gemm, (set_local_fn)set_local, process_wide,
                  ta, tb, split, m, n, k, lda, ldb, ldc, sa, sb, sc, piece, a, b, c};
  int previous = blas_enter(j.set_local, process_wide);
  if (pool) pool(part, &j, count, align);
  else part(&j, 0, count);
  blas_leave(j.set_local, process_wide, previous);
}

/* ------------------------------------------------------------------ few rows of A
   C (m x n) = A (m x k, row-major) @ op(B) for small m, with no packing: the blocked GEMM
   packs all of B per call, which for a few rows (a batch of one, a decoder's token) costs more
   than the product. tb: B is n x k row-major (a linear layer's weight), each C[i][j] a dot
   product of two contiguous rows, four rows of A by four of B at a time (the four of B stay in
   L1 while every row of A passes); else B is k x n row-major, rows of C accumulated as sums of
   B's rows scaled by A's values, four rows of C by four vectors of columns at a time. */
struct skinny { int tb; long m, n, k, lda, ldb, ldc; const T *a, *b; T *c; };

/* the sum of v's lanes by halving the vector (two vector adds, then a few scalar ones): one
   scalar add per lane, a long chain, cost a large share of a dot product of a layer's width */
static T hsum(vec v) {
  typedef T half __attribute__((vector_size(32)));
  typedef T quarter __attribute__((vector_size(16)));
  half lo, hi;
  memcpy(&lo, &v, 32);
  memcpy(&hi, (char *)&v + 32, 32);
  lo += hi;
  quarter a, b;
  memcpy(&a, &lo, 16);
  memcpy(&b, (char *)&lo + 16, 16);
  a += b;
  T s = 0;
  for (long i = 0; i < (long)(16 / sizeof(T)); i++) s += a[i];
  return s;
}

/* C[i..i+NI][j..j+4] as dot products (NI rows of A: a constant where it is inlined) */
static inline __attribute__((always_inline)) void dots_block(const struct skinny *s, long i,
                                                             long j, long nj, const int NI) {
  long kv = s->k / VL * VL;
  const T *w[4], *x[4];
  for (int q = 0; q < 4; q++) w[q] = s->b + (j + (q < nj ? q : 0)) * s->ldb;
  for (int r = 0; r < NI; r++) x[r] = s->a + (i + r) * s->lda;
  vec acc[4][4];
  for (int r = 0; r < NI; r++)
    for (int q = 0; q < 4; q++) acc[r][q] = (vec){0};
  for (long p = 0; p < kv; p += VL) {
    vec wv[4];
    for (int q = 0; q < 4; q++) {
      wv[q] = *(const uvec *)(w[q] + p);
      /* (kept in a register: else GCC loads each again for every row, twice the loads) */
      __asm__("" : "+v"(wv[q]));
    }
    for (int r = 0; r < NI; r++) {
      vec xv = *(const uvec *)(x[r] + p);
      __asm__("" : "+v"(xv));
      for (int q = 0; q < 4; q++) acc[r][q] += xv * wv[q];
    }
  }
  for (int r = 0; r < NI; r++)
    for (long q = 0; q < nj; q++) {
      T sum = hsum(acc[r][q]);
      for (long p = kv; p < s->k; p++) sum += x[r][p] * w[q][p];
      s->c[(i + r) * s->ldc + j + q] = sum;
    }
}

/* the first `rem` values from p (none where rem <= 0), zeros after them, reading nothing
   beyond them (p's row may end the array) */
#if defined(__AVX512F__)
#include <immintrin.h>
static inline vec part_load(const T *p, long rem) {
  if (rem <= 0) return (vec){0};
  if (rem >= VL) return *(const uvec *)p;
  if (sizeof(T) == 4) return (vec)_mm512_maskz_loadu_ps((__mmask16)((1u << rem) - 1), p);
  return (vec)_mm512_maskz_loadu_pd((__mmask8)((1u << rem) - 1), p);
}
#else
static inline vec part_load(const T *p, long rem) {
  vec v = {0};
  for (long e = 0; e < rem && e < VL; e++) v[e] = p[e];
  return v;
}
#endif

/* rows_block's C[i..i+NI][j..j1] where j1 - j < four vectors (a narrow product, n = 24 say, or
   the last columns): whole vectors loaded as such, the last part masked (element by element, a
   long k cost 10x the product). Its own function, so the full blocks' loop stays as tight */
static inline __attribute__((always_inline)) void part_rows(const struct skinny *s, long i,
                                                            long j, long j1, const int NI) {
  vec acc[4][4];
  long rem[4];
  for (int v = 0; v < 4; v++) rem[v] = j1 - j - v * VL;
  for (int r = 0; r < NI; r++)
    for (int v = 0; v < 4; v++) acc[r][v] = (vec){0};
  for (long p = 0; p < s->k; p++) {
    const T *brow = s->b + p * s->ldb + j;
    vec bv[4];
    for (int v = 0; v < 4; v++) {
      bv[v] = part_load(brow + v * VL, rem[v]);
      __asm__("" : "+v"(bv[v]));
    }
    for (int r = 0; r < NI; r++) {
      T av = s->a[(i + r) * s->lda + p];
      for (int v = 0; v < 4; v++) acc[r][v] += av * bv[v];
    }
  }
  for (int r = 0; r < NI; r++)
    for (int v = 0; v < 4; v++)
      for (long e = 0; e < VL && e < rem[v]; e++)
        s->c[(i + r) * s->ldc + j + v * VL + e] = acc[r][v][e];
}

static __attribute__((noinline)) void part_block(const struct skinny *s, long i, long j,
                                                 long j1, int rows) {
  switch (rows) {
    case 1: part_rows(s, i, j, j1, 1); break;
    case 2: part_rows(s, i, j, j1, 2); break;
    case 3: part_rows(s, i, j, j1, 3); break;
    default: part_rows(s, i, j, j1, 4);
  }
}

/* C[i..i+NI][j..j+nv vectors] as sums of B's rows (NI: a constant where it is inlined) */
static inline __attribute__((always_inline)) void rows_block(const struct skinny *s, long i,
                                                             long j, long j1, const int NI) {
  long nv = (j1 - j + VL - 1) / VL < 4 ? (j1 - j + VL - 1) / VL : 4;
  if (j + 4 * VL > j1) {
    part_block(s, i, j, j1, NI);
    return;
  }
  vec acc[4][4];
  for (int r = 0; r < NI; r++)
    for (int v = 0; v < 4; v++) acc[r][v] = (vec){0};
  for (long p = 0; p < s->k; p++) {
    const T *brow = s->b + p * s->ldb + j;
    vec bv[4];
    for (int v = 0; v < 4; v++) {
      bv[v] = *(const uvec *)(brow + v * VL);
      __asm__("" : "+v"(bv[v]));  /* (kept in a register, as in dots_block) */
    }
    for (int r = 0; r < NI; r++) {
      T av = s->a[(i + r) * s->lda + p];
      for (int v = 0; v < 4; v++) acc[r][v] += av * bv[v];
    }
  }
  for (int r = 0; r < NI; r++)
    for (long v = 0; v < nv; v++)
      for (long e = 0; e < VL && j + v * VL + e < j1; e++)
        s->c[(i + r) * s->ldc + j + v * VL + e] = acc[r][v][e];
}

/* the block at rows i.., columns j.. (to j1) of either form, NI rows of it */
static inline __attribute__((always_inline)) void skinny_block(const struct skinny *s, long i,
                                                               long j, long j1, const int NI) {
  if (s->tb) dots_block(s, i, j, j1 - j < 4 ? j1 - j : 4, NI);
  else rows_block(s, i, j, j1, NI);
}

/* columns lo..hi: blocks of four columns (dot products) or four vectors of them (sums of
   rows), each for every block of up to four rows, the row count a constant in each call */
static void skinny_part(void *job, long lo, long hi) {
  const struct skinny *s = job;
  long width = s->tb ? 4 : 4 * VL;
  for (long j = lo; j < hi; j += width)
    for (long i = 0; i < s->m; i += 4) {
      switch (s->m - i < 4 ? s->m - i : 4) {
        case 1: skinny_block(s, i, j, hi, 1); break;
        case 2: skinny_block(s, i, j, hi, 2); break;
        case 3: skinny_block(s, i, j, hi, 3); break;
        default: skinny_block(s, i, j, hi, 4);
      }
    }
}

void ember_skinny(int tb, long m, long n, long k, const T *a, long lda, const T *b, long ldb,
                  T *c, long ldc, long align, ember_pool pool) {
  struct skinny s = {tb, m, n, k, lda, ldb, ldc, a, b, c};
  if (pool) pool(skinny_part, &s, n, align);
  else skinny_part(&s, 0, n);
}
"""

# Shared by `OWN_GEMM` and kernels/cprepack.py's product on packed weights (after kernels/
# cmicro.py's MICRO, whose vec, uvec, MR, NR, VL they use): `transpose8x16`, which packs eight
# float32 rows sixteen steps at a time where the compiler targets AVX-512 (TRANSPOSE8 says
# whether it applies), and `micro3_c`/`micro2_c`, the micro-kernel summing a whole tile where it
# lies in the result.
TILES = r"""
#include <string.h>
#if defined(__AVX512F__)
/* out[p * 8 + r] = src[r * ld + p] for 8 rows r and 16 steps p of float32: three rounds of
   interleaving pairs of rows (a perfect shuffle each) leave vector q holding steps 2q and
   2q + 1 of every row, in order: 24 two-vector permutes for 128 values, where the scalar loop
   moved them one by one */
typedef float f16 __attribute__((vector_size(64)));
typedef float uf16 __attribute__((vector_size(64), aligned(4)));
typedef int i16 __attribute__((vector_size(64)));
static inline void transpose8x16(const float *src, long ld, f16 out[8]) {
  const i16 lo = {0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23};
  const i16 hi = {8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  f16 v[8], w[8];
  for (int r = 0; r < 8; r++) v[r] = *(const uf16 *)(src + r * ld);
  for (int round = 0; round < 3; round++) {
    for (int j = 0; j < 4; j++) {
      w[2 * j] = __builtin_shuffle(v[j], v[j + 4], lo);
      w[2 * j + 1] = __builtin_shuffle(v[j], v[j + 4], hi);
    }
    for (int r = 0; r < 8; r++) v[r] = w[r];
  }
  for (int q = 0; q < 8; q++) out[q] = v[q];
}
#define TRANSPOSE8 (sizeof(T) == 4 && MR == 8)
#else
#define TRANSPOSE8 0
#endif

/* `micro` and `micro2` (V vectors of columns) with the MR x V tile at c, rows ldc apart,
   unaligned: a whole tile is summed where it lies in the result (storing it in a buffer and
   copying it into the result was a quarter of a product's time, the result's rows scattered
   over memory); the same sums in the same order, so the same bits */
#define MICRO_C(name, V)                                                                      \
  __attribute__((unused)) static void name(long kc, const T *restrict a, const T *restrict b, \
                                           T *restrict c,                                    \
                                           long ldc, int first) {                            \
    vec s[MR][V];                                                                             \
    _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                                      \
      _Pragma("GCC unroll 3") for (int v = 0; v < V; v++)                                     \
        s[i][v] = first ? (vec){0} : *(const uvec *)(c + i * ldc + v * VL);                   \
    for (long p = 0; p < kc; p++) {                                                           \
      vec bv[V];                                                                              \
      _Pragma("GCC unroll 3") for (int v = 0; v < V; v++) bv[v] = *(const vec *)(b + v * VL); \
      _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++) {                                  \
        T x = a[i];                                                                           \
        _Pragma("GCC unroll 3") for (int v = 0; v < V; v++) s[i][v] += x * bv[v];             \
      }                                                                                       \
      a += MR;                                                                                \
      b += NR;                                                                                \
    }                                                                                         \
    _Pragma("GCC unroll 8") for (int i = 0; i < MR; i++)                                      \
      _Pragma("GCC unroll 3") for (int v = 0; v < V; v++)                                     \
        *(uvec *)(c + i * ldc + v * VL) = s[i][v];                                            \
  }
MICRO_C(micro3_c, 3)
MICRO_C(micro2_c, 2)
"""

# ember's own single-threaded GEMM on the shared micro-kernel (kernels/cmicro.py), with the
# CBLAS signature (row-major; alpha 1 and beta 0, the only values `ember_gemm` passes). A is
# packed whole into panels of MR rows; then for each panel of NR columns of B, block by block
# of KC along K, each block is packed and every panel of A multiplied into its MR x NR tile of
# accumulators, which are stored into C once K is done.
OWN_GEMM = (
    f"#define L1_BYTES {cache_sizes.l1_data_bytes()}L\n"
    + r"""
#include <stdlib.h>
#include <string.h>

/* the calling thread's packing buffer, kept between calls and grown as needed: allocating
   and freeing it per call (mmap and munmap, at these sizes) interrupted the other threads to
   flush their TLBs and made two threads slower than one */
static T *scratch(size_t bytes) {
  static __thread T *buffer = 0;
  static __thread size_t capacity = 0;
  if (bytes > capacity) {
    free(buffer);
    capacity = (bytes + 4095) / 4096 * 4096;
    buffer = aligned_alloc(64, capacity);
    if (!buffer) abort();
  }
  return buffer;
}


static void pack_a(int ta, const T *a, long lda, long m, long k, T *ap) {
  if (ta) {
    /* op(A)[i][p] = a[p * lda + i]: a group of `steps` rows of a (together half the L1 data
       cache) dealt panel by panel, each panel's steps one contiguous run; the group stays in
       L1 while every panel takes its MR values, so each line of a is still read from memory
       once (panel by panel over all of k, a weight gradient's long k x m a was read m / MR
       times over). Row by row, each row dealt to every panel, wrote one 32-byte piece per
       panel, the panels MR * k values apart: all in one cache set, each line evicted before
       its other half came (a 1024 x 1024 x.T packing took a third of x.T @ dy's time) */
    long full = m / MR * MR;
    long steps = L1_BYTES / 2 / ((long)sizeof(T) * m) / 2 * 2;
    if (steps < 2) steps = 2;
    for (long p0 = 0; p0 < k; p0 += steps) {
      long p1 = p0 + steps < k ? p0 + steps : k;
      for (long i0 = 0; i0 < full; i0 += MR) {
        T *to = ap + i0 * k + p0 * MR;
        for (long p = p0; p < p1; p++, to += MR)
#pragma GCC unroll 8
          for (long r = 0; r < MR; r++) to[r] = a[p * lda + i0 + r];
      }
      if (full < m)
        for (long p = p0; p < p1; p++)
          for (long r = 0; r < MR; r++)
            ap[full * k + p * MR + r] = full + r < m ? a[p * lda + full + r] : 0;
    }
    return;
  }
  for (long i0 = 0; i0 < m; i0 += MR) {
    T *to = ap + i0 * k;
    long mr = m - i0 < MR ? m - i0 : MR;
    if (mr == MR) { /* MR rows read side by side, a step at a time */
      const T *from = a + i0 * lda;
      long p = 0;
#if defined(__AVX512F__)
      if (TRANSPOSE8) /* (float32: sixteen steps at a time) */
        for (; p + 16 <= k; p += 16) {
          f16 t[8];
          transpose8x16((const float *)from + p, lda, t);
          for (int q = 0; q < 8; q++) *(uf16 *)((float *)to + p * MR + 16 * q) = t[q];
        }
#endif
      for (; p < k; p++)
#pragma GCC unroll 8
        for (long r = 0; r < MR; r++) to[p * MR + r] = from[r * lda + p];
    } else {
      for (long p = 0; p < k; p++)
        for (long r = 0; r < MR; r++) to[p * MR + r] = r < mr ? a[(i0 + r) * lda + p] : 0;
    }
  }
}

/* rows p0..p0+kc of op(B), columns j0..j0+nr, as kc x NR (zero past nr) */
static void pack_b(int tb, const T *b, long ldb, long p0, long kc, long j0, long nr, T *bp) {
  if (!tb) {
    for (long p = 0; p < kc; p++) {
      const T *from = b + (p0 + p) * ldb + j0;
      T *to = bp + p * NR;
      if (nr == NR) {
        *(vec *)to = *(const uvec *)from;
        *(vec *)(to + VL) = *(const uvec *)(from + VL);
        *(vec *)(to + 2 * VL) = *(const uvec *)(from + 2 * VL);
      } else {
        long c = 0;
        for (; c < nr; c++) to[c] = from[c];
        for (; c < NR; c++) to[c] = 0;
      }
    }
  } else {  /* op(B)[p][j] = b[j * ldb + p]: eight rows of b at a time read side by side (eight
               sequential streams, which the prefetchers follow), stored eight values a step */
    const T *from = b + j0 * ldb + p0;
    long c0 = 0;
    for (; c0 + 8 <= nr; c0 += 8) {
      long p = 0;
#if defined(__AVX512F__)
      if (TRANSPOSE8) /* (float32: sixteen steps at a time, as pack_a) */
        for (; p + 16 <= kc; p += 16) {
          f16 t[8];
          transpose8x16((const float *)from + c0 * ldb + p, ldb, t);
          for (int q = 0; q < 8; q++) {
            memcpy((float *)bp + (p + 2 * q) * NR + c0, &t[q], 32);
            memcpy((float *)bp + (p + 2 * q + 1) * NR + c0, (const char *)&t[q] + 32, 32);
          }
        }
#endif
      for (; p < kc; p++)
#pragma GCC unroll 8
        for (long r = 0; r < 8; r++) bp[p * NR + c0 + r] = from[(c0 + r) * ldb + p];
    }
    for (long p = 0; p < kc; p++)
      for (long c = c0; c < NR; c++) bp[p * NR + c] = c < nr ? from[c * ldb + p] : 0;
  }
}

/* `micro` on the first two of the NR columns (b and acc keep NR's stride): a last panel of
   at most two vectors of columns, which the full micro-kernel would compute as three (an
   attention head's 64 float32 columns were 96 in two panels) */
static void micro2(long kc, const T *restrict a, const T *restrict b, T *restrict acc,
                   int first) {
  vec c[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 2
    for (int v = 0; v < 2; v++) c[i][v] = first ? (vec){0} : *(vec *)(acc + i * NR + v * VL);
  for (long p = 0; p < kc; p++) {
    vec b0 = *(const vec *)b, b1 = *(const vec *)(b + VL);
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      T s = a[i];
      c[i][0] += s * b0;
      c[i][1] += s * b1;
    }
    a += MR;
    b += NR;
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; i++)
#pragma GCC unroll 2
    for (int v = 0; v < 2; v++) *(vec *)(acc + i * NR + v * VL) = c[i][v];
}


/* `micro` (V vectors of columns) on the first R rows of a panel (a keeps MR's stride, b and acc
   NR's): the rows past a product's last full panel of MR, which the full micro-kernel would
   compute as MR rows, zero past R (65 rows were nine panels, seven rows of the ninth zeros).
   The same sums in the same order as `micro`'s, so the same bits */
static inline __attribute__((always_inline)) void micro_part(long kc, const T *restrict a,
                                                             const T *restrict b,
                                                             T *restrict acc, int first,
                                                             const int R, const int V) {
  vec c[MR][3];
  for (int i = 0; i < R; i++)
    for (int v = 0; v < V; v++) c[i][v] = first ? (vec){0} : *(vec *)(acc + i * NR + v * VL);
  for (long p = 0; p < kc; p++) {
    vec bv[3];
    for (int v = 0; v < V; v++) bv[v] = *(const vec *)(b + v * VL);
    for (int i = 0; i < R; i++) {
      T s = a[i];
      for (int v = 0; v < V; v++) c[i][v] += s * bv[v];
    }
    a += MR;
    b += NR;
  }
  for (int i = 0; i < R; i++)
    for (int v = 0; v < V; v++) *(vec *)(acc + i * NR + v * VL) = c[i][v];
}

/* `micro_part` with the row count (1 to MR - 1) and the vectors (2 or 3) constants */
static __attribute__((noinline)) void micro_rows_of(long kc, const T *a, const T *b, T *acc,
                                                    int first, int rows, int vectors) {
#define PART(R)                                                         \
  case R:                                                               \
    if (vectors == 3) micro_part(kc, a, b, acc, first, R, 3);           \
    else micro_part(kc, a, b, acc, first, R, 2);                        \
    break;
  _Static_assert(MR == 8, "a case per row count below MR");
  switch (rows) {
    PART(1) PART(2) PART(3) PART(4) PART(5) PART(6) PART(7)
  }
#undef PART
}

/* the width of the panel of columns from j0: NR, or two vectors where at most two remain or
   where four remain (two panels of two, not one of three and one of one) */
static long panel_width(long n, long j0) {
  long vectors = (n - j0 + VL - 1) / VL;
  return vectors <= 2 || vectors == 4 ? 2 * VL : NR;
}

static void ember_own_gemm(int order, int transa, int transb, BLAS_INT m_, BLAS_INT n_,
                           BLAS_INT k_, T alpha, const T *a, BLAS_INT lda, const T *b,
                           BLAS_INT ldb, T beta, T *c, BLAS_INT ldc) {
  (void)order, (void)alpha, (void)beta;
  long m = m_, n = n_, k = k_; /* all positive: `matmul` leaves empty products to NumPy */
  long mp = (m + MR - 1) / MR, full = m / MR; /* panels of A, those of MR rows */
  long a_size = (mp * MR * k + VL - 1) / VL * VL; /* (tiles and bp stay 64-byte aligned) */
  T *ap = scratch((size_t)(a_size + mp * MR * NR + KC * NR) * sizeof(T));
  T *tiles = ap + a_size, *bp = tiles + mp * MR * NR;
  pack_a(transa == 112, a, lda, m, k, ap);
  for (long j0 = 0, width; j0 < n; j0 += width) {
    width = panel_width(n, j0);
    long nr = n - j0 < width ? n - j0 : width;
    for (long p0 = 0; p0 < k; p0 += KC) {
      long kc = k - p0 < KC ? k - p0 : KC;
      pack_b(transb == 112, b, ldb, p0, kc, j0, nr, bp);
      for (long ip = 0; ip < mp; ip++) {
        const T *panel = ap + ip * MR * k + p0 * MR;
        if (nr == width && ip < full) { /* a whole tile: summed in the result itself */
          T *to = c + ip * MR * ldc + j0;
          if (width == NR) micro3_c(kc, panel, bp, to, ldc, p0 == 0);
          else micro2_c(kc, panel, bp, to, ldc, p0 == 0);
        } else if (ip == full) /* the last rows, fewer than MR */
          micro_rows_of(kc, panel, bp, tiles + ip * MR * NR, p0 == 0, (int)(m - full * MR),
                        width == NR ? 3 : 2);
        else if (width == NR) micro(kc, panel, bp, tiles + ip * MR * NR, p0 == 0);
        else micro2(kc, panel, bp, tiles + ip * MR * NR, p0 == 0);
      }
    }
    for (long i = nr == width ? full * MR : 0; i < m; i++) /* the partial tiles' values */
      memcpy(c + i * ldc + j0, tiles + (i / MR) * MR * NR + (i % MR) * NR, nr * sizeof(T));
  }
}
"""
)
