"""The first ``k`` positions of each row's stable order in C (``topk``, and ``argsort`` with
``k``): the ``argsort`` op's NumPy kernel (ops/sorting.py, the specification) partitions,
counts ties and sorts the chosen part in a dozen passes over each row; here one pass keeps a
heap of the ``k`` best so far, and the heap is emptied into order at the end.

The order is the specification's: descending (``largest``) or ascending, NaN above every
number, equal elements (and NaNs among themselves, -0.0 and 0.0 too) by increasing index, so
the positions are the NumPy kernel's exactly. Rows are shared over ember's pool. Returns None
where it does not apply (no compiler, a dtype other than float32/float64) and the caller runs
NumPy.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from .cstep import data_address

__all__ = ["first_k"]

_SOURCE = r"""
#include <math.h>
#include <stdlib.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);

struct job { const T *x; long *out; long n, k; int descending; long *scratch; };

/* whether (va, ia) comes before (vb, ib) in the stable order */
static inline int before(T va, long ia, T vb, long ib, int descending) {
  int na = va != va, nb = vb != vb;
  if (na || nb) {
    if (na && nb) return ia < ib;
    return descending ? na : nb;  /* NaN first when descending, last when ascending */
  }
  if (va != vb) return descending ? va > vb : va < vb;
  return ia < ib;
}

/* a heap of positions whose top is the one that comes last */
static void sift_down(const T *x, long *h, long size, long at, int d) {
  for (;;) {
    long l = 2 * at + 1, r = l + 1, worst = at;
    if (l < size && before(x[h[worst]], h[worst], x[h[l]], h[l], d)) worst = l;
    if (r < size && before(x[h[worst]], h[worst], x[h[r]], h[r], d)) worst = r;
    if (worst == at) return;
    long t = h[at]; h[at] = h[worst]; h[worst] = t;
    at = worst;
  }
}

static void sift_up(const T *x, long *h, long at, int d) {
  while (at > 0) {
    long parent = (at - 1) / 2;
    if (!before(x[h[parent]], h[parent], x[h[at]], h[at], d)) return;
    long t = h[at]; h[at] = h[parent]; h[parent] = t;
    at = parent;
  }
}

static void rows(void *job_, long lo, long hi) {
  const struct job *j = job_;
  long n = j->n, k = j->k;
  int d = j->descending;
  long *h = j->scratch + lo * k;  /* each row's own heap, in its slot of the scratch */
  for (long r = lo; r < hi; r++, h += k) {
    const T *x = j->x + r * n;
    long size = 0;
    long i = 0;
    for (; i < n && size < k; i++) {
      h[size] = i;
      sift_up(x, h, size++, d);
    }
    T top = x[h[0]];
    for (; i < n; i++) {
      T v = x[i];
      /* most elements come after the heap's last: rejected by one comparison (false for a
         NaN on either side, which takes the full test; an equal later element comes after) */
      if (d ? v <= top : v >= top) continue;
      if (before(v, i, top, h[0], d)) {
        h[0] = i;
        sift_down(x, h, k, 0, d);
        top = x[h[0]];
      }
    }
    long *out = j->out + r * k;
    for (long at = k - 1; at >= 0; at--) {  /* the last first */
      out[at] = h[0];
      h[0] = h[--size];
      sift_down(x, h, size, 0, d);
    }
  }
}

int ember_first_k(const T *x, long *out, long count, long n, long k, int descending,
                  ember_pool pool, long parallel_min) {
  long *scratch = malloc(sizeof(long) * (count * k > 0 ? count * k : 1));
  if (!scratch) return 1;
  struct job j = {x, out, n, k, descending, scratch};
  if (pool && count > 1 && count * n >= parallel_min) pool(rows, &j, count, 1);
  else rows(&j, 0, count);
  free(scratch);
  return 0;
}
"""

_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fno-math-errno", "-std=gnu11")
_P, _L, _I = ctypes.c_void_p, ctypes.c_long, ctypes.c_int


@functools.cache
def _function(dtype: np.dtype):
    from . import ccompile, cpool

    if dtype not in _TYPES or not ccompile.compiler_available():
        return None
    source = f"#define T {_TYPES[dtype]}\n" + _SOURCE
    try:
        fn = ccompile.load(source, "ember_first_k", [_P, _P, _L, _L, _L, _I, _P, _L], flags=_FLAGS)
    except ccompile.CompileError:
        return None
    fn.restype = ctypes.c_int
    return fn, cpool.parallel_for()


def first_k(a: np.ndarray, k: int, descending: bool) -> np.ndarray | None:
    """The first ``k`` positions (int64) of each row's stable order of the 2-D ``a``, or
    None."""
    found = _function(a.dtype)
    if found is None or a.ndim != 2 or not 0 < k <= a.shape[1]:
        return None
    fn, pool = found
    from .cfuse import PARALLEL_MIN

    a = np.ascontiguousarray(a)
    rows, n = a.shape
    out = np.empty((rows, k), np.int64)
    failed = fn(data_address(a), data_address(out), rows, n, k, int(descending), pool, PARALLEL_MIN)
    return None if failed else out
