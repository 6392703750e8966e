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
  thread block and then over blocks. In float32 a row takes two passes (its four sums in
  double, then dx), in float64 four (see the C source).

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

from . import chalf, cpool
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

/* dx = rstd * (u - mean(u) - xhat * mean(u * xhat)), u = w * g; dw += g * xhat; db += g.
   In float, one pass gathers sum x, sum x^2, sum u and sum u x in double and a second writes
   dx (sum(u xhat) = rstd (sum u x - mean sum u)): a row of float32 values cancels in these
   double sums only when its mean exceeds its spread by some 1e8, far beyond float32's own
   precision, and rows are short enough that each pass's loop set-up and its sums' horizontal
   additions are much of a row's cost, so two passes instead of four are the saving. In
   double, where the same cancellation would cost a float64 result its digits, the statistics
   keep their two passes (centred squares). */
static inline void norm_grad_row(const S *restrict x, const S *restrict g, const S *restrict w,
                                 S *restrict dx, double *restrict pw, double *restrict pb,
                                 long n, double eps) {
  double inv_n = 1.0 / (double)n, m, rs, su = 0, sux = 0;
#if ONE_PASS_STATS
  double s = 0, q = 0;
#pragma omp simd reduction(+ : s, q, su, sux)
  for (long i = 0; i < n; i++) {
    double v = (double)LD(x[i]), u = (double)(LD(w[i]) * LD(g[i]));
    s += v;
    q += v * v;
    su += u;
    sux += u * v;
  }
  m = s * inv_n;
  double var = q * inv_n - m * m;
  rs = 1.0 / sqrt((var < 0 ? 0 : var) + eps); /* (rounding can make it negative) */
  sux = rs * (sux - m * su);
#else
  row_stats(x, n, eps, &m, &rs);
  {
    T mean = (T)m, rstd = (T)rs;
#pragma omp simd reduction(+ : su, sux)
    for (long i = 0; i < n; i++) {
      T u = LD(w[i]) * LD(g[i]);
      su += (double)u;
      sux += (double)(u * ((LD(x[i]) - mean) * rstd));
    }
  }
#endif
  T mean = (T)m, rstd = (T)rs;
  T mu = (T)(su * inv_n), mux = (T)(sux * inv_n);
#pragma omp simd
  for (long i = 0; i < n; i++) {
    T xhat = (LD(x[i]) - mean) * rstd;
    dx[i] = ST(rstd * ((LD(w[i]) * LD(g[i]) - mu) - xhat * mux));
    pw[i] += (double)(LD(g[i]) * xhat);
    pb[i] += (double)LD(g[i]);
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
    from . import ccompile

    if dtype not in _TYPES or not ccompile.compiler_available():
        return None
    c_type, erf, exp, tanh = _TYPES[dtype]
    source = f"#define T {c_type}\n#define ERF {erf}\n#define EXP {exp}\n#define TANH {tanh}\n"
    source += f"#define ONE_PASS_STATS {int(c_type == 'float')}\n"
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
