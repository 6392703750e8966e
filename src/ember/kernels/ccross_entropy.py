"""Cross-entropy with class-index targets in C: log-softmax, the target's pick, label smoothing,
class weights, ignore_index and the reduction in one pass over the logits forward, and
``g * (softmax - the target's distribution)`` in one row pass backward.

The logits are viewed as (N, C, S): N leading positions, C classes, S trailing positions (1
for (N, C) logits; H*W for (N, C, H, W)). Each position i = (n, s) with target t_i (an int64)
is kept unless t_i equals ``ignore``; with class weights w (all 1 without), label smoothing e
and lse_i = log sum_c exp(x_ic):

* loss_i = (1 - e) w[t_i] (lse_i - x_it) + e / C * sum_c w_c (lse_i - x_ic), 0 where ignored;
* the kept weight wt_i = w[t_i] (0 where ignored), whose total divides a 'mean';
* dx_ic = s_i ((1 - e) wt_i (p_ic - [c = t_i]) + e / C (p_ic sum_c w_c - w_c)), with
  p = softmax(x) and s_i the incoming gradient's scale at i, 0 where ignored (so an ignored
  row's gradient is 0 * p: NaN where its logits hold a NaN or an infinity, as PyTorch's).

Sums over a row and the totals are accumulated in double; ``exp`` is the vector math library's
where it is installed (a few ulps from NumPy's). The functions return None where they do not
apply (no compiler, a dtype other than float32/float64, a target out of range: the NumPy
kernel, ops/cross_entropy.py's specification, then runs and raises). Arrays are made
C-contiguous first.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from .cstep import data_address

__all__ = ["available", "forward", "backward"]

_SOURCE = r"""
#include <math.h>
#include <stdlib.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
__attribute__((simd("notinbranch"))) T EXP(T);

struct job {
  const T *x, *w, *g;
  const long *t;
  T *out; /* forward: per-position losses (or NULL); backward: dx */
  double *totals; /* forward: per block, the loss total then the weight total */
  long n, c, s, ignore, block;
  double e, wsum, scale;
  int g_per_position, failed;
};

/* the kept weight of target t (0 when ignored), or -1 for a target out of range */
static inline double kept_weight(const struct job *j, long t) {
  if (t == j->ignore) return 0;
  if (t < 0 || t >= j->c) return -1;
  return j->w ? (double)j->w[t] : 1.0;
}

/* the largest value, ignoring NaNs: a NaN still reaches the sum of exponentials (as an
   infinity does, through inf - inf), so the result is the reference's NaN */
static inline T row_max(const T *restrict x, long c) {
  T m = -INFINITY;
#pragma omp simd reduction(max : m)
  for (long k = 0; k < c; k++) m = x[k] > m ? x[k] : m;
  return m;
}

/* (N, C) rows: row i's loss */
static double row_loss(const struct job *j, const T *restrict x, long t, double wt) {
  long c = j->c;
  T m = row_max(x, c);
  T acc = 0;
#pragma omp simd reduction(+ : acc)
  for (long k = 0; k < c; k++) acc += EXP(x[k] - m);
  double lse = (double)m + log((double)acc);
  double loss = (1 - j->e) * wt * (lse - (double)x[t]);
  if (j->e != 0) {
    double sw = 0;
    if (j->w) {
#pragma omp simd reduction(+ : sw)
      for (long k = 0; k < c; k++) sw += (double)j->w[k] * (double)x[k];
    } else {
#pragma omp simd reduction(+ : sw)
      for (long k = 0; k < c; k++) sw += (double)x[k];
    }
    loss += j->e / (double)c * (j->wsum * lse - sw);
  }
  return loss;
}

static void forward_rows(void *job_, long lo, long hi) {
  struct job *j = job_;
  for (long blk = lo; blk < hi; blk++) {
    double tl = 0, tw = 0;
    long end = (blk + 1) * j->block < j->n ? (blk + 1) * j->block : j->n;
    for (long i = blk * j->block; i < end; i++) {
      double wt = kept_weight(j, j->t[i]), loss = 0;
      if (wt < 0) {
        j->failed = 1;
        return;
      }
      if (j->t[i] != j->ignore) loss = row_loss(j, j->x + i * j->c, j->t[i], wt);
      if (j->out) j->out[i] = (T)loss;
      tl += loss;
      tw += wt;
    }
    j->totals[2 * blk] = tl;
    j->totals[2 * blk + 1] = tw;
  }
}

static void backward_rows(void *job_, long lo, long hi) {
  struct job *j = job_;
  long c = j->c;
  for (long i = lo; i < hi; i++) {
    const T *restrict x = j->x + i * c;
    T *restrict dx = j->out + i * c;
    long t = j->t[i];
    double wt = kept_weight(j, t);
    if (wt < 0) {
      j->failed = 1;
      return;
    }
    /* an ignored row's gradient is 0 * p (NaN where p is: PyTorch's log_softmax backward) */
    int kept = t != j->ignore;
    double s = !kept ? 0 : j->g_per_position ? (double)j->g[i] : j->scale;
    T m = row_max(x, c);
    T acc = 0;
#pragma omp simd reduction(+ : acc)
    for (long k = 0; k < c; k++) {
      T v = EXP(x[k] - m);
      dx[k] = v;
      acc += v;
    }
    double a = (1 - j->e) * wt, b = j->e / (double)c;
    /* dx = p (a + b sum w) s - a s [k = t] - b s w_k */
    T pk = (T)((a + b * j->wsum) * s / (double)acc), bs = (T)(b * s);
    if (j->w && b != 0) {
#pragma omp simd
      for (long k = 0; k < c; k++) dx[k] = dx[k] * pk - bs * j->w[k];
    } else {
#pragma omp simd
      for (long k = 0; k < c; k++) dx[k] = dx[k] * pk - bs;
    }
    if (kept) dx[t] -= (T)(a * s);
  }
}

/* (N, C, S) with S > 1: the classes of one n are S apart; work vectorizes along s */
static void forward_planes(void *job_, long lo, long hi) {
  struct job *j = job_;
  long c = j->c, S = j->s;
  T *mx = malloc(sizeof(T) * 2 * S), *acc = mx + S;
  double *sw = malloc(sizeof(double) * S);
  if (!mx || !sw) {
    j->failed = 1;
    free(mx);
    free(sw);
    return;
  }
  for (long n = lo; n < hi; n++) {
    const T *x = j->x + n * c * S;
    const long *t = j->t + n * S;
    for (long s = 0; s < S; s++) mx[s] = x[s], acc[s] = 0, sw[s] = 0;
    for (long k = 1; k < c; k++)
      for (long s = 0; s < S; s++) {
        T v = x[k * S + s];
        mx[s] = v > mx[s] ? v : mx[s];
      }
    for (long k = 0; k < c; k++) {
      const T *restrict xk = x + k * S;
      T *restrict a = acc;
      const T *restrict m = mx;
#pragma omp simd
      for (long s = 0; s < S; s++) a[s] += EXP(xk[s] - m[s]);
      if (j->e != 0) {
        double wk = j->w ? (double)j->w[k] : 1.0;
        for (long s = 0; s < S; s++) sw[s] += wk * (double)xk[s];
      }
    }
    double tl = 0, tw = 0;
    for (long s = 0; s < S; s++) {
      long ti = t[s];
      double wt = kept_weight(j, ti), loss = 0;
      if (wt < 0) {
        j->failed = 1;
        break;
      }
      if (ti != j->ignore) {
        double lse = (double)mx[s] + log((double)acc[s]);
        loss = (1 - j->e) * wt * (lse - (double)x[ti * S + s]);
        if (j->e != 0) loss += j->e / (double)c * (j->wsum * lse - sw[s]);
      }
      if (j->out) j->out[n * S + s] = (T)loss;
      tl += loss;
      tw += wt;
    }
    j->totals[2 * n] = tl;
    j->totals[2 * n + 1] = tw;
  }
  free(mx);
  free(sw);
}

static void backward_planes(void *job_, long lo, long hi) {
  struct job *j = job_;
  long c = j->c, S = j->s;
  T *mx = malloc(sizeof(T) * 2 * S), *acc = mx + S;
  if (!mx) {
    j->failed = 1;
    return;
  }
  for (long n = lo; n < hi; n++) {
    const T *x = j->x + n * c * S;
    T *dx = j->out + n * c * S;
    const long *t = j->t + n * S;
    for (long s = 0; s < S; s++) mx[s] = x[s], acc[s] = 0;
    for (long k = 1; k < c; k++)
      for (long s = 0; s < S; s++) {
        T v = x[k * S + s];
        mx[s] = v > mx[s] ? v : mx[s];
      }
    for (long k = 0; k < c; k++) {
      const T *restrict xk = x + k * S;
      T *restrict dk = dx + k * S, *restrict a = acc;
      const T *restrict m = mx;
#pragma omp simd
      for (long s = 0; s < S; s++) {
        T v = EXP(xk[s] - m[s]);
        dk[s] = v;
        a[s] += v;
      }
    }
    double b = j->e / (double)c;
    for (long s = 0; s < S; s++) {
      long ti = t[s];
      double wt = kept_weight(j, ti);
      if (wt < 0) {
        j->failed = 1;
        break;
      }
      double sc = ti == j->ignore ? 0 : (j->g_per_position ? (double)j->g[n * S + s] : j->scale);
      double a = (1 - j->e) * wt;
      /* reuse the row of sums as this position's factor on p */
      acc[s] = (T)((a + b * j->wsum) * sc / (double)acc[s]);
      mx[s] = (T)(b * sc);
    }
    for (long k = 0; k < c; k++) {
      T *restrict dk = dx + k * S;
      const T *restrict f = acc, *restrict bs = mx;
      T wk = j->w ? j->w[k] : (T)1;
#pragma omp simd
      for (long s = 0; s < S; s++) dk[s] = dk[s] * f[s] - bs[s] * wk;
    }
    for (long s = 0; s < S; s++) {
      long ti = t[s];
      if (ti == j->ignore) continue;
      double sc = j->g_per_position ? (double)j->g[n * S + s] : j->scale;
      dx[ti * S + s] -= (T)((1 - j->e) * kept_weight(j, ti) * sc);
    }
  }
  free(mx);
}

static void run(ember_task task, struct job *j, long tasks, ember_pool pool, int parallel) {
  if (pool && parallel && tasks > 1) pool(task, j, tasks, 1);
  else task(j, 0, tasks);
}

int ember_ce_forward(const T *x, const long *t, const T *w, T *out, double *totals, long n,
                     long c, long s, long ignore, double e, double wsum, long blocks,
                     ember_pool pool, int parallel) {
  struct job j = {x, w, 0, t, out, totals, n, c, s, ignore, 0, e, wsum, 0, 0, 0};
  if (s == 1) {
    j.block = (n + blocks - 1) / blocks;
    run(forward_rows, &j, blocks, pool, parallel);
  } else {
    run(forward_planes, &j, n, pool, parallel);
  }
  return j.failed;
}

int ember_ce_backward(const T *x, const long *t, const T *w, const T *g, T *dx, long n, long c,
                      long s, long ignore, double e, double wsum, double scale,
                      int g_per_position, ember_pool pool, int parallel) {
  struct job j = {x, w, g, t, dx, 0, n, c, s, ignore, 0, e, wsum, scale, g_per_position, 0};
  run(s == 1 ? backward_rows : backward_planes, &j, n, pool, parallel);
  return j.failed;
}
"""

_TYPES = {np.dtype(np.float32): ("float", "expf"), np.dtype(np.float64): ("double", "exp")}
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fopenmp-simd", "-fno-math-errno")
_FLAGS += ("-fno-trapping-math", "-ffp-contract=off", "-std=gnu11")
_P, _L, _I, _D = ctypes.c_void_p, ctypes.c_long, ctypes.c_int, ctypes.c_double
_SIGNATURES = {
    "ember_ce_forward": [_P, _P, _P, _P, _P, _L, _L, _L, _L, _D, _D, _L, _P, _I],
    "ember_ce_backward": [_P, _P, _P, _P, _P, _L, _L, _L, _L, _D, _D, _D, _I, _P, _I],
}


@functools.cache
def _functions(dtype: np.dtype):
    """{symbol: function} for ``dtype`` plus the pool, or None (no compiler, a failed build)."""
    from . import ccompile, cpool

    if dtype not in _TYPES or not ccompile.compiler_available():
        return None
    c_type, exp = _TYPES[dtype]
    source = f"#define T {c_type}\n#define EXP {exp}\n" + _SOURCE
    # (these return 1 when they decline)
    found = ccompile.load_with_vector_math(source, _SIGNATURES, flags=_FLAGS, restype=ctypes.c_int)
    return None if found is None else (found, cpool.parallel_for())


def available(dtype) -> bool:
    """Whether the kernels run for logits of ``dtype`` (a compiler is there, they built)."""
    return _functions(np.dtype(dtype)) is not None


def _layout(x: np.ndarray, t: np.ndarray):
    """(N, C, S) of logits ``x`` ((C,) or (N, C, ...)) whose targets are ``t``, or None."""
    if x.ndim == 0 or x.size == 0:
        return None
    c = x.shape[0 if x.ndim == 1 else 1]
    n = 1 if x.ndim == 1 else x.shape[0]
    s = x.size // (n * c)
    return (n, c, s) if t.size == n * s else None


def _prepare(x, t, weight):
    found = _functions(x.dtype)
    layout = _layout(x, t)
    if found is None or layout is None or (weight is not None and weight.dtype != x.dtype):
        return None
    x = x if x.flags.c_contiguous else np.ascontiguousarray(x)
    t = np.ascontiguousarray(t.reshape(-1), dtype=np.int64)
    if weight is not None:
        weight = np.ascontiguousarray(weight)
        if weight.shape != (layout[1],):
            return None
    return found, layout, x, t, weight


@functools.cache
def _parallel_min() -> int:
    from .cfuse import PARALLEL_MIN  # the fused elementwise loops' threshold for threads

    return PARALLEL_MIN


def _parallel(x: np.ndarray) -> bool:
    return x.size >= _parallel_min()


def _blocks(parallel: bool, rows: int) -> int:
    """Row blocks of a forward: a few per thread (each sums its own totals), one when serial."""
    if not parallel:
        return 1
    from . import cpool

    return min(rows, 4 * cpool.get_num_threads())


def _weight_sum(weight, c: int) -> float:
    return float(c) if weight is None else float(weight.astype(np.float64).sum())


def forward(x, t, weight, ignore: int, smoothing: float, per_position: bool):
    """``(losses, loss total, weight total)``: the per-position losses shaped like ``t`` (None
    unless ``per_position``) and the totals as Python floats; or None."""
    t_shape = t.shape
    prepared = _prepare(x, t, weight)
    if prepared is None:
        return None
    (fns, pool), (n, c, s), x, t, weight = prepared
    parallel = pool is not None and _parallel(x)
    blocks = _blocks(parallel, n) if s == 1 else n
    totals = np.zeros(2 * blocks)
    out = np.empty(t_shape, dtype=x.dtype) if per_position else None
    failed = fns["ember_ce_forward"](
        data_address(x),
        data_address(t),
        None if weight is None else data_address(weight),
        None if out is None else data_address(out),
        data_address(totals),
        n * s if s == 1 else n,
        c,
        s,
        int(ignore),
        float(smoothing),
        _weight_sum(weight, c),
        blocks,
        pool,
        int(parallel),
    )
    if failed:
        return None
    if blocks == 1:  # (one block's totals: what the sums over blocks would give)
        return out, float(totals[0]), float(totals[1])
    return out, float(totals[0::2].sum()), float(totals[1::2].sum())


def backward(x, t, weight, g, ignore: int, smoothing: float, scale: float | None):
    """dx for the incoming gradient: per position ``g`` (shaped like ``t``) when ``scale`` is
    None, else the one factor ``scale`` for every position; or None."""
    prepared = _prepare(x, t, weight)
    if prepared is None:
        return None
    (fns, pool), (n, c, s), x, t, weight = prepared
    if scale is None:
        if g.size != t.size or g.dtype != x.dtype:
            return None
        g = np.ascontiguousarray(g.reshape(-1))
    dx = np.empty_like(x)
    failed = fns["ember_ce_backward"](
        data_address(x),
        data_address(t),
        None if weight is None else data_address(weight),
        None if scale is not None else data_address(g),
        data_address(dx),
        n * s if s == 1 else n,
        c,
        s,
        int(ignore),
        float(smoothing),
        _weight_sum(weight, c),
        0.0 if scale is None else float(scale),
        int(scale is None),
        pool,
        int(pool is not None and _parallel(x)),
    )
    return None if failed else dx
