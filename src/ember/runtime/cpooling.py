"""C kernels for 2-d max pooling and its gradient (the ``max_pool`` and ``pool_scatter`` ops),
used by the code generator through the ops' ``extra["compile"]`` hooks (ops/pool.py).

The NumPy kernels in ops/pool.py are the specification; these compute the same thing in one
pass per (n, c) plane, the planes shared over the thread pool (runtime/cpool.py):

* ``max_pool``: each window's maximum and the flat index (within its plane) of the element
  chosen, as PyTorch chooses it: the first maximum, or the last NaN (an element replaces the
  running maximum when it is greater or NaN). Padding and the part of a ``ceil_mode`` window
  past the edge hold no element (the reference pads with -inf, which is never chosen over a
  real element). Equal to the reference bit for bit, indices included.
* ``pool_scatter``: zeros of the input's shape with each gradient added at its index, in the
  order of the outputs (the order ``np.add.at`` adds in), so sums of overlapping windows
  round the same way.

`build_max_pool(node)` / `build_scatter(node)` return a function of the node's input arrays,
or None where they do not apply (not 2-d, not float32/float64, no C compiler).
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from .. import dtypes as dt

__all__ = ["build_max_pool", "build_scatter"]

_C = {dt.float32: "float", dt.float64: "double"}
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fno-math-errno", "-std=gnu11")

_MAX_POOL = r"""
#include <stddef.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
struct job {
  const T *x; T *values; long long *indices;
  long ih, iw, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
};
static void planes(void *job_, long lo, long hi) {
  const struct job *j = job_;
  const long in_plane = j->ih * j->iw, out_plane = j->oh * j->ow;
  for (long p = lo; p < hi; p++) {
    const T *x = j->x + p * in_plane;
    T *values = j->values + p * out_plane;
    long long *indices = j->indices + p * out_plane;
    for (long oy = 0; oy < j->oh; oy++) {
      for (long ox = 0; ox < j->ow; ox++) {
        T best = 0;
        long chosen = -1;
        for (long ky = 0; ky < j->kh; ky++) {
          const long y = oy * j->sh - j->ph + ky * j->dh;
          if (y < 0 || y >= j->ih) continue;
          for (long kx = 0; kx < j->kw; kx++) {
            const long xx = ox * j->sw - j->pw + kx * j->dw;
            if (xx < 0 || xx >= j->iw) continue;
            const long at = y * j->iw + xx;
            const T v = x[at];
            if (chosen < 0 || v > best || v != v) {
              best = v;
              chosen = at;
            }
          }
        }
        values[oy * j->ow + ox] = best;
        indices[oy * j->ow + ox] = chosen;
      }
    }
  }
}
void max_pool(const T *x, T *values, long long *indices, long count, const long *shape,
              ember_pool pool) {
  struct job j = {x, values, indices, shape[0], shape[1], shape[2], shape[3], shape[4],
                  shape[5], shape[6], shape[7], shape[8], shape[9], shape[10], shape[11]};
  if (pool && count * j.oh * j.ow * j.kh * j.kw > (1L << 16)) pool(planes, &j, count, 1);
  else planes(&j, 0, count);
}
"""

_SCATTER = r"""
#include <string.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
struct job { const T *g; const long long *indices; T *out; long in_plane, out_plane; };
static void planes(void *job_, long lo, long hi) {
  const struct job *j = job_;
  for (long p = lo; p < hi; p++) {
    T *out = j->out + p * j->in_plane;
    const T *g = j->g + p * j->out_plane;
    const long long *indices = j->indices + p * j->out_plane;
    memset(out, 0, j->in_plane * sizeof *out);
    for (long k = 0; k < j->out_plane; k++) out[indices[k]] += g[k];
  }
}
void scatter(const T *g, const long long *indices, T *out, long count, long in_plane,
             long out_plane, ember_pool pool) {
  struct job j = {g, indices, out, in_plane, out_plane};
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


def build_max_pool(node):
    """A C implementation of a 2-d ``max_pool`` node: ``(x) -> (values, indices)``, or None."""
    attrs = node.attrs
    x_type = node.inputs[0].type
    if len(attrs["kernel"]) != 2 or any(not isinstance(d, int) for d in x_type.shape[2:]):
        return None
    pointer = ctypes.c_void_p
    fn, pool = _load(
        _MAX_POOL,
        "max_pool",
        x_type.dtype,
        [pointer] * 3 + [ctypes.c_long] * 1 + [pointer, pointer],
    )
    if fn is None:
        return None
    np_dtype = x_type.dtype.np
    in_size = tuple(x_type.shape[2:])
    out_size = tuple(node.outputs[0].type.shape[2:])
    if any(not isinstance(d, int) for d in out_size):
        return None
    geometry = np.array(
        [
            *in_size,
            *out_size,
            *attrs["kernel"],
            *attrs["stride"],
            *attrs["padding"],
            *attrs["dilation"],
        ],
        np.int64,
    )

    def run(x):
        x = x if x.dtype == np_dtype and x.flags.c_contiguous else np.ascontiguousarray(x, np_dtype)
        shape = x.shape[:2] + out_size
        values, indices = np.empty(shape, np_dtype), np.empty(shape, np.int64)
        count = x.shape[0] * x.shape[1]
        if count and values.size:
            fn(
                x.ctypes.data,
                values.ctypes.data,
                indices.ctypes.data,
                count,
                geometry.ctypes.data,
                pool,
            )
        return values, indices

    return run


def build_scatter(node):
    """A C implementation of a ``pool_scatter`` node over 2-d planes: ``(g, indices) -> out``,
    or None."""
    g_type = node.inputs[0].type
    in_size = tuple(node.attrs["in_size"])
    if any(not isinstance(d, int) for d in (*in_size, *g_type.shape[2:])):
        return None
    pointer = ctypes.c_void_p
    fn, pool = _load(
        _SCATTER, "scatter", g_type.dtype, [pointer] * 3 + [ctypes.c_long] * 3 + [pointer]
    )
    if fn is None:
        return None
    np_dtype = g_type.dtype.np
    in_plane = math.prod(in_size)

    def run(g, indices):
        g = g if g.dtype == np_dtype and g.flags.c_contiguous else np.ascontiguousarray(g, np_dtype)
        indices = np.ascontiguousarray(indices, np.int64)
        out = np.empty(g.shape[:2] + in_size, np_dtype)
        count = g.shape[0] * g.shape[1]
        out_plane = math.prod(g.shape[2:])
        if out.size:
            fn(
                g.ctypes.data,
                indices.ctypes.data,
                out.ctypes.data,
                count,
                in_plane,
                out_plane,
                pool,
            )
        return out

    return run
