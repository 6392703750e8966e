"""``gather`` and ``scatter_add`` along one axis with per-element indices, in C: the ``gather``
op (``torch.gather``, ``x.gather(1, actions)`` in policy gradients, a language model's chosen
tokens) and its adjoint ``scatter_add`` (``scatter_add_``, ``index_add_``-style message passing
in graph networks, the gradient of every gather).

NumPy's kernels (ops/gather.py, ops/_scatter_kernels.py: the specification) validate the
indices in two passes (a minimum and a maximum), build flat positions with broadcast
arithmetic (several passes of int64 arrays) and then gather (``take_along_axis``) or add
(``np.add.at``). Here each runs in one pass over the index, which it checks as it goes.

With ``x`` seen as (outer, n, inner) along the axis and the index and the values as (outer,
m, inner):

* gather: ``y[o, j, i] = x[o, index[o, j, i], i]``, a copy (any element size), equal to
  ``take_along_axis`` bit for bit; rows of the result are shared over ember's pool;
* scatter_add: ``out[o, index[o, j, i], i] += src[o, j, i]`` in the index's C order, the order
  ``np.add.at`` adds in, so each sum is NumPy's bit for bit (float32, float64; half precision
  computed in float and rounded after each addition, as NumPy's add on those arrays). One
  thread: two elements of the index may name one target, so no two threads may add at once.

A negative index counts from the end (NumPy's and PyTorch's); one out of range makes the
kernel return None, and the caller runs NumPy, which raises naming it. Each returns None where
it does not apply (no compiler, another dtype, the index and the values smaller than ``x``
outside the axis: NumPy's reads a corner).
"""

from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from . import chalf
from .axes import kernel_axis
from .cstep import data_address

__all__ = ["gather", "scatter_add"]

_GATHER = r"""
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
struct job { const E *x; const long *index; E *y; long n, m, inner; int bad; };

static void rows(void *job_, long lo, long hi) {
  struct job *j = job_;
  long n = j->n, m = j->m, inner = j->inner;
  /* r = o * m + jj: one row of inner elements; o and jj advance with r (one division per
     task, not per row: a division costs more than a row of one element) */
  long o = lo / m, jj = lo - o * m;
  const long *idx = j->index + lo * inner;
  E *y = j->y + lo * inner;
  const E *x = j->x + o * n * inner;
  if (inner == 1) {  /* along the last axis: one element a row */
    for (long r = lo; r < hi; r++) {
      long k = *idx++;
      if (k < 0) k += n;
      if (k < 0 || k >= n) { j->bad = 1; return; }
      *y++ = x[k];
      if (++jj == m) { jj = 0; x += n; }
    }
    return;
  }
  for (long r = lo; r < hi; r++, idx += inner, y += inner) {
    for (long i = 0; i < inner; i++) {
      long k = idx[i];
      if (k < 0) k += n;
      if (k < 0 || k >= n) { j->bad = 1; return; }
      y[i] = x[k * inner + i];
    }
    if (++jj == m) { jj = 0; x += n * inner; }
  }
}

int ember_gather(const E *x, const long *index, E *y, long outer, long n, long m, long inner,
                 ember_pool pool, long parallel_min) {
  struct job j = {x, index, y, n, m, inner, 0};
  long count = outer * m;
  if (pool && count > 1 && count * inner >= parallel_min) pool(rows, &j, count, 1);
  else rows(&j, 0, count);
  return j.bad;
}
"""

_SCATTER = r"""
#ifndef HALF
#define HALF 0
#define S T
#define LD(v) (v)
#define ST(v) (v)
#endif

int ember_scatter_add(S *out, const long *index, const S *src, long outer, long n, long m,
                      long inner) {
  for (long o = 0; o < outer; o++) {
    S *target = out + o * n * inner;
    for (long jj = 0; jj < m; jj++) {
      const long *idx = index + (o * m + jj) * inner;
      const S *s = src + (o * m + jj) * inner;
      for (long i = 0; i < inner; i++) {
        long k = idx[i];
        if (k < 0) k += n;
        if (k < 0 || k >= n) return 1;
        S *t = target + k * inner + i;
        *t = ST(LD(*t) + LD(s[i]));
      }
    }
  }
  return 0;
}
"""

_ELEMENT = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
_SUM = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_SUM.update(dict.fromkeys(chalf.NAMES, "float"))
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fno-math-errno", "-fno-trapping-math")
_FLAGS += ("-ffp-contract=off", "-std=gnu11")
_P, _L = ctypes.c_void_p, ctypes.c_long


@functools.cache
def _gather_function(itemsize: int):
    from . import ccompile, cpool

    if itemsize not in _ELEMENT or not ccompile.compiler_available():
        return None
    source = f"#define E {_ELEMENT[itemsize]}\n" + _GATHER
    try:
        fn = ccompile.load(
            source, "ember_gather", [_P, _P, _P, _L, _L, _L, _L, _P, _L], flags=_FLAGS
        )
    except ccompile.CompileError:
        return None
    fn.restype = ctypes.c_int
    return fn, cpool.parallel_for()


@functools.cache
def _scatter_function(dtype: np.dtype):
    from . import ccompile

    if dtype not in _SUM or not ccompile.compiler_available():
        return None
    source = f"#define T {_SUM[dtype]}\n"
    if dtype in chalf.NAMES:
        source = chalf.storage_defines(dtype) + source
    try:
        fn = ccompile.load(
            source + _SCATTER, "ember_scatter_add", [_P, _P, _P, _L, _L, _L, _L], flags=_FLAGS
        )
    except ccompile.CompileError:
        return None
    fn.restype = ctypes.c_int
    return fn


def _geometry(shape, index_shape, axis: int):
    """(outer, n, m, inner), or None where the index is smaller than ``shape`` outside the
    axis."""
    if len(shape) != len(index_shape):
        return None
    axis = kernel_axis(axis, len(shape))  # (a graph file's axis: the extents come from it)
    if axis is None:
        return None
    if any(a != b for d, (a, b) in enumerate(zip(shape, index_shape)) if d != axis):
        return None
    return math.prod(shape[:axis]), shape[axis], index_shape[axis], math.prod(shape[axis + 1 :])


def _index(index: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(index, dtype=np.int64)


def gather(x: np.ndarray, index: np.ndarray, axis: int) -> np.ndarray | None:
    """``np.take_along_axis(x, index, axis)`` for an index of x's shape outside the axis, or
    None."""
    geometry = _geometry(x.shape, index.shape, axis)
    if geometry is None or index.size == 0 or x.size == 0:
        return None
    found = _gather_function(x.dtype.itemsize)
    if found is None or x.dtype.hasobject:  # (bits copied: any dtype of 1 to 8 bytes)
        return None
    fn, pool = found
    from .cfuse import PARALLEL_MIN

    outer, n, m, inner = geometry
    x, index = np.ascontiguousarray(x), _index(index)
    y = np.empty(index.shape, x.dtype)
    bad = fn(
        data_address(x),
        data_address(index),
        data_address(y),
        outer,
        n,
        m,
        inner,
        pool,
        PARALLEL_MIN,
    )
    return None if bad else y


def scatter_add(out: np.ndarray, index: np.ndarray, src: np.ndarray, axis: int) -> bool:
    """``out[..., index, ...] += src`` along ``axis`` in place (``out`` C-contiguous, the index
    and src of out's shape outside the axis), in ``np.add.at``'s order; False where it does
    not apply or an index is out of range (``out`` is then unchanged only in the first case:
    the caller starts again from a fresh copy)."""
    geometry = _geometry(out.shape, index.shape, axis)
    if geometry is None or src.shape != index.shape or src.dtype != out.dtype:
        return False
    if not out.flags.c_contiguous or index.size == 0:
        return False
    fn = _scatter_function(out.dtype)
    if fn is None:
        return False
    outer, n, m, inner = geometry
    index, src = _index(index), np.ascontiguousarray(src)
    return not fn(data_address(out), data_address(index), data_address(src), outer, n, m, inner)
