"""Optimizer steps in C: one call updates every parameter of a group (PyTorch's foreach / fused
paths do the same), instead of eight to twelve NumPy passes and op dispatches per parameter.

`adam(...)` and `sgd(...)` take lists of C-contiguous arrays of one dtype (float32 or float64)
and the group's hyper-parameters as Python floats, and update the parameters and state buffers
in place. The arithmetic is the eager update's (optim/adam.py, optim/sgd.py: PyTorch's
single-tensor formulas) operation for operation, each hyper-parameter rounded to the arrays'
dtype as the eager ops round a Python scalar, compiled with ``-ffp-contract=off`` (Adam's
float32 second moment fused explicitly, as PyTorch's addcmul_): the result equals the
per-tensor NumPy path bit for bit (``sqrt`` is correctly rounded, ``FMA`` the compiler's
fused multiply-add, rounded once, as ops/add_alpha.py's kernel; nothing else here calls the
math library).

Work is split in chunks of the parameters' concatenated elements, shared over ember's pool when
there are enough of them. Each returns False where it does not apply (no compiler, another
dtype) and the caller runs the per-tensor update.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from .cstep import data_address

__all__ = ["adam", "sgd"]

_SOURCE = r"""
#include <math.h>
#include <stdlib.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);

#define CHUNK 4096L

/* chunk k of the concatenated elements: parameter `which`, elements [lo, hi) of it */
struct span { long which, lo, hi; };

static long spans(long count, const long *sizes, struct span **out) {
  long total = 0;
  for (long i = 0; i < count; i++) total += (sizes[i] + CHUNK - 1) / CHUNK;
  struct span *s = malloc(sizeof(struct span) * (total ? total : 1));
  if (!s) return -1;
  long k = 0;
  for (long i = 0; i < count; i++)
    for (long lo = 0; lo < sizes[i]; lo += CHUNK) {
      s[k].which = i;
      s[k].lo = lo;
      s[k].hi = lo + CHUNK < sizes[i] ? lo + CHUNK : sizes[i];
      k++;
    }
  *out = s;
  return total;
}

struct adam_job {
  T **p, **g, **m, **v, **vmax;
  const double *step_size, *bc2_sqrt;
  struct span *s;
  double lr_wd, wd, w1, w1_far, beta2, one_minus_beta2, eps;
  int decayed, decoupled, near_start, amsgrad, maximize;
};

/* one span of one parameter; the arrays as restrict arguments so the loop vectorizes */
#define INLINE static inline __attribute__((always_inline))
INLINE void adam_span(T *restrict p, const T *restrict g, T *restrict m, T *restrict v,
                             T *restrict vmax, long a, long b, T lr_wd, T wd, T w1, T w1_far,
                             T beta2, T omb2, T eps, T step_size, T bc2, int maximize,
                             int decayed, int decoupled, int near_start, int amsgrad) {
#pragma omp simd
  for (long i = a; i < b; i++) {
    T gi = maximize ? -g[i] : g[i];
    T pi = p[i];
    if (decayed) {
      if (decoupled) pi = pi * lr_wd;
      else gi = FMA(pi, wd, gi);
    }
    /* PyTorch's lerp_: fma(w, g - m, m), or fma(w - 1, g - m, g) (w1_far: w - 1) */
    T mi = m[i];
    mi = near_start ? FMA(gi - mi, w1, mi) : FMA(gi - mi, w1_far, gi);
    T vi = v[i] * beta2;
    vi = ADDCMUL(vi, omb2 * gi, gi);
    T second = vi;
    if (amsgrad) {
      T old = vmax[i];
      second = (old != old) ? old : ((vi != vi) ? vi : (old > vi ? old : vi));
      vmax[i] = second;
    }
    T denom = SQRT(second) / bc2 + eps;
    p[i] = pi + (-step_size * mi) / denom; /* PyTorch's addcdiv_(m, denom, value=-step) */
    m[i] = mi;
    v[i] = vi;
  }
}

static void adam_part(void *job_, long lo, long hi) {
  const struct adam_job *j = job_;
  for (long k = lo; k < hi; k++) {
    long which = j->s[k].which;
    /* amsgrad as a constant in each inlined copy: a store under a run-time condition
       keeps GCC from vectorizing the loop */
#define ADAM_SPAN(AMSGRAD, VMAX)                                                              \
  adam_span(j->p[which], j->g[which], j->m[which], j->v[which], VMAX, j->s[k].lo, j->s[k].hi, \
            (T)j->lr_wd, (T)j->wd, (T)j->w1, (T)j->w1_far, (T)j->beta2, (T)j->one_minus_beta2, \
            (T)j->eps, (T)j->step_size[which], (T)j->bc2_sqrt[which], j->maximize, j->decayed, \
            j->decoupled, j->near_start, AMSGRAD)
    if (j->amsgrad) ADAM_SPAN(1, j->vmax[which]);
    else ADAM_SPAN(0, 0);
  }
}

int ember_adam(long count, T **p, T **g, T **m, T **v, T **vmax, const long *sizes,
               const double *step_size, const double *bc2_sqrt, double lr_wd, double wd,
               double w1, double w1_far, double beta2, double one_minus_beta2, double eps,
               int decayed, int decoupled, int near_start, int amsgrad, int maximize,
               ember_pool pool, long parallel_min) {
  struct span *s;
  long n = spans(count, sizes, &s);
  if (n < 0) return 1;
  struct adam_job j = {p, g, m, v, vmax, step_size, bc2_sqrt, s, lr_wd, wd, w1, w1_far, beta2,
                       one_minus_beta2, eps, decayed, decoupled, near_start, amsgrad, maximize};
  long total = 0;
  for (long i = 0; i < count; i++) total += sizes[i];
  if (pool && n > 1 && total >= parallel_min) pool(adam_part, &j, n, 1);
  else adam_part(&j, 0, n);
  free(s);
  return 0;
}

struct sgd_job {
  T **p, **g, **buf;
  const int *fresh;
  struct span *s;
  double lr, momentum, damp, wd;
  int use_momentum, damped, decayed, nesterov, maximize;
};

INLINE void sgd_span(T *restrict p, const T *restrict g, T *restrict buf, long a,
                            long b, T lr, T mom, T damp, T wd, int fresh, int maximize,
                            int decayed, int use_momentum, int damped, int nesterov) {
#pragma omp simd
  for (long i = a; i < b; i++) {
    T gi = maximize ? -g[i] : g[i];
    T pi = p[i];
    /* PyTorch's add(alpha=): one fused multiply-add each (optim/sgd.py) */
    if (decayed) gi = FMA(pi, wd, gi);
    if (use_momentum) {
      T bi;
      if (fresh) bi = gi;
      else {
        bi = buf[i] * mom;
        bi = damped ? FMA(gi, damp, bi) : bi + gi;
      }
      buf[i] = bi;
      gi = nesterov ? FMA(bi, mom, gi) : bi;
    }
    p[i] = FMA(gi, -lr, pi);
  }
}

static void sgd_part(void *job_, long lo, long hi) {
  const struct sgd_job *j = job_;
  for (long k = lo; k < hi; k++) {
    long which = j->s[k].which;
    /* the buffer's use as constants in each inlined copy (see adam_part) */
#define SGD_SPAN(BUF, FRESH, MOMENTUM)                                                     \
  sgd_span(j->p[which], j->g[which], BUF, j->s[k].lo, j->s[k].hi, (T)j->lr, (T)j->momentum, \
           (T)j->damp, (T)j->wd, FRESH, j->maximize, j->decayed, MOMENTUM, j->damped,       \
           j->nesterov)
    if (!j->use_momentum) SGD_SPAN(0, 0, 0);
    else if (j->fresh[which]) SGD_SPAN(j->buf[which], 1, 1);
    else SGD_SPAN(j->buf[which], 0, 1);
  }
}

int ember_sgd(long count, T **p, T **g, T **buf, const int *fresh, const long *sizes, double lr,
              double momentum, double damp, double wd, int use_momentum, int damped,
              int decayed, int nesterov, int maximize, ember_pool pool, long parallel_min) {
  struct span *s;
  long n = spans(count, sizes, &s);
  if (n < 0) return 1;
  struct sgd_job j = {p, g, buf, fresh, s, lr, momentum, damp, wd,
                      use_momentum, damped, decayed, nesterov, maximize};
  long total = 0;
  for (long i = 0; i < count; i++) total += sizes[i];
  if (pool && n > 1 && total >= parallel_min) pool(sgd_part, &j, n, 1);
  else sgd_part(&j, 0, n);
  free(s);
  return 0;
}
"""

_TYPES = {
    np.dtype(np.float32): ("float", "sqrtf", "__builtin_fmaf"),
    np.dtype(np.float64): ("double", "sqrt", "__builtin_fma"),
}
# Adam's second moment, ``v + (c g) g``: PyTorch's addcmul_ fuses it (fma(c g, g, v)), which
# the per-tensor ops reproduce in float32 only (optim/_common.py `addcmul_fused_`: float64 has
# no wider type to sum in), so float64 rounds the product first in both
_ADDCMUL = {
    np.dtype(np.float32): "#define ADDCMUL(v, a, b) __builtin_fmaf(a, b, v)\n",
    np.dtype(np.float64): "#define ADDCMUL(v, a, b) ((v) + (a) * (b))\n",
}
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fopenmp-simd", "-fno-math-errno")
_FLAGS += ("-fno-trapping-math", "-ffp-contract=off", "-std=gnu11")
_P, _L, _I, _D = ctypes.c_void_p, ctypes.c_long, ctypes.c_int, ctypes.c_double
_SIGNATURES = {
    "ember_adam": [_L] + [_P] * 8 + [_D] * 7 + [_I] * 5 + [_P, _L],
    "ember_sgd": [_L] + [_P] * 5 + [_D] * 4 + [_I] * 5 + [_P, _L],
}


@functools.cache
def _functions(dtype: np.dtype):
    """({symbol: function}, the pool) for ``dtype``, or None (no compiler, a failed build)."""
    from . import ccompile, cpool

    if dtype not in _TYPES or not ccompile.compiler_available():
        return None
    c_type, sqrt, fma = _TYPES[dtype]
    source = f"#define T {c_type}\n#define SQRT {sqrt}\n#define FMA {fma}\n" + _ADDCMUL[dtype]
    source += _SOURCE
    try:
        found = {
            name: ccompile.load(source, name, args, flags=_FLAGS + ("-lm",))
            for name, args in _SIGNATURES.items()
        }
    except ccompile.CompileError:
        return None
    return found, cpool.parallel_for()


def _parallel_min() -> int:
    from .cfuse import PARALLEL_MIN  # the fused elementwise loops' threshold for threads

    return PARALLEL_MIN


def _addresses(arrays) -> np.ndarray:
    return np.array([data_address(a) for a in arrays], dtype=np.uintp)


def _usable(dtype, read: list, *written) -> bool:
    """Whether every array is C-contiguous and of ``dtype``, and the written ones writeable
    and disjoint (their chunks run in parallel, in no order)."""
    for arrays in (read, *written):
        for a in arrays:
            if a.dtype != dtype or not a.flags.c_contiguous:
                return False
    extents = []
    for arrays in written:
        for a in arrays:
            if not a.flags.writeable:
                return False
            extents.append((data_address(a), data_address(a) + a.nbytes))
    extents.sort()
    return all(end <= start for (_, end), (start, _) in zip(extents, extents[1:]))


def adam(
    params: list,
    grads: list,
    exp_avgs: list,
    exp_avg_sqs: list,
    max_exp_avg_sqs: list | None,
    step_sizes: list,
    bias_correction2_sqrts: list,
    *,
    lr_wd: float,
    weight_decay: float,
    w1: float,
    w1_far: float,
    beta2: float,
    one_minus_beta2: float,
    eps: float,
    decayed: bool,
    decoupled: bool,
    near_start: bool,
    maximize: bool,
) -> bool:
    """One Adam/AdamW step over every parameter (see optim/adam.py for the formula); False
    where it does not apply (nothing is changed then)."""
    if not params:
        return True
    dtype = params[0].dtype
    found = _functions(dtype)
    written = [params, exp_avgs, exp_avg_sqs] + ([max_exp_avg_sqs] if max_exp_avg_sqs else [])
    if found is None or not _usable(dtype, grads, *written):
        return False
    fns, pool = found
    amsgrad = max_exp_avg_sqs is not None
    keep = [
        _addresses(params),
        _addresses(grads),
        _addresses(exp_avgs),
        _addresses(exp_avg_sqs),
        _addresses(max_exp_avg_sqs) if amsgrad else np.zeros(len(params), np.uintp),
        np.array([a.size for a in params], dtype=ctypes.c_long),
        np.array(step_sizes, dtype=np.float64),
        np.array(bias_correction2_sqrts, dtype=np.float64),
    ]
    failed = fns["ember_adam"](
        len(params),
        *(data_address(a) for a in keep),
        lr_wd,
        weight_decay,
        w1,
        w1_far,
        beta2,
        one_minus_beta2,
        eps,
        int(decayed),
        int(decoupled),
        int(near_start),
        int(amsgrad),
        int(maximize),
        pool,
        _parallel_min(),
    )
    return not failed


def sgd(
    params: list,
    grads: list,
    buffers: list | None,
    fresh: list | None,
    *,
    lr: float,
    momentum: float,
    damp: float,
    weight_decay: float,
    damped: bool,
    decayed: bool,
    nesterov: bool,
    maximize: bool,
) -> bool:
    """One SGD step over every parameter (see optim/sgd.py); ``buffers`` (None without
    momentum) are the momentum buffers, ``fresh[i]`` true where buffer i is new (it then
    takes the gradient). False where it does not apply (nothing is changed then)."""
    if not params:
        return True
    dtype = params[0].dtype
    found = _functions(dtype)
    written = [params] + ([buffers] if buffers is not None else [])
    if found is None or not _usable(dtype, grads, *written):
        return False
    fns, pool = found
    use_momentum = buffers is not None
    n = len(params)
    keep = [
        _addresses(params),
        _addresses(grads),
        _addresses(buffers) if use_momentum else np.zeros(n, np.uintp),
        np.array(fresh if use_momentum else [0] * n, dtype=np.intc),
        np.array([a.size for a in params], dtype=ctypes.c_long),
    ]
    failed = fns["ember_sgd"](
        n,
        *(data_address(a) for a in keep),
        lr,
        momentum,
        damp,
        weight_decay,
        int(use_momentum),
        int(damped),
        int(decayed),
        int(nesterov),
        int(maximize),
        pool,
        _parallel_min(),
    )
    return not failed
