"""Whole-layer LSTM and GRU in C: the time loop, forward and backward through time.

Each time step is one product on ember's GEMM (kernels/cgemm.py: the recurrent projection of
all gates at once, ``h @ W_hh^T``, shared over ember's pool where it is large) followed by one
C kernel for the step's elementwise work (the gates' sigmoids and tanhs, the new cell and
hidden state, and the activations the backward pass reads), so a step is matmul-bound. The
input projection of every step is computed before the loop by the caller (one large product).
Backward, each step is one C kernel (the gates' pre-activation gradients) and one product
(``dgates @ W_hh``); the weight gradient is one product over all steps at the end.

The NumPy kernels of ops/recurrent.py are the specification; these follow their arithmetic
term for term (``-ffp-contract=off``), so results differ only by the vector exp's and tanh's
few ulps (glibc's libmvec; without it, the scalar C library's functions).

Every function returns None where it does not apply (no compiler, a dtype other than
float32/float64, an empty operand) and the caller runs NumPy.
"""

from __future__ import annotations

import ctypes
import functools

import numpy as np

__all__ = ["gru_backward", "gru_forward", "lstm_backward", "lstm_forward"]

_SOURCE = r"""
#include <math.h>
SIMD T EXP(T);
SIMD T TANH(T);

static inline T sig(T x) { return (T)1 / ((T)1 + EXP(-x)); }

/* one LSTM step: pre-activations xg + rec (gates i, f, g, o, each H wide, per row) */
void ember_lstm_fwd(const T *restrict xg, const T *restrict rec, const T *restrict c_prev,
                    T *restrict acts, T *restrict c, T *restrict h, long rows, long H) {
  for (long b = 0; b < rows; b++) {
    const T *x = xg + b * 4 * H, *r = rec + b * 4 * H, *cp = c_prev + b * H;
    T *a = acts + b * 4 * H, *cb = c + b * H, *hb = h + b * H;
#pragma omp simd
    for (long j = 0; j < H; j++) {
      T i = sig(x[j] + r[j]);
      T f = sig(x[H + j] + r[H + j]);
      T g = TANH(x[2 * H + j] + r[2 * H + j]);
      T o = sig(x[3 * H + j] + r[3 * H + j]);
      a[j] = i;
      a[H + j] = f;
      a[2 * H + j] = g;
      a[3 * H + j] = o;
      T cn = f * cp[j] + i * g;
      cb[j] = cn;
      hb[j] = o * TANH(cn);
    }
  }
}

/* one LSTM step backward: dh = rec + gy reaches h_t, dc (in: from step t+1, out: to step
   t-1) reaches c_t; gcs and gacts are the gradients of the saved c_t and activations */
void ember_lstm_bwd(const T *restrict rec, const T *restrict gy, const T *restrict gcs,
                    const T *restrict gacts, const T *restrict acts, const T *restrict c,
                    const T *restrict c_prev, T *restrict dc, T *restrict dpre, long rows,
                    long H) {
  for (long b = 0; b < rows; b++) {
    const T *r = rec + b * H, *y = gy + b * H, *gc = gcs + b * H, *ga = gacts + b * 4 * H;
    const T *a = acts + b * 4 * H, *cb = c + b * H, *cp = c_prev + b * H;
    T *d = dc + b * H, *p = dpre + b * 4 * H;
#pragma omp simd
    for (long j = 0; j < H; j++) {
      T i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j];
      T dh = r[j] + y[j];
      T tc = TANH(cb[j]);
      T dout = dh * tc + ga[3 * H + j];
      T dcj = d[j] + gc[j] + dh * o * ((T)1 - tc * tc);
      T di = dcj * g + ga[j];
      T df = dcj * cp[j] + ga[H + j];
      T dg = dcj * i + ga[2 * H + j];
      p[j] = di * i * ((T)1 - i);
      p[H + j] = df * f * ((T)1 - f);
      p[2 * H + j] = dg * ((T)1 - g * g);
      p[3 * H + j] = dout * o * ((T)1 - o);
      d[j] = dcj * f;
    }
  }
}

/* one GRU step: rec = h_prev @ W_hh^T (gates r, z, n), plus b_hh; acts = r, z, n, hn */
void ember_gru_fwd(const T *restrict xg, const T *restrict rec, const T *restrict bias,
                   const T *restrict h_prev, T *restrict acts, T *restrict h, long rows,
                   long H) {
  for (long b = 0; b < rows; b++) {
    const T *x = xg + b * 3 * H, *q = rec + b * 3 * H, *hp = h_prev + b * H;
    T *a = acts + b * 4 * H, *hb = h + b * H;
#pragma omp simd
    for (long j = 0; j < H; j++) {
      T r = sig(x[j] + (q[j] + bias[j]));
      T z = sig(x[H + j] + (q[H + j] + bias[H + j]));
      T hn = q[2 * H + j] + bias[2 * H + j];
      T n = TANH(x[2 * H + j] + r * hn);
      a[j] = r;
      a[H + j] = z;
      a[2 * H + j] = n;
      a[3 * H + j] = hn;
      hb[j] = ((T)1 - z) * n + z * hp[j];
    }
  }
}

/* one GRU step backward: dh = rec + carry + gy reaches h_t; carry (out) is dh * z, the direct
   path to h_{t-1}; dgx / dgh are the gradients of the input / recurrent projections */
void ember_gru_bwd(const T *restrict rec, T *restrict carry, const T *restrict gy,
                   const T *restrict gacts, const T *restrict acts, const T *restrict h_prev,
                   T *restrict dgx, T *restrict dgh, long rows, long H) {
  for (long b = 0; b < rows; b++) {
    const T *q = rec + b * H, *y = gy + b * H, *ga = gacts + b * 4 * H;
    const T *a = acts + b * 4 * H, *hp = h_prev + b * H;
    T *k = carry + b * H, *dx = dgx + b * 3 * H, *dr = dgh + b * 3 * H;
#pragma omp simd
    for (long j = 0; j < H; j++) {
      T r = a[j], z = a[H + j], n = a[2 * H + j], hn = a[3 * H + j];
      T dh = q[j] + k[j] + y[j];
      T dn = dh * ((T)1 - z) + ga[2 * H + j];
      T dz = dh * (hp[j] - n) + ga[H + j];
      T dpn = dn * ((T)1 - n * n);
      T drr = dpn * hn + ga[j];
      T dhn = dpn * r + ga[3 * H + j];
      T dpr = drr * r * ((T)1 - r);
      T dpz = dz * z * ((T)1 - z);
      dx[j] = dpr;
      dx[H + j] = dpz;
      dx[2 * H + j] = dpn;
      dr[j] = dpr;
      dr[H + j] = dpz;
      dr[2 * H + j] = dhn;
      k[j] = dh * z;
    }
  }
}
"""

# The recurrent product h @ W with W packed once per layer: ember's GEMM (kernels/cgemm.py)
# packs its right operand at every call, which for a batch of rows times a weight matrix costs
# about as much as the multiply-adds; here W's panels of NR columns are packed once (each panel
# k x NR, contiguous) and every step packs only h (a few rows) and runs the shared micro-kernel
# (kernels/cmicro.py), panels shared over ember's pool where the product is large.
_PACKED = r"""
#include <stdlib.h>
#include <string.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);

/* b (k x n; element (p, j) at b[p * sp + j * sj]) as panels of NR columns, each k x NR (zero
   past n): a transposed weight is packed straight from the weight, without a copy */
void ember_rnn_pack(const T *b, long k, long n, long sp, long sj, T *bp) {
  for (long j0 = 0; j0 < n; j0 += NR) {
    long nr = n - j0 < NR ? n - j0 : NR;
    T *to = bp + (j0 / NR) * k * NR;
    if (labs(sp) <= labs(sj)) { /* (a transposed weight) read along its rows, not across */
      for (long c = 0; c < NR; c++)
        for (long p = 0; p < k; p++) to[p * NR + c] = c < nr ? b[p * sp + (j0 + c) * sj] : 0;
    } else {
      for (long p = 0; p < k; p++)
        for (long c = 0; c < NR; c++) to[p * NR + c] = c < nr ? b[p * sp + (j0 + c) * sj] : 0;
    }
  }
}

static T *tiles_of(size_t bytes) {
  static __thread T *buffer = 0;
  static __thread size_t capacity = 0;
  if (bytes > capacity) {
    free(buffer);
    capacity = (bytes + 4095) / 4096 * 4096;
    buffer = aligned_alloc(64, capacity);
    if (!buffer) abort();
  }
  return buffer;
}

struct product { const T *ap; long m, k, n; const T *bp; T *c; };

static void panels(void *job, long lo, long hi) {
  const struct product *j = job;
  long m = j->m, k = j->k, mp = (m + MR - 1) / MR;
  T *tiles = tiles_of((size_t)mp * MR * NR * sizeof(T));
  for (long jp = lo; jp < hi; jp++) {
    long j0 = jp * NR, nr = j->n - j0 < NR ? j->n - j0 : NR;
    const T *b = j->bp + jp * k * NR;
    for (long p0 = 0; p0 < k; p0 += KC) {
      long kc = k - p0 < KC ? k - p0 : KC;
      for (long ip = 0; ip < mp; ip++)
        micro(kc, j->ap + ip * MR * k + p0 * MR, b + p0 * NR, tiles + ip * MR * NR, p0 == 0);
    }
    for (long i = 0; i < m; i++)
      memcpy(j->c + i * j->n + j0, tiles + (i / MR) * MR * NR + (i % MR) * NR, nr * sizeof(T));
  }
}

/* Fewer rows than the micro-kernel's MR (a batch of one: a matrix-vector product): the
   micro-kernel would multiply MR rows, most of them zero padding, so each panel is instead
   read once per block of up to FEW rows, each row's NR sums kept in vector registers (FEW
   rows of three vectors, plus the panel's three, fit AVX-512's registers) */
#define FEW 4
static inline __attribute__((always_inline)) void few_panel(long rb, const T *a, long k,
                                                            const T *b, T *c, long n, long nr) {
  /* a single row has only three chains of additions, too few to hide the adds' latency: its
     even and odd terms are summed apart and added at the end */
  const long sets = rb == 1 ? 2 : 1;
  vec acc[2][FEW][3];
#pragma GCC unroll 2
  for (long s = 0; s < sets; s++)
#pragma GCC unroll 4
    for (long r = 0; r < rb; r++)
#pragma GCC unroll 3
      for (int v = 0; v < 3; v++) acc[s][r][v] = (vec){0};
  long p = 0;
  for (; p + sets <= k; p += sets)
#pragma GCC unroll 2
    for (long s = 0; s < sets; s++) {
      const vec *bv = (const vec *)(b + (p + s) * NR);
      vec b0 = bv[0], b1 = bv[1], b2 = bv[2];
#pragma GCC unroll 4
      for (long r = 0; r < rb; r++) {
        T x = a[r * k + p + s];
        acc[s][r][0] += x * b0;
        acc[s][r][1] += x * b1;
        acc[s][r][2] += x * b2;
      }
    }
  for (; p < k; p++) { /* (an odd depth's last term, a single row) */
    const vec *bv = (const vec *)(b + p * NR);
    T x = a[p];
    acc[0][0][0] += x * bv[0];
    acc[0][0][1] += x * bv[1];
    acc[0][0][2] += x * bv[2];
  }
#pragma GCC unroll 4
  for (long r = 0; r < rb; r++) {
    T sums[NR] __attribute__((aligned(64)));
#pragma GCC unroll 3
    for (int v = 0; v < 3; v++)
      *(vec *)(sums + v * VL) = sets == 2 ? acc[0][r][v] + acc[1][r][v] : acc[0][r][v];
    memcpy(c + r * n, sums, nr * sizeof(T));
  }
}

static void few_panels(void *job, long lo, long hi) {
  const struct product *j = job;
  for (long jp = lo; jp < hi; jp++) {
    long j0 = jp * NR, nr = j->n - j0 < NR ? j->n - j0 : NR;
    const T *b = j->bp + jp * j->k * NR;
    for (long i0 = 0; i0 < j->m; i0 += FEW) {
      const T *a = j->ap + i0 * j->k;
      T *c = j->c + i0 * j->n + j0;
      /* the row count a compile-time constant in each case, so acc lives in registers */
      switch (j->m - i0 < FEW ? j->m - i0 : FEW) {
        case 1: few_panel(1, a, j->k, b, c, j->n, nr); break;
        case 2: few_panel(2, a, j->k, b, c, j->n, nr); break;
        case 3: few_panel(3, a, j->k, b, c, j->n, nr); break;
        default: few_panel(4, a, j->k, b, c, j->n, nr); break;
      }
    }
  }
}

/* c (m x n) = a (m x k, row-major) @ b, b packed by ember_rnn_pack; ap holds the packed a
   (rounded up to MR rows) */
void ember_rnn_product(const T *a, long m, long k, long n, const T *bp, T *c, T *ap,
                       ember_pool pool) {
  long count = (n + NR - 1) / NR;
  if (m < MR) {
    struct product j = {a, m, k, n, bp, c};
    if (pool && count > 1) pool(few_panels, &j, count, 1);
    else few_panels(&j, 0, count);
    return;
  }
  for (long i0 = 0; i0 < m; i0 += MR) {
    T *to = ap + i0 * k;
    for (long p = 0; p < k; p++)
      for (long r = 0; r < MR; r++) to[p * MR + r] = i0 + r < m ? a[(i0 + r) * k + p] : 0;
  }
  struct product j = {ap, m, k, n, bp, c};
  if (pool && count > 1) pool(panels, &j, count, 1);
  else panels(&j, 0, count);
}
"""

_TYPES = {
    np.dtype(np.float32): ("float", "expf", "tanhf"),
    np.dtype(np.float64): ("double", "exp", "tanh"),
}
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fopenmp-simd", "-fno-math-errno")
_FLAGS += ("-fno-trapping-math", "-ffp-contract=off", "-std=gnu11")
_SYMBOLS = ("ember_lstm_fwd", "ember_lstm_bwd", "ember_gru_fwd", "ember_gru_bwd")
_ARGS = {
    "ember_lstm_fwd": 6,
    "ember_lstm_bwd": 9,
    "ember_gru_fwd": 6,
    "ember_gru_bwd": 8,
}


@functools.cache
def _packed_functions(dtype: np.dtype):
    """(ember_rnn_pack, ember_rnn_product, the pool) for ``dtype``, or None (no compiler, or
    the matrix products run on the BLAS, which this micro-kernel does not replace)."""
    from . import ccompile, cgemm, cpool
    from .cmicro import MICRO

    if dtype not in _TYPES or not cgemm.own_kernel(dtype):
        return None
    source = f"#define T {_TYPES[dtype][0]}\n" + MICRO + _PACKED
    try:
        pack = ccompile.load(source, "ember_rnn_pack", [ctypes.c_void_p] + [ctypes.c_long] * 4
                             + [ctypes.c_void_p])  # fmt: skip
        product = ccompile.load(
            source,
            "ember_rnn_product",
            [ctypes.c_void_p] + [ctypes.c_long] * 3 + [ctypes.c_void_p] * 4,
        )
    except ccompile.CompileError:
        return None
    return pack, product, cpool.parallel_for()


def _aligned(count: int, dtype) -> np.ndarray:
    """An empty array of ``count`` values starting on a 64-byte boundary (the micro-kernel's
    vector loads of the packed panels are aligned)."""
    itemsize = np.dtype(dtype).itemsize
    raw = np.empty(count + 64 // itemsize, dtype)
    start = (-raw.ctypes.data % 64) // itemsize
    return raw[start : start + count]


class _Product:
    """``rows x k @ w`` (w: k x n) for every step of a layer: ``w`` packed once where ember's
    own GEMM runs, else ember's GEMM (kernels/cgemm.py) at each call."""

    def __init__(self, w: np.ndarray, rows: int):
        self.packed = _packed_functions(w.dtype)
        if self.packed is None:
            self.gemm = _gemm()
            # row-major, copied once for all steps: the GEMM packs its right operand at every
            # call, and reads a row-major one with unit stride
            self.w = np.ascontiguousarray(w)
            return
        from .cgemm import SPLIT_FLOPS, skinny_shared

        pack, self.product, pool = self.packed
        k, n = w.shape
        nr = 3 * (64 // w.itemsize)  # cmicro.py's NR: three vectors of 64 bytes
        self.bp = _aligned(-(-n // nr) * k * nr, w.dtype)
        if any(s % w.itemsize for s in w.strides):
            w = np.ascontiguousarray(w)
        sp, sj = (s // w.itemsize for s in w.strides)
        pack(w.ctypes.data, k, n, sp, sj, self.bp.ctypes.data)  # (w kept alive by the caller)
        self.ap = np.empty(-(-rows // 8) * 8 * k, w.dtype)  # cmicro.py's MR: 8 rows
        if rows < 8:  # the few-rows kernel reads the panels like `skinny` reads b
            shared = skinny_shared(rows, n, k, w.itemsize)
        else:
            shared = 2 * rows * k * n >= SPLIT_FLOPS
        self.pool = pool if shared else None
        self.shape = (rows, k, n)
        self.addresses = (self.bp.ctypes.data, self.ap.ctypes.data)

    def __call__(self, a: np.ndarray, out: np.ndarray, a_at: int, out_at: int) -> None:
        """out = a @ w; ``a`` and ``out`` C-contiguous, their data at ``a_at`` and ``out_at``
        (the loops compute addresses by arithmetic: numpy's ``.ctypes.data`` costs about as
        much per call as a batch-of-one step's product)."""
        if self.packed is None:
            self.gemm(a, self.w, out)
            return
        rows, k, n = self.shape
        bp, ap = self.addresses
        self.product(a_at, rows, k, n, bp, out_at, ap, self.pool)


@functools.cache
def _functions(dtype: np.dtype) -> dict | None:
    """The step kernels for ``dtype`` by name, or None (no compiler, or the build failed)."""
    from . import ccompile

    if dtype not in _TYPES or not ccompile.compiler_available():
        return None
    c_type, exp, tanh = _TYPES[dtype]
    header = f"#define T {c_type}\n#define EXP {exp}\n#define TANH {tanh}\n"
    for simd, libs in (('__attribute__((simd("notinbranch")))', ("-lmvec", "-lm")), ("", ("-lm",))):
        source = header + f"#define SIMD {simd}\n" + _SOURCE
        try:
            return {
                name: ccompile.load(
                    source,
                    name,
                    [ctypes.c_void_p] * _ARGS[name] + [ctypes.c_long] * 2,
                    flags=_FLAGS + libs,
                )
                for name in _SYMBOLS
            }
        except ccompile.CompileError:
            continue  # no vector math library here: scalar exp and tanh, still one kernel
    return None


def _ready(dtype, *arrays) -> dict | None:
    if any(a.dtype != dtype or a.size == 0 for a in arrays):
        return None
    return _functions(np.dtype(dtype))


def _at(a: np.ndarray):
    """(address of a[0], stride of a's first axis in bytes): a[t]'s data is at base + t * stride
    (``a`` C-contiguous)."""
    return a.ctypes.data, a.strides[0]


def _steps(count: int, reverse: bool) -> range:
    return range(count - 1, -1, -1) if reverse else range(count)


def _gemm():
    from .cgemm import gemm

    return gemm


def lstm_forward(xg, h0, c0, w_hh, reverse: bool):
    """(y, h_n, c_n, cs, acts) as ops/recurrent.py's ``lstm_layer`` kernel, or None."""
    fns = _ready(xg.dtype, xg, h0, c0, w_hh)
    if fns is None:
        return None
    steps, rows, gates = xg.shape
    hidden = gates // 4
    xg, h0, c0 = (np.ascontiguousarray(a) for a in (xg, h0, c0))
    y = np.empty((steps, rows, hidden), xg.dtype)
    cs = np.empty_like(y)
    acts = np.empty((steps, rows, gates), xg.dtype)
    rec = np.empty((rows, gates), xg.dtype)
    step, product = fns["ember_lstm_fwd"], _Product(w_hh.T, rows)
    (x0, xs), (a0, as_), (c0_, css), (y0, ys) = (_at(a) for a in (xg, acts, cs, y))
    r0 = rec.ctypes.data
    h, h_at, c_at = h0, h0.ctypes.data, c0.ctypes.data
    for t in _steps(steps, reverse):
        product(h, rec, h_at, r0)
        step(x0 + t * xs, r0, c_at, a0 + t * as_, c0_ + t * css, y0 + t * ys, rows, hidden)
        h, h_at, c_at = y[t], y0 + t * ys, c0_ + t * css
    c = cs[0 if reverse else steps - 1]  # (steps > 0: _ready declines empty operands)
    return y, h.copy(), c.copy(), cs, acts


def _weight_grad(dg, y, h0, reverse: bool, gemm):
    """sum over t of dg[t]^T @ h_{t-1}: the step after the first reads y of the step before."""
    gates, hidden = dg.shape[2], y.shape[2]
    first, rest = (dg[-1], dg[:-1]) if reverse else (dg[0], dg[1:])
    before = y[1:] if reverse else y[:-1]
    # dW^T = h^T @ dg, transposed once at the end: the operand read transposed is then the
    # narrower one (H columns, not 4H or 3H)
    dw_t = gemm(h0.T, first)
    if len(rest):
        dw_t += gemm(before.reshape(-1, hidden).T, rest.reshape(-1, gates))
    return np.ascontiguousarray(dw_t.T)


def lstm_backward(gy, ghn, gcn, gcs, gacts, y, acts, cs, h0, c0, w_hh, reverse: bool):
    """(dxg, dh0, dc0, dw_hh) as ops/recurrent.py's ``lstm_layer_grad`` kernel, or None."""
    fns = _ready(y.dtype, gy, ghn, gcn, gcs, gacts, y, acts, cs, h0, c0, w_hh)
    if fns is None:
        return None
    gy, ghn, gcn, gcs, gacts, y, acts, cs, h0, c0 = (
        np.ascontiguousarray(a) for a in (gy, ghn, gcn, gcs, gacts, y, acts, cs, h0, c0)
    )
    steps, rows, hidden = y.shape
    dg = np.empty_like(acts)
    dc = gcn.copy()
    rec = ghn.copy()
    step, gemm, product = fns["ember_lstm_bwd"], _gemm(), _Product(w_hh, rows)
    order = list(_steps(steps, reverse))
    (y0, ys), (s0, ss), (ga0, gas), (a0, as_), (c0_, css), (d0, ds) = (
        _at(a) for a in (gy, gcs, gacts, acts, cs, dg)
    )
    r0, dc0, first = rec.ctypes.data, dc.ctypes.data, c0.ctypes.data
    for k in range(steps - 1, -1, -1):
        t = order[k]
        c_prev = c0_ + order[k - 1] * css if k else first
        step(r0, y0 + t * ys, s0 + t * ss, ga0 + t * gas, a0 + t * as_, c0_ + t * css, c_prev,
             dc0, d0 + t * ds, rows, hidden)  # fmt: skip
        product(dg[t], rec, d0 + t * ds, r0)
    return dg, rec, dc, _weight_grad(dg, y, h0, reverse, gemm)


def gru_forward(xg, h0, w_hh, b_hh, reverse: bool):
    """(y, h_n, acts) as ops/recurrent.py's ``gru_layer`` kernel, or None."""
    fns = _ready(xg.dtype, xg, h0, w_hh, b_hh)
    if fns is None:
        return None
    steps, rows, gates = xg.shape
    hidden = gates // 3
    xg, h0, b_hh = (np.ascontiguousarray(a) for a in (xg, h0, b_hh))
    y = np.empty((steps, rows, hidden), xg.dtype)
    acts = np.empty((steps, rows, 4 * hidden), xg.dtype)
    rec = np.empty((rows, gates), xg.dtype)
    step, product = fns["ember_gru_fwd"], _Product(w_hh.T, rows)
    (x0, xs), (a0, as_), (y0, ys) = (_at(a) for a in (xg, acts, y))
    r0, b0 = rec.ctypes.data, b_hh.ctypes.data
    h, h_at = h0, h0.ctypes.data
    for t in _steps(steps, reverse):
        product(h, rec, h_at, r0)
        step(x0 + t * xs, r0, b0, h_at, a0 + t * as_, y0 + t * ys, rows, hidden)
        h, h_at = y[t], y0 + t * ys
    return y, h.copy(), acts


def gru_backward(gy, ghn, gacts, y, acts, h0, w_hh, reverse: bool):
    """(dxg, dh0, dw_hh, db_hh) as ops/recurrent.py's ``gru_layer_grad`` kernel, or None."""
    fns = _ready(y.dtype, gy, ghn, gacts, y, acts, h0, w_hh)
    if fns is None:
        return None
    gy, ghn, gacts, y, acts, h0 = (np.ascontiguousarray(a) for a in (gy, ghn, gacts, y, acts, h0))
    steps, rows, hidden = y.shape
    dgx = np.empty((steps, rows, 3 * hidden), y.dtype)
    dgh = np.empty_like(dgx)
    carry = np.zeros_like(h0)
    rec = ghn.copy()
    step, gemm, product = fns["ember_gru_bwd"], _gemm(), _Product(w_hh, rows)
    order = list(_steps(steps, reverse))
    (g0, gs), (ga0, gas), (a0, as_), (y0, ys), (x0, xs), (d0, ds) = (
        _at(a) for a in (gy, gacts, acts, y, dgx, dgh)
    )
    r0, k0, first = rec.ctypes.data, carry.ctypes.data, h0.ctypes.data
    for k in range(steps - 1, -1, -1):
        t = order[k]
        h_prev = y0 + order[k - 1] * ys if k else first
        step(r0, k0, g0 + t * gs, ga0 + t * gas, a0 + t * as_, h_prev, x0 + t * xs,
             d0 + t * ds, rows, hidden)  # fmt: skip
        product(dgh[t], rec, d0 + t * ds, r0)
    dh0 = rec + carry
    dw = _weight_grad(dgh, y, h0, reverse, gemm)
    return dgx, dh0, dw, dgh.sum(axis=(0, 1))
