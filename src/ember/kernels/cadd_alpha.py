"""``x + alpha * y`` rounded once (a fused multiply-add per element) for float32 and float64
arrays in one direct C call: eager ``add(x, y, alpha=a)``/``sub``'s kernel (ops/add_alpha.py,
whose NumPy kernel is the specification: an exact emulation of the one rounding) and the
in-place ``x.add_(y, alpha=a)`` an optimizer's update makes.

It takes what eager calls mostly pass: operands of one shape, both C-contiguous, or one of them
a single value (a 0-d tensor, or a size-1 one broadcast over the other's shape); the result may
be one of the operands' own memory (an in-place update: each element is read before it is
written, at the same index). Anything else (broadcasting, strides, half precision) returns
None and the caller takes the general fused loop (ops/_half.py) or NumPy.

Why its own kernel: the general loop works out shape patterns, compiles per pattern and decides
by measurement on every call, several times the cost of the arithmetic on the sizes eager calls
pass; this call costs one ctypes call and an allocation. The elements are shared over ember's
pool (kernels/cpool.py) from the fused loops' size on (`cfuse.PARALLEL_MIN`).
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

from .cstep import data_address

__all__ = ["add_alpha", "available"]

_SOURCE = r"""
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);

struct job { const T *x, *y; T *out; T a; long sx, sy; };

/* out may be x's or y's memory: each element is read before it is written, at its own index */
static void part(void *job_, long lo, long hi) {
  const struct job *j = job_;
  const T *x = j->x, *y = j->y;
  T *out = j->out;
  const T a = j->a;
  if (j->sx && j->sy) {
    for (long i = lo; i < hi; i++) out[i] = FMA(y[i], a, x[i]);
  } else if (j->sy) {
    const T x0 = x[0];
    for (long i = lo; i < hi; i++) out[i] = FMA(y[i], a, x0);
  } else {
    const T y0 = y[0];
    for (long i = lo; i < hi; i++) out[i] = FMA(y0, a, x[i]);
  }
}

void ember_add_alpha(const T *x, const T *y, double alpha, T *out, long n, long sx, long sy,
                     ember_pool pool, long parallel_min) {
  struct job j = {x, y, out, (T)alpha, sx, sy};
  if (pool && n >= parallel_min) pool(part, &j, n, 64);
  else part(&j, 0, n);
}
"""

_TYPES = {
    np.dtype(np.float32): ("float", "__builtin_fmaf"),
    np.dtype(np.float64): ("double", "__builtin_fma"),
}
# (-ffp-contract=off: the one fused multiply-add is the explicit one, nothing else is contracted)
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fno-math-errno", "-fno-trapping-math")
_FLAGS += ("-ffp-contract=off", "-std=gnu11")
_P, _L = ctypes.c_void_p, ctypes.c_long


@functools.cache
def _function(dtype: np.dtype):
    """(the C function for ``dtype``, the pool, its size threshold), or None (no compiler, a
    failed build, another dtype)."""
    from . import ccompile, cpool
    from .cfuse import PARALLEL_MIN

    if dtype not in _TYPES or not ccompile.compiler_available():
        return None
    value, fma = _TYPES[dtype]
    source = f"#define T {value}\n#define FMA {fma}\n" + _SOURCE
    argtypes = [_P, _P, ctypes.c_double, _P, _L, _L, _L, _P, _L]
    try:
        fn = ccompile.load(source, "ember_add_alpha", argtypes, flags=_FLAGS)
    except ccompile.CompileError:
        return None
    return fn, cpool.parallel_for(), PARALLEL_MIN


def available(dtype) -> bool:
    """Whether the kernel runs for arrays of ``dtype`` (a compiler is there, it built)."""
    return _function(np.dtype(dtype)) is not None


def _single(a: np.ndarray, other: np.ndarray) -> bool:
    """Whether ``a`` is one value that broadcasting spreads over ``other``'s whole shape."""
    return a.size == 1 and a.ndim <= other.ndim


def add_alpha(x, y, alpha: float, out=None):
    """``x + alpha * y`` rounded once per element, in ``out`` where given (it must then have
    the result's shape and dtype and be C-contiguous; it may be ``x``'s or ``y``'s memory), or
    None where the operands are not ones this kernel takes (see the module). ``alpha`` is
    rounded to the operands' dtype first, as PyTorch's ``alpha.to<scalar_t>()``."""
    if type(x) is not np.ndarray or type(y) is not np.ndarray:
        return None
    dtype = x.dtype
    if y.dtype != dtype:
        return None
    if x.shape == y.shape:
        if not (x.flags.c_contiguous and y.flags.c_contiguous):
            return None
        shape, sx, sy = x.shape, 1, 1
    elif _single(x, y) and y.flags.c_contiguous:
        shape, sx, sy = y.shape, 0, 1
    elif _single(y, x) and x.flags.c_contiguous:
        shape, sx, sy = x.shape, 1, 0
    else:
        return None
    found = _function(dtype)
    if found is None:
        return None
    fn, pool, parallel_min = found
    if out is None:
        out = np.empty(shape, dtype)
    elif out.shape != shape or out.dtype != dtype or not out.flags.c_contiguous:
        return None
    n = out.size
    if n:
        fn(data_address(x), data_address(y), alpha, data_address(out), n, sx, sy, pool or None,
           parallel_min)  # fmt: skip
    return out
