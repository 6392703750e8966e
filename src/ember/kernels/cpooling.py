"""C kernels of max pooling and its gradient (the ``pool_scatter`` op), used by the ops'
kernels in ops/pool.py (eager and graphs alike) and by the code generator through
``pool_scatter``'s ``compile`` rule.

The NumPy kernels in ops/pool.py are the specification, and these equal them bit for bit:

* `scatter`: zeros of the input's shape with each gradient added at its index within its
  (n, c) plane, in the order of the outputs (the order ``np.add.at`` adds in, about 3x slower),
  so sums of overlapping windows round the same way;
* `max_pool_2d`: each window's maximum and the index of its first maximum (NaN wins), for 2-d
  windows (1-d ones as rows of height one), padded ones and ones past the end (ceil_mode)
  included. The geometry is compiled
  into the kernel (one small library per geometry), so the window loops unroll, and each plane
  is copied into a frame of -inf wide enough that every output row is whole vectors: no bounds
  checks, no scalar remainder. A C loop with the geometry as arguments was slower than NumPy
  (branchy maxima, strided loads); a loop without the frame ran rows of 14 outputs 4x slower
  than rows of 16 (their scalar remainder).

Half precision (bfloat16, float16) is read and written in 16 bits and computed in float32
(kernels/chalf.py's conversions), as the NumPy kernels compute it on a float32 copy: the
maxima are input values (exact), and each scattered plane is summed in a float32 plane of the
thread's (its stack, or the heap for large planes) and rounded once, as ``np.add.at`` into a
float32 result and the cast after it round.

Planes are shared over the thread pool (kernels/cpool.py). Each entry returns None where it
does not apply (not a float dtype above, no C compiler) and NumPy runs.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np

from .. import dtypes as dt
from .cstep import data_address
from .pool_geometry import first_inside_axis, pad_input, padded_extent, plane_positions

__all__ = ["build_scatter"]

# dtype -> (storage type S, compute type T, load and store of one value)
_C = {
    dt.float32: ("float", "float", "", ""),
    dt.float64: ("double", "double", "", ""),
    dt.bfloat16: ("uint16_t", "float", "bf16_load", "bf16_store"),
    dt.float16: ("uint16_t", "float", "f16_load", "f16_store"),
}
_HALF = (dt.bfloat16, dt.float16)
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
#include <stdlib.h>
#include <string.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
struct job {
  const S *g;
  const IDX *indices;
  const long long *base, *offsets; /* CODES: the plane position of code k of output i */
  S *out;
  long in_plane, out_plane;
  const unsigned char *mask; /* where(mask, scattered, fill), or NULL */
  T fill;
  volatile int failed; /* a float32 plane could not be allocated */
};
/* half precision sums each plane in float32 here: on the stack up to this many values */
#define STACK_PLANE 16384
static void planes(void *job_, long lo, long hi) {
  struct job *j = job_;
#if HALF
  T stack_sums[j->in_plane <= STACK_PLANE ? j->in_plane : 1];
  T *sums = j->in_plane <= STACK_PLANE ? stack_sums : malloc(j->in_plane * sizeof(T));
  if (!sums) { j->failed = 1; return; }
#endif
  for (long p = lo; p < hi; p++) {
    S *dst = j->out + p * j->in_plane;
#if HALF
    T *out = sums;
#else
    T *out = dst;
#endif
    const S *g = j->g + p * j->out_plane;
    const IDX *indices = j->indices + p * j->out_plane;
    memset(out, 0, j->in_plane * sizeof *out);
#if CODES
    const long long *base = j->base, *offsets = j->offsets;
    for (long k = 0; k < j->out_plane; k++) out[base[k] + offsets[indices[k]]] += LD(g[k]);
#else
    for (long k = 0; k < j->out_plane; k++) out[indices[k]] += LD(g[k]);
#endif
    /* locals and restrict: branch-free loops the compiler vectorizes */
    const T *restrict from = out;
    S *restrict to = dst;
    const long size = j->in_plane;
    if (j->mask) {
      const unsigned char *restrict mask = j->mask + p * j->in_plane;
      const S fill = ST(j->fill);
      for (long i = 0; i < size; i++) to[i] = mask[i] ? ST(from[i]) : fill;
    }
#if HALF
    else
      for (long i = 0; i < size; i++) to[i] = ST(from[i]);
#endif
  }
#if HALF
  if (sums != stack_sums) free(sums);
#endif
}
int scatter(const S *g, const IDX *indices, const long long *base, const long long *offsets,
            S *out, long count, long in_plane, long out_plane, const unsigned char *mask, T fill,
            ember_pool pool) {
  struct job j = {g, indices, base, offsets, out, in_plane, out_plane, mask, fill, 0};
  if (pool && count * (in_plane + out_plane) > (1L << 16)) pool(planes, &j, count, 1);
  else planes(&j, 0, count);
  return j.failed;
}
"""


# the C type of max pooling's indices: flat int64 positions, or window codes (ops/pool_codes.py)
_INDEX = {np.dtype(np.int64): "long long", np.dtype(np.uint8): "unsigned char"}
_INDEX[np.dtype(np.int32)] = "int"


def _load(template: str, symbol: str, dtype, argtypes, index=np.int64):
    from . import ccompile, chalf, cpool

    if dtype not in _C or not ccompile.compiler_available():
        return None, None
    storage, compute, load, store = _C[dtype]
    half = dtype in _HALF
    index = np.dtype(index)
    defines = f"#define S {storage}\n#define T {compute}\n#define HALF {int(half)}\n"
    defines += f"#define IDX {_INDEX[index]}\n#define CODES {int(index != np.int64)}\n"
    defines += f"#define LD(v) {load}(v)\n#define ST(v) {store}(v)\n"
    source = (chalf.CONVERT if half else "") + defines + template
    try:
        fn = ccompile.load(source, symbol, argtypes, flags=_FLAGS)
    except ccompile.CompileError:
        return None, None
    return fn, cpool.parallel_for()


def _scatter_function(dtype, index=np.int64):
    scalar = ctypes.c_double if dtype == dt.float64 else ctypes.c_float
    pointer = ctypes.c_void_p
    argtypes = [pointer] * 5 + [ctypes.c_long] * 3 + [pointer, scalar, pointer]
    fn, pool = _load(_SCATTER, "scatter", dtype, argtypes, index)
    if fn is not None:
        fn.restype = ctypes.c_int
    return fn, pool


# the NumPy dtypes the kernels take
_NP = {np.dtype(d.np) for d in _C}


def scatter(
    g: np.ndarray, indices: np.ndarray, in_size: tuple, mask=None, fill=0.0, out=None, window=None
):
    """``pool_scatter(g, indices; in_size, window)`` in C, equal to the NumPy kernel bit for
    bit, or None (not float32/float64/bfloat16/float16, no compiler). The indices (flat
    positions, or with ``window`` window codes) are trusted (max_pool made them). With
    ``mask`` (bool, of the result's shape): ``where(mask, result, fill)``, each plane masked
    while it is in cache (the gradient of a ReLU before the pooling; ``fill`` a value of g's
    dtype). The result is written into ``out`` where it is
    given and fits (C-contiguous, of the result's shape and dtype: an arena slot)."""
    if g.dtype not in _NP:
        return None
    index = np.dtype(np.int64) if window is None else np.dtype(indices.dtype)
    if index not in _INDEX:
        return None
    fn, pool = _scatter_function(dt.as_dtype(g.dtype), index)
    if fn is None:
        return None
    in_size = tuple(in_size)
    g = np.ascontiguousarray(g)
    indices = np.ascontiguousarray(indices, index)
    base = offsets = None
    if window is not None:
        base, offsets = plane_positions(tuple(window), in_size, tuple(g.shape[2:]))
    shape = g.shape[:2] + in_size
    fits = out is not None and out.shape == shape and out.dtype == g.dtype
    if not (fits and out.flags.c_contiguous):
        out = np.empty(shape, g.dtype)
    count = g.shape[0] * g.shape[1]
    if out.size:
        plane, out_plane = math.prod(in_size), math.prod(g.shape[2:])
        if mask is not None:
            mask = np.ascontiguousarray(mask, np.bool_)
        failed = fn(
            data_address(g),
            data_address(indices),
            None if base is None else data_address(base),
            None if offsets is None else data_address(offsets),
            data_address(out),
            count,
            plane,
            out_plane,
            None if mask is None else data_address(mask),
            fill,
            pool,
        )
        if failed:
            raise MemoryError(f"pool_scatter: no memory for a float32 plane of {plane} values")
    return out


def build_scatter(node):
    """A C implementation of a ``pool_scatter`` node: ``(g, indices) -> out``, or None."""
    g_type = node.inputs[0].type
    in_size = tuple(node.attrs["in_size"])
    window = node.attrs.get("window")
    if any(not isinstance(d, int) for d in (*in_size, *g_type.shape[2:])):
        return None
    index = np.dtype(node.inputs[1].type.dtype.np)
    if g_type.dtype not in _C or _scatter_function(g_type.dtype, index)[0] is None:
        return None
    np_dtype = g_type.dtype.np

    def run(g, indices):
        return scatter(np.asarray(g, np_dtype), indices, in_size, window=window)

    return run


_MAX_POOL = r"""
#include <math.h>
#include <string.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
struct job { const S *x; S *out; IDX *idx; };
/* each window's maximum and the plane index of its first maximum (row-major; CODES: its
   number within the window instead, a window code of ops/pool_codes.py), as ops/pool.py
   computes them: the running maximum starts at the window's first element (padding: -inf) with
   the index of its first element inside the input (FIRST_A per output row, FIRST_B per
   column), and an element replaces it when it is greater or NaN. The geometry is built in
   (H, W, OH, OW, KH, KW, SH, SW, DH, DW, padding PH, PW), so the window loops unroll.
   Each plane is first copied into a frame of -inf (HF x WF) wide enough that a row of OWV
   outputs, OW rounded up to whole vectors, reads inside it: every row is one full-width vector
   loop, with no bounds checks and no scalar remainder (the extra lanes are dropped). */
static const int first_a[OH] = {FIRST_A};
#if FRAMED && HALF /* a value of the caller's frame, widened */
#define READ(v) LD(v)
#else
#define READ(v) (v)
#endif
static const int first_b[OWV] = {FIRST_B};
static void planes(void *job_, long lo, long hi) {
  const struct job *j = job_;
#if !FRAMED /* a frame on this thread's stack, refilled per plane (its border stays -inf) */
  T frame[HF * WF];
  for (long i = 0; i < HF * WF; i++) frame[i] = -INFINITY;
#endif
  for (long p = lo; p < hi; p++) {
#if FRAMED /* planes too large for a stack: the caller framed them all (in S) */
    const S *x = j->x + p * (HF * WF);
#else /* (half precision: widened into the float32 frame) */
    for (long r = 0; r < H; r++) {
#if HALF
      const S *from = j->x + p * (H * W) + r * W;
      T *to = frame + (r + PH) * WF + PW;
      for (long c = 0; c < W; c++) to[c] = LD(from[c]);
#else
      memcpy(frame + (r + PH) * WF + PW, j->x + p * (H * W) + r * W, W * sizeof(T));
#endif
    }
    const T *x = frame;
#endif
    for (long r = 0; r < OH; r++) {
      T top_row[OWV] __attribute__((aligned(64)));
      int at_row[OWV] __attribute__((aligned(64)));
      const int fa = first_a[r];
#pragma omp simd
      for (int c = 0; c < OWV; c++) {
        /* origin: the window's corner in the frame; plane: its index in the input plane */
        const int origin = r * SH * WF + c * SW, plane = (r * SH - PH) * W + c * SW - PW;
        T top = READ(x[origin]);
#if CODES
        int where = fa * KW + first_b[c];
#else
        int where = plane + fa * DH * W + first_b[c] * DW;
#endif
#if CODES
#define WHERE(a, b) ((int)((a) * KW + (b)))
#else
#define WHERE(a, b) (plane + (a) * DH * W + (b) * DW)
#endif
#define VISIT(a, b)                                   \
  {                                                   \
    T v = READ(x[origin + (a) * DH * WF + (b) * DW]); \
    int take = (v > top) | (v != v);                  \
    top = take ? v : top;                             \
    where = take ? WHERE(a, b) : where;               \
  }
        /* (an inner loop of one iteration keeps GCC from vectorizing this loop: a window of one
           row or column is one loop, of one element none) */
#if KH > 1 && KW > 1
#pragma GCC unroll 16
        for (int a = 0; a < KH; a++)
#pragma GCC unroll 16
          for (int b = 0; b < KW; b++) VISIT(a, b)
#elif KH * KW > 1 /* (unrolled as far as the two loops above together) */
#pragma GCC unroll 256
        for (int e = 0; e < KH * KW; e++) VISIT(KH == 1 ? 0 : e, KH == 1 ? e : 0)
#endif
        top_row[c] = top;
        at_row[c] = where;
      }
      S *best = j->out + (p * OH + r) * OW;
      IDX *at = j->idx + (p * OH + r) * OW;
#if HALF
      /* rounded (exactly: input values) over whole vectors, then copied: a loop over OW
         values alone ran scalar and took 40% of the pooling */
      S best_row[OWV] __attribute__((aligned(64)));
#pragma omp simd
      for (long c = 0; c < OWV; c++) best_row[c] = ST(top_row[c]);
      memcpy(best, best_row, OW * sizeof(S));
#else
      memcpy(best, top_row, OW * sizeof(T));
#endif
      for (long c = 0; c < OW; c++) at[c] = at_row[c];
    }
  }
}
void max_pool(const S *x, S *out, IDX *idx, long count, ember_pool pool) {
  struct job j = {x, out, idx};
  if (pool && count * H * W >= (1L << 15)) pool(planes, &j, count, 1);
  else planes(&j, 0, count);
}
/* the graph runner's step (runtime/cgraph.py): args x, out, idx, count, the pool (or 0) */
void max_pool_step(const long *a) {
  max_pool((const S *)a[0], (S *)a[1], (IDX *)a[2], a[3], (ember_pool)a[4]);
}
"""
# frames up to this size live on the stack of the thread running the plane (the pool's
# threads have 1 MiB); larger ones are made for every plane at once by the caller
FRAME_LIMIT_BYTES = 1 << 17
# frames up to this many elements: plane indices are C ints
PLANE_LIMIT = 1 << 28


def _as_2d(shape: tuple, *geometry):
    """A 1-d pooling's input shape and geometry (out size, kernel, stride, padding, dilation)
    as the 2-d pooling of rows of height one: the same windows, the same flat positions within
    a plane and the same window codes (a window's number of (0, b) is b); 2-d ones as given."""
    if len(shape) != 3:
        return (tuple(shape), *geometry)
    out_size, kernel, stride, padding, dilation = (tuple(g) for g in geometry)
    shape = (*shape[:2], 1, shape[2])
    return shape, (1, *out_size), (1, *kernel), (1, *stride), (0, *padding), (1, *dilation)


def max_pool_2d(x: np.ndarray, kernel, stride, padding, dilation, out_size, codes=None):
    """(values, indices) of 2-d max pooling (or 1-d: rows of height one), equal to
    ops/pool.py's NumPy kernel; None where it does not apply (another dtype, planes too large
    for C ints, no compiler). ``codes``: the dtype of window codes to return instead of flat
    int64 positions (ops/pool_codes.py)."""
    if x.ndim not in (3, 4) or x.size == 0 or x.dtype not in _NP:
        return None
    if x.ndim == 3:
        shape, out, *rest = _as_2d(x.shape, out_size, kernel, stride, padding, dilation)
        found = max_pool_2d(x.reshape(shape), *rest, out, codes)
        if found is None:
            return None
        return tuple(a.reshape(a.shape[:2] + a.shape[3:]) for a in found)
    n, c, h, w = x.shape
    index = np.dtype(np.int64 if codes is None else codes)
    geometry = (h, w, *map(tuple, (out_size, kernel, stride, padding, dilation)), index)
    kernel_fn = _max_pool_kernel_of(x.dtype, geometry)
    if kernel_fn is None:
        return None
    fn, pool, frame, _ = kernel_fn
    if frame is not None:  # every plane in its -inf frame, made here (see FRAME_LIMIT_BYTES)
        x = pad_input(x, padding, frame, -np.inf, "cpooling_frames")
    x = np.ascontiguousarray(x)
    values = np.empty((n, c) + tuple(out_size), x.dtype)
    indices = np.empty((n, c) + tuple(out_size), index)
    fn(data_address(x), data_address(values), data_address(indices), n * c, pool)
    return values, indices


def max_pool_workspace(x_type, out_size, kernel, stride, padding, dilation) -> int | None:
    """The bytes `max_pool_2d` allocates beyond its results for an input of ``x_type``: the
    framed copy of the input where its planes are too large for a stack frame, else 0; None
    where the kernel does not apply (the caller's NumPy kernel runs)."""
    shape = tuple(x_type.shape)
    if len(shape) not in (3, 4) or 0 in shape or x_type.dtype not in _C:
        return None
    if not all(isinstance(d, int) for d in shape):
        return None
    shape, out_size, kernel, stride, padding, dilation = _as_2d(
        shape, out_size, kernel, stride, padding, dilation
    )
    # (the index dtype does not change the frame)
    geometry = (*shape[2:], *map(tuple, (out_size, kernel, stride, padding, dilation)))
    geometry += (np.dtype(np.int64),)
    kernel_fn = _max_pool_kernel_of(np.dtype(x_type.dtype.np), geometry)
    if kernel_fn is None:
        return None
    frame = kernel_fn[2]
    return 0 if frame is None else shape[0] * shape[1] * math.prod(frame) * x_type.dtype.itemsize


# (dtype, geometry) -> what _max_pool_function built: an eager call otherwise spends longer on
# the source and its hash than on the pooling
_max_pool_kernels: dict = {}


def _max_pool_kernel_of(dtype: np.dtype, geometry: tuple):
    kernel_fn = _max_pool_kernels.get((dtype, geometry))
    if kernel_fn is None:  # (a miss is not remembered: a compiler may be set later)
        kernel_fn = _max_pool_function(dtype, *geometry)
        if kernel_fn is not None:
            _max_pool_kernels[(dtype, geometry)] = kernel_fn
    return kernel_fn


def max_pool_c_step(node):
    """The graph runner's C step (runtime/cgraph.py) of a 1-d or 2-d ``max_pool`` node, or None (as
    `max_pool_2d` would return, or planes the caller must frame)."""
    from .cstep import CStep, function_address

    x = node.inputs[0].type
    attrs = node.attrs
    if len(x.shape) not in (3, 4) or x.dtype not in _C or 0 in x.shape:
        return None
    out_size = tuple(node.outputs[0].type.shape[2:])
    given = (tuple(attrs[k]) for k in ("kernel", "stride", "padding", "dilation"))
    shape, *lifted = _as_2d(tuple(x.shape), out_size, *given)
    n, c, h, w = shape
    geometry = (h, w, *lifted)
    geometry += (np.dtype(node.outputs[1].type.dtype.np),)
    kernel_fn = _max_pool_kernel_of(np.dtype(x.dtype.np), geometry)
    if kernel_fn is None or kernel_fn[2] is not None:
        return None
    step = kernel_fn[3]
    args = np.array([0, 0, 0, n * c, kernel_fn[1] or 0], np.int64)
    slots = [(0, "in", 0), (1, "out", 0), (2, "out", 1)]
    return CStep(function_address(step), args, slots, (step,))


def _max_pool_function(
    dtype: np.dtype, h, w, out_size, kernel, stride, padding, dilation, index=np.int64
):
    """(the compiled kernel of this geometry, the pool, the frame size (rows, columns) when the
    caller frames the planes, else None, the graph runner's step), or None."""

    dtype_ = dt.as_dtype(dtype)
    itemsize = 4 if dtype_ in _HALF else dtype.itemsize  # of the frame (half: widened)
    (oh, ow), (kh, kw), (sh, sw), (ph, pw), (dh, dw) = out_size, kernel, stride, padding, dilation
    lanes = 64 // itemsize  # a row's outputs in whole 64-byte vectors
    owv = -(-ow // lanes) * lanes
    hf = padded_extent((h, w), kernel, stride, padding, dilation, out_size)[0]
    wf = max(pw + w, (owv - 1) * sw + dw * (kw - 1) + 1)
    if hf * wf > PLANE_LIMIT:
        return None
    framed = hf * wf * itemsize > FRAME_LIMIT_BYTES
    geometry = dict(H=h, W=w, OH=oh, OW=ow, OWV=owv, KH=kh, KW=kw, SH=sh, SW=sw)
    geometry.update(DH=dh, DW=dw, PH=ph, PW=pw, HF=hf, WF=wf, FRAMED=int(framed))
    defines = "".join(f"#define {k} {v}L\n" for k, v in geometry.items())
    first_b = [*first_inside_axis(ow, kw, sw, pw, dw, w), *[0] * (owv - ow)]  # (extra lanes)
    first_a = first_inside_axis(oh, kh, sh, ph, dh, h)
    defines += f"#define FIRST_A {', '.join(map(str, first_a))}\n"
    defines += f"#define FIRST_B {', '.join(map(str, first_b))}\n"
    pointer = ctypes.c_void_p
    argtypes = [pointer] * 3 + [ctypes.c_long, pointer]
    fn, pool = _load(defines + _MAX_POOL, "max_pool", dtype_, argtypes, index)
    if fn is None:
        return None
    step, _ = _load(defines + _MAX_POOL, "max_pool_step", dtype_, [pointer], index)
    return fn, pool, (hf, wf) if framed else None, step


def build_masked_scatter(node):
    """The compiled ``fused_epilogue`` of a ``pool_scatter`` and a ``where(mask, result, c)``
    on it (transforms/epilogue.py; ops/pool.py's epilogue rule checks the program):
    ``(g, indices, *where operands) -> (out,)``, or None."""
    attrs = node.attrs
    g_type = node.inputs[0].type
    index = np.dtype(node.inputs[1].type.dtype.np)
    if g_type.dtype not in _C or _scatter_function(g_type.dtype, index)[0] is None:
        return None
    producer = dict(attrs["producer_attrs"])
    in_size, window = tuple(producer["in_size"]), producer.get("window")
    np_dtype = g_type.dtype.np

    def run(g, indices, mask, fill, out=None):
        into = out[0] if out is not None else None
        g = np.asarray(g, np_dtype)
        result = scatter(g, indices, in_size, mask, float(fill), into, window)
        if into is not None and result is not into:
            np.copyto(into, result)
            result = into
        return (result,)

    return run
