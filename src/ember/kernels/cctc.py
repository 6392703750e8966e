"""The CTC loss's alpha and beta recursions in C (ops/ctc.py's ``ctc_loss`` and
``ctc_loss_backward``), float64 as the NumPy kernels compute, the sequences over ember's pool.

The NumPy kernels run the recursions over the whole batch one time step at a time (a few NumPy
calls per step, each on an (N, L) slice): 2.9x PyTorch's time forward and 4.4x with the
gradient on a (50, 16, 20) batch. Here each sequence runs its own recursion over its own input
length and extended labels, in the NumPy kernels' operations: NumPy's ``logaddexp`` formula
(``x + log1p(exp(y - x))`` on the larger side, ``x + log 2`` where equal) with the C library's
``exp`` and ``log1p``, which NumPy's scalar ``logaddexp`` calls too, and the padded positions'
-inf (which the batched kernels read past a shorter sequence's end) read where they are, so the
losses are the NumPy kernel's bits. The gradient then sums ``exp(alpha + beta - max)`` over each
class's positions in position order, as the NumPy kernel's ``np.add.at`` does, but with the C
library's ``exp`` and ``log`` where NumPy's array functions may use their own vector versions:
within an ulp or two of each term.

Returns None where it does not apply (no compiler, a failed allocation) and the caller runs
NumPy.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from .cstep import data_address

__all__ = ["ctc_grad", "ctc_nll"]

_SOURCE = r"""
#include <math.h>
#include <stdlib.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);

#define LOGE2 0.693147180559945309417232121458176568

/* NumPy's npy_logaddexp */
static inline double lae(double x, double y) {
  if (x == y) return x + LOGE2;
  double tmp = x - y;
  if (tmp > 0) return x + log1p(exp(-tmp));
  if (tmp <= 0) return y + log1p(exp(tmp));
  return tmp;
}

struct job {
  const double *lp, *grad;
  long steps, n, classes, width;
  const long *ext, *sizes, *lengths;
  const unsigned char *skip;
  double *nll, *out;
  int zero_inf;
  int *failed;
};

#define EMIT(t, s) (j->lp[((t) * j->n + i) * j->classes + ext[s]])

/* alpha over t < len (rows of `size`), into `alpha` ((len, size), or two rows when `keep` is
   0); returns the negative log-likelihood */
static double alphas(const struct job *j, long i, double *alpha, int keep) {
  long len = j->lengths[i], size = j->sizes[i];
  const long *ext = j->ext + i * j->width;
  const unsigned char *skip = j->skip + i * j->width;
  if (len == 0) return size > 1 ? INFINITY : 0.0;
  double *prev = alpha, *cur;
  for (long s = 0; s < size; s++) prev[s] = -INFINITY;
  prev[0] = EMIT(0, 0);
  if (size > 1) prev[1] = EMIT(0, 1);
  for (long t = 1; t < len; t++) {
    cur = keep ? prev + size : (prev == alpha ? alpha + size : alpha);
    for (long s = 0; s < size; s++) {
      double v = prev[s];
      if (s >= 1) v = lae(prev[s], prev[s - 1]);
      if (s >= 2 && skip[s]) v = lae(v, prev[s - 2]);
      cur[s] = v + EMIT(t, s);
    }
    prev = cur;
  }
  double total = size == 1 ? prev[0] : lae(prev[size - 1], prev[size - 2]);
  return -total;
}

static void forward(void *job_, long lo, long hi) {
  const struct job *j = job_;
  double *rows = malloc(sizeof(double) * 2 * (j->width > 0 ? j->width : 1));
  if (!rows) {
    __atomic_store_n(j->failed, 1, __ATOMIC_RELAXED);
    return;
  }
  for (long i = lo; i < hi; i++) j->nll[i] = alphas(j, i, rows, 0);
  free(rows);
}

/* beta (PyTorch's, with the emission at t) over t < len, reading the padding's -inf one past
   the sequence's end where the batched kernel's rows go on */
static void betas(const struct job *j, long i, double *beta) {
  long len = j->lengths[i], size = j->sizes[i], width = j->width;
  const long *ext = j->ext + i * width;
  const unsigned char *skip = j->skip + i * width;
  double *last = beta + (len - 1) * size;
  for (long s = 0; s < size; s++) last[s] = -INFINITY;
  last[size - 1] = EMIT(len - 1, size - 1);
  if (size >= 2) last[size - 2] = EMIT(len - 1, size - 2);
  for (long t = len - 2; t >= 0; t--) {
    const double *nxt = beta + (t + 1) * size;
    double *cur = beta + t * size;
    for (long s = 0; s < size; s++) {
      double v = nxt[s];
      if (s + 1 < size) v = lae(nxt[s], nxt[s + 1]);
      else if (s + 1 < width) v = lae(nxt[s], -INFINITY);
      if (s + 2 < size && skip[s + 2]) v = lae(v, nxt[s + 2]);
      cur[s] = v + EMIT(t, s);
    }
  }
}

static void backward(void *job_, long lo, long hi) {
  const struct job *j = job_;
  long steps = j->steps, classes = j->classes, width = j->width;
  size_t rows = (size_t)(steps > 0 ? steps : 1) * (width > 0 ? width : 1);
  double *alpha = malloc(sizeof(double) * (2 * rows + 2 * classes));
  unsigned char *touched = malloc(classes > 0 ? classes : 1);
  if (!alpha || !touched) {
    free(alpha);
    free(touched);
    __atomic_store_n(j->failed, 1, __ATOMIC_RELAXED);
    return;
  }
  double *beta = alpha + rows, *top = beta + rows, *total = top + classes;
  for (long c = 0; c < classes; c++) touched[c] = 0; /* (reset after each step's use) */
  for (long i = lo; i < hi; i++) {
    long len = j->lengths[i], size = j->sizes[i];
    const long *ext = j->ext + i * width;
    double nll = alphas(j, i, alpha, 1);
    j->nll[i] = nll;
    int used = len > 0 && !(j->zero_inf && isinf(nll));
    for (long t = 0; t < steps; t++) {
      double *o = j->out + (t * j->n + i) * classes;
      if (!used || t >= len) {
        for (long c = 0; c < classes; c++) o[c] = 0.0;
      }
    }
    if (!used) continue;
    betas(j, i, beta);
    double g = j->grad[i];
    for (long t = 0; t < len; t++) {
      const double *a = alpha + t * size, *b = beta + t * size;
      const double *lp = j->lp + (t * j->n + i) * classes;
      double *o = j->out + (t * j->n + i) * classes;
      for (long s = 0; s < size; s++) {
        top[ext[s]] = -INFINITY;
        total[ext[s]] = 0.0;
        touched[ext[s]] = 0;
      }
      for (long s = 0; s < size; s++) { /* (np.maximum.at: NaN propagates) */
        double v = a[s] + b[s], *m = top + ext[s];
        if (v > *m || v != v) *m = v;
        touched[ext[s]] = 1;
      }
      for (long s = 0; s < size; s++) {
        double m = top[ext[s]];
        double shift = isfinite(m) ? m : 0.0;
        total[ext[s]] += exp((a[s] + b[s]) - shift);
      }
      for (long c = 0; c < classes; c++) {
        double lcab = -INFINITY;
        if (touched[c]) {
          double shift = isfinite(top[c]) ? top[c] : 0.0;
          lcab = log(total[c]) + shift;
        }
        o[c] = (exp(lp[c]) - exp(lcab + nll - lp[c])) * g;
      }
      for (long s = 0; s < size; s++) touched[ext[s]] = 0;
    }
  }
  free(alpha);
  free(touched);
}

int ember_ctc(const double *lp, const double *grad, long steps, long n, long classes,
              const long *ext, const unsigned char *skip, long width, const long *sizes,
              const long *lengths, int zero_inf, double *nll, double *out, ember_pool pool) {
  int failed = 0;
  struct job j = {lp, grad, steps, n, classes, width, ext, sizes, lengths, skip, nll, out,
                  zero_inf, &failed};
  ember_task task = out ? backward : forward;
  if (pool && n > 1) pool(task, &j, n, 1);
  else task(&j, 0, n);
  return failed;
}
"""

_FLAGS = ("-O2", "-fPIC", "-shared", "-ffp-contract=off", "-std=gnu11")
_P, _L, _I = ctypes.c_void_p, ctypes.c_long, ctypes.c_int


@functools.cache
def _function():
    from . import ccompile, cpool

    if not ccompile.compiler_available() or ctypes.sizeof(ctypes.c_long) != 8:
        return None
    args = [_P, _P, _L, _L, _L, _P, _P, _L, _P, _P, _I, _P, _P, _P]
    try:
        fn = ccompile.load(_SOURCE, "ember_ctc", args, flags=_FLAGS)
    except ccompile.CompileError:
        return None
    fn.restype = ctypes.c_int
    return fn, cpool.parallel_for()


def _run(lp, grad, ext, skip, sizes, lengths, zero_inf: bool, with_grad: bool):
    found = _function()
    if found is None:
        return None
    fn, pool = found
    steps, n, classes = lp.shape
    lp = np.ascontiguousarray(lp, np.float64)
    ext = np.ascontiguousarray(ext, np.int64)
    skip = np.ascontiguousarray(skip, np.uint8)
    sizes = np.ascontiguousarray(sizes, np.int64)
    lengths = np.ascontiguousarray(lengths, np.int64)
    nll = np.empty(n, np.float64)
    out = np.empty(lp.shape, np.float64) if with_grad else None
    grad = np.ascontiguousarray(grad, np.float64) if with_grad else None
    failed = fn(data_address(lp), None if grad is None else data_address(grad), steps, n,
                classes, data_address(ext), data_address(skip), ext.shape[1],
                data_address(sizes), data_address(lengths), int(zero_inf), data_address(nll),
                None if out is None else data_address(out), pool)  # fmt: skip
    if failed:
        return None
    return (nll, out) if with_grad else nll


def ctc_nll(lp, ext, skip, sizes, lengths) -> np.ndarray | None:
    """Each sequence's negative log-likelihood (float64), from the log-probabilities ``lp``
    (T, N, C), the extended labels ``ext`` and where they may skip ``skip`` (N, L), their
    sizes and the input lengths (N,); or None."""
    return _run(lp, None, ext, skip, sizes, lengths, False, False)


def ctc_grad(grad, lp, ext, skip, sizes, lengths, zero_inf: bool):
    """(the losses, the gradient (T, N, C) with respect to ``lp``), float64, given the losses'
    gradient ``grad`` (N,); or None."""
    return _run(lp, grad, ext, skip, sizes, lengths, zero_inf, True)
