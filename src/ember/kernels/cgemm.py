"""Matrix products on ember's thread pool: ember's own GEMM kernel, or NumPy's OpenBLAS called
single-threaded in each thread.

`matmul(a, b)` computes ``a @ b`` for float32/float64 operands that BLAS can read in place
(each matrix row-major or transposed, batches at one stride), or returns None where it does not
apply (no C compiler, another layout or dtype, an empty operand, a product small enough for one
thread, `BLAS_ONE_THREAD`) and the caller runs ``np.matmul``.

Threads. After a multi-threaded call OpenBLAS's workers spin, waiting for the next one, for
about 0.1 s; ember's compiled loops (kernels/cpool.py) then shared the cores with a spinning
thread, which made the eager CNN step 1.3x slower on this project's 2-core machine (21.2 ms
against 16.4 ms with ``OPENBLAS_NUM_THREADS=1``), while the MLP and GPT steps, whose matmuls need
both cores, were 1.6x and 1.4x slower single-threaded. So a large product is split into
contiguous blocks (of batch entries, of the result's rows, or of its columns), one per thread
of ember's pool, each computed single-threaded. A product below `SPLIT_FLOPS` runs on the
calling thread alone, where waking the pool would cost more than it saves.

Kernels. Each block runs ember's own GEMM (`_OWN_GEMM`: the register-blocked micro-kernel of
kernels/cmicro.py over packed panels) where the compiler targets 512-bit vectors, else the
BLAS's gemm with OpenBLAS's thread setting at one (``EMBER_GEMM=own`` or ``blas`` overrides).
On the project's AVX-512 machine, whose environment pins OpenBLAS to its AVX2 kernels
(``OPENBLAS_CORETYPE=Haswell``), the own kernel ran the training steps' products at 330-470
GFLOP/s on two threads against OpenBLAS's 200-250 (float64: 210-225 against 110-120).

Few rows. A product of at most `SKINNY_ROWS` rows (a batch of one, a small one) runs
`skinny`: no packing at all, which for a few rows costs more than the product (the blocked
GEMM packs the whole of B per call). Each result is a dot product of two contiguous rows where
B is a linear layer's transposed weight, else rows of B scaled and summed; B's columns are
shared over the pool where B is large, since reading it is then the whole cost. On the
project's machine a 1x784 by 784x512 product took 15-28 us this way against 168 us packed
(NumPy's OpenBLAS: 17 us), and the MLP's inference at batch 1 dropped from 282 to 126 us.

Results equal NumPy's to float rounding: either kernel orders a sum differently from NumPy's
multi-threaded OpenBLAS.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os

import numpy as np

from . import cpool
from .blas_layout import blas_layout

__all__ = ["SPLIT_FLOPS", "available", "block_align", "gemm", "matmul", "skinny"]
__all__ += ["skinny_shared", "skinny_unit"]

# multiply-adds x 2 below which one thread runs the whole product (about 20 us of work on one
# core of the project's machine, against ~10 us to wake the pool and join it)
SPLIT_FLOPS = 1 << 22
# products of at most this many rows run `skinny` (no packing): from 1 to 8 rows, measured on
# the project's machine at 0.3-0.9x the blocked GEMM's time and 0.5-1.3x NumPy's; with more
# rows the blocked GEMM's packing pays for itself
SKINNY_ROWS = 8
SKINNY_SPLIT_BYTES = 1 << 18  # b's size from which `skinny` shares its columns over the pool
# multiply-adds (M * N * K, the whole batch) up to which OpenBLAS itself runs one thread
# (its interface's SMP threshold): NumPy's call is then as good, and cheaper to make
BLAS_ONE_THREAD = 1 << 18

_C = {np.dtype(np.float32): ("float", "s"), np.dtype(np.float64): ("double", "d")}

_DISPATCH = r"""
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
  long m, n, k, lda, ldb, ldc, sa, sb, sc;
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
  struct job j = {gemm ? (gemm_fn)gemm : ember_own_gemm, (set_local_fn)set_local, process_wide,
                  ta, tb, split, m, n, k, lda, ldb, ldc, sa, sb, sc, a, b, c};
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

static T hsum(vec v) {
  T s = 0;
  for (long i = 0; i < VL; i++) s += v[i];
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
    for (int q = 0; q < 4; q++) wv[q] = *(const uvec *)(w[q] + p);
    for (int r = 0; r < NI; r++) {
      vec xv = *(const uvec *)(x[r] + p);
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

/* C[i..i+NI][j..j+nv vectors] as sums of B's rows (NI: a constant where it is inlined) */
static inline __attribute__((always_inline)) void rows_block(const struct skinny *s, long i,
                                                             long j, long j1, const int NI) {
  long nv = (j1 - j + VL - 1) / VL < 4 ? (j1 - j + VL - 1) / VL : 4;
  int full = j + nv * VL <= j1;
  vec acc[4][4];
  for (int r = 0; r < NI; r++)
    for (int v = 0; v < 4; v++) acc[r][v] = (vec){0};
  for (long p = 0; p < s->k; p++) {
    const T *brow = s->b + p * s->ldb + j;
    vec bv[4];
    if (full && nv == 4)
      for (int v = 0; v < 4; v++) bv[v] = *(const uvec *)(brow + v * VL);
    else
      for (int v = 0; v < 4; v++)
        for (long e = 0; e < VL; e++) bv[v][e] = j + v * VL + e < j1 ? brow[v * VL + e] : 0;
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

# ember's own single-threaded GEMM on the shared micro-kernel (kernels/cmicro.py), with the
# CBLAS signature (row-major; alpha 1 and beta 0, the only values `ember_gemm` passes). A is
# packed whole into panels of MR rows; then for each panel of NR columns of B, block by block
# of KC along K, each block is packed and every panel of A multiplied into its MR x NR tile of
# accumulators, which are stored into C once K is done.
_OWN_GEMM = r"""
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
  for (long i0 = 0; i0 < m; i0 += MR) {
    T *to = ap + i0 * k;
    long mr = m - i0 < MR ? m - i0 : MR;
    if (ta) {  /* op(A)[i][p] = a[p * lda + i]: MR contiguous values per step */
      for (long p = 0; p < k; p++) {
        const T *from = a + p * lda + i0;
        for (long r = 0; r < MR; r++) to[p * MR + r] = r < mr ? from[r] : 0;
      }
    } else if (mr == MR) { /* MR rows read side by side, a step at a time */
      const T *from = a + i0 * lda;
      for (long p = 0; p < k; p++)
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
    for (; c0 + 8 <= nr; c0 += 8)
      for (long p = 0; p < kc; p++)
#pragma GCC unroll 8
        for (long r = 0; r < 8; r++) bp[p * NR + c0 + r] = from[(c0 + r) * ldb + p];
    for (long p = 0; p < kc; p++)
      for (long c = c0; c < NR; c++) bp[p * NR + c] = c < nr ? from[c * ldb + p] : 0;
  }
}

static void ember_own_gemm(int order, int transa, int transb, BLAS_INT m_, BLAS_INT n_,
                           BLAS_INT k_, T alpha, const T *a, BLAS_INT lda, const T *b,
                           BLAS_INT ldb, T beta, T *c, BLAS_INT ldc) {
  (void)order, (void)alpha, (void)beta;
  long m = m_, n = n_, k = k_; /* all positive: `matmul` leaves empty products to NumPy */
  long mp = (m + MR - 1) / MR;
  long a_size = (mp * MR * k + VL - 1) / VL * VL; /* (tiles and bp stay 64-byte aligned) */
  T *ap = scratch((size_t)(a_size + mp * MR * NR + KC * NR) * sizeof(T));
  T *tiles = ap + a_size, *bp = tiles + mp * MR * NR;
  pack_a(transa == 112, a, lda, m, k, ap);
  for (long j0 = 0; j0 < n; j0 += NR) {
    long nr = n - j0 < NR ? n - j0 : NR;
    for (long p0 = 0; p0 < k; p0 += KC) {
      long kc = k - p0 < KC ? k - p0 : KC;
      pack_b(transb == 112, b, ldb, p0, kc, j0, nr, bp);
      for (long ip = 0; ip < mp; ip++)
        micro(kc, ap + ip * MR * k + p0 * MR, bp, tiles + ip * MR * NR, p0 == 0);
    }
    for (long i = 0; i < m; i++)
      memcpy(c + i * ldc + j0, tiles + (i / MR) * MR * NR + (i % MR) * NR, nr * sizeof(T));
  }
}
"""

_P, _L, _I = ctypes.c_void_p, ctypes.c_long, ctypes.c_int
_ARGS = [_P, _P, _I, _I, _I, _I, _L, _L, _L, _P, _L, _P, _L, _P, _L, _L, _L, _L, _L, _L, _P]
_SKINNY_ARGS = [_I, _L, _L, _L, _P, _L, _P, _L, _P, _L, _L, _P]


def _symbol(library, names):
    for name in names:
        try:
            return ctypes.cast(getattr(library, name), ctypes.c_void_p).value, name
        except AttributeError:
            continue
    return None, None


@functools.cache
def _functions(dtype: np.dtype):
    """(ember_gemm, the BLAS gemm's address or None, set_local's address or None, whether that
    setting is process-wide, the pool, whether the compiler targets 512-bit vectors,
    ember_skinny) for ``dtype``, or None (no compiler)."""
    from . import blas_threads, ccompile
    from .cmicro import MICRO

    if dtype not in _C or not ccompile.compiler_available():
        return None
    c_type, letter = _C[dtype]
    gemm = set_local = None
    blas_int = "long long"
    library = blas_threads.library()
    if library is not None:
        # NumPy's wheels ship OpenBLAS with 64-bit integers and prefixed names; a system
        # OpenBLAS has the plain CBLAS names and 32-bit ones
        gemm, name = _symbol(
            library,
            [f"scipy_cblas_{letter}gemm64_", f"cblas_{letter}gemm64_", f"cblas_{letter}gemm"],
        )
        set_local, _ = _symbol(library, ["openblas_set_num_threads_local"])
        if gemm is None or set_local is None:
            gemm = set_local = None
        elif not name.endswith("64_"):
            blas_int = "int"
    source = f"#define T {c_type}\n#define BLAS_INT {blas_int}\n" + MICRO + _OWN_GEMM + _DISPATCH
    try:
        fn = ccompile.load(source, "ember_gemm", _ARGS)
        skinny = ccompile.load(source, "ember_skinny", _SKINNY_ARGS)
        width = ccompile.load(source, "ember_gemm_vector_bits", [ctypes.c_void_p])
    except ccompile.CompileError:
        return None
    bits = ctypes.c_int(0)
    width(ctypes.addressof(bits))
    process_wide = set_local is not None and not blas_threads.per_thread()
    return fn, gemm, set_local, process_wide, cpool.parallel_for(), bits.value >= 512, skinny


def _use_blas(blas_gemm, wide: bool) -> bool:
    """Whether to call the BLAS's gemm rather than ember's own (``EMBER_GEMM=blas|own``
    decides; by default ember's own where the compiler targets 512-bit vectors, which its
    micro-kernel is written for, and the BLAS elsewhere)."""
    if blas_gemm is None:
        return False
    choice = os.environ.get("EMBER_GEMM", "")
    if choice in ("blas", "own"):
        return choice == "blas"
    return not wide


def available(dtype) -> bool:
    """Whether `matmul` runs ``dtype`` operands."""
    return _functions(np.dtype(dtype)) is not None


def _batch_stride(x: np.ndarray, batch: tuple) -> int | None:
    """The one stride (in elements) between consecutive matrices of ``x`` broadcast to
    ``batch``, or None where its batch dimensions do not collapse to one."""
    lead = x.shape[:-2]
    if not lead or math.prod(lead) == 1:
        return 0
    if tuple(lead) != tuple(batch):
        return None
    strides = x.strides[:-2]
    for i in range(len(lead) - 1):
        if lead[i] > 1 and strides[i] != strides[i + 1] * lead[i + 1]:
            return None
    if strides[-1] % x.itemsize:
        return None
    return strides[-1] // x.itemsize


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray | None:
    """``a @ b`` (operands of at least 2 dimensions, the same float dtype) written into ``out``
    (C-contiguous, of the result's shape and dtype) or a new array; None where it does not
    apply (see the module docstring) or where the product is small enough that OpenBLAS runs
    it on one thread anyway (`BLAS_ONE_THREAD`)."""
    if a.ndim < 2 or b.ndim < 2 or a.dtype != b.dtype or a.shape[-1] != b.shape[-2]:
        return None
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = ()
    if a.ndim > 2 or b.ndim > 2:
        try:
            batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            return None
    count = math.prod(batch)
    # (an empty product is NumPy's too: zeros or an empty array)
    if m * k * n * count <= BLAS_ONE_THREAD:
        return None
    if not batch and a.ndim == 2 and b.ndim == 2:
        few = skinny(a, b, out)
        if few is not None:
            return few
    functions = _functions(a.dtype)
    if functions is None:
        return None
    fn, blas_gemm, set_local, process_wide, pool, wide, _ = functions
    gemm = blas_gemm if _use_blas(blas_gemm, wide) else None
    if gemm is None:
        set_local = None  # ember's own kernel makes no BLAS call
    # batch entries that are not one stride apart (attention's heads, split out of a wider
    # axis) are copied together: NumPy's loop over them would call BLAS once per matrix, with
    # its own threads, which then spin (see the module docstring)
    sa, sb = _batch_stride(a, batch), _batch_stride(b, batch)
    if sa is None:
        a = np.ascontiguousarray(a)
        sa = _batch_stride(a, batch)
    if sb is None:
        b = np.ascontiguousarray(b)
        sb = _batch_stride(b, batch)
    la, lb = blas_layout(a), blas_layout(b)
    if la is None or lb is None or sa is None or sb is None:
        return None
    shape = tuple(batch) + (m, n)
    if out is None:
        out = np.empty(shape, a.dtype)
    elif (
        out.shape != shape
        or out.dtype != a.dtype
        or not out.flags.c_contiguous
        or np.may_share_memory(out, a)
        or np.may_share_memory(out, b)
    ):
        return None
    if count > 1:
        split, parts, unit = 0, count, 1
    elif m >= n:
        split, parts, unit = 1, m, 8
    else:  # (whole 64-byte vectors of columns)
        split, parts, unit = 2, n, 64 // a.itemsize
    use_pool = pool if 2 * m * n * k * count >= SPLIT_FLOPS else None
    align = block_align(parts, unit)
    fn(
        gemm,
        set_local,
        int(process_wide),
        int(la[0]),
        int(lb[0]),
        split,
        m,
        n,
        k,
        a.ctypes.data,
        la[1],
        b.ctypes.data,
        lb[1],
        out.ctypes.data,
        n,
        sa,
        sb,
        m * n,
        parts,
        align,
        use_pool,
    )
    return out


def gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``np.matmul(a, b, out=out)``: `matmul` where it applies, else NumPy's."""
    result = matmul(a, b, out)
    return np.matmul(a, b, out=out) if result is None else result


def skinny(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray | None:
    """``a @ b`` by `ember_skinny` (no packing) for a 2-d ``a`` of at most `SKINNY_ROWS` rows
    by a 2-d ``b``, each in a layout BLAS reads in place (`blas_layout`), written into ``out``
    (C-contiguous, the result's shape and dtype) or a new array; None where it does not
    apply."""
    if a.ndim != 2 or b.ndim != 2 or a.dtype != b.dtype or a.shape[1] != b.shape[0]:
        return None
    m, k = a.shape
    n = b.shape[1]
    la, lb = blas_layout(a), blas_layout(b)
    if 0 in a.shape or 0 in b.shape or m > SKINNY_ROWS or la is None or lb is None:
        return None  # (the layouts the blocked GEMM takes: the same product, the same kernel)
    if la[0]:  # a few rows read down columns: copied row by row first
        a, la = np.ascontiguousarray(a), (False, k)
    tb, ldb = int(lb[0]), lb[1]
    functions = _functions(a.dtype)
    if functions is None:
        return None
    if out is None:
        out = np.empty((m, n), a.dtype)
    elif (
        out.shape != (m, n)
        or out.dtype != a.dtype
        or not out.flags.c_contiguous
        or np.may_share_memory(out, a)
        or np.may_share_memory(out, b)
    ):
        return None
    use_pool = functions[4] if skinny_shared(m, n, k, a.itemsize) else None
    align = block_align(n, skinny_unit(bool(tb), a.itemsize))
    functions[6](
        tb, m, n, k, a.ctypes.data, la[1], b.ctypes.data, ldb, out.ctypes.data, n, align,
        use_pool,
    )  # fmt: skip
    return out


def block_align(parts: int, unit: int) -> int:
    """The size of one block of ``parts`` per thread of the pool, in whole ``unit``s (each
    block packs its own copy of the operand it shares, so the pool's usual several chunks per
    thread would pack it several times over)."""
    per_thread = -(-parts // cpool.get_num_threads())
    return -(-per_thread // unit) * unit


def skinny_shared(m: int, n: int, k: int, itemsize: int) -> bool:
    """Whether `skinny` shares its columns over the pool: a large product, or a large b, read
    at the memory's pace (two threads draw more of it than one)."""
    return 2 * m * n * k >= SPLIT_FLOPS or n * k * itemsize >= SKINNY_SPLIT_BYTES


def skinny_unit(transposed: bool, itemsize: int) -> int:
    """Columns per block of `skinny`'s kernel: four dot products, or whole vectors of a row."""
    return 4 if transposed else 64 // itemsize
