"""A selection along one axis and its gradient in C: ``take(x, idx, axis)``, NumPy's
``np.take`` for in-range indices (the ``index`` op of a single index tensor: ``index_select``,
an embedding, a linear or nearest ``interpolate``'s selection along each spatial axis), and
``add_slices(in_shape, axis, idx, g)``,
zeros of ``in_shape`` with each slice ``g[..., j, ...]`` added at ``idx[j]`` along ``axis``
(the ``index_backward`` op of a single index tensor: ``index_select``'s and an embedding's
gradient, and so a linear or nearest ``interpolate``'s, which selects along each spatial axis).

The NumPy kernel (ops/_scatter_kernels.py's ``add_slices``) multiplies a sparse selection
matrix with the gradient laid out (m, outer * inner): two transposing copies of the gradient
and one of the result around the product. Here each (outer, column range) block of the result
is zeroed and the rows of g added into it in the order of j, in one pass over g: the same sums
in the same order as the sparse product's (each result element starts at 0 and receives its
slices in increasing j), so equal to NumPy bit for bit.

Half precision (bfloat16, float16) adds in 16 bits as NumPy's ``add.at`` does on those
arrays: each sum computed in float and rounded (kernels/chalf.py's conversions), in the same
order, so equal bit for bit too.

Blocks are shared over ember's thread pool (kernels/cpool.py): whole outer blocks where there
are enough of them, else column ranges of whole 64-byte lines. `add_slices` returns None where
it does not apply (no compiler, a dtype other than those above, an index out of range) and the
caller runs NumPy.

`take` copies elements (any dtype: one library per element size) along the last axis, where
``np.take`` gathers element by element on one thread (a bilinear upsampling's column
selection of an (8, 32, 64, 64) activation took 0.6-0.8 ms); here rows of the result are
shared over the thread pool (other axes: NumPy copies whole slices, as fast). Equal to
``np.take`` bit for bit (a copy); None where it does not apply (no compiler, a negative or
out-of-range index: NumPy wraps or reports those).
"""

from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from . import chalf
from .axes import kernel_axis
from .cstep import data_address

__all__ = ["accumulate_slices", "add_slices", "take"]

_C = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
# half precision: 16-bit storage, each sum rounded (kernels/chalf.py's conversions)
_HALF = chalf.NAMES
_LINE_BYTES = 64

_SOURCE = r"""
#include <string.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
#ifndef ADD /* a + b in T (16 bits: in float, rounded) */
#define ADD(a, b) ((a) + (b))
#endif
struct job {
  const T *g;
  const long long *idx;
  T *out;
  long n, m, inner, chunks, width; /* width: the columns of one chunk */
  long keep; /* add into out as it holds (scatter_add) instead of into zeros */
};
/* task t: outer block t / chunks, columns [c * width, (c + 1) * width) of it, c = t % chunks */
static void blocks(void *job_, long lo, long hi) {
  const struct job *j = job_;
  long n = j->n, m = j->m, inner = j->inner;
  for (long t = lo; t < hi; t++) {
    long o = t / j->chunks, c0 = (t % j->chunks) * j->width;
    long w = inner - c0 < j->width ? inner - c0 : j->width;
    T *out = j->out + o * n * inner + c0;
    const T *g = j->g + o * m * inner + c0;
    if (inner == 1) { /* along the last axis: one element a slice */
      const long long *restrict idx = j->idx;
      if (!j->keep) memset(out, 0, (size_t)n * sizeof(T));
      for (long k = 0; k < m; k++) out[idx[k]] = ADD(out[idx[k]], g[k]);
      continue;
    }
    if (!j->keep)
      for (long i = 0; i < n; i++) memset(out + i * inner, 0, (size_t)w * sizeof(T));
    for (long k = 0; k < m; k++) {
      T *restrict to = out + j->idx[k] * inner;
      const T *restrict from = g + k * inner;
      for (long c = 0; c < w; c++) to[c] = ADD(to[c], from[c]);
    }
  }
}
void add_slices(const T *g, const long long *idx, T *out, long outer, long n, long m,
                long inner, long chunks, long width, long keep, ember_pool pool) {
  struct job j = {g, idx, out, n, m, inner, chunks, width, keep};
  long tasks = outer * chunks;
  if (pool && tasks > 1 && outer * (n + m) * inner > (1L << 16)) pool(blocks, &j, tasks, 1);
  else blocks(&j, 0, tasks);
}
"""


@functools.cache
def _function(dtype: np.dtype):
    from . import ccompile, cpool

    if (dtype not in _C and dtype not in _HALF) or not ccompile.compiler_available():
        return None
    if dtype in _HALF:
        name = _HALF[dtype]
        source = chalf.CONVERT + "#define T uint16_t\n"
        source += f"#define ADD(a, b) {name}_store({name}_load(a) + {name}_load(b))\n" + _SOURCE
    else:
        source = f"#define T {_C[dtype]}\n" + _SOURCE
    p, n = ctypes.c_void_p, ctypes.c_long
    try:
        fn = ccompile.load(source, "add_slices", [p, p, p] + [n] * 7 + [p])
    except ccompile.CompileError:
        return None
    return fn, cpool.parallel_for()


def _chunks(outer: int, inner: int, itemsize: int) -> tuple:
    """(chunks per outer block, columns per chunk): one chunk per block where the blocks
    alone give every thread a few tasks, else column ranges of whole cache lines (two threads
    never write one line), as many as give every thread a few."""
    from . import cpool

    wanted = 4 * cpool.get_num_threads()
    line = max(1, _LINE_BYTES // itemsize)
    if outer >= wanted or inner <= line:
        return 1, inner
    per_block = -(-wanted // outer)
    columns = -(-inner // per_block)
    width = -(-columns // line) * line
    return -(-inner // width), width


def add_slices(in_shape: tuple, axis: int, idx: np.ndarray, g: np.ndarray):
    """zeros(in_shape) with ``g``'s slices added at ``idx`` along ``axis`` (g: ``in_shape[:axis]
    + idx.shape + in_shape[axis + 1:]``), or None where the C kernel does not apply."""
    out = np.empty(tuple(int(s) for s in in_shape), g.dtype)
    return out if _add(out, axis, idx, g, keep=False) else None


def accumulate_slices(out: np.ndarray, axis: int, idx: np.ndarray, g: np.ndarray) -> bool:
    """Add ``g``'s slices into the C-contiguous ``out`` at ``idx`` along ``axis`` in place, in
    np.add.at's order (scatter_add with an index that varies only along ``axis``): False
    where the C kernel does not apply (and ``out`` is untouched)."""
    if not out.flags.c_contiguous or g.dtype != out.dtype:
        return False
    return _add(out, axis, idx, g, keep=True)


def _add(out: np.ndarray, axis: int, idx: np.ndarray, g: np.ndarray, keep: bool) -> bool:
    dtype = np.dtype(g.dtype)
    found = _function(dtype) if dtype in _C or dtype in _HALF else None
    if found is None:
        return False
    fn, pool = found
    in_shape = out.shape
    axis = kernel_axis(axis, len(in_shape))  # (a graph file's axis: the extents come from it)
    if axis is None:
        return False
    n = in_shape[axis]
    flat = np.ascontiguousarray(idx, np.int64).reshape(-1)
    if flat.size and (int(flat.min()) < 0 or int(flat.max()) >= n):
        return False  # (NumPy normalizes negative indices and reports bad ones)
    if out.size == 0:
        return True
    outer, inner = math.prod(in_shape[:axis]), math.prod(in_shape[axis + 1 :])
    g = np.ascontiguousarray(g)
    chunks, width = _chunks(outer, inner, dtype.itemsize)
    fn(data_address(g), data_address(flat), data_address(out), outer, n, flat.size, inner, chunks,
       width, int(keep), pool)  # fmt: skip
    return True


_TAKE_SOURCE = r"""
#include <string.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
struct job {
  const E *x;
  const long long *idx;
  E *out;
  long n, m;
};
/* rows lo..hi of the result, element by element */
static void rows(void *job_, long lo, long hi) {
  const struct job *j = job_;
  const long n = j->n, m = j->m;
  const long long *restrict idx = j->idx;
  for (long o = lo; o < hi; o++) {
    const E *restrict x = j->x + o * n;
    E *restrict out = j->out + o * m;
    for (long k = 0; k < m; k++) out[k] = x[idx[k]];
  }
}
void take(const E *x, const long long *idx, E *out, long outer, long n, long m,
          ember_pool pool) {
  struct job j = {x, idx, out, n, m};
  if (pool && outer > 1 && outer * m > (1L << 15)) pool(rows, &j, outer, 1);
  else rows(&j, 0, outer);
}
"""
_ELEMENTS = {1: "uint8_t", 2: "uint16_t", 4: "uint32_t", 8: "uint64_t"}
# below this many elements np.take's own loop costs less than the call into C
_TAKE_MIN = 1 << 12


@functools.cache
def _take_function(itemsize: int):
    from . import ccompile, cpool

    if itemsize not in _ELEMENTS or not ccompile.compiler_available():
        return None
    source = f"#include <stdint.h>\n#define E {_ELEMENTS[itemsize]}\n" + _TAKE_SOURCE
    p, n = ctypes.c_void_p, ctypes.c_long
    try:
        fn = ccompile.load(source, "take", [p, p, p] + [n] * 3 + [p])
    except ccompile.CompileError:
        return None
    return fn, cpool.parallel_for()


def take(x: np.ndarray, idx: np.ndarray, axis: int):
    """``np.take(x, idx, axis=axis)`` along the last axis of size other than 1 (element by
    element: NumPy's weak case; whole slices it copies as fast), for indices in ``[0,
    x.shape[axis])``, or None where the C kernel does not apply (another axis, a small
    result, no compiler) and the caller runs NumPy."""
    if x.ndim == 0 or x.dtype.hasobject:
        return None
    axis = axis % x.ndim
    out_shape = x.shape[:axis] + np.shape(idx) + x.shape[axis + 1 :]
    if math.prod(x.shape[axis + 1 :]) != 1 or math.prod(out_shape) < _TAKE_MIN:
        return None
    found = _take_function(x.dtype.itemsize)
    if found is None:
        return None
    fn, pool = found
    n = x.shape[axis]
    flat = np.ascontiguousarray(idx, np.int64).reshape(-1)
    if flat.size and (int(flat.min()) < 0 or int(flat.max()) >= n):
        return None
    x = np.ascontiguousarray(x)
    out = np.empty(out_shape, x.dtype)
    fn(data_address(x), data_address(flat), data_address(out), math.prod(x.shape[:axis]), n,
       flat.size, pool)  # fmt: skip
    return out
