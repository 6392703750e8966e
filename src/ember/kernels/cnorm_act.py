"""GELU and layer normalization in C, forward and backward, one pass (or one row pass) each.

The composites these replace run five to eight NumPy passes per call; the ops of
ops/norm_act.py attach these as their ``fast`` rules. Each follows its NumPy kernel's formula
(ops/norm_act.py, the specification; both are PyTorch's CPU kernels' formulas) operation for
operation, compiled with ``-ffp-contract=off`` so no fused multiply-add changes a rounding;
results differ from NumPy's only by the vector math library's few ulps in ``erf``, ``exp`` and
``tanh``, and by the order in which a row's sums are added (pairwise in NumPy, lane-wise here).

* `gelu(x, tanh)` / `gelu_backward(x, g, tanh)`: ``x * 0.5 * (1 + erf(x / sqrt 2))`` or the tanh
  form, and ``g * gelu'(x)``; chunks of the flat array are shared over ember's pool.
* `layer_norm(x, w, b, n, eps)`: rows of ``n`` values, mean and biased variance accumulated in
  double, ``(x - mean) * rstd * w + b``.
* `layer_norm_backward(x, w, g, n, eps)`: ``(dx, dw, db)``; each row's statistics are recomputed
  (cheaper than saving them: the row is read anyway), ``dw`` and ``db`` summed in double per
  thread block and then over blocks; ``dx`` in PyTorch's formula and order
  (ops/_layer_norm_torch.py), its fused multiply-adds explicit ``fma`` calls.

Half precision (bfloat16, float16) is read and written in 16 bits and computed as float32 is
(kernels/chalf.py's conversions): the float32 kernel's arithmetic on the widened values, each
result rounded once, as the op's float32 kernel on widened copies would give.

Each returns None where it does not apply (no compiler, a dtype other than those above) and
the caller runs NumPy. Arrays are made C-contiguous first.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from . import chalf
from .cstep import data_address

__all__ = ["available", "gelu", "gelu_backward", "layer_norm", "layer_norm_backward"]

# a row's mean and 1 / sqrt(biased variance + eps), accumulated in double in two passes (the
# layer and group norm kernels' statistics; S and LD as their sources define them)
ROW_STATS = r"""
static inline void row_stats(const S *restrict x, long n, double eps, double *mean,
                             double *rstd) {
  double s = 0, q = 0;
#pragma omp simd reduction(+ : s)
  for (long i = 0; i < n; i++) s += (double)LD(x[i]);
  double m = s / (double)n;
#pragma omp simd reduction(+ : q)
  for (long i = 0; i < n; i++) {
    double d = (double)LD(x[i]) - m;
    q += d * d;
  }
  *mean = m;
  *rstd = 1.0 / sqrt(q / (double)n + eps);
}
"""

_SOURCE = (
    r"""
#include <math.h>
#include <stdlib.h>
#include <string.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
#ifndef HALF /* S: the storage type (T, or 16 bits that LD widens and ST rounds) */
#define HALF 0
#define S T
#define LD(v) (v)
#define ST(v) (v)
#endif
__attribute__((simd("notinbranch"))) T ERF(T);
__attribute__((simd("notinbranch"))) T EXP(T);
__attribute__((simd("notinbranch"))) T TANH(T);

#define CHUNK 4096L
#define SQRT1_2 ((T)0.70710678118654752440)
#define INV_SQRT_2PI ((T)0.39894228040143267794)
#define K_BETA ((T)0.79788456080286535588) /* sqrt(2 / pi) */
#define K_KAPPA ((T)0.044715)

struct act { const S *x, *g; S *y; long n; int tanh_form; };

static void gelu_part(void *job_, long lo, long hi) {
  const struct act *j = job_;
  long a = lo * CHUNK, b = hi * CHUNK < j->n ? hi * CHUNK : j->n;
  const S *x = j->x;
  S *y = j->y;
  if (j->tanh_form) {
#pragma omp simd
    for (long i = a; i < b; i++) {
      T v = LD(x[i]);
      T inner = K_BETA * (v + K_KAPPA * (v * v * v));
      y[i] = ST((T)0.5 * v * ((T)1 + TANH(inner)));
    }
  } else {
#pragma omp simd
    for (long i = a; i < b; i++) {
      T v = LD(x[i]);
      y[i] = ST(v * (T)0.5 * ((T)1 + ERF(v * SQRT1_2)));
    }
  }
}

static void gelu_grad_part(void *job_, long lo, long hi) {
  const struct act *j = job_;
  long a = lo * CHUNK, b = hi * CHUNK < j->n ? hi * CHUNK : j->n;
  const S *x = j->x, *g = j->g;
  S *y = j->y;
  if (j->tanh_form) {
#pragma omp simd
    for (long i = a; i < b; i++) {
      T v = LD(x[i]);
      T sq = v * v;
      T inner = K_BETA * (v + K_KAPPA * (sq * v));
      T t = TANH(inner);
      T left = (T)0.5 * v;
      T right = (T)1 + t;
      T left_d = (T)0.5 * right;
      T right_d = left * ((T)1 - t * t) * (K_BETA * ((T)1 + (T)3 * K_KAPPA * sq));
      y[i] = ST(LD(g[i]) * (left_d + right_d));
    }
  } else {
#pragma omp simd
    for (long i = a; i < b; i++) {
      T v = LD(x[i]);
      T cdf = (T)0.5 * ((T)1 + ERF(v * SQRT1_2));
      T pdf = EXP((T)-0.5 * (v * v)) * INV_SQRT_2PI;
      y[i] = ST(LD(g[i]) * (cdf + v * pdf));
    }
  }
}

static void run_chunks(ember_task task, struct act *j, ember_pool pool, long parallel_min) {
  long chunks = (j->n + CHUNK - 1) / CHUNK;
  if (pool && chunks > 1 && j->n >= parallel_min) pool(task, j, chunks, 1);
  else task(j, 0, chunks);
}

void ember_gelu(const S *x, S *y, long n, int tanh_form, ember_pool pool, long parallel_min) {
  struct act j = {x, 0, y, n, tanh_form};
  run_chunks(gelu_part, &j, pool, parallel_min);
}

void ember_gelu_backward(const S *x, const S *g, S *dx, long n, int tanh_form, ember_pool pool,
                         long parallel_min) {
  struct act j = {x, g, dx, n, tanh_form};
  run_chunks(gelu_grad_part, &j, pool, parallel_min);
}

/* ---- layer norm: rows of n values */

struct norm {
  const S *x, *w, *b, *g;
  S *y, *dw, *db;
  double *partial; /* per block: dw then db, 2n doubles */
  long rows, n, block;
  double eps;
};

"""
    + ROW_STATS
    + r"""
/* one row; restrict arguments so the loops vectorize (the struct's pointers might alias) */
static inline void norm_row(const S *restrict x, const S *restrict w, const S *restrict b,
                            S *restrict y, long n, double eps) {
  double m, rs;
  row_stats(x, n, eps, &m, &rs);
  T mean = (T)m, rstd = (T)rs;
#pragma omp simd
  for (long i = 0; i < n; i++) y[i] = ST((LD(x[i]) - mean) * rstd * LD(w[i]) + LD(b[i]));
}

static void norm_rows(void *job_, long lo, long hi) {
  const struct norm *j = job_;
  for (long r = lo; r < hi; r++)
    norm_row(j->x + r * j->n, j->w, j->b, j->y + r * j->n, j->n, j->eps);
}

void ember_layer_norm(const S *x, const S *w, const S *b, S *y, long rows, long n, double eps,
                      ember_pool pool, long parallel_min) {
  struct norm j = {x, w, b, 0, y, 0, 0, 0, rows, n, 0, eps};
  if (pool && rows > 1 && rows * n >= parallel_min) pool(norm_rows, &j, rows, 1);
  else norm_rows(&j, 0, rows);
}

/* the C graph runner's step (kernels/cstep.py): x, w, b, y, rows, n, eps's bits, the pool,
   parallel_min */
void ember_layer_norm_step(const long *a) {
  double eps;
  __builtin_memcpy(&eps, &a[6], sizeof eps);
  ember_layer_norm((const S *)a[0], (const S *)a[1], (const S *)a[2], (S *)a[3], a[4], a[5], eps,
                   (ember_pool)a[7], a[8]);
}

/* dx as PyTorch's CPU kernel computes it, a dy w + b x + c, its statistics and sums in its
   order and compute dtype (ops/_layer_norm_torch.py, the specification, says why): LANES is
   the vector width of its AVX2 kernels, fma_t its fused multiply-adds. */
#define LANES ((long)(sizeof(T) == 4 ? 8 : 4))
#define WIDTH (HALF ? 2 * LANES : LANES) /* values per load: 16 of a 16-bit type, two vectors */

static inline T fma_t(T a, T b, T c) {
  return sizeof(T) == 4 ? (T)fmaf((float)a, (float)b, (float)c) : (T)fma(a, b, c);
}

/* AddMomentsVec: the moments of count_add values per lane merged into count's */
static inline void merge_moments(long count_add, const T *m1a, const T *m2a, long *count, T *m1,
                                 T *m2) {
  long total = *count + count_add;
  T c = total == 0 ? (T)0 : (T)count_add / (T)total;
  for (long l = 0; l < LANES; l++) {
    T delta = m1a[l] - m1[l], m2_tmp = m2[l] + m2a[l], c_delta = c * delta;
    T count_delta = delta * (T)(*count);
    m1[l] = m1[l] + c_delta;
    m2[l] = fma_t(count_delta, c_delta, m2_tmp);
  }
  *count = total;
}

/* RowwiseMoments: Welford per lane over chunks of 16 vectors, merged pairwise, then the
   values past the last whole vector one by one, then each lane merged in */
static void torch_moments(const S *restrict x, long size, T *mean, T *var) {
  long n = size / WIDTH, m = (n + 15) / 16;
  int depth = m <= 2 ? 1 : 64 - __builtin_clzl((unsigned long)(m - 1));
  long counts[64];
  T m1s[64][8], m2s[64][8];
  for (int i = 0; i < depth; i++) {
    counts[i] = 0;
    for (long l = 0; l < LANES; l++) m1s[i][l] = m2s[i][l] = 0;
  }
  for (long i = 0; i < m; i++) {
    const S *xp = x + i * 16 * WIDTH;
    long count = n - i * 16 < 16 ? n - i * 16 : 16;
    T m1[16] = {0}, m2[16] = {0}; /* (16-bit: two float vectors' accumulators side by side) */
    for (long j = 0; j < count; j++) {
      T cj = (T)1 / (T)(j + 1);
      for (long l = 0; l < WIDTH; l++) {
        T v = LD(xp[j * WIDTH + l]), d = v - m1[l];
        m1[l] = fma_t(cj, d, m1[l]);
        m2[l] = fma_t(d, v - m1[l], m2[l]);
      }
    }
    for (long k = 0; k < WIDTH; k += LANES)
      merge_moments(count, m1 + k, m2 + k, &counts[0], m1s[0], m2s[0]);
    long mask = i + 1;
    for (int j = 1; j < depth && !(mask & 1); j++) {
      merge_moments(counts[j - 1], m1s[j - 1], m2s[j - 1], &counts[j], m1s[j], m2s[j]);
      counts[j - 1] = 0;
      for (long l = 0; l < LANES; l++) m1s[j - 1][l] = m2s[j - 1][l] = 0;
      mask >>= 1;
    }
  }
  for (int i = 1; i < depth; i++)
    merge_moments(counts[i], m1s[i], m2s[i], &counts[0], m1s[0], m2s[0]);
  long count = 0;
  T m1 = 0, m2 = 0;
  for (long i = n * WIDTH; i < size; i++) {
    T v = LD(x[i]), d = v - m1;
    count++;
    m1 = m1 + d / (T)count;
    m2 = fma_t(d, v - m1, m2);
  }
  long per_lane = n * WIDTH / LANES;
  for (long l = 0; l < LANES; l++) {
    long total = count + per_lane;
    T c = total == 0 ? (T)0 : (T)per_lane / (T)total, d = m1s[0][l] - m1;
    m1 = fma_t(c, d, m1);
    m2 = m2 + fma_t(d * d * c, (T)count, m2s[0][l]);
    count = total;
  }
  *mean = m1;
  *var = m2 / (T)size;
}

/* sum of g x w (x given) or g w: reduce_all's order, a lane's accumulator per position of
   the whole vectors, the rest into the first lanes, the lanes summed by halving; a row
   shorter than a vector in order */
static inline T torch_product(const S *g, const S *x, const S *w, long i) {
  T p = LD(g[i]);
  if (x) p = p * LD(x[i]);
  return p * LD(w[i]);
}

static inline T torch_halving(T *acc) {
  T t[8];
  for (long step = LANES / 2; step; step /= 2) {
    for (long l = 0; l < LANES; l++) t[l] = acc[l] + acc[l ^ step];
    for (long l = 0; l < LANES; l++) acc[l] = t[l];
  }
  return acc[0];
}

/* a 16-bit row: loads of 16 values as two float vectors, each its own accumulator, added
   together before the lanes are */
static T torch_sum_half(const S *restrict g, const S *restrict x, const S *restrict w, long n) {
  T acc0[8], acc1[8];
  if (n <= LANES) {
    T s = torch_product(g, x, w, 0);
    for (long k = 1; k < n; k++) s += torch_product(g, x, w, k);
    return s;
  }
  if (n < WIDTH) {
    for (long l = 0; l < LANES; l++) acc0[l] = torch_product(g, x, w, l);
    for (long l = 0; l < n - LANES; l++) acc0[l] += torch_product(g, x, w, LANES + l);
    T s = acc0[0];
    for (long l = 1; l < LANES; l++) s += acc0[l];
    return s;
  }
  for (long l = 0; l < LANES; l++) {
    acc0[l] = torch_product(g, x, w, l);
    acc1[l] = torch_product(g, x, w, LANES + l);
  }
  long whole = n - n % WIDTH, rest = n - whole;
  for (long d = WIDTH; d < whole; d += WIDTH)
    for (long l = 0; l < LANES; l++) {
      acc0[l] += torch_product(g, x, w, d + l);
      acc1[l] += torch_product(g, x, w, d + LANES + l);
    }
  if (rest > LANES) {
    for (long l = 0; l < LANES; l++) acc0[l] += torch_product(g, x, w, whole + l);
    for (long l = 0; l < rest - LANES; l++) acc1[l] += torch_product(g, x, w, whole + LANES + l);
  } else {
    for (long l = 0; l < rest; l++) acc0[l] += torch_product(g, x, w, whole + l);
  }
  for (long l = 0; l < LANES; l++) acc0[l] += acc1[l];
  return torch_halving(acc0);
}

static T torch_sum(const S *restrict g, const S *restrict x, const S *restrict w, long n) {
  if (HALF) return torch_sum_half(g, x, w, n);
  if (n < LANES) {
    T s = torch_product(g, x, w, 0);
    for (long k = 1; k < n; k++) s += torch_product(g, x, w, k);
    return s;
  }
  T acc[8];
  for (long l = 0; l < LANES; l++) acc[l] = torch_product(g, x, w, l);
  long whole = n - n % LANES;
  for (long d = LANES; d < whole; d += LANES)
    for (long l = 0; l < LANES; l++) acc[l] += torch_product(g, x, w, d + l);
  for (long l = 0; l < n - whole; l++) acc[l] += torch_product(g, x, w, whole + l);
  return torch_halving(acc);
}

/* ds = sum(g x w) and db = sum(g w) together (their lanes side by side) */
static void torch_sums(const S *restrict g, const S *restrict x, const S *restrict w, long n,
                       T *ds, T *db) {
  if (HALF || n < LANES) {
    *ds = torch_sum(g, x, w, n);
    *db = torch_sum(g, 0, w, n);
    return;
  }
  T as[8], ab[8];
  for (long l = 0; l < LANES; l++) {
    as[l] = LD(g[l]) * LD(x[l]) * LD(w[l]);
    ab[l] = LD(g[l]) * LD(w[l]);
  }
  long whole = n - n % LANES;
  for (long d = LANES; d < whole; d += LANES)
#pragma omp simd
    for (long l = 0; l < LANES; l++) {
      as[l] += LD(g[d + l]) * LD(x[d + l]) * LD(w[d + l]);
      ab[l] += LD(g[d + l]) * LD(w[d + l]);
    }
  for (long l = 0; l < n - whole; l++) {
    as[l] += LD(g[whole + l]) * LD(x[whole + l]) * LD(w[whole + l]);
    ab[l] += LD(g[whole + l]) * LD(w[whole + l]);
  }
  *ds = torch_halving(as);
  *db = torch_halving(ab);
}

/* one row: dx in PyTorch's formula; dw += g (a x - a mean) and db += g in double, xhat as
   PyTorch's dgamma reads it (a = rstd, both the saved statistics) */
static inline void norm_grad_row(const S *restrict x, const S *restrict g, const S *restrict w,
                                 S *restrict dx, double *restrict pw, double *restrict pb,
                                 long n, double eps) {
  T mean, var, ds, db;
  torch_moments(x, n, &mean, &var);
  T a = sizeof(T) == 4 ? (T)(1.0f / sqrtf((float)(var + (T)eps))) : (T)(1.0 / sqrt(var + (T)eps));
  if (HALF) { /* (saved in the 16-bit parameters' dtype, read back widened) */
    mean = LD(ST(mean));
    a = LD(ST(a));
  }
  torch_sums(g, x, w, n, &ds, &db);
  T scale = (T)1 / (T)n;
  T b = fma_t(db, mean, -ds) * a * a * a * scale;
  T c = fma_t(-b, mean, -(db * a * scale)), shift = -a * mean;
#pragma omp simd
  for (long i = 0; i < n; i++) {
    T xv = LD(x[i]), gv = LD(g[i]);
    dx[i] = ST(fma_t(b, xv, a * gv * LD(w[i])) + c);
    pw[i] += (double)(gv * fma_t(a, xv, shift));
    pb[i] += (double)gv;
  }
}

static void norm_grad_blocks(void *job_, long lo, long hi) {
  const struct norm *j = job_;
  long n = j->n;
  for (long blk = lo; blk < hi; blk++) {
    double *pw = j->partial + 2 * n * blk, *pb = pw + n;
    memset(pw, 0, sizeof(double) * 2 * n);
    long r_end = (blk + 1) * j->block < j->rows ? (blk + 1) * j->block : j->rows;
    for (long r = blk * j->block; r < r_end; r++)
      norm_grad_row(j->x + r * n, j->g + r * n, j->w, j->y + r * n, pw, pb, n, j->eps);
  }
}

int ember_layer_norm_backward(const S *x, const S *w, const S *g, S *dx, S *dw, S *db, long rows,
                              long n, double eps, long blocks, ember_pool pool) {
  double *partial = malloc(sizeof(double) * 2 * n * blocks);
  if (!partial) return 1;
  long block = (rows + blocks - 1) / blocks;
  struct norm j = {x, w, 0, g, dx, dw, db, partial, rows, n, block, eps};
  if (pool && blocks > 1) pool(norm_grad_blocks, &j, blocks, 1);
  else norm_grad_blocks(&j, 0, blocks);
  for (long i = 0; i < n; i++) {
    double sw = 0, sb = 0;
    for (long blk = 0; blk < blocks; blk++) {
      sw += partial[2 * n * blk + i];
      sb += partial[2 * n * blk + n + i];
    }
    dw[i] = ST((T)sw);
    db[i] = ST((T)sb);
  }
  free(partial);
  return 0;
}
"""
)

_TYPES = {
    np.dtype(np.float32): ("float", "erff", "expf", "tanhf"),
    np.dtype(np.float64): ("double", "erf", "exp", "tanh"),
}
# half precision: float arithmetic on 16-bit storage (kernels/chalf.py's conversions)
_TYPES.update(dict.fromkeys(chalf.NAMES, _TYPES[np.dtype(np.float32)]))
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fopenmp-simd", "-fno-math-errno")
_FLAGS += ("-fno-trapping-math", "-ffp-contract=off", "-std=gnu11")
_P, _L, _I, _D = ctypes.c_void_p, ctypes.c_long, ctypes.c_int, ctypes.c_double
_SIGNATURES = {
    "ember_gelu": [_P, _P, _L, _I, _P, _L],
    "ember_gelu_backward": [_P, _P, _P, _L, _I, _P, _L],
    "ember_layer_norm": [_P, _P, _P, _P, _L, _L, _D, _P, _L],
    "ember_layer_norm_backward": [_P, _P, _P, _P, _P, _P, _L, _L, _D, _L, _P],
    "ember_layer_norm_step": [_P],
}


@functools.cache
def _functions(dtype: np.dtype):
    """{symbol: function} for ``dtype`` plus the pool, or None (no compiler, a failed build)."""
    from . import ccompile, cpool

    if dtype not in _TYPES or not ccompile.compiler_available():
        return None
    c_type, erf, exp, tanh = _TYPES[dtype]
    source = f"#define T {c_type}\n#define ERF {erf}\n#define EXP {exp}\n#define TANH {tanh}\n"
    if dtype in chalf.NAMES:
        source = chalf.storage_defines(dtype) + source
    source += _SOURCE
    found = ccompile.load_with_vector_math(source, _SIGNATURES, flags=_FLAGS)
    if found is None:
        return None
    # (load declares no result: the backward's is 1 when its workspace is not allocated)
    found["ember_layer_norm_backward"].restype = ctypes.c_int
    return found, cpool.parallel_for()


def available(dtype) -> bool:
    """Whether the kernels run for arrays of ``dtype`` (a compiler is there, they built)."""
    return _functions(np.dtype(dtype)) is not None


_cfuse: list = []  # kernels/cfuse.py, imported at the first call (an import per call costs)


def _parallel_min() -> int:
    """The fused elementwise loops' threshold for threads (kernels/cfuse.py)."""
    if not _cfuse:
        from . import cfuse

        _cfuse.append(cfuse)
    return _cfuse[0].PARALLEL_MIN


def _prepare(*arrays):
    """The functions for the arrays' common dtype (or None) and the arrays, C-contiguous."""
    dtype = arrays[0].dtype
    if any(a.dtype != dtype for a in arrays):
        return None, arrays
    found = _functions(dtype)
    # (np.ascontiguousarray would make a 0-d array 1-d)
    return found, [a if a.flags.c_contiguous else np.ascontiguousarray(a) for a in arrays]


def gelu(x: np.ndarray, tanh_form: bool) -> np.ndarray | None:
    found, (x,) = _prepare(x)
    if found is None:
        return None
    fns, pool = found
    y = np.empty_like(x)
    fns["ember_gelu"](
        data_address(x), data_address(y), x.size, int(tanh_form), pool, _parallel_min()
    )
    return y


def gelu_backward(x: np.ndarray, g: np.ndarray, tanh_form: bool) -> np.ndarray | None:
    if x.shape != g.shape:
        return None
    found, (x, g) = _prepare(x, g)
    if found is None:
        return None
    fns, pool = found
    dx = np.empty_like(x)
    fns["ember_gelu_backward"](
        data_address(x),
        data_address(g),
        data_address(dx),
        x.size,
        int(tanh_form),
        pool,
        _parallel_min(),
    )
    return dx


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray | None:
    """Normalize ``x`` over its trailing ``w.size`` values (``w`` and ``b`` of that size)."""
    n = w.size
    if n == 0 or x.size == 0 or b.size != n:
        return None
    found, (x, w, b) = _prepare(x, w, b)
    if found is None:
        return None
    fns, pool = found
    y = np.empty_like(x)
    fns["ember_layer_norm"](
        data_address(x),
        data_address(w),
        data_address(b),
        data_address(y),
        x.size // n,
        n,
        float(eps),
        pool,
        _parallel_min(),
    )
    return y


def layer_norm_step(x, w, b, eps: float):
    """The C graph runner's step of ``layer_norm`` on operands of types ``x``, ``w``, ``b``
    (`kernels/cstep.py`), or None (a dtype without kernels, an empty operand)."""
    from .cstep import CStep, function_address

    dtype = x.dtype.np
    n = int(np.prod(w.shape, dtype=np.int64))
    size = int(np.prod(x.shape, dtype=np.int64))
    found = _functions(dtype) if all(t.dtype.np == dtype for t in (w, b)) else None
    if found is None or n == 0 or size == 0:
        return None
    fns, pool = found
    bits = int(np.array([eps], np.float64).view(np.int64)[0])
    args = np.array([0, 0, 0, 0, size // n, n, bits, pool or 0, _parallel_min()], np.int64)
    step = fns["ember_layer_norm_step"]
    slots = [(0, "in", 0), (1, "in", 1), (2, "in", 2), (3, "out", 0)]
    return CStep(function_address(step), args, slots, (fns,))


def layer_norm_backward(x: np.ndarray, w: np.ndarray, g: np.ndarray, eps: float):
    """``(dx, dw, db)`` of `layer_norm` for the output gradient ``g``, or None."""
    n = w.size
    if n == 0 or x.size == 0 or g.shape != x.shape:
        return None
    found, (x, w, g) = _prepare(x, w, g)
    if found is None:
        return None
    fns, pool = found
    from . import cpool

    rows = x.size // n
    # one block of rows per chunk the pool hands out (a few per thread), one when serial
    parallel = pool is not None and rows > 1 and x.size >= _parallel_min()
    blocks = min(rows, 4 * cpool.get_num_threads()) if parallel else 1
    dx = np.empty_like(x)
    dw = np.empty(w.shape, dtype=x.dtype)
    db = np.empty(w.shape, dtype=x.dtype)
    failed = fns["ember_layer_norm_backward"](
        data_address(x),
        data_address(w),
        data_address(g),
        data_address(dx),
        data_address(dw),
        data_address(db),
        rows,
        n,
        float(eps),
        blocks,
        pool if parallel else None,
    )
    return None if failed else (dx, dw, db)
