"""Average pooling in C, 1-d to 3-d (``avg_pool``'s fast rule and its graph-runner step), with
the NumPy kernel's bits (ops/pool_avg.py, the specification).

The NumPy kernel pads the input with zeros, copies each window's first element and adds the
others in row-major window order, then divides by the window's divisor. Here each window adds
only its elements inside the input, in the same order, onto a start that stands for what the
padding would have done: -0.0 (the identity of addition: ``-0.0 + a`` is ``a`` for every a)
where the window lies wholly inside, +0.0 where it covers padding or ceil_mode's overhang (a
padded zero added to a running total changes only a total of -0.0, which it makes +0.0, and a
total is -0.0 only while every term so far was). Each output's sum stays one chain in that
order (no fast-math: the compiler keeps the additions as written; vectors hold several
outputs' chains side by side, one per lane, never one output's terms), so every result is
NumPy's. Rows with enough output columns inside the input take them a vector at a time (the
widest of 64, 32 or 16 bytes they fill; strides 1 and 2: whole or even/odd lanes) rather
than in passes along the row, whose totals go through memory at every window offset.

Planes whose rows hold too few such outputs for a 64-byte vector (small planes, late in a CNN,
and strides of 3 or more) go a block of planes at a time instead, one plane per lane: the
block's planes copied interleaved, each output's window summed by whole vectors in window
order, so each lane is one output's chain as the scalar columns compute it.

Geometry is an argument (one library per dtype): D, H, W, OD, OH, OW, KD, KH, KW, SD, SH, SW,
PD, PH, PW, then whether planes go in blocks; 1-d and 2-d poolings are 3-d ones with leading
sizes of one. The divisors come
from the caller (the op's own, per output position). float32 and float64 only (None
otherwise: the NumPy kernel runs).
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from .cstep import CStep, data_address, function_address

__all__ = ["avg_pool", "avg_pool_c_step", "lifted_geometry"]

# the C type, and the integer type of its width (a shuffle's mask lanes)
_C = {np.dtype(np.float32): ("float", "int"), np.dtype(np.float64): ("double", "long")}
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fno-math-errno", "-std=gnu11")

_SOURCE = r"""
#include <stdlib.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
struct job { const T *x; T *out; const T *div; const long *g; };

/* One output row at a time, in two ways that give the same bits. Where the rows have
   outputs whose windows lie wholly inside them (columns [ilo, ihi)), those are summed a vector
   at a time in a register, the widest vector (64, 32 or 16 bytes) whose lanes those columns
   fill: each lane takes its window's elements in row-major window order, loaded as whole
   vectors (stride 1) or as the even or odd lanes of two (stride 2), so no lane's additions are
   reordered; the columns past the last whole vector are one more vector ending at ihi (over
   columns summed already: the same bits again), the few at the edges summed one by one. Rows
   narrower than every vector (or other strides) use the row itself as the running totals:
   each window offset (kd, kh, kw) in row-major order adds its element to every output whose
   window holds it inside the input, a pass along the row the compiler vectorizes. */

/* the row's outputs of columns [c0, c1) by passes along it */
static inline __attribute__((always_inline)) void passes(const T *x, T *out, const long *g,
                                                         long d0, long da, long db, long h0,
                                                         long ha, long hb, long c0, long c1) {
  const long H = g[1], W = g[2], KW = g[8], SW = g[11], PW = g[14];
  for (long kd = da; kd < db; kd++)
    for (long kh = ha; kh < hb; kh++) {
      const T *row = x + ((d0 + kd) * H + h0 + kh) * W;
      for (long kw = 0; kw < KW; kw++) {
        /* the outputs whose column w = ow * SW - PW + kw lies in [0, W), within [c0, c1) */
        long first = PW - kw > 0 ? (PW - kw + SW - 1) / SW : 0;
        long end = W - 1 + PW - kw < 0 ? 0 : (W - 1 + PW - kw) / SW + 1;
        if (first < c0) first = c0;
        if (end > c1) end = c1;
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
}

/* rows too narrow for a vector: every column by passes along the row */
static void narrow_planes(const struct job *j, long lo, long hi) {
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
        passes(x, out, g, d0, da, db, h0, ha, hb, 0, OW);
        for (long ow = 0; ow < OW; ow++) out[ow] /= div[ow];
      }
    }
  }
}

/* output column c of the row, its elements inside the input one by one in window order */
#define COLUMN(c)                                                                    \
  {                                                                                  \
    const long w0 = (c) * SW - PW;                                                   \
    const long wa = w0 < 0 ? -w0 : 0, wb = w0 + KW > W ? W - w0 : KW;                \
    T acc = rows_whole && wa == 0 && wb == KW ? (T)-0.0 : (T)0.0;                    \
    for (long kd = da; kd < db; kd++)                                                \
      for (long kh = ha; kh < hb; kh++) {                                            \
        const T *row = x + ((d0 + kd) * H + h0 + kh) * W + w0;                       \
        for (long kw = wa; kw < wb; kw++) acc += row[kw];                            \
      }                                                                              \
    out[c] = acc / div[c];                                                           \
  }

/* the vector of outputs from column o: each window offset's elements (stride 1: a vector
   from the offset; stride 2: the even or odd lanes of the two vectors from the offset's
   pair, 2 * lanes elements read from the pair's first) added lane by lane */
#define VECTOR(o)                                                                    \
  {                                                                                  \
    V acc = start - (V){};                                                           \
    for (long kd = da; kd < db; kd++)                                                \
      for (long kh = ha; kh < hb; kh++) {                                            \
        const T *row = x + ((d0 + kd) * H + h0 + kh) * W + (o) * SW - PW;            \
        for (long kw = 0; kw < KW; kw++)                                             \
          if (SW == 1)                                                               \
            acc += *(const V *)(row + kw);                                           \
          else                                                                       \
            acc += __builtin_shuffle(*(const V *)(row + (kw & ~1L)),                 \
                                     *(const V *)(row + (kw & ~1L) + N),             \
                                     kw & 1 ? odd : even);                           \
      }                                                                              \
    *(V *)(out + (o)) = acc / *(const V *)(div + (o));                               \
  }

/* rows summed in vectors of BYTES bytes (strides 1 and 2, ihi - ilo at least its lanes) */
#define WIDE_PLANES(NAME, BYTES)                                                     \
  static void NAME(const struct job *j, long lo, long hi, long ilo, long ihi) {      \
    typedef T V __attribute__((vector_size(BYTES), aligned(sizeof(T)), may_alias));  \
    typedef M VM __attribute__((vector_size(BYTES)));                                \
    enum { N = BYTES / sizeof(T) };                                                  \
    const long *g = j->g;                                                            \
    const long D = g[0], H = g[1], W = g[2], OD = g[3], OH = g[4], OW = g[5];        \
    const long KD = g[6], KH = g[7], KW = g[8], SD = g[9], SH = g[10], SW = g[11];   \
    const long PD = g[12], PH = g[13], PW = g[14];                                   \
    /* a stride-2 vector at column o reads up to element 2 o - PW + reach: inside W */ \
    const long reach = SW == 1 ? N + KW - 1 : ((KW - 1) & ~1L) + 2 * N;              \
    VM even, odd;                                                                    \
    for (long v = 0; v < N; v++) even[v] = 2 * v, odd[v] = 2 * v + 1;                \
    for (long p = lo; p < hi; p++) {                                                 \
      const T *x = j->x + p * D * H * W;                                             \
      T *out = j->out + p * OD * OH * OW;                                            \
      const T *div = j->div;                                                         \
      for (long od = 0; od < OD; od++) {                                             \
        const long d0 = od * SD - PD;                                                \
        const long da = d0 < 0 ? -d0 : 0, db = d0 + KD > D ? D - d0 : KD;            \
        for (long oh = 0; oh < OH; oh++, out += OW, div += OW) {                     \
          const long h0 = oh * SH - PH;                                              \
          const long ha = h0 < 0 ? -h0 : 0, hb = h0 + KH > H ? H - h0 : KH;          \
          const int rows_whole = da == 0 && db == KD && ha == 0 && hb == KH;         \
          /* -0.0 where the window lies wholly inside, +0.0 where it covers padding */ \
          const T start = rows_whole ? (T)-0.0 : (T)0.0;                             \
          long ow = ilo;                                                             \
          for (; ow + N <= ihi && ow * SW - PW + reach <= W; ow += N) VECTOR(ow)     \
          if (ow < ihi && (ihi - N) * SW - PW + reach <= W) {                        \
            VECTOR(ihi - N)                                                          \
            ow = ihi;                                                                \
          }                                                                          \
          for (long c = 0; c < ilo; c++) COLUMN(c)                                   \
          for (long c = ow; c < OW; c++) COLUMN(c)                                   \
        }                                                                            \
      }                                                                              \
    }                                                                                \
  }
WIDE_PLANES(planes64, 64)
WIDE_PLANES(planes32, 32)
WIDE_PLANES(planes16, 16)

/* planes [lo, hi) one at a time, rows in vectors where they are wide enough */
static void rows_of_planes(const struct job *j, long lo, long hi) {
  const long *g = j->g;
  const long W = g[2], OW = g[5], KW = g[8], SW = g[11], PW = g[14];
  /* the columns whose windows lie inside the row: ow * SW - PW >= 0, ow * SW - PW + KW <= W */
  long ilo = (PW + SW - 1) / SW, ihi = W + PW - KW < 0 ? 0 : (W + PW - KW) / SW + 1;
  if (ihi > OW) ihi = OW;
  if (ilo > ihi) ilo = ihi;
  const long inside = SW == 1 || SW == 2 ? ihi - ilo : 0;
  if (inside * (long)sizeof(T) >= 64) planes64(j, lo, hi, ilo, ihi);
  else if (inside * (long)sizeof(T) >= 32) planes32(j, lo, hi, ilo, ihi);
  else if (inside * (long)sizeof(T) >= 16) planes16(j, lo, hi, ilo, ihi);
  else narrow_planes(j, lo, hi);
}

/* CN planes at once, one plane per lane of a 64-byte vector: the planes' elements copied
   interleaved (element i of plane p at i * CN + p), each output position's window then summed
   by whole vectors in window order onto its start (as COLUMN: -0.0 where the window lies wholly
   inside, +0.0 where it covers padding), divided, and copied back plane by plane. Every lane
   is COLUMN's chain for its plane, so the bits are the same; it takes planes whose rows fill no
   64-byte vector of outputs (small planes, strides of 3 and more), where the rows' own vectors
   are short or absent. ``xt`` and ``ot``: scratch of D*H*W and OD*OH*OW vectors. */
enum { CN = 64 / sizeof(T) };
static void channel_block(const struct job *j, long p0, T *xt, T *ot) {
  typedef T V __attribute__((vector_size(64), aligned(sizeof(T)), may_alias));
  const long *g = j->g;
  const long D = g[0], H = g[1], W = g[2], OD = g[3], OH = g[4], OW = g[5];
  const long KD = g[6], KH = g[7], KW = g[8], SD = g[9], SH = g[10], SW = g[11];
  const long PD = g[12], PH = g[13], PW = g[14];
  const long plane = D * H * W, oplane = OD * OH * OW;
  const T *x = j->x + p0 * plane;
  for (long i = 0; i < plane; i++)
    for (long p = 0; p < CN; p++) xt[i * CN + p] = x[p * plane + i];
  const T *div = j->div;
  V *o = (V *)ot;
  for (long od = 0; od < OD; od++) {
    const long d0 = od * SD - PD;
    const long da = d0 < 0 ? -d0 : 0, db = d0 + KD > D ? D - d0 : KD;
    for (long oh = 0; oh < OH; oh++) {
      const long h0 = oh * SH - PH;
      const long ha = h0 < 0 ? -h0 : 0, hb = h0 + KH > H ? H - h0 : KH;
      const int rows_whole = da == 0 && db == KD && ha == 0 && hb == KH;
      for (long ow = 0; ow < OW; ow++, o++, div++) {
        const long w0 = ow * SW - PW;
        const long wa = w0 < 0 ? -w0 : 0, wb = w0 + KW > W ? W - w0 : KW;
        const T start = rows_whole && wa == 0 && wb == KW ? (T)-0.0 : (T)0.0;
        V acc = start - (V){};
        for (long kd = da; kd < db; kd++)
          for (long kh = ha; kh < hb; kh++) {
            const V *row = (const V *)xt + ((d0 + kd) * H + h0 + kh) * W + w0;
            for (long kw = wa; kw < wb; kw++) acc += row[kw];
          }
        *o = acc / *div;
      }
    }
  }
  T *out = j->out + p0 * oplane;
  for (long i = 0; i < oplane; i++)
    for (long p = 0; p < CN; p++) out[p * oplane + i] = ot[i * CN + p];
}

static void planes(void *job_, long lo, long hi) {
  const struct job *j = job_;
  const long *g = j->g;
  if (g[15] && hi - lo >= CN) { /* blocks of CN planes (scratch within g[15]'s budget) */
    const long plane = g[0] * g[1] * g[2], oplane = g[3] * g[4] * g[5];
    T *xt = aligned_alloc(64, (size_t)(plane + oplane) * CN * sizeof(T));
    if (xt) {
      for (; lo + CN <= hi; lo += CN) channel_block(j, lo, xt, xt + plane * CN);
      free(xt);
    }
  }
  if (lo < hi) rows_of_planes(j, lo, hi);
}

void avg_pool(const T *x, T *out, long count, const T *div, const long *g, ember_pool pool) {
  struct job j = {x, out, div, g};
  long work = count * g[3] * g[4] * g[5] * g[6] * g[7] * g[8];
  /* (blocked planes: chunks of whole blocks) */
  if (pool && count > 1 && work >= (1L << 18)) pool(planes, &j, count, g[15] ? CN : 1);
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
        fn = ccompile.load(
            f"#define T {_C[dtype][0]}\n#define M {_C[dtype][1]}\n" + _SOURCE,
            symbol,
            argtypes,
            flags=_FLAGS,
        )
    except ccompile.CompileError:
        return None, None
    _built[(dtype, symbol)] = found = (fn, cpool.parallel_for())
    return found


def lifted_geometry(in_size, out_size, kernel, stride, padding) -> np.ndarray | None:
    """The kernel's geometry block (int64) of a 1-d to 3-d pooling, lifted to 3-d, and whether
    planes go a block at a time (`_blocked`); None for other ranks or sizes not known."""
    nd = len(kernel)
    sizes = (in_size, out_size, kernel, stride, padding)
    if not 1 <= nd <= 3 or not all(isinstance(v, int) for s in sizes for v in s):
        return None
    lift = 3 - nd
    ones, zeros = (1,) * lift, (0,) * lift
    block = (*ones, *in_size, *ones, *out_size, *ones, *kernel, *ones, *stride, *zeros, *padding)
    blocked = _blocked(in_size, out_size, kernel, stride, padding)
    return np.array((*block, int(blocked)), np.int64)


def _blocked(in_size, out_size, kernel, stride, padding) -> bool:
    """Whether planes go a block of one 64-byte vector's lanes at a time (the C `channel_block`):
    where the rows' own vectors would hold fewer than 64 bytes of outputs whose windows lie
    inside the row and the windows overlap (each element read several times), or the rows take
    no vectors at all (fewer than 16 bytes of such outputs, strides of 3 or more); and a
    block's copies of its
    planes (the input's and the output's, float64 lanes: the wider dtype) fit in half of one
    core's L2 cache, beside the data they are copied from."""
    from .cache_sizes import l2_bytes

    w, ow, kw, sw, pw = in_size[-1], out_size[-1], kernel[-1], stride[-1], padding[-1]
    first = -(-pw // sw)
    last = min(ow, (w + pw - kw) // sw + 1) if w + pw - kw >= 0 else 0
    inside = last - first if sw <= 2 else 0
    if inside * 4 >= 64:  # (counted in float32 lanes: float64 rows of 8 to 15 go in blocks too)
        return False
    if math.prod(kernel) <= math.prod(stride) and inside * 4 >= 16:
        # windows that do not overlap read each element once: the copies would cost what the
        # rows' own shorter vectors lose
        return False
    scratch = (math.prod(in_size) + math.prod(out_size)) * 64
    return scratch <= l2_bytes() // 2


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
