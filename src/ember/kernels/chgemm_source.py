"""The C source of ember's half-precision GEMM (kernels/chgemm.py compiles it once per dtype,
with ``HKIND`` 1 for bfloat16 or 2 for float16, after kernels/cmicro.py's `MICRO` on float and
kernels/chalf.py's `CONVERT`).

Operands are read in 16 bits and converted while their panels are packed; products are summed
in float32 and each result rounded once (to nearest, ties to even) on its store, after the
optional per-column bias is added to the float32 sum before that one rounding (what the NumPy
reference, ``round(a @ b + bias)``, and PyTorch's addmm and linear compute). Two micro-kernels:

- the float32 one (kernels/cmicro.py) on panels widened to float32 while they are packed:
  float16 everywhere, and bfloat16 where the CPU lacks AVX512_BF16;
- for bfloat16 where the compiler targets AVX512_BF16 (``-march=native`` on such a CPU, so
  ``__AVX512BF16__``; the kernel cache's key includes the CPU) and ``EMBER_NO_BF16_DOT`` is not
  defined: `micro_pairs`, whose ``vdpbf16ps`` adds two products of bfloat16 pairs per float32
  lane. Its panels keep the 16-bit values, two consecutive steps of K packed in each 32-bit
  lane (an odd K's last step paired with a zero). The instruction treats subnormal inputs and
  results as zero, so tiny values (below 1e-38) differ from a float32 sum.

Fewer rows than the micro-kernel's MR (a batch of one, a decoder's token): ``ember_hgemm_few``,
dot products (or sums of rows) over the 16-bit values, unpacked, in float32.
"""

from .cmicro import MICRO_PAIRS

__all__ = ["HALF_GEMM"]

HALF_GEMM = (
    r"""
#include <stdlib.h>
#if HKIND == 1
#define LOAD bf16_load
#define STORE bf16_store
#else
#define LOAD f16_load
#define STORE f16_store
#endif
#if HKIND == 1 && defined(__AVX512BF16__) && !defined(EMBER_NO_BF16_DOT)
#define PAIRS 1
#include <immintrin.h>
#else
#define PAIRS 0
#endif
typedef uint16_t S;
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);

static float *scratch(size_t bytes) {
  static __thread float *buffer = 0;
  static __thread size_t capacity = 0;
  if (bytes > capacity) {
    free(buffer);
    capacity = (bytes + 4095) / 4096 * 4096;
    buffer = aligned_alloc(64, capacity);
    if (!buffer) abort();
  }
  return buffer;
}

/* element (i, p) of op(A), (p, j) of op(B) */
#define AT(x, t, ld, i, p) ((t) ? (x)[(p) * (ld) + (i)] : (x)[(i) * (ld) + (p)])

void ember_hgemm_pairs(int *pairs) { *pairs = PAIRS; }

#if PAIRS
/* panels of MR rows of op(A): for each pair of steps, MR 32-bit lanes (step 2q low, 2q+1 high) */
static void pack_a(int ta, const S *a, long lda, long m, long k, uint32_t *ap) {
  long k2 = (k + 1) / 2;
  for (long i0 = 0; i0 < m; i0 += MR) {
    uint32_t *to = ap + i0 * k2;
    for (long q = 0; q < k2; q++)
      for (long r = 0; r < MR; r++) {
        long i = i0 + r, p = 2 * q;
        uint32_t lo = i < m ? AT(a, ta, lda, i, p) : 0;
        uint32_t hi = i < m && p + 1 < k ? AT(a, ta, lda, i, p + 1) : 0;
        to[q * MR + r] = lo | hi << 16;
      }
  }
}

/* steps p0..p0+kc of op(B), columns j0..j0+nr, as (kc + 1) / 2 x NR pairs (zero past nr) */
static void pack_b(int tb, const S *b, long ldb, long p0, long kc, long j0, long nr, uint32_t *bp) {
  for (long q = 0; q < (kc + 1) / 2; q++) {
    long p = p0 + 2 * q;
    int odd = 2 * q + 1 < kc;
    if (!tb && nr == NR && odd) {
      const S *r0 = b + p * ldb + j0, *r1 = r0 + ldb;
      for (long c = 0; c < NR; c++) bp[q * NR + c] = (uint32_t)r0[c] | (uint32_t)r1[c] << 16;
    } else {
      for (long c = 0; c < NR; c++) {
        uint32_t lo = c < nr ? AT(b, !tb, ldb, j0 + c, p) : 0;
        uint32_t hi = c < nr && odd ? AT(b, !tb, ldb, j0 + c, p + 1) : 0;
        bp[q * NR + c] = lo | hi << 16;
      }
    }
  }
}

"""
    + MICRO_PAIRS
    + r"""typedef uint32_t P; /* a packed element */
#define PACKED_K(k) (((k) + 1) / 2)
#define MICRO_RUN(kc, a, b, acc, first) micro_pairs(((kc) + 1) / 2, a, b, acc, first)
#else
/* panels widened to float32 while packed */
static void pack_a(int ta, const S *a, long lda, long m, long k, float *ap) {
  for (long i0 = 0; i0 < m; i0 += MR) {
    float *to = ap + i0 * k;
    long mr = m - i0 < MR ? m - i0 : MR;
    if (!ta && mr == MR) {
      const S *from = a + i0 * lda;
      for (long p = 0; p < k; p++)
#pragma GCC unroll 8
        for (long r = 0; r < MR; r++) to[p * MR + r] = LOAD(from[r * lda + p]);
    } else {
      for (long p = 0; p < k; p++)
        for (long r = 0; r < MR; r++)
          to[p * MR + r] = r < mr ? LOAD(AT(a, ta, lda, i0 + r, p)) : 0.0f;
    }
  }
}

static void pack_b(int tb, const S *b, long ldb, long p0, long kc, long j0, long nr, float *bp) {
  if (!tb) {
    for (long p = 0; p < kc; p++) {
      const S *from = b + (p0 + p) * ldb + j0;
      float *to = bp + p * NR;
      if (nr == NR)
        for (long c = 0; c < NR; c++) to[c] = LOAD(from[c]);
      else
        for (long c = 0; c < NR; c++) to[c] = c < nr ? LOAD(from[c]) : 0.0f;
    }
  } else { /* eight rows of b read side by side, as kernels/cgemm_source.py's pack_b */
    const S *from = b + j0 * ldb + p0;
    long c0 = 0;
    for (; c0 + 8 <= nr; c0 += 8)
      for (long p = 0; p < kc; p++)
#pragma GCC unroll 8
        for (long r = 0; r < 8; r++) bp[p * NR + c0 + r] = LOAD(from[(c0 + r) * ldb + p]);
    for (long p = 0; p < kc; p++)
      for (long c = c0; c < NR; c++) bp[p * NR + c] = c < nr ? LOAD(from[c * ldb + p]) : 0.0f;
  }
}
typedef float P;
#define PACKED_K(k) (k)
#define MICRO_RUN(kc, a, b, acc, first) micro(kc, a, b, acc, first)
#endif

/* C (m x n, row-major, ldc) = op(A) @ op(B) (+ bias, one value per column), single-threaded */
static void own_hgemm(int ta, int tb, long m, long n, long k, const S *a, long lda, const S *b,
                      long ldb, S *c, long ldc, const S *bias) {
  long mp = (m + MR - 1) / MR, kp = PACKED_K(k);
  long a_size = (mp * MR * kp + 15) / 16 * 16;
  P *ap = (P *)scratch((size_t)(a_size + mp * MR * NR + KC * NR) * 4);
  float *tiles = (float *)(ap + a_size);
  P *bp = (P *)(tiles + mp * MR * NR);
  pack_a(ta, a, lda, m, k, ap);
  for (long j0 = 0; j0 < n; j0 += NR) {
    long nr = n - j0 < NR ? n - j0 : NR;
    for (long p0 = 0; p0 < k; p0 += KC) {
      long kc = k - p0 < KC ? k - p0 : KC;
      pack_b(tb, b, ldb, p0, kc, j0, nr, bp);
      for (long ip = 0; ip < mp; ip++)
        MICRO_RUN(kc, ap + ip * MR * kp + PACKED_K(p0) * MR, bp, tiles + ip * MR * NR, p0 == 0);
    }
    for (long i = 0; i < m; i++) {
      const float *t = tiles + (i / MR) * MR * NR + (i % MR) * NR;
      S *to = c + i * ldc + j0;
      if (bias)
        for (long x = 0; x < nr; x++) to[x] = STORE(t[x] + LOAD(bias[j0 + x]));
      else
        for (long x = 0; x < nr; x++) to[x] = STORE(t[x]);
    }
  }
}

/* split: 0 over batch entries, 1 over the result's rows, 2 over its columns */
struct job {
  int ta, tb, split;
  long m, n, k, lda, ldb, ldc, sa, sb, sc;
  const S *a, *b, *bias;
  S *c;
};

static void part(void *job_, long lo, long hi) {
  const struct job *j = job_;
  if (j->split == 0) {
    for (long i = lo; i < hi; i++)
      own_hgemm(j->ta, j->tb, j->m, j->n, j->k, j->a + i * j->sa, j->lda, j->b + i * j->sb,
                j->ldb, j->c + i * j->sc, j->ldc, j->bias);
  } else if (j->split == 1) {
    own_hgemm(j->ta, j->tb, hi - lo, j->n, j->k, j->a + (j->ta ? lo : lo * j->lda), j->lda,
              j->b, j->ldb, j->c + lo * j->ldc, j->ldc, j->bias);
  } else {
    own_hgemm(j->ta, j->tb, j->m, hi - lo, j->k, j->a, j->lda,
              j->b + (j->tb ? lo * j->ldb : lo), j->ldb, j->c + lo, j->ldc,
              j->bias ? j->bias + lo : 0);
  }
}

/* ------------------------------------------------------------------ fewer rows than MR
   C (m x n) = A (m x k, row-major) @ op(B) (+ bias), columns lo..hi, with no packing: the
   blocked kernel would pad A to MR rows and pack all of B (converted) for a few rows. tb: B is
   n x k row-major (a linear layer's weight), each C[i][j] a dot product of two contiguous
   rows, every row of A against one row of B at a time (B read once); else B is k x n
   row-major, each row of C a sum of B's rows scaled by A's values, in a float32 row. */
struct few { int tb; long m, n, k, lda, ldb, ldc; const S *a, *b, *bias; S *c; };

static inline S finish(float sum, const S *bias, long j) {
  return bias ? STORE(sum + LOAD(bias[j])) : STORE(sum);
}

static void few_part(void *job_, long lo, long hi) {
  const struct few *f = job_;
  if (f->tb) {
    for (long j = lo; j < hi; j++) {
      const S *w = f->b + j * f->ldb;
      long i = 0;
      for (; i + 4 <= f->m; i += 4) {
        const S *x0 = f->a + i * f->lda, *x1 = x0 + f->lda, *x2 = x1 + f->lda, *x3 = x2 + f->lda;
        float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
        for (long p = 0; p < f->k; p++) {
          float v = LOAD(w[p]);
          s0 += LOAD(x0[p]) * v;
          s1 += LOAD(x1[p]) * v;
          s2 += LOAD(x2[p]) * v;
          s3 += LOAD(x3[p]) * v;
        }
        f->c[i * f->ldc + j] = finish(s0, f->bias, j);
        f->c[(i + 1) * f->ldc + j] = finish(s1, f->bias, j);
        f->c[(i + 2) * f->ldc + j] = finish(s2, f->bias, j);
        f->c[(i + 3) * f->ldc + j] = finish(s3, f->bias, j);
      }
      for (; i < f->m; i++) {
        const S *x = f->a + i * f->lda;
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (long p = 0; p < f->k; p++) s += LOAD(x[p]) * LOAD(w[p]);
        f->c[i * f->ldc + j] = finish(s, f->bias, j);
      }
    }
    return;
  }
  float *row = scratch((size_t)(hi - lo) * 4);
  for (long i = 0; i < f->m; i++) {
    for (long j = lo; j < hi; j++) row[j - lo] = 0;
    for (long p = 0; p < f->k; p++) {
      float v = LOAD(f->a[i * f->lda + p]);
      const S *brow = f->b + p * f->ldb;
#pragma omp simd
      for (long j = lo; j < hi; j++) row[j - lo] += v * LOAD(brow[j]);
    }
    for (long j = lo; j < hi; j++) f->c[i * f->ldc + j] = finish(row[j - lo], f->bias, j);
  }
}

void ember_hgemm_few(int tb, long m, long n, long k, const S *a, long lda, const S *b, long ldb,
                     S *c, long ldc, const S *bias, long align, ember_pool pool) {
  struct few f = {tb, m, n, k, lda, ldb, ldc, a, b, bias, c};
  if (pool) pool(few_part, &f, n, align);
  else few_part(&f, 0, n);
}

void ember_hgemm(int ta, int tb, int split, long m, long n, long k, const S *a, long lda,
                 const S *b, long ldb, S *c, long ldc, long sa, long sb, long sc, const S *bias,
                 long count, long align, ember_pool pool) {
  struct job j = {ta, tb, split, m, n, k, lda, ldb, ldc, sa, sb, sc, a, b, bias, c};
  if (pool) pool(part, &j, count, align);
  else part(&j, 0, count);
}
"""
)
