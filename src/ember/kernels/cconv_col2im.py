"""A transposed convolution (the input gradient of a convolution) as one product and a col2im
in C, for geometries where kernels/cconv.py's padded forward would mostly multiply zeros.

cconv.py computes the input gradient as a forward convolution over the output gradient padded
by the kernel's reach (phase by phase where strided). Where the gradient's planes are small
against the kernel (a DCGAN generator's first layer: a 1x1 input spread over a 4x4 output;
any stride-1 transposed convolution without padding), most of those multiply-adds read the
padding: a 1x1 plane under a 4x4 kernel does 16 times the work needed. Here the work is the
needed product, the columns ``gy^T w`` over the whole batch (ember's GEMM, kernels/cgemm.py;
the weight copied with its channels innermost), then each column's values added into the result
at their kernel offsets (the col2im), in kernel-offset order as ops/_conv_kernels.py's NumPy
kernel adds them, over ember's pool: a sample's sums kept with their channels innermost, so a
tap's channels of a position are one run added a vector at a time, and transposed into the
result's planes at the end (adding into the planes themselves, one strided scalar a channel,
missed L1 at each addition once a sample's planes outgrew it: ResNet's 128-channel 16x16
gradient, 4.5x slower).

`wins` decides by counted work: the padded forward's multiply-adds against the product's plus
the col2im's additions, each counted as two vector fused multiply-adds of cconv.py's 64-byte
vectors; where the counts are near, kernels/cconv_dx_choice.py measures which runs faster.
"""

from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from . import cache_sizes
from .cstep import data_address

__all__ = ["counts", "input_grad", "sample_block", "wins", "work"]

_VECTOR_BYTES, _MR = 64, 8  # (kernels/cconv.py's vectors and blocks of output channels)

SOURCE = r"""
#include <stdlib.h>
typedef void (*ember_task)(void *, long, long);
typedef void (*ember_pool)(ember_task, void *, long, long);

/* cols: per group and sample, (positions) rows of (channels of the group * taps) values;
   out: (batch, channels, oh, ow); one work item per group and sample */
struct job {
  const T *cols, *bias; T *out;
  long channels, cg, taps, kw, gh, gw, oh, ow, sh, sw, ph, pw, dh, dw, batch;
  int *failed;
};

static void samples(void *job_, long lo, long hi) {
  const struct job *j = job_;
  const long positions = j->gh * j->gw, width = j->cg * j->taps, plane = j->oh * j->ow;
  /* a sample's result with its channels innermost: a product row's (tap, channel) values are
     then added a vector of channels at a time into contiguous sums, transposed into the
     result's planes at the end (the planes' strided additions missed L1 at each one) */
  T *restrict acc = malloc(sizeof(T) * (size_t)(j->cg * plane));
  if (!acc) {
    *j->failed = 1;
    return;
  }
  for (long r = lo; r < hi; r++) {          /* r = g * batch + n */
    const long g = r / j->batch, n = r % j->batch;
    T *restrict o = j->out + (n * j->channels + g * j->cg) * plane;
    const T *restrict sample = j->cols + r * positions * width;
    for (long i = 0; i < j->cg * plane; i++) acc[i] = 0;
    /* kernel offset by kernel offset, as the NumPy kernel adds them */
    for (long t = 0; t < j->taps; t++) {
      const long ky = t / j->kw, kx = t % j->kw;
      const long base = kx * j->dw - j->pw;
      long x0 = 0, x1 = j->gw;  /* the positions whose target lies inside the row */
      while (x0 < x1 && x0 * j->sw + base < 0) x0++;
      while (x1 > x0 && (x1 - 1) * j->sw + base >= j->ow) x1--;
      for (long y = 0; y < j->gh; y++) {
        const long oy = y * j->sh - j->ph + ky * j->dh;
        if (oy < 0 || oy >= j->oh) continue;
        for (long x = x0; x < x1; x++) {
          const T *restrict src = sample + (y * j->gw + x) * width + t * j->cg;
          T *restrict dst = acc + (oy * j->ow + x * j->sw + base) * j->cg;
          for (long c = 0; c < j->cg; c++) dst[c] += src[c];
        }
      }
    }
    /* into the planes, a tile of positions by channels at a time, each channel's bias added
       after its sums */
    for (long i0 = 0; i0 < plane; i0 += 16) {
      const long i1 = i0 + 16 < plane ? i0 + 16 : plane;
      for (long c = 0; c < j->cg; c++) {
        const T b = j->bias ? j->bias[g * j->cg + c] : 0;
        for (long i = i0; i < i1; i++) {
          T v = acc[i * j->cg + c];
          if (j->bias) v += b;
          o[c * plane + i] = v;
        }
      }
    }
  }
  free(acc);
}

void ember_col2im(const T *cols, const T *bias, T *out, long batch, long channels, long cg,
                  long kh, long kw, long gh, long gw, long oh, long ow, long sh, long sw,
                  long ph, long pw, long dh, long dw, int *failed, ember_pool pool) {
  struct job j = {cols, bias, out, channels, cg, kh * kw, kw, gh, gw, oh, ow, sh, sw, ph, pw,
                  dh, dw, batch, failed};
  long items = (channels / cg) * batch;
  if (pool && items > 1 && batch * channels * oh * ow >= (1L << 14)) pool(samples, &j, items, 1);
  else samples(&j, 0, items);
}
"""

_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fopenmp-simd", "-fno-math-errno")
_FLAGS += ("-fno-trapping-math", "-ffp-contract=off", "-std=gnu11")


@functools.cache
def _function(dtype: np.dtype):
    from . import ccompile, cpool

    if dtype not in _TYPES or not ccompile.compiler_available():
        return None
    p, n = ctypes.c_void_p, ctypes.c_long
    try:
        fn = ccompile.load(
            f"#define T {_TYPES[dtype]}\n" + SOURCE,
            "ember_col2im",
            [p, p, p] + [n] * 15 + [p, p],
            flags=_FLAGS,
        )
    except ccompile.CompileError:
        return None
    return fn, cpool.parallel_for()


def counts(gy_shape: tuple, w_shape: tuple, p, groups: int, itemsize: int) -> tuple:
    """(the padded forward's counted multiply-adds, the product's and col2im's) per sample and
    group: phase by phase where strided (prod(stride) phases of about prod(in_size) /
    prod(stride) positions each, the kernel's taps shared among them), each phase's positions
    of a sample in column panels of three vectors, its result channels in blocks of ``_MR``;
    a col2im addition counted as the multiply-adds of two vector fused multiply-adds (where
    the counts are near, kernels/cconv_dx_choice.py measures which runs faster)."""
    cog, cg = gy_shape[1] // groups, w_shape[1]
    rows = -(-cg // _MR) * _MR  # (the padded forward computes its result channels in blocks)
    lanes = _VECTOR_BYTES // itemsize
    phases, panel = math.prod(p.stride), 3 * lanes
    # a phase's positions of a sample in whole column panels; the phases share the kernel's
    # taps, so the padded forward's work per tap is one phase's padded positions
    padded = -(-math.prod(p.in_size) // (phases * panel)) * panel
    positions = math.prod(p.out_size)
    return padded * rows * cog, positions * cg * (cog + 2 * lanes)


def wins(gy_shape: tuple, w_shape: tuple, p, groups: int, itemsize: int) -> bool:
    """Whether the product and col2im take fewer counted operations than cconv.py's padded
    forward (`counts`)."""
    if len(p.kernel) != 2 or math.prod(p.kernel) == 1:
        return False
    padded, col2im = counts(gy_shape, w_shape, p, groups, itemsize)
    return padded > col2im


def work(gy_shape: tuple, w_shape: tuple, p, groups: int, itemsize: int) -> float:
    """The product's and col2im's counted work in vector multiply-adds (`wins`' count over the
    batch: a col2im addition as two), to weigh against kernels/cconv_taps.py's `work`."""
    n, cog, cg = gy_shape[0], gy_shape[1] // groups, w_shape[1]
    lanes = _VECTOR_BYTES // itemsize
    taps, positions = math.prod(p.kernel), math.prod(p.out_size)
    return n * groups * positions * cg * taps * (cog + 2 * lanes) / lanes


def input_grad(gy: np.ndarray, w: np.ndarray, p, groups: int, bias=None) -> np.ndarray | None:
    """The input gradient of the 2-D convolution planned by ``p`` (a transposed convolution)
    for output gradient ``gy`` (N, groups * cog, *p.out_size) and weight ``w`` (groups * cog,
    cg, kh, kw), + ``bias`` per result channel; None where it does not apply."""
    found = _function(gy.dtype)
    if found is None or w.dtype != gy.dtype or len(p.kernel) != 2 or gy.shape[0] == 0:
        return None
    if bias is not None and (bias.dtype != gy.dtype or bias.shape != (w.shape[1] * groups,)):
        return None
    fn, pool = found
    from . import cgemm

    n = gy.shape[0]
    cout, cg = w.shape[:2]
    cog = cout // groups
    taps = math.prod(p.kernel)
    m = math.prod(p.out_size)
    # the product's rows are the samples' positions, its columns a group's (tap, channel)
    # pairs: gy with its channels innermost times the weight with its channels innermost (a
    # copy of the weight's elements, against the product's multiply-adds of each of them by
    # every position), so the col2im adds a row's channels of a tap as one run
    rows = np.ascontiguousarray(gy.reshape(n, groups, cog, m).transpose(1, 0, 3, 2))
    rows = rows.reshape(groups, n * m, cog)
    weight = np.ascontiguousarray(w.reshape(groups, cog, cg, taps).transpose(0, 1, 3, 2))
    weight = weight.reshape(groups, cog, taps * cg)
    out = np.empty((n, groups * cg) + tuple(p.in_size), gy.dtype)
    (kh, kw), (gh, gw), (oh, ow) = p.kernel, p.out_size, p.in_size
    bias = None if bias is None else np.ascontiguousarray(bias)
    failed = ctypes.c_int(0)
    # a block of samples at a time: its columns, written by the product, are read by the
    # col2im while they are in L2 (the whole batch's, ResNet's r3a layer 19 MB, went to memory
    # and back, fresh pages each call), unless the weight the product packs again per block
    # outweighs them
    block = sample_block(n, groups, m, cg * taps, np.dtype(gy.dtype).itemsize, cog)
    cols = np.empty((groups, block * m, cg * taps), gy.dtype)
    for n0 in range(0, n, block):
        b = min(block, n - n0)
        for g in range(groups):
            cgemm.gemm(rows[g, n0 * m : (n0 + b) * m], weight[g], out=cols[g, : b * m])
        fn(
            data_address(cols), 0 if bias is None else data_address(bias),
            data_address(out[n0:]), b, groups * cg, cg, kh, kw, gh, gw, oh, ow, *p.stride,
            *p.lo, *p.dilation, ctypes.addressof(failed), pool,
        )  # fmt: skip
        if failed.value:
            return None  # (no memory for a thread's sums: NumPy runs)
    return out


def sample_block(n: int, groups: int, positions: int, width: int, itemsize: int, cog: int) -> int:
    """The samples whose product columns (``groups`` x ``positions`` rows of ``width``
    values each) fill at most the L2 cache, but at least ``cog`` rows (the weight's, which the
    product packs again for each block: its bytes at most the block's columns'), at least one
    per pool thread (the col2im's work items), at most ``n``."""
    from . import cpool

    per_sample = groups * positions * width * itemsize
    fit = max(cache_sizes.l2_bytes() // max(1, per_sample), -(-cog // max(1, positions)))
    return max(1, min(n, max(cpool.get_num_threads(), fit)))
