"""The positions PyTorch's CPU ``topk`` and ``sort(stable=False)`` report, in C (the
``argsort`` op with ``k``, or unstable). PyTorch orders (value, position) pairs with
libstdc++'s algorithms, compared by value only: ``sort`` is ``std::sort`` of each row; topk is
``std::partial_sort`` of the first k where ``k * 64 <= n``, else ``std::nth_element`` at k - 1
followed (``sorted=True``) by ``std::sort`` of the k - 1 before it. Which of equal values ends
where is what those algorithms leave: this file runs the same steps (GCC's introsort,
introselect, heap selection and insertion sorts, with their thresholds), so the positions are
PyTorch's, ties included. The comparison is PyTorch's: descending (``largest``) or ascending,
NaN above every number.

ops/_stl_steps.py is the specification (the same steps in Python); where no row has ties that
the algorithms order, both equal the stable order. Rows are shared over ember's pool. Returns
None where it does not apply (no compiler, a dtype it has no C type for) and the caller runs
the specification.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from .cstep import data_address

__all__ = ["torch_k", "torch_sort"]

_SOURCE = r"""
#include <stdlib.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);

typedef struct { T v; long i; } elem;
struct job { const T *x; long *out; long n, k; int largest, sorted; volatile int failed; };

/* PyTorch's comparators: x before y (NaN above every number) */
static inline int comp(elem x, elem y, int d) {
  int nx = x.v != x.v, ny = y.v != y.v;
  return d ? ((nx && !ny) || x.v > y.v) : ((!nx && ny) || x.v < y.v);
}

static void adjust_heap(elem *a, long hole, long len, elem value, int d) {
  long top = hole, second = hole;
  while (second < (len - 1) / 2) {
    second = 2 * (second + 1);
    if (comp(a[second], a[second - 1], d)) second--;
    a[hole] = a[second];
    hole = second;
  }
  if ((len & 1) == 0 && second == (len - 2) / 2) {
    second = 2 * (second + 1);
    a[hole] = a[second - 1];
    hole = second - 1;
  }
  long parent = (hole - 1) / 2;
  while (hole > top && comp(a[parent], value, d)) {
    a[hole] = a[parent];
    hole = parent;
    parent = (hole - 1) / 2;
  }
  a[hole] = value;
}

static void make_heap(elem *a, long len, int d) {
  if (len < 2) return;
  for (long parent = (len - 2) / 2;; parent--) {
    adjust_heap(a, parent, len, a[parent], d);
    if (parent == 0) return;
  }
}

static inline void pop_heap(elem *a, long len, long result, int d) {
  elem value = a[result];
  a[result] = a[0];
  adjust_heap(a, 0, len, value, d);
}

static void heap_select(elem *a, long middle, long last, int d) {
  make_heap(a, middle, d);
  for (long i = middle; i < last; i++)
    if (comp(a[i], a[0], d)) pop_heap(a, middle, i, d);
}

static void sort_heap(elem *a, long last, int d) {
  while (last > 1) {
    last--;
    pop_heap(a, last, last, d);
  }
}

static inline void swap(elem *a, long i, long j) { elem t = a[i]; a[i] = a[j]; a[j] = t; }

static void move_median_to_first(elem *a, long result, long x, long y, long z, int d) {
  long s;
  if (comp(a[x], a[y], d)) s = comp(a[y], a[z], d) ? y : comp(a[x], a[z], d) ? z : x;
  else s = comp(a[x], a[z], d) ? x : comp(a[y], a[z], d) ? z : y;
  swap(a, result, s);
}

static long unguarded_partition(elem *a, long first, long last, long pivot, int d) {
  for (;;) {
    while (comp(a[first], a[pivot], d)) first++;
    last--;
    while (comp(a[pivot], a[last], d)) last--;
    if (!(first < last)) return first;
    swap(a, first, last);
    first++;
  }
}

static long partition_pivot(elem *a, long first, long last, int d) {
  long mid = first + (last - first) / 2;
  move_median_to_first(a, first, first + 1, mid, last - 1, d);
  return unguarded_partition(a, first + 1, last, first, d);
}

static void unguarded_linear_insert(elem *a, long last, int d) {
  elem val = a[last];
  long next = last - 1;
  while (comp(val, a[next], d)) {
    a[last] = a[next];
    last = next;
    next--;
  }
  a[last] = val;
}

static void insertion_sort(elem *a, long first, long last, int d) {
  if (first == last) return;
  for (long i = first + 1; i < last; i++) {
    if (comp(a[i], a[first], d)) {
      elem val = a[i];
      for (long j = i; j > first; j--) a[j] = a[j - 1];
      a[first] = val;
    } else {
      unguarded_linear_insert(a, i, d);
    }
  }
}

static long lg(long n) { long r = 0; while (n >>= 1) r++; return r; }

static void introsort_loop(elem *a, long first, long last, long depth, int d) {
  while (last - first > 16) {
    if (depth == 0) {
      heap_select(a + first, last - first, last - first, d);
      sort_heap(a + first, last - first, d);
      return;
    }
    depth--;
    long cut = partition_pivot(a, first, last, d);
    introsort_loop(a, cut, last, depth, d);
    last = cut;
  }
}

static void std_sort(elem *a, long last, int d) {
  if (last == 0) return;
  introsort_loop(a, 0, last, lg(last) * 2, d);
  if (last > 16) {
    insertion_sort(a, 0, 16, d);
    for (long i = 16; i < last; i++) unguarded_linear_insert(a, i, d);
  } else {
    insertion_sort(a, 0, last, d);
  }
}

static void nth_element(elem *a, long nth, long last, int d) {
  long first = 0;
  if (nth == last) return;
  long depth = lg(last) * 2;
  while (last - first > 3) {
    if (depth == 0) {
      heap_select(a + first, nth + 1 - first, last - first, d);
      swap(a, first, nth);
      return;
    }
    depth--;
    long cut = partition_pivot(a, first, last, d);
    if (cut <= nth) first = cut;
    else last = cut;
  }
  insertion_sort(a, first, last, d);
}

static void rows(void *job_, long lo, long hi) {
  struct job *j = job_;
  long n = j->n, k = j->k;
  int d = j->largest;
  elem *a = malloc(sizeof(elem) * (n > 0 ? n : 1));
  if (!a) { j->failed = 1; return; }
  for (long r = lo; r < hi; r++) {
    const T *x = j->x + r * n;
    for (long i = 0; i < n; i++) { a[i].v = x[i]; a[i].i = i; }
    if (k * 64 <= n) {
      heap_select(a, k, n, d);
      sort_heap(a, k, d);
    } else {
      nth_element(a, k - 1, n, d);
      if (j->sorted) std_sort(a, k - 1, d);
    }
    long *out = j->out + r * k;
    for (long i = 0; i < k; i++) out[i] = a[i].i;
  }
  free(a);
}

/* a whole row by std::sort (PyTorch's sort with stable=False) */
static void sort_rows(void *job_, long lo, long hi) {
  struct job *j = job_;
  long n = j->n;
  int d = j->largest;
  elem *a = malloc(sizeof(elem) * (n > 0 ? n : 1));
  if (!a) { j->failed = 1; return; }
  for (long r = lo; r < hi; r++) {
    const T *x = j->x + r * n;
    for (long i = 0; i < n; i++) { a[i].v = x[i]; a[i].i = i; }
    std_sort(a, n, d);
    long *out = j->out + r * n;
    for (long i = 0; i < n; i++) out[i] = a[i].i;
  }
  free(a);
}

int ember_torch_sort(const T *x, long *out, long count, long n, int descending, ember_pool pool,
                     long parallel_min) {
  struct job j = {x, out, n, n, descending, 1, 0};
  if (pool && count > 1 && count * n >= parallel_min) pool(sort_rows, &j, count, 1);
  else sort_rows(&j, 0, count);
  return j.failed;
}

int ember_torch_k(const T *x, long *out, long count, long n, long k, int largest, int sorted,
                  ember_pool pool, long parallel_min) {
  struct job j = {x, out, n, k, largest, sorted, 0};
  if (pool && count > 1 && count * n >= parallel_min) pool(rows, &j, count, 1);
  else rows(&j, 0, count);
  return j.failed;
}
"""

_TYPES = {
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
    np.dtype(np.int64): "long",
    np.dtype(np.int32): "int",
    np.dtype(np.int16): "short",
    np.dtype(np.int8): "signed char",
    np.dtype(np.uint8): "unsigned char",
}
_FLAGS = ("-O2", "-march=native", "-fPIC", "-shared", "-std=gnu11")
_P, _L, _I = ctypes.c_void_p, ctypes.c_long, ctypes.c_int


@functools.cache
def _function(dtype: np.dtype, symbol: str = "ember_torch_k"):
    from . import ccompile, cpool

    if dtype not in _TYPES or not ccompile.compiler_available():
        return None
    source = f"#define T {_TYPES[dtype]}\n" + _SOURCE
    args = [_P, _P, _L, _L, _L, _I, _I, _P, _L]
    if symbol == "ember_torch_sort":
        args = [_P, _P, _L, _L, _I, _P, _L]
    try:
        fn = ccompile.load(source, symbol, args, flags=_FLAGS)
    except ccompile.CompileError:
        return None
    fn.restype = ctypes.c_int
    return fn, cpool.parallel_for()


def torch_k(a: np.ndarray, k: int, largest: bool, sorted: bool) -> np.ndarray | None:  # noqa: A002
    """PyTorch's topk positions (int64, k per row) of each row of the 2-D ``a``, or None."""
    found = _function(a.dtype)
    if found is None or a.ndim != 2 or not 0 < k <= a.shape[1]:
        return None
    fn, pool = found
    from .cfuse import PARALLEL_MIN

    a = np.ascontiguousarray(a)
    count, n = a.shape
    out = np.empty((count, k), np.int64)
    failed = fn(
        data_address(a),
        data_address(out),
        count,
        n,
        k,
        int(largest),
        int(sorted),
        pool,
        PARALLEL_MIN,
    )
    return None if failed else out


def torch_sort(a: np.ndarray, descending: bool) -> np.ndarray | None:
    """The positions PyTorch's ``sort(stable=False)`` orders each row of the 2-D ``a`` by
    (``std::sort``'s), int64, or None."""
    found = _function(a.dtype, "ember_torch_sort")
    if found is None or a.ndim != 2:
        return None
    fn, pool = found
    from .cfuse import PARALLEL_MIN

    a = np.ascontiguousarray(a)
    count, n = a.shape
    out = np.empty((count, n), np.int64)
    failed = fn(data_address(a), data_address(out), count, n, int(descending), pool, PARALLEL_MIN)
    return None if failed else out
