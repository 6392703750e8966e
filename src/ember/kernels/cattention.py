"""Attention for inference in one C call: ``softmax(q k^T * scale + mask) v`` per batch element
(a (batch, head) pair), the scores of a few query rows at a time kept in cache from the product
through the softmax to the product with the values, instead of the (L, S) score and weight
arrays going through memory between three kernels.

Operands may be strided (a head split is a permuted view, never copied first): every operand
comes with the offset of each batch element and its row and column strides, so broadcasting
over batch dimensions is a zero stride. Per batch element the keys are packed transposed and
the values row-major, both padded to a whole vector of columns; each block of `ROWS` query
rows is then two register-blocked products around a softmax that follows kernels/csoftmax.py
step by step (the NaN flag beside the maximum, ``safe``'s shift by 0 and zero rows, the vector
exp with arguments below ``LOWEST`` taken as 0), so special values come out as the NumPy
kernel's (ops/attention.py). The sum of the exponentials divides the output row at the end
rather than each weight (one rounding of difference). A causal block computes only the keys
its last row sees.

`attention(...)` returns None where it does not apply (no compiler, a dtype other than float32
or float64, an empty operand) and the caller runs NumPy.
"""

from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from .cstep import data_address

__all__ = ["attention", "attention_step"]

_SOURCE = r"""
#if defined(__x86_64__) && defined(__AVX512F__)
/* the softmax's loops (exp, max, sums) on whole 64-byte vectors, as the products' (GCC would
   otherwise take 32-byte vectors for them on CPUs whose 64-byte ones it rates slower) */
#pragma GCC target("prefer-vector-width=512")
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);
__attribute__((simd("notinbranch"))) T EXP(T);

#ifdef OWN_EXP
/* float32 exp inline, so the loop vectorizes without a call: Cephes' expf (range reduction
   by ln 2 in two parts, degree-6 polynomial, 2^n put in the exponent bits), within 2 ulp of
   expf over [LOWEST, 88]; exp(0) is exactly 1, NaN stays NaN, above 88.72 (a safe shift by 0
   of a row holding large scores) +inf. */
static inline float own_exp(float x) {
  float c = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  float n = __builtin_floorf(c * 1.44269504088896341f + 0.5f);
  float r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * r * r + r + 1.0f;
  union { float f; int i; } scale;
  scale.i = ((int)n + 127) << 23;
  y *= scale.f;
  return x != x ? x : (x > 88.72283935546875f ? INFINITY : y);
}
#undef EXP
#define EXP own_exp
#endif

#define VEC (64 / (long)sizeof(T))
/* The register block of both products: ROWS query rows by up to WIDE vectors of columns (COLS
   values each), so up to ROWS x WIDE accumulators, WIDE vector loads and ROWS broadcasts per
   step. The rows' padding stays at one vector of columns: a block takes as many whole vectors
   as remain, up to WIDE (with one vector, 4 accumulators waited on the adds' latency: a
   quarter of the machine's multiply-add rate). */
#define ROWS 4
#define COLS VEC
#define WIDE 4
typedef T vec __attribute__((vector_size(64)));
typedef T uvec __attribute__((vector_size(64), aligned(sizeof(T))));

/* scores of ROWS rows (qs: ROWS x E, scaled) against NV vectors of keys from s0 (kt: E x Sp,
   transposed), summed over the embedding in its order, into sc (ROWS x Sp) */
static inline __attribute__((always_inline)) void scores_block(const T *qs, const T *kt, long E,
                                                               long Sp, long s0, T *sc,
                                                               const int NV) {
  vec a[ROWS][WIDE];
  for (int r = 0; r < ROWS; r++)
    for (int v = 0; v < NV; v++) a[r][v] = (vec){0};
  for (long d = 0; d < E; d++) {
    const T *kd = kt + d * Sp + s0;
    vec kv[WIDE];
    for (int v = 0; v < NV; v++) kv[v] = *(const vec *)(kd + v * COLS);
    for (int r = 0; r < ROWS; r++) {
      T x = qs[r * E + d];
      for (int v = 0; v < NV; v++) a[r][v] += x * kv[v];
    }
  }
  for (int r = 0; r < ROWS; r++)
    for (int v = 0; v < NV; v++) *(vec *)(sc + r * Sp + s0 + v * COLS) = a[r][v];
}

/* the first `rows` output rows' columns e0.. (NV vectors of them, at most Ev): the weights of
   `keys` keys (sc) times the value rows (vp: S x Evp), summed key by key, each divided by its
   row's total */
static inline __attribute__((always_inline)) void values_block(const T *sc, const T *vp,
                                                               long keys, long Sp, long Evp,
                                                               long e0, long Ev, long rows,
                                                               const T *totals, T *o,
                                                               const int NV) {
  vec a[ROWS][WIDE];
  for (int r = 0; r < ROWS; r++)
    for (int v = 0; v < NV; v++) a[r][v] = (vec){0};
  for (long s = 0; s < keys; s++) {
    const T *vs = vp + s * Evp + e0;
    vec kv[WIDE];
    for (int v = 0; v < NV; v++) kv[v] = *(const vec *)(vs + v * COLS);
    for (int r = 0; r < ROWS; r++) {
      T p = sc[r * Sp + s];
      for (int v = 0; v < NV; v++) a[r][v] += p * kv[v];
    }
  }
  for (long r = 0; r < rows; r++) {
    T *out = o + r * Ev + e0;
    for (int v = 0; v < NV; v++) {
      vec q = a[r][v] / totals[r];
      long n = Ev - e0 - v * COLS;
      if (n >= COLS) *(uvec *)(out + v * COLS) = q;
      else
        for (long c = 0; c < n; c++) out[v * COLS + c] = q[c];
    }
  }
}

#define DIMS 6
struct job {
  const T *q, *k, *v; const void *m; T *o;
  long dims[DIMS], qb[DIMS], kb[DIMS], vb[DIMS], mb[DIMS];
  long L, S, E, Ev, qr, qc, kr, kc, vr, vc, mr, mc;
  T scale; int causal, safe, mask_kind, failed;
};

/* One row's softmax over its first n scores (csoftmax.py's arithmetic), over whole vectors
   up to `width` (the scores past n are set to -inf first, so they come out 0 and no loop has a
   remainder); returns the sum of the exponentials the output row is divided by. */
static T softmax_row(T *x, long n, long width, int safe) {
  for (long i = n; i < width; i++) x[i] = -INFINITY;
  T tops[VEC], sums[VEC];
  int nans[VEC];
  for (long c = 0; c < VEC; c++) tops[c] = -INFINITY, nans[c] = 0, sums[c] = 0;
  for (long i = 0; i < width; i += VEC)
#pragma omp simd
    for (long c = 0; c < VEC; c++) {
      tops[c] = x[i + c] > tops[c] ? x[i + c] : tops[c];
      nans[c] |= x[i + c] != x[i + c];
    }
  T top = -INFINITY;
  int nan = 0;
  for (long c = 0; c < VEC; c++) top = tops[c] > top ? tops[c] : top, nan |= nans[c];
  T shift = nan ? NAN : top;
  if (safe && !isfinite(shift)) shift = 0;
#ifdef OWN_EXP
  for (long i = 0; i < width; i += VEC)
#pragma omp simd
    for (long c = 0; c < VEC; c++) {
      T d = x[i + c] - shift;
      T e = EXP(d);
      x[i + c] = d <= LOWEST ? 0 : e;
      sums[c] += x[i + c];
    }
#else
  /* the vector exp leaves its fast path below LOWEST: clamped through memory (csoftmax.py) */
  for (long i = 0; i < width; i += VEC)
#pragma omp simd
    for (long c = 0; c < VEC; c++) {
      T d = x[i + c] - shift;
      x[i + c] = d < LOWEST ? LOWEST : d;
    }
  for (long i = 0; i < width; i += VEC)
#pragma omp simd
    for (long c = 0; c < VEC; c++) {
      T e = EXP(x[i + c]);
      x[i + c] = x[i + c] <= LOWEST ? 0 : e;
      sums[c] += x[i + c];
    }
#endif
  T total = 0;
  for (long c = 0; c < VEC; c++) total += sums[c];
  if (safe && total == 0) total = 1;
  return total;
}

static void batches(void *job_, long lo, long hi) {
  const struct job *j = job_;
  long L = j->L, S = j->S, E = j->E, Ev = j->Ev;
  long Sp = (S + COLS - 1) / COLS * COLS, Evp = (Ev + COLS - 1) / COLS * COLS;
  size_t bytes = sizeof(T) * (E * Sp + S * Evp + ROWS * Sp + ROWS * E);
  T *kt = aligned_alloc(64, (bytes + 63) / 64 * 64);
  if (!kt) {
    ((struct job *)job_)->failed = 1;
    return;
  }
  T *vp = kt + E * Sp, *sc = vp + S * Evp, *qs = sc + ROWS * Sp;
  for (long b = lo; b < hi; b++) {
    /* the batch element's offset in each operand (batch strides of 0 broadcast) */
    long qo = 0, ko = 0, vo = 0, mo = 0;
    for (long rest = b, d = DIMS - 1; d >= 0; d--) {
      long i = rest % j->dims[d];
      rest /= j->dims[d];
      qo += i * j->qb[d], ko += i * j->kb[d], vo += i * j->vb[d], mo += i * j->mb[d];
    }
    const T *q = j->q + qo, *k = j->k + ko, *v = j->v + vo;
    T *o = j->o + b * L * Ev;
    /* key by key: a head split's key rows lie a whole token apart, often a multiple of 4 KiB,
       so walking down a column would touch one cache set per key */
    if (j->kc == 1) /* (its own loop: a stride unknown here made GCC gather, a lane a load) */
      for (long s = 0; s < S; s++)
        for (long d = 0; d < E; d++) kt[d * Sp + s] = k[s * j->kr + d];
    else
      for (long s = 0; s < S; s++)
        for (long d = 0; d < E; d++) kt[d * Sp + s] = k[s * j->kr + d * j->kc];
    for (long d = 0; d < E; d++)
      for (long s = S; s < Sp; s++) kt[d * Sp + s] = 0;
    for (long s = 0; s < S; s++) {
      T *row = vp + s * Evp;
      if (j->vc == 1) memcpy(row, v + s * j->vr, Ev * sizeof(T));
      else
        for (long e = 0; e < Ev; e++) row[e] = v[s * j->vr + e * j->vc];
      for (long e = Ev; e < Evp; e++) row[e] = 0;
    }
    for (long i0 = 0; i0 < L; i0 += ROWS) {
      long rows = L - i0 < ROWS ? L - i0 : ROWS;
      long keys = j->causal ? (i0 + rows < S ? i0 + rows : S) : S;
      long width = (keys + COLS - 1) / COLS * COLS;
      for (long r = 0; r < ROWS; r++) {
        const T *from = q + (i0 + r) * j->qr;
        if (r >= rows)
          for (long d = 0; d < E; d++) qs[r * E + d] = 0;
        else if (j->qc == 1) /* (as for the keys: no gathers) */
          for (long d = 0; d < E; d++) qs[r * E + d] = from[d] * j->scale;
        else
          for (long d = 0; d < E; d++) qs[r * E + d] = from[d * j->qc] * j->scale;
      }
      /* scores of ROWS rows, up to WIDE vectors of keys at a time, summed over the embedding */
      for (long s0 = 0, nv; s0 < width; s0 += nv * COLS) {
        nv = (width - s0) / COLS < WIDE ? (width - s0) / COLS : WIDE;
        switch (nv) {
          case 1: scores_block(qs, kt, E, Sp, s0, sc, 1); break;
          case 2: scores_block(qs, kt, E, Sp, s0, sc, 2); break;
          case 3: scores_block(qs, kt, E, Sp, s0, sc, 3); break;
          default: scores_block(qs, kt, E, Sp, s0, sc, WIDE);
        }
      }
      T totals[ROWS];
      for (long r = 0; r < rows; r++) {
        long i = i0 + r;
        T *x = sc + r * Sp;
        if (j->mask_kind == 1) {
          const T *m = (const T *)j->m + mo + i * j->mr;
          for (long s = 0; s < keys; s++) x[s] += m[s * j->mc];
        } else if (j->mask_kind == 2) {
          const unsigned char *m = (const unsigned char *)j->m + mo + i * j->mr;
          for (long s = 0; s < keys; s++) x[s] = m[s * j->mc] ? x[s] : -INFINITY;
        }
        long n = j->causal ? (i + 1 < keys ? i + 1 : keys) : keys;
        totals[r] = softmax_row(x, n, width, j->safe);
      }
      for (long r = rows; r < ROWS; r++)
        for (long s = 0; s < width; s++) sc[r * Sp + s] = 0;
      /* the weighted sum of the value rows, up to WIDE vectors of columns at a time */
      for (long e0 = 0, nv; e0 < Evp; e0 += nv * COLS) {
        nv = (Evp - e0) / COLS < WIDE ? (Evp - e0) / COLS : WIDE;
        T *out = o + i0 * Ev;
        switch (nv) {
          case 1: values_block(sc, vp, keys, Sp, Evp, e0, Ev, rows, totals, out, 1); break;
          case 2: values_block(sc, vp, keys, Sp, Evp, e0, Ev, rows, totals, out, 2); break;
          case 3: values_block(sc, vp, keys, Sp, Evp, e0, Ev, rows, totals, out, 3); break;
          default: values_block(sc, vp, keys, Sp, Evp, e0, Ev, rows, totals, out, WIDE);
        }
      }
    }
  }
  free(kt);
}

/* Batch elements are shared over ember's pool once there are 2^16 multiply-adds in all, the
   scale at which the other row kernels (csoftmax, cindex, cpooling) stop running serially. */
void ember_attention(struct job *j, long count, ember_pool pool) {
  if (pool && count > 1 && count * j->L * j->S * (j->E + j->Ev) >= (1L << 16))
    pool(batches, j, count, 1);
  else
    batches(j, 0, count);
}

/* the C graph runner's step (kernels/cstep.py): the job, q, k, v, the mask (or 0), the output,
   the batch count, the pool. A failed allocation of the packing scratch (a few pages) leaves
   the output as it was: the step aborts rather than hand on unwritten values */
void ember_attention_step(const long *a) {
  struct job *j = (struct job *)a[0];
  j->q = (const T *)a[1], j->k = (const T *)a[2], j->v = (const T *)a[3];
  j->m = (const void *)a[4], j->o = (T *)a[5], j->failed = 0;
  ember_attention(j, a[6], (ember_pool)a[7]);
  if (j->failed) abort();
}
"""

_VECTOR_EXP = '__attribute__((simd("notinbranch")))'
_TYPES = {
    np.dtype(np.float32): ("float", "expf", "-80.0f", ctypes.c_float),
    np.dtype(np.float64): ("double", "exp", "-700.0", ctypes.c_double),
}
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fopenmp-simd", "-fno-math-errno")
_FLAGS += ("-fno-trapping-math", "-ffp-contract=fast", "-std=gnu11")

_P = ctypes.c_void_p
_L = ctypes.c_long


_DIMS = 6  # batch dimensions the kernel takes (DIMS in the C source)


def _job(scalar):
    class Job(ctypes.Structure):
        _fields_ = [(n, _P) for n in ("q", "k", "v", "m", "o")]
        _fields_ += [(n, _L * _DIMS) for n in ("dims", "qb", "kb", "vb", "mb")]
        _fields_ += [(n, _L) for n in "L S E Ev qr qc kr kc vr vc mr mc".split()]
        _fields_ += [("scale", scalar), ("causal", ctypes.c_int), ("safe", ctypes.c_int)]
        _fields_ += [("mask_kind", ctypes.c_int), ("failed", ctypes.c_int)]

    return Job


@functools.cache
def _function(dtype: np.dtype):
    """(ember_attention, its job structure, the pool, its C step) for ``dtype``, or None."""
    from . import ccompile, cpool

    if dtype not in _TYPES or not ccompile.compiler_available():
        return None
    c_type, exp, lowest, scalar = _TYPES[dtype]
    own = "#define OWN_EXP\n" if dtype == np.float32 else ""
    source = own + f"#define T {c_type}\n#define EXP {exp}\n#define LOWEST ({lowest})\n" + _SOURCE
    args = [ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p]
    for libs in (("-lmvec", "-lm"), ("-lm",)):
        text = source if "-lmvec" in libs else source.replace(_VECTOR_EXP, "")
        try:
            fn = ccompile.load(text, "ember_attention", args, flags=_FLAGS + libs)
            step = ccompile.load(text, "ember_attention_step", [_P], flags=_FLAGS + libs)
        except ccompile.CompileError:
            continue  # no vector math library here: scalar exp, still one kernel
        return fn, _job(scalar), cpool.parallel_for(), step
    return None


def _batch_strides(shape: tuple, strides: tuple, batch: tuple) -> list:
    """An operand's strides in elements over the batch dimensions ``batch`` (its last two
    dimensions excluded), 0 where it broadcasts, padded in front to `_DIMS`."""
    lead = len(shape) - 2
    own = [0 if shape[i] == 1 else strides[i] for i in range(lead)]
    return [0] * (_DIMS - lead) + own


def _contiguous(shape: tuple) -> tuple:
    """A C-contiguous array's strides in elements."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def _job_of(job_type, operands, mask, out_shape, *, scale, causal, safe):
    """The kernel's job (its pointers 0) for operands given as (shape, strides in elements):
    q, k, v and the mask (None, or (shape, strides, is_bool)); None where it does not apply;
    else (job, the batch count)."""
    (qsh, qs), (ksh, ks), (vsh, vs) = operands
    L, E = qsh[-2:]
    S, Ev = vsh[-2:]
    if ksh[-2] != S or ksh[-1] != E:
        return None
    shapes = [qsh[:-2], ksh[:-2], vsh[:-2]]
    if mask is not None:
        msh, ms, _ = mask
        if len(msh) < 2:
            pad = 2 - len(msh)
            msh, ms = (1,) * pad + tuple(msh), (0,) * pad + tuple(ms)
        shapes.append(msh[:-2])
    try:
        batch = np.broadcast_shapes(*shapes)
        if mask is not None and np.broadcast_shapes(msh[-2:], (L, S)) != (L, S):
            return None
    except ValueError:
        return None
    if len(batch) > _DIMS or tuple(batch) + (L, Ev) != tuple(out_shape):
        return None
    count = math.prod(out_shape) // max(L * Ev, 1)
    dims = [1] * (_DIMS - len(batch)) + list(batch)
    mask_kind, mb, mr, mc = 0, [0] * _DIMS, 0, 0
    if mask is not None:
        mask_kind = 2 if mask[2] else 1
        mb = _batch_strides(msh, ms, batch)
        mr = 0 if msh[-2] == 1 else ms[-2]
        mc = 0 if msh[-1] == 1 else ms[-1]
    job = job_type(
        None, None, None, None, None,
        (_L * _DIMS)(*dims), (_L * _DIMS)(*_batch_strides(qsh, qs, batch)),
        (_L * _DIMS)(*_batch_strides(ksh, ks, batch)),
        (_L * _DIMS)(*_batch_strides(vsh, vs, batch)), (_L * _DIMS)(*mb),
        L, S, E, Ev, qs[-2], qs[-1], ks[-2], ks[-1], vs[-2], vs[-1],
        mr, mc, scale, int(causal), int(safe), mask_kind, 0,
    )  # fmt: skip
    return job, count


def attention(q, k, v, mask, *, scale: float, causal: bool, safe: bool):
    """``softmax(q @ k^T * scale + mask) @ v`` over the last two dimensions (leading ones
    broadcast), or None where the kernel does not apply (see the module docstring). ``mask``
    is None, a float array of q's dtype added to the scores, or a bool array of the kept
    positions; either broadcasts to the scores' shape."""
    # the call's layout decides everything but the data pointers: its job is built once per
    # layout and copied per call (building it, broadcasts and ctypes arrays, cost several
    # times a small head's whole kernel: an eager ViT at batch one calls this per layer)
    key = (q.dtype, q.shape, q.strides, k.dtype, k.shape, k.strides, v.dtype, v.shape)
    key += (v.strides, scale, causal, safe)
    if mask is not None:
        key += (mask.dtype, mask.shape, mask.strides)
    planned = _planned.get(key, _UNPLANNED)
    if planned is _UNPLANNED:
        planned = _plan(q, k, v, mask, scale=scale, causal=causal, safe=safe)
        if len(_planned) >= 256:  # (bounded: a process may meet many layouts)
            _planned.clear()
        _planned[key] = planned
    if planned is None:
        return None
    template, count, out_shape = planned
    out = np.empty(out_shape, q.dtype)
    if template is None:  # (an empty result)
        return out
    found = _function(q.dtype)
    if found is None:
        return None
    fn, job_type, pool, _ = found
    job = job_type.from_buffer_copy(template)  # (each call its own: threads may share a layout)
    job.q, job.k, job.v, job.o = (
        data_address(q),
        data_address(k),
        data_address(v),
        data_address(out),
    )
    job.m = None if mask is None else data_address(mask)
    fn(ctypes.addressof(job), count, pool)
    return None if job.failed else out


_UNPLANNED = object()
_planned: dict = {}  # a call's layout -> `_plan`'s answer


def _plan(q, k, v, mask, *, scale: float, causal: bool, safe: bool):
    """For operands of ``q``'s, ``k``'s, ``v``'s and ``mask``'s layouts: None where the kernel
    does not apply, else (the job without its pointers, the batch count, the result's shape),
    the job None for an empty result."""
    dtype = q.dtype
    if k.dtype != dtype or v.dtype != dtype or min(q.ndim, k.ndim, v.ndim) < 2:
        return None
    if mask is not None and mask.dtype != dtype and mask.dtype != np.bool_:
        return None
    arrays = (q, k, v) if mask is None else (q, k, v, mask)
    if any(s % a.itemsize for a in arrays for s in a.strides):
        return None
    L, E = q.shape[-2:]
    S, Ev = v.shape[-2:]
    if k.shape[-2] != S or k.shape[-1] != E:
        return None
    try:
        batch = np.broadcast_shapes(*(a.shape[:-2] for a in arrays))
    except ValueError:
        return None
    out_shape = batch + (L, Ev)
    if math.prod(out_shape) == 0:
        return None, 0, out_shape
    found = _function(dtype) if S and E else None
    if found is None:
        return None
    job_type = found[1]

    def described(a):
        return a.shape, tuple(st // a.itemsize for st in a.strides)

    masked = None if mask is None else (*described(mask), mask.dtype == np.bool_)
    made = _job_of(
        job_type, [described(a) for a in (q, k, v)], masked, out_shape,
        scale=scale, causal=causal, safe=safe,
    )  # fmt: skip
    if made is None:
        return None
    job, count = made
    return job, count, out_shape


def attention_step(q, k, v, mask, out, *, scale: float, causal: bool, safe: bool):
    """The C graph runner's step of an ``attention`` node (kernels/cstep.py) on C-contiguous
    operands of types ``q``, ``k``, ``v``, ``mask`` (or None) and result ``out``, or None
    where the kernel does not apply."""
    from .cstep import CStep, function_address

    dtype = q.dtype.np
    types = (q, k, v) if mask is None else (q, k, v, mask)
    if any(t.dtype.np != dtype for t in types[:3]) or min(len(t.shape) for t in types[:3]) < 2:
        return None
    if mask is not None and mask.dtype.np not in (dtype, np.dtype(np.bool_)):
        return None
    if 0 in out.shape or 0 in k.shape or any(0 in t.shape for t in types):
        return None
    found = _function(dtype)
    if found is None:
        return None
    _, job_type, pool, step = found

    def described(t):
        return tuple(t.shape), _contiguous(tuple(t.shape))

    masked = None
    if mask is not None:
        masked = (*described(mask), mask.dtype.np == np.bool_)
    made = _job_of(
        job_type, [described(t) for t in (q, k, v)], masked, tuple(out.shape),
        scale=scale, causal=causal, safe=safe,
    )  # fmt: skip
    if made is None:
        return None
    job, count = made
    args = np.array([ctypes.addressof(job), 0, 0, 0, 0, 0, count, pool or 0], np.int64)
    slots = [(1, "in", 0), (2, "in", 1), (3, "in", 2), (5, "out", 0)]
    slots += [(4, "in", 3)] if mask is not None else []
    return CStep(function_address(step), args, slots, (job, found))
