"""The C source of ember's few-rows product ``ember_skinny`` (no packing: a batch of one, a
decoder's token), appended to kernels/cgemm_source.py's `DISPATCH` (after kernels/cmicro.py's
`MICRO`, whose vec, uvec and VL it uses, and DISPATCH's ``ember_pool``)."""

__all__ = ["SKINNY"]

SKINNY = r"""
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
