"""Average pooling in C, 1-d to 3-d (``avg_pool``'s fast rule and its graph-runner step), with
the NumPy kernel's bits (ops/pool_avg.py, the specification).

The NumPy kernel pads the input with zeros, copies each window's first element and adds the
others in row-major window order, then divides by the window's divisor. Here each window adds
only its elements inside the input, in the same order, onto a start that stands for what the
padding would have done: -0.0 (the identity of addition: ``-0.0 + a`` is ``a`` for every a)
where the window lies wholly inside, +0.0 where it covers padding or ceil_mode's overhang (a
padded zero added to a running total changes only a total of -0.0, which it makes +0.0, and a
total is -0.0 only while every term so far was). The sums stay scalar, in order (no
fast-math: the compiler keeps the additions as written), so every result is NumPy's.

Geometry is an argument (one library per dtype): D, H, W, OD, OH, OW, KD, KH, KW, SD, SH, SW,
PD, PH, PW; 1-d and 2-d poolings are 3-d ones with leading sizes of one. The divisors come
from the caller (the op's own, per output position). float32 and float64 only (None
otherwise: the NumPy kernel runs).
"""

from __future__ import annotations

import ctypes

import numpy as np

from .cstep import CStep, data_address, function_address

__all__ = ["avg_pool", "avg_pool_c_step", "lifted_geometry"]

_C = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fno-math-errno", "-std=gnu11")

_SOURCE = r"""
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
struct job { const T *x; T *out; const T *div; const long *g; };

/* one output row at a time, the row itself the running totals: each window offset (kd, kh, kw)
   in row-major order adds its element to every output of the row whose window holds it inside
   the input, a pass along the row the compiler vectorizes, so each output still takes its
   elements in the window's order */
static void planes(void *job_, long lo, long hi) {
  const struct job *j = job_;
  const long *g = j->g;
  const long D = g[0], H = g[1], W = g[2], OD = g[3], OH = g[4], OW = g[5];
  const long KD = g[6], KH = g[7], KW = g[8], SD = g[9], SH = g[10], SW = g[11];
  const long PD = g[12], PH = g[13], PW = g[14];
  for (long p = lo; p < hi; p++) {
    const T *x = j->x + p * D * H * W;
    T *out = j->out + p * OD * OH * OW;
    const T *div = j->div;
    for (long od = 0; od < OD; od++) {
      const long d0 = od * SD - PD;
      const long da = d0 < 0 ? -d0 : 0, db = d0 + KD > D ? D - d0 : KD;
      for (long oh = 0; oh < OH; oh++, out += OW, div += OW) {
        const long h0 = oh * SH - PH;
        const long ha = h0 < 0 ? -h0 : 0, hb = h0 + KH > H ? H - h0 : KH;
        const int rows_whole = da == 0 && db == KD && ha == 0 && hb == KH;
        for (long ow = 0; ow < OW; ow++) {
          const long w0 = ow * SW - PW;
          out[ow] = rows_whole && w0 >= 0 && w0 + KW <= W ? (T)-0.0 : (T)0.0;
        }
        for (long kd = da; kd < db; kd++)
          for (long kh = ha; kh < hb; kh++) {
            const T *row = x + ((d0 + kd) * H + h0 + kh) * W;
            for (long kw = 0; kw < KW; kw++) {
              /* the outputs whose column w = ow * SW - PW + kw lies in [0, W) */
              long first = PW - kw > 0 ? (PW - kw + SW - 1) / SW : 0;
              long end = W - 1 + PW - kw < 0 ? 0 : (W - 1 + PW - kw) / SW + 1;
              if (end > OW) end = OW;
              const T *at = row - PW + kw;
              /* (strides 1 and 2 spelled out: constant strides the vectorizer takes) */
              if (SW == 1)
                for (long ow = first; ow < end; ow++) out[ow] += at[ow];
              else if (SW == 2)
                for (long ow = first; ow < end; ow++) out[ow] += at[2 * ow];
              else
                for (long ow = first; ow < end; ow++) out[ow] += at[ow * SW];
            }
          }
        for (long ow = 0; ow < OW; ow++) out[ow] /= div[ow];
      }
    }
  }
}

void avg_pool(const T *x, T *out, long count, const T *div, const long *g, ember_pool pool) {
  struct job j = {x, out, div, g};
  long work = count * g[3] * g[4] * g[5] * g[6] * g[7] * g[8];
  if (pool && count > 1 && work >= (1L << 18)) pool(planes, &j, count, 1);
  else planes(&j, 0, count);
}

/* the graph runner's step (runtime/cgraph.py): args x, out, count, div, geometry, pool (or 0) */
void avg_pool_step(const long *a) {
  avg_pool((const T *)a[0], (T *)a[1], a[2], (const T *)a[3], (const long *)a[4],
           (ember_pool)a[5]);
}
"""

_P = ctypes.c_void_p


# (dtype, symbol) -> (function, pool): an eager call would otherwise hash the source each time
_built: dict = {}


def _library(dtype: np.dtype, symbol: str, argtypes: list):
    """The compiled function and the pool, or (None, None) (no compiler, another dtype; a miss
    is not remembered: a compiler may be set later)."""
    from . import ccompile, cpool

    found = _built.get((dtype, symbol))
    if found is not None:
        return found
    if dtype not in _C or not ccompile.compiler_available():
        return None, None
    try:
        fn = ccompile.load(f"#define T {_C[dtype]}\n" + _SOURCE, symbol, argtypes, flags=_FLAGS)
    except ccompile.CompileError:
        return None, None
    _built[(dtype, symbol)] = found = (fn, cpool.parallel_for())
    return found


def lifted_geometry(in_size, out_size, kernel, stride, padding) -> np.ndarray | None:
    """The kernel's geometry block (int64) of a 1-d to 3-d pooling, lifted to 3-d; None for
    other ranks or sizes not known."""
    nd = len(kernel)
    sizes = (in_size, out_size, kernel, stride, padding)
    if not 1 <= nd <= 3 or not all(isinstance(v, int) for s in sizes for v in s):
        return None
    lift = 3 - nd
    ones, zeros = (1,) * lift, (0,) * lift
    block = (*ones, *in_size, *ones, *out_size, *ones, *kernel, *ones, *stride, *zeros, *padding)
    return np.array(block, np.int64)


def avg_pool(x: np.ndarray, geometry: np.ndarray, div: np.ndarray) -> np.ndarray | None:
    """The pooled (N, C, *out) of ``x`` (N, C, *in), ``geometry`` `lifted_geometry`'s block,
    ``div`` the divisor of every output position (its spatial shape, contiguous, x's dtype);
    None where the kernel does not apply."""
    fn, pool = _library(x.dtype, "avg_pool", [_P, _P, ctypes.c_long, _P, _P, _P])
    if fn is None or x.size == 0:
        return None
    x = np.ascontiguousarray(x)
    out = np.empty(x.shape[:2] + div.shape, x.dtype)
    count = x.shape[0] * x.shape[1]
    fn(data_address(x), data_address(out), count, div.ctypes.data, geometry.ctypes.data, pool)
    return out


def avg_pool_c_step(count: int, dtype: np.dtype, geometry: np.ndarray, div: np.ndarray):
    """The graph runner's step of a pooling of ``count`` planes (a node's N * C), or None."""
    step, pool = _library(np.dtype(dtype), "avg_pool_step", [_P])
    if step is None or count == 0:
        return None
    div = np.ascontiguousarray(div, dtype)
    geometry = np.ascontiguousarray(geometry, np.int64)
    args = np.array([0, 0, count, div.ctypes.data, geometry.ctypes.data, pool or 0], np.int64)
    slots = [(0, "in", 0), (1, "out", 0)]
    return CStep(function_address(step), args, slots, (step, div, geometry))
