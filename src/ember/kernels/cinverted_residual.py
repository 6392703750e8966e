"""An inverted-residual block's first half in one kernel: the expansion 1x1 convolution (+ bias,
clamp: ReLU6) and the depthwise convolution after it (+ bias, clamp), float32/float64, NCHW.

Unfused, the expansion writes its whole result (a MobileNet's first block at batch 8: 128
channels of 112x112, 51 MB, past the last-level cache) and the depthwise convolution reads it
back from memory. Here each item is a band of the depthwise output's rows of one sample: the
expansion computes the input rows the band reads (a flat run of ``rows * W`` values per
channel, CB channels at a time, register-blocked along the run), clamps them, and the depthwise
half frames and sums each channel's band with kernels/cdepthwise_source.py's tap loops while the
expanded rows are in the L2 cache. A band's halo rows ((KH - 1) * DH + 1 - SH of them) are
computed by both bands that read them; the band's height is derived from the L2 cache's size,
so its input rows and expanded block fit in half of it, and lowered so that a small batch still
gives each thread two items.

Sums: the expansion's over the input channels in order from zero, then the bias (the unfused
convolution's store adds it to its sums); the depthwise half's in its kernels' own order. So
results equal the unfused pair's within rounding (and the NumPy specification's,
ops/pointwise_depthwise.py). Whether the fused kernel runs is measured once per machine and
geometry (`pays`), as kernels/cconv_step_choice.py measures layouts: the unfused pair is held
unless the fused step is clearly faster (on small planes the expansion's GEMM in kernels/cconv.py
is, and the expanded tensor stays in cache anyway).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import math
import time

import numpy as np

from .cclamp import clamp_address
from .cdepthwise import _frame, _head
from .cdepthwise_source import SOURCE as DEPTHWISE_SOURCE
from .choice_cache import ChoiceCache
from .cinverted_residual_source import SOURCE
from .cstep import STEP_CALL, CStep, data_address, function_address

__all__ = ["available", "forward", "pays", "step"]

_C = {np.dtype(np.float32), np.dtype(np.float64)}
# (2: timings repeated to `_SAMPLE_S`; the choices of single-call timings are measured again)
FORMAT_VERSION = 2
_SAMPLES = 7  # (interleaved timings of each side, once per machine and geometry)
# (each timing repeats a step to last about this long, as kernels/gemm_tune.py's: single calls
# of a step of tens of microseconds measured a side's cold first calls and the load's
# bursts, and could hold the slower side)
_SAMPLE_S = 3e-4
_MOST_CHANNELS = 8  # the C source's CB where the vectors are widest (an expanded block's rows)


def _source(dtype: np.dtype, kernel: tuple, stride: tuple, dilation: tuple) -> str:
    return _head(dtype, kernel, stride, dilation) + DEPTHWISE_SOURCE + SOURCE


@functools.cache
def _function(dtype: np.dtype, kernel: tuple, stride: tuple, dilation: tuple):
    from . import ccompile

    if dtype not in _C or not ccompile.compiler_available():
        return None
    try:
        return ccompile.load(_source(dtype, kernel, stride, dilation), "ir_step", [ctypes.c_void_p])
    except ccompile.CompileError:
        return None


def _fits(x_shape, w1_shape, w2_shape, p) -> bool:
    """Whether the geometry is one the kernel runs: 2-d, a 1x1 expansion of one group, a
    depthwise convolution of multiplier 1 whose padding is not negative, kernels of at most 16
    a side and strides of at most 8 (one library per geometry, as kernels/cdepthwise.py)."""
    if len(x_shape) != 4 or len(w1_shape) != 4 or len(w2_shape) != 4 or 0 in x_shape:
        return False
    cmid = w1_shape[0]
    if tuple(w1_shape) != (cmid, x_shape[1], 1, 1) or tuple(w2_shape[:2]) != (cmid, 1):
        return False
    if any(lo < 0 for lo in p.lo) or any(k > 16 for k in p.kernel) or max(p.stride) > 8:
        return False
    return all(o > 0 for o in p.out_size)


def available(x_shape, w1_shape, w2_shape, p, dtype) -> bool:
    dtype = np.dtype(dtype)
    if dtype not in _C or not _fits(x_shape, w1_shape, w2_shape, p):
        return False
    return _function(dtype, tuple(p.kernel), tuple(p.stride), tuple(p.dilation)) is not None


def band_rows(x_shape, p, dtype, threads: int) -> int:
    """Output rows per item: the most whose input rows and expanded block (CB channels) fit in
    half the L2 cache (the other half: the frame, weights, outputs), lowered so that a batch
    smaller than twice the threads still gives each thread two items."""
    from .cache_sizes import l2_bytes

    n, cin, _, w = x_shape
    (kh, _), (sh, _), (dh, _) = p.kernel, p.stride, p.dilation
    oh = p.out_size[0]
    row_bytes = (cin + _MOST_CHANNELS) * w * np.dtype(dtype).itemsize
    rows_in = max(1, (l2_bytes() // 2) // row_bytes)
    band = max(1, (rows_in - (kh - 1) * dh - 1) // sh + 1)
    if n < 2 * threads:
        band = min(band, math.ceil(oh * n / (2 * threads)))
    return max(1, min(band, oh))


def step(x_shape, w1_shape, w2_shape, p, dtype, clamps: tuple, threads: int | None = None):
    """The graph runner's step (slots: x, w1, b1, w2, b2 in 0 to 4, the result out), or None
    where the kernel does not run this geometry. ``clamps``: the two clamps, each None or
    kernels/cclamp.py's four values."""
    from . import cpool

    dtype = np.dtype(dtype)
    if not available(x_shape, w1_shape, w2_shape, p, dtype):
        return None
    fn = _function(dtype, tuple(p.kernel), tuple(p.stride), tuple(p.dilation))
    threads = cpool.get_num_threads() if threads is None else threads
    n, cin, h, w = x_shape
    oh, ow = p.out_size
    _, fw = _frame(p.out_size, p.kernel, p.stride, p.dilation)
    band = band_rows(x_shape, p, dtype, threads)
    args = [0] * 6 + [cpool.parallel_for() or 0, n, cin, w1_shape[0], h, w, oh, ow, *p.lo, fw]
    args += [band, clamp_address(clamps[0], dtype), clamp_address(clamps[1], dtype)]
    slots = [(0, "in", 0), (1, "in", 1), (2, "in", 2), (3, "in", 3), (4, "in", 4)]
    slots.append((5, "out", 0))
    return CStep(function_address(fn), np.array(args, np.int64), slots, (fn,))


def forward(x, w1, b1, w2, b2, p, clamps: tuple):
    """``clamp2(depthwise(clamp1(conv1x1(x, w1) + b1), w2) + b2)`` of depthwise plan ``p``, or
    None where the kernel does not run it."""
    made = step(x.shape, w1.shape, w2.shape, p, x.dtype, clamps)
    if made is None:
        return None
    operands = [np.ascontiguousarray(a, x.dtype) for a in (x, w1, b1, w2, b2)]
    out = np.empty((x.shape[0], w1.shape[0], *p.out_size), x.dtype)
    _call(made, operands, out)
    return out


def _call(made: CStep, operands: list, out: np.ndarray) -> None:
    block = made.args.copy()
    for slot, role, i in made.slots:
        block[slot] = data_address(out if role == "out" else operands[i])
    STEP_CALL(made.fn)(data_address(block))


# ------------------------------------------------------------------------------ the choice


@functools.cache
def _machine_key() -> str:
    from .cpool import cpu_count, cpu_model

    digest = hashlib.sha256((DEPTHWISE_SOURCE + SOURCE).encode()).hexdigest()[:16]
    return f"{cpu_model()}|{cpu_count()}|{digest}|v{FORMAT_VERSION}"


def _decode_pays(stored) -> bool:
    if type(stored) is not bool:
        raise ValueError("not a boolean")
    return stored


_choices = ChoiceCache("inverted-residual", lambda: _machine_key(), FORMAT_VERSION, _decode_pays)


def pays(x_shape, w1_shape, w2_shape, p, dtype, clamps: tuple) -> bool:
    """Whether the fused step runs this geometry clearly faster than the unfused pair (the
    expansion's step of kernels/cconv.py, the depthwise one of kernels/cdepthwise.py): timed
    on random operands at the current thread count (this thread's CPU time on one, the
    process's on more), once per machine and geometry, the answer kept in ember's cache
    directory."""
    from . import cpool

    dtype = np.dtype(dtype)
    if not available(x_shape, w1_shape, w2_shape, p, dtype):
        return False
    threads = cpool.get_num_threads()
    key = repr(
        (tuple(x_shape), tuple(w1_shape), tuple(w2_shape), p.stride, p.lo, p.dilation,
         p.out_size, dtype.name, threads, clamps)
    )  # fmt: skip
    found = _choices.get(key)
    if found is not None:
        return found
    found = _measure(x_shape, w1_shape, w2_shape, p, dtype, clamps, threads)
    if found is None:
        return False
    _choices.put(key, found)
    return found


def _measure(x_shape, w1_shape, w2_shape, p, dtype, clamps, threads) -> bool | None:
    from . import cconv, cdepthwise
    from .conv_plan import plan as conv_plan
    from .timing import choose, interleaved

    cmid = w1_shape[0]
    mid_shape = (x_shape[0], cmid, *x_shape[2:])
    p1 = conv_plan(tuple(x_shape[2:]), (1, 1), (1, 1), ((0, 0), (0, 0)), (1, 1), x_shape[1], cmid)
    first = cconv.forward_step(x_shape, w1_shape, p1, dtype, clamps[0], weight_constant=True)
    second = cdepthwise.forward_step(mid_shape, w2_shape, p, cmid, dtype, True, clamps[1])
    fused = step(x_shape, w1_shape, w2_shape, p, dtype, clamps, threads)
    if first is None or second is None or fused is None:
        return None
    rng = np.random.default_rng(0)
    x, w1, w2 = (rng.standard_normal(s).astype(dtype) for s in (x_shape, w1_shape, w2_shape))
    b = rng.standard_normal(cmid).astype(dtype)
    mid = np.empty(mid_shape, dtype)
    out = np.empty((x_shape[0], cmid, *p.out_size), dtype)
    fn1, args1, _ = first
    block1 = args1.copy()
    block1[0], block1[1], block1[2], block1[3] = map(data_address, (x, w1, b, mid))
    block2 = second.args.copy()
    for slot, role, i in second.slots:
        block2[slot] = data_address(out if role == "out" else (mid, w2, b)[i])
    call1, call2 = STEP_CALL(function_address(fn1)), STEP_CALL(second.fn)
    at1, at2 = data_address(block1), data_address(block2)

    def unfused():
        call1(at1)
        call2(at2)

    def together():
        _call(fused, [x, w1, b, w2, b], out)

    # (the process's CPU time on more threads, the pool's included: what a call costs the
    # machine, which wall time on a loaded machine does not show: another process holding a
    # core stretches both sides' waits)
    clock = time.thread_time if threads == 1 else time.process_time
    times = interleaved([unfused, together], _SAMPLES, clock=clock, sample_s=_SAMPLE_S)
    return choose(times, 0) == 1
