"""C kernels of max pooling and its gradient (the ``pool_scatter`` op), used by the ops'
kernels in ops/pool.py (eager and graphs alike) and by the code generator through
``pool_scatter``'s ``extra["compile"]`` hook.

The NumPy kernels in ops/pool.py are the specification, and these equal them bit for bit:

* `scatter`: zeros of the input's shape with each gradient added at its index within its
  (n, c) plane, in the order of the outputs (the order ``np.add.at`` adds in, about 3x slower),
  so sums of overlapping windows round the same way;
* `max_pool_2d`: each window's maximum and the index of its first maximum (NaN wins), for 2-d
  windows without padding that lie inside the input. The geometry is compiled into the kernel
  (one small library per geometry), so the window loops unroll and each output row is a
  vector loop: 2.5x faster than NumPy on the CNN's first pool (64x32x28x28), even on its second
  (64x64x14x14, rows of 7). A C loop with the geometry as arguments was slower than NumPy
  (branchy maxima, strided loads).

Planes are shared over the thread pool (runtime/cpool.py). Each entry returns None where it
does not apply (not float32/float64, other geometry, no C compiler) and NumPy runs.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from .. import dtypes as dt

__all__ = ["build_scatter"]

_C = {dt.float32: "float", dt.float64: "double"}
_FLAGS = (
    "-O3",
    "-march=native",
    "-fPIC",
    "-shared",
    "-fno-math-errno",
    "-std=gnu11",
    "-fopenmp-simd",
)

_SCATTER = r"""
#include <string.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
struct job {
  const T *g;
  const long long *indices;
  T *out;
  long in_plane, out_plane;
  const unsigned char *mask; /* where(mask, scattered, fill), or NULL */
  T fill;
};
static void planes(void *job_, long lo, long hi) {
  const struct job *j = job_;
  for (long p = lo; p < hi; p++) {
    T *out = j->out + p * j->in_plane;
    const T *g = j->g + p * j->out_plane;
    const long long *indices = j->indices + p * j->out_plane;
    memset(out, 0, j->in_plane * sizeof *out);
    for (long k = 0; k < j->out_plane; k++) out[indices[k]] += g[k];
    if (j->mask) { /* locals and restrict: a branch-free loop the compiler vectorizes */
      const unsigned char *restrict mask = j->mask + p * j->in_plane;
      T *restrict to = out;
      const T fill = j->fill;
      const long size = j->in_plane;
      for (long i = 0; i < size; i++) to[i] = mask[i] ? to[i] : fill;
    }
  }
}
void scatter(const T *g, const long long *indices, T *out, long count, long in_plane,
             long out_plane, const unsigned char *mask, T fill, ember_pool pool) {
  struct job j = {g, indices, out, in_plane, out_plane, mask, fill};
  if (pool && count * (in_plane + out_plane) > (1L << 16)) pool(planes, &j, count, 1);
  else planes(&j, 0, count);
}
"""


def _load(template: str, symbol: str, dtype, argtypes):
    from . import ccompile, cpool

    if dtype not in _C or not ccompile.compiler_available():
        return None, None
    source = f"#define T {_C[dtype]}\n" + template
    try:
        fn = ccompile.load(source, symbol, argtypes, flags=_FLAGS)
    except ccompile.CompileError:
        return None, None
    return fn, cpool.parallel_for()


def _scatter_function(dtype):
    scalar = ctypes.c_float if dtype == dt.float32 else ctypes.c_double
    pointer = ctypes.c_void_p
    argtypes = [pointer] * 3 + [ctypes.c_long] * 3 + [pointer, scalar, pointer]
    return _load(_SCATTER, "scatter", dtype, argtypes)


def scatter(g: np.ndarray, indices: np.ndarray, in_size: tuple, mask=None, fill=0.0):
    """``pool_scatter(g, indices; in_size)`` in C, equal to the NumPy kernel bit for bit, or
    None (not float32/float64, no compiler). The indices are trusted (max_pool made them).
    With ``mask`` (bool, of the result's shape): ``where(mask, result, fill)``, each plane
    masked while it is in cache (the gradient of a ReLU before the pooling)."""
    if g.dtype not in (np.float32, np.float64):
        return None
    fn, pool = _scatter_function(dt.as_dtype(g.dtype))
    if fn is None:
        return None
    in_size = tuple(in_size)
    g = np.ascontiguousarray(g)
    indices = np.ascontiguousarray(indices, np.int64)
    out = np.empty(g.shape[:2] + in_size, g.dtype)
    count = g.shape[0] * g.shape[1]
    if out.size:
        plane, out_plane = math.prod(in_size), math.prod(g.shape[2:])
        if mask is not None:
            mask = np.ascontiguousarray(mask, np.bool_)
        fn(
            g.ctypes.data,
            indices.ctypes.data,
            out.ctypes.data,
            count,
            plane,
            out_plane,
            None if mask is None else mask.ctypes.data,
            fill,
            pool,
        )
    return out


def build_scatter(node):
    """A C implementation of a ``pool_scatter`` node: ``(g, indices) -> out``, or None."""
    g_type = node.inputs[0].type
    in_size = tuple(node.attrs["in_size"])
    if any(not isinstance(d, int) for d in (*in_size, *g_type.shape[2:])):
        return None
    if g_type.dtype not in _C or _scatter_function(g_type.dtype)[0] is None:
        return None
    np_dtype = g_type.dtype.np

    def run(g, indices):
        return scatter(np.asarray(g, np_dtype), indices, in_size)

    return run


_MAX_POOL = r"""
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
struct job { const T *x; T *out; long long *idx; };
/* each window's maximum and the plane index of its first maximum (row-major), as ops/pool.py:
   an element replaces the running maximum when it is greater or NaN. The geometry is built in
   (H, W, OH, OW, KH, KW, SH, SW, DH, DW), so the window loops unroll and a row vectorizes. */
static void planes(void *job_, long lo, long hi) {
  const struct job *j = job_;
  for (long p = lo; p < hi; p++) {
    const T *x = j->x + p * (H * W);
    for (long r = 0; r < OH; r++) {
      T *restrict best = j->out + (p * OH + r) * OW;
      long long *restrict at = j->idx + (p * OH + r) * OW;
#pragma omp simd
      for (long c = 0; c < OW; c++) {
        long origin = r * SH * W + c * SW, where = origin;
        T top = x[origin];
#pragma GCC unroll 16
        for (long a = 0; a < KH; a++)
#pragma GCC unroll 16
          for (long b = 0; b < KW; b++) {
            long k = origin + a * DH * W + b * DW;
            T v = x[k];
            int take = (v > top) | (v != v);
            top = take ? v : top;
            where = take ? k : where;
          }
        best[c] = top;
        at[c] = where;
      }
    }
  }
}
void max_pool(const T *x, T *out, long long *idx, long count, ember_pool pool) {
  struct job j = {x, out, idx};
  if (pool && count * H * W > (1L << 16)) pool(planes, &j, count, 1);
  else planes(&j, 0, count);
}
"""


def max_pool_2d(x: np.ndarray, kernel, stride, padding, dilation, out_size):
    """(values, indices) of 2-d max pooling without padding, every window inside the input,
    equal to ops/pool.py's NumPy kernel; None where it does not apply (another dtype, padding,
    a window past the edge, no compiler)."""
    if x.ndim != 4 or any(padding) or x.size == 0 or x.dtype not in (np.float32, np.float64):
        return None
    n, c, h, w = x.shape
    if any(
        (o - 1) * s + d * (k - 1) >= size
        for o, s, d, k, size in zip(out_size, stride, dilation, kernel, (h, w))
    ):
        return None
    geometry = (h, w, *out_size, *kernel, *stride, *dilation)
    names = ("H", "W", "OH", "OW", "KH", "KW", "SH", "SW", "DH", "DW")
    defines = "".join(f"#define {k} {v}L\n" for k, v in zip(names, geometry))
    pointer = ctypes.c_void_p
    argtypes = [pointer] * 3 + [ctypes.c_long, pointer]
    fn, pool = _load(defines + _MAX_POOL, "max_pool", dt.as_dtype(x.dtype), argtypes)
    if fn is None:
        return None
    x = np.ascontiguousarray(x)
    values = np.empty((n, c) + tuple(out_size), x.dtype)
    indices = np.empty((n, c) + tuple(out_size), np.int64)
    fn(x.ctypes.data, values.ctypes.data, indices.ctypes.data, n * c, pool)
    return values, indices


def build_masked_scatter(node):
    """The compiled ``fused_epilogue`` of a ``pool_scatter`` and a ``where(mask, result, c)``
    on it (transforms/epilogue.py): ``(g, indices, *where operands) -> (out,)``, or None."""
    attrs = node.attrs
    if not masked_scatter_fusable(attrs["program"], attrs["slot"]):
        return None
    g_type = node.inputs[0].type
    if g_type.dtype not in _C or _scatter_function(g_type.dtype)[0] is None:
        return None
    in_size = tuple(dict(attrs["producer_attrs"])["in_size"])
    np_dtype = g_type.dtype.np

    def run(g, indices, mask, fill, out=None):
        result = scatter(np.asarray(g, np_dtype), indices, in_size, mask, float(fill))
        if out is not None and out[0] is not None:
            np.copyto(out[0], result)
            result = out[0]
        return (result,)

    return run


def masked_scatter_fusable(program, slot: int) -> bool:
    """Whether an epilogue program on a pool_scatter result is ``where(mask, result, c)``."""
    if len(program) != 1 or slot != 1:
        return False
    name, operands, attrs = program[0]
    return name == "where" and not attrs and operands == (("in", 0), ("in", 1), ("in", 2))
