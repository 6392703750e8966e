"""A C kernel for the gradient of max pooling (the ``pool_scatter`` op), used by the code
generator through the op's ``extra["compile"]`` hook (ops/pool.py).

The NumPy kernel in ops/pool.py is the specification (``np.add.at``, about 3x slower). This
computes the same thing: zeros of the input's shape with each gradient added at its index
within its (n, c) plane, in the order of the outputs (the order ``np.add.at`` adds in), so
sums of overlapping windows round the same way; the planes are shared over the thread pool
(runtime/cpool.py). Max pooling itself stays on NumPy: its gathered, vectorized comparisons
were faster than the straightforward C loops tried (strided loads and branchy maxima).

`build_scatter(node)` returns a function of the node's input arrays, or None where it does not
apply (not float32/float64, symbolic sizes, no C compiler).
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from .. import dtypes as dt

__all__ = ["build_scatter"]

_C = {dt.float32: "float", dt.float64: "double"}
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fno-math-errno", "-std=gnu11")

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
