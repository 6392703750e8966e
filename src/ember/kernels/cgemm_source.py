"""The C source of ember's GEMM (kernels/cgemm.py compiles it, per dtype, with ``T`` and
``BLAS_INT`` defined): `OWN_GEMM`, ember's single-threaded GEMM on the shared micro-kernel
(kernels/cmicro.py), and `DISPATCH`, which splits a product over ember's thread pool with BLAS
(or ember's own kernel) single-threaded in each thread, plus the few-rows kernel ``ember_skinny``
(kernels/cgemm_skinny_source.py).
"""

import os

from . import cache_sizes, cmicro
from .cgemm_skinny_source import SKINNY

__all__ = ["DISPATCH", "OWN_GEMM", "TILES"]

DISPATCH = (
    r"""
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

"""
    + SKINNY
)

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
# CBLAS signature (row-major; alpha 1 and beta 0, the only values `ember_gemm` passes), blocked
# as GotoBLAS blocks (the sizes from the caches: cmicro.py `gemm_blocks`): for each block of
# GEMM_NC columns of B, for each block of GEMM_KC steps of K, the block of B is packed into
# panels of NR columns (in the last level); then for each block of GEMM_MC rows of A, packed
# into panels of MR rows (in L2), every panel of B's block (streaming from L2 through L1) is
# multiplied by every panel of A's into its MR x NR tile of C, summed in C itself where the
# tile is whole.
_BLOCKS = [
    cmicro.gemm_blocks(
        size, cache_sizes.l2_bytes(), cache_sizes.last_level_bytes(), os.cpu_count() or 1
    )
    for size in (4, 8)
]
OWN_GEMM = (
    f"#define L1_BYTES {cache_sizes.l1_data_bytes()}L\n"
    + "".join(
        f"#define GEMM_{name} (sizeof(T) == 4 ? {_BLOCKS[0][i]}L : {_BLOCKS[1][i]}L)\n"
        for i, name in enumerate(("MC", "KC", "NC"))
    )
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

/* the size of each of the fewest blocks of at most `most` (a multiple of `unit`) that cover
   `total`, evened out and rounded up to `unit` (k = 600 in blocks of 512: two of 304, not 512
   and 88) */
static long even_block(long total, long most, long unit) {
  long blocks = (total + most - 1) / most;
  long size = (total + blocks - 1) / blocks;
  return (size + unit - 1) / unit * unit;
}

/* the whole MR x width tile of C at `to` (rows ldc apart): fetched now, while the tile before it
   is summed, so that the micro-kernel's loads of it at the start of its block and its stores
   at the end do not wait on memory (each of its rows is a line or two of its own, a stream
   too short for the hardware prefetchers) */
static inline void prefetch_tile(const T *to, long ldc, long width) {
  for (int r = 0; r < MR; r++) {
    const char *row = (const char *)(to + r * ldc);
    long bytes = width * (long)sizeof(T);
    for (long off = 0; off < bytes; off += 64) __builtin_prefetch(row + off, 1, 3);
    __builtin_prefetch(row + bytes - 1, 1, 3);
  }
}

/* the partial tiles of a block of columns: a tile of the last rows (fewer than MR) by panel q of
   the block at `tiles + q`, a tile of a narrow last panel (fewer columns than its width) by
   row panel gi after the block's panels */
#define PARTIAL_TILE(gi, q) (tiles + ((gi) == full ? (q) : most_panels + (gi)) * MR * NR)

static void ember_own_gemm(int order, int transa, int transb, BLAS_INT m_, BLAS_INT n_,
                           BLAS_INT k_, T alpha, const T *a, BLAS_INT lda, const T *b,
                           BLAS_INT ldb, T beta, T *c, BLAS_INT ldc) {
  (void)order, (void)alpha, (void)beta;
  long m = m_, n = n_, k = k_; /* all positive: `matmul` leaves empty products to NumPy */
  int ta = transa == 112, tb = transb == 112;
  long mp = (m + MR - 1) / MR, full = m / MR; /* panels of A, those of MR rows */
  long kb = even_block(k, GEMM_KC, 16), mb = even_block(m, GEMM_MC, MR);
  /* (the panels of a block of columns: NR wide but the last two, which may be two vectors) */
  long most_panels = (n < GEMM_NC ? n : GEMM_NC) / NR + 2;
  size_t a_size = (size_t)mb * kb, b_size = (size_t)most_panels * kb * NR;
  T *ap = scratch((a_size + b_size + (size_t)(most_panels + mp) * MR * NR) * sizeof(T));
  T *bp = ap + a_size, *tiles = bp + b_size; /* (64-byte aligned: mb is a multiple of MR) */
  for (long jc = 0, jend; jc < n; jc = jend) {
    /* a block of columns: whole panels from jc until GEMM_NC columns are covered */
    for (jend = jc; jend < n && jend - jc < GEMM_NC;) jend += panel_width(n, jend);
    if (jend > n) jend = n;
#define PANELS                                                                \
  for (long j0 = jc, q = 0, width, nr; j0 < jend && (width = panel_width(n, j0), \
       nr = n - j0 < width ? n - j0 : width, 1); j0 += width, q++)
    for (long p0 = 0; p0 < k; p0 += kb) {
      long kc = k - p0 < kb ? k - p0 : kb;
      for (long i0 = 0; i0 < m; i0 += mb) {
        long mc = m - i0 < mb ? m - i0 : mb, panels_a = (mc + MR - 1) / MR;
        pack_a(ta, ta ? a + p0 * lda + i0 : a + i0 * lda + p0, lda, mc, kc, ap);
        PANELS {
          T *bq = bp + q * kc * NR;
          /* (each panel of B packed just before the first block of A uses it, still in L1) */
          if (i0 == 0) pack_b(tb, b, ldb, p0, kc, j0, nr, bq);
          for (long ip = 0; ip < panels_a; ip++) {
            long gi = i0 / MR + ip;
            const T *panel = ap + ip * MR * kc;
            if (nr == width && gi + 1 < full && ip + 1 < panels_a)
              prefetch_tile(c + (gi + 1) * MR * ldc + j0, ldc, width);
            if (nr == width && gi < full) { /* a whole tile: summed in the result itself */
              T *to = c + gi * MR * ldc + j0;
              if (width == NR) micro3_c(kc, panel, bq, to, ldc, p0 == 0);
              else micro2_c(kc, panel, bq, to, ldc, p0 == 0);
            } else if (gi == full) /* the last rows, fewer than MR */
              micro_rows_of(kc, panel, bq, PARTIAL_TILE(gi, q), p0 == 0, (int)(m - full * MR),
                            width == NR ? 3 : 2);
            else if (width == NR) micro(kc, panel, bq, PARTIAL_TILE(gi, q), p0 == 0);
            else micro2(kc, panel, bq, PARTIAL_TILE(gi, q), p0 == 0);
          }
        }
      }
    }
    PANELS /* the partial tiles' values */
      for (long i = nr == width ? full * MR : 0; i < m; i++)
        memcpy(c + i * ldc + j0, PARTIAL_TILE(i / MR, q) + (i % MR) * NR, nr * sizeof(T));
#undef PANELS
  }
}
#undef PARTIAL_TILE
"""
)
