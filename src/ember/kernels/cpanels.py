"""The C source of products by a matrix packed once into the micro-kernel's panels
(kernels/cmicro.py) that kernels/cprepack.py runs: the packing (panels of NR columns, each
k x NR, zero past the last column), the few-rows kernel (`few_panel`: each panel read once per
block of up to FEW rows) and the panels' product. Written for the recurrent layers' steps
(kernels/crnn.py's packed product, from which it was taken); a module of its own, importing
nothing, so that the GEMM's modules (cgemm, gemm_tune, cprepack) include it without importing
the recurrent kernels, which import the GEMM. The includer defines ``T`` and puts
`cmicro.MICRO` first.
"""

import numpy as np

from .cstep import data_address

__all__ = ["FEW_PANEL", "PACKED", "aligned"]


def aligned(count: int, dtype) -> np.ndarray:
    """An empty array of ``count`` values starting on a 64-byte boundary (the micro-kernel's
    vector loads of packed panels are aligned)."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.empty(count + 64 // itemsize, dtype)
    start = (-data_address(raw) % 64) // itemsize
    return raw[start : start + count]


FEW_PANEL = r"""
#include <string.h>
/* Fewer rows than the micro-kernel's MR (a batch of one: a matrix-vector product): the
   micro-kernel would multiply MR rows, most of them zero padding, so each panel is instead
   read once per block of up to FEW rows, each row's NR sums kept in vector registers (FEW
   rows of three vectors, plus the panel's three, fit AVX-512's registers) */
#define FEW 4
static inline __attribute__((always_inline)) void few_panel(long rb, const T *a, long k,
                                                            const T *b, T *c, long ldc, long nr) {
  /* a single row has only three chains of additions, too few to hide the adds' latency: its
     even and odd terms are summed apart and added at the end, unless the includer defines
     FEW_IN_ORDER (each sum in the order of k, as ember's own GEMM adds it) */
#ifdef FEW_IN_ORDER
  const long sets = 1;
#else
  const long sets = rb == 1 ? 2 : 1;
#endif
  vec acc[2][FEW][3];
#pragma GCC unroll 2
  for (long s = 0; s < sets; s++)
#pragma GCC unroll 4
    for (long r = 0; r < rb; r++)
#pragma GCC unroll 3
      for (int v = 0; v < 3; v++) acc[s][r][v] = (vec){0};
  long p = 0;
  for (; p + sets <= k; p += sets)
#pragma GCC unroll 2
    for (long s = 0; s < sets; s++) {
      const vec *bv = (const vec *)(b + (p + s) * NR);
      vec b0 = bv[0], b1 = bv[1], b2 = bv[2];
#pragma GCC unroll 4
      for (long r = 0; r < rb; r++) {
        T x = a[r * k + p + s];
        acc[s][r][0] += x * b0;
        acc[s][r][1] += x * b1;
        acc[s][r][2] += x * b2;
      }
    }
  for (; p < k; p++) { /* (an odd depth's last term, a single row) */
    const vec *bv = (const vec *)(b + p * NR);
    T x = a[p];
    acc[0][0][0] += x * bv[0];
    acc[0][0][1] += x * bv[1];
    acc[0][0][2] += x * bv[2];
  }
  /* row r's nr sums to c + r * ldc: whole panels stored as vectors (the recurrent layers'
     output has room for every panel's NR columns), the last, partial one through a buffer */
#pragma GCC unroll 4
  for (long r = 0; r < rb; r++) {
    if (nr == NR) {
#pragma GCC unroll 3
      for (int v = 0; v < 3; v++)
        *(uvec *)(c + r * ldc + v * VL) = sets == 2 ? acc[0][r][v] + acc[1][r][v] : acc[0][r][v];
    } else {
      T sums[NR] __attribute__((aligned(64)));
#pragma GCC unroll 3
      for (int v = 0; v < 3; v++)
        *(vec *)(sums + v * VL) = sets == 2 ? acc[0][r][v] + acc[1][r][v] : acc[0][r][v];
      memcpy(c + r * ldc, sums, nr * sizeof(T));
    }
  }
}

"""

# ember's GEMM (kernels/cgemm.py) packs its right operand at every call, which for a few rows
# times a weight matrix costs about as much as the multiply-adds; here the weight's panels of NR
# columns are packed once (each panel k x NR, contiguous) and every product packs only its rows
# and runs the shared micro-kernel, panels shared over ember's pool where the product is large.
PACKED = (
    r"""
#include <stdlib.h>
#include <string.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);

/* b (k x n; element (p, j) at b[p * sp + j * sj]) as panels of NR columns, each k x NR (zero
   past n): a transposed weight is packed straight from the weight, without a copy */
void ember_rnn_pack(const T *b, long k, long n, long sp, long sj, T *bp) {
  for (long j0 = 0; j0 < n; j0 += NR) {
    long nr = n - j0 < NR ? n - j0 : NR;
    T *to = bp + (j0 / NR) * k * NR;
    if (labs(sp) <= labs(sj)) { /* (a transposed weight) read along its rows, not across */
      for (long c = 0; c < NR; c++)
        for (long p = 0; p < k; p++) to[p * NR + c] = c < nr ? b[p * sp + (j0 + c) * sj] : 0;
    } else {
      for (long p = 0; p < k; p++)
        for (long c = 0; c < NR; c++) to[p * NR + c] = c < nr ? b[p * sp + (j0 + c) * sj] : 0;
    }
  }
}

static T *tiles_of(size_t bytes) {
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

struct product { const T *ap; long m, k, n; const T *bp; T *c; };

static void panels(void *job, long lo, long hi) {
  const struct product *j = job;
  long m = j->m, k = j->k, mp = (m + MR - 1) / MR;
  T *tiles = tiles_of((size_t)mp * MR * NR * sizeof(T));
  for (long jp = lo; jp < hi; jp++) {
    long j0 = jp * NR, nr = j->n - j0 < NR ? j->n - j0 : NR;
    const T *b = j->bp + jp * k * NR;
    for (long p0 = 0; p0 < k; p0 += KC) {
      long kc = k - p0 < KC ? k - p0 : KC;
      for (long ip = 0; ip < mp; ip++)
        micro(kc, j->ap + ip * MR * k + p0 * MR, b + p0 * NR, tiles + ip * MR * NR, p0 == 0);
    }
    for (long i = 0; i < m; i++)
      memcpy(j->c + i * j->n + j0, tiles + (i / MR) * MR * NR + (i % MR) * NR, nr * sizeof(T));
  }
}

"""
    + FEW_PANEL
    + r"""
static void few_panels(void *job, long lo, long hi) {
  const struct product *j = job;
  for (long jp = lo; jp < hi; jp++) {
    long j0 = jp * NR, nr = j->n - j0 < NR ? j->n - j0 : NR;
    const T *b = j->bp + jp * j->k * NR;
    for (long i0 = 0; i0 < j->m; i0 += FEW) {
      const T *a = j->ap + i0 * j->k;
      T *c = j->c + i0 * j->n + j0;
      /* the row count a compile-time constant in each case, so acc lives in registers */
      switch (j->m - i0 < FEW ? j->m - i0 : FEW) {
        case 1: few_panel(1, a, j->k, b, c, j->n, nr); break;
        case 2: few_panel(2, a, j->k, b, c, j->n, nr); break;
        case 3: few_panel(3, a, j->k, b, c, j->n, nr); break;
        default: few_panel(4, a, j->k, b, c, j->n, nr); break;
      }
    }
  }
}

/* c (m x n) = a (m x k, row-major) @ b, b packed by ember_rnn_pack; ap holds the packed a
   (rounded up to MR rows) */
void ember_rnn_product(const T *a, long m, long k, long n, const T *bp, T *c, T *ap,
                       ember_pool pool) {
  long count = (n + NR - 1) / NR;
  if (m < MR) {
    struct product j = {a, m, k, n, bp, c};
    if (pool && count > 1) pool(few_panels, &j, count, 1);
    else few_panels(&j, 0, count);
    return;
  }
  for (long i0 = 0; i0 < m; i0 += MR) {
    T *to = ap + i0 * k;
    for (long p = 0; p < k; p++)
      for (long r = 0; r < MR; r++) to[p * MR + r] = i0 + r < m ? a[(i0 + r) * k + p] : 0;
  }
  struct product j = {ap, m, k, n, bp, c};
  if (pool && count > 1) pool(panels, &j, count, 1);
  else panels(&j, 0, count);
}
"""
)
