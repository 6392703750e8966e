"""The convolution kernels' compiled library (kernels/cconv.py's forward and input gradient,
kernels/cconv_weight.py's weight gradient): the C source (kernels/cconv_source.py's column-panel
kernels, kernels/cconv_wide.py's channels-wide and kernels/cconv_taps.py's sample-block
forwards in one library), its per-dtype specialisation (half precision: float32 arithmetic on
16-bit storage, bfloat16 pairs where the CPU has AVX512_BF16's dot products), the compiled
functions and steps, and the facts of the build the layouts ask (the micro-kernel's rows,
panel groups sized from L2, whether runs are copied a masked vector at a time)."""

from __future__ import annotations

import ctypes
import functools
import os

import numpy as np

from .. import dtypes as dt
from . import cache_sizes, cconv_dx_choice, cconv_step_choice, cconv_taps, cconv_wide, chalf
from .cconv_source import SOURCE as _KERNELS
from .cmicro import KC

# one library: the column-panel kernels and the channels-wide forwards (kernels/cconv_wide.py,
# and kernels/cconv_taps.py's over blocks of samples, which packs its weight as the former)
SOURCE = _KERNELS + cconv_wide.WIDE_SOURCE + cconv_taps.TAPS_SOURCE
cconv_step_choice.use_source(SOURCE)
cconv_dx_choice.use_source(SOURCE)

_C = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
_MR = 8
_VECTOR_BYTES = 64
# the weight gradient's extended grid may be at most this much larger than the output
_MAX_WASTE = 2.0
# the weight gradient sums this many blocks of samples in parallel, then adds their partial sums
_BLOCKS = 8
_P, _L, _I = ctypes.c_void_p, ctypes.c_long, ctypes.c_int
_FORWARD_ARGS = [_P] * 8 + [_L] * 8 + [_P, _P, _L, _P]
# the argument-block slot of the residual a step's store adds (column layout, channels-wide)
_RESIDUAL_SLOT = {False: 38, True: 32}
_SEGMENT_ARGS = [_P, _P, _L, _L, _L]
_WEIGHT_ARGS = [_P] * 5 + [_L] * 7 + _SEGMENT_ARGS + [_P]
_WEIGHT_CL_ARGS = [_P] * 5 + [_L] * 9 + _SEGMENT_ARGS + [_P] * 4


# the half-precision dtypes the forward stores in 16 bits: the name of their conversions
# (kernels/chalf.py) and whether they are bfloat16
_HALF = {np.dtype(dt.bfloat16.np): ("bf16", 1), np.dtype(np.float16): ("f16", 0)}


def _header(dtype: np.dtype) -> str:
    """The defines that specialise the C source to ``dtype`` (half precision: float32
    arithmetic on 16-bit storage)."""
    if dtype in _HALF:
        name, bf16 = _HALF[dtype]
        # (EMBER_BF16_DOT=0: float32 panels, no AVX512_BF16 dot products, as kernels/chgemm.py)
        no_dot = "#define EMBER_NO_BF16_DOT\n" if os.environ.get("EMBER_BF16_DOT") == "0" else ""
        defines = "#define T float\n#define T_FLOAT 1\n#define HALF 1\n#define S uint16_t\n"
        defines += f"#define HALF_LOAD {name}_load\n#define HALF_STORE {name}_store\n"
        return chalf.CONVERT + no_dot + defines + f"#define HALF_BF16 {bf16}\n"
    return f"#define T {_C[dtype]}\n#define T_FLOAT {int(dtype == np.float32)}\n"


@functools.cache
def pairs(dtype) -> bool:
    """Whether the forward's panels of ``dtype`` are bfloat16 pairs summed by AVX512_BF16's
    dot products (the C source's ``PAIRS``: the weight is then packed as pairs too)."""
    from . import ccompile

    dtype = np.dtype(dtype)
    if dtype not in _HALF or _functions(dtype) is None:
        return False
    try:
        fn = ccompile.load(_header(dtype) + SOURCE, "conv_pairs", [_P])
    except ccompile.CompileError:
        return False
    answer = ctypes.c_int(0)
    fn(ctypes.byref(answer))
    return bool(answer.value)


def compute_itemsize(dtype) -> int:
    """The bytes of one value the kernels compute in (half precision: float32's)."""
    dtype = np.dtype(dtype)
    return 4 if dtype in _HALF else dtype.itemsize


def _compute_dtype(dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype in _HALF else dtype


@functools.cache
def _functions(dtype: np.dtype):
    """(forward, weight_grad, weight_grad_cl, pool) for ``dtype``, or None (no compiler, or it
    failed). Half precision: the weight gradient kernels are float32's, never called."""
    from . import ccompile, cpool

    if (dtype not in _C and dtype not in _HALF) or not ccompile.compiler_available():
        return None
    source = _header(dtype) + SOURCE
    try:
        forward = ccompile.load(source, "conv_forward", _FORWARD_ARGS)
        weight = ccompile.load(source, "conv_weight_grad", _WEIGHT_ARGS)
        weight_cl = ccompile.load(source, "conv_weight_grad_cl", _WEIGHT_CL_ARGS)
    except ccompile.CompileError:
        return None
    return forward, weight, weight_cl, cpool.parallel_for()


def _panel_group(m_panels: int, itemsize: int) -> int:
    """Column panels the forward kernel runs together (each packed-weight block read once per
    group): as many as keep their packed columns and accumulators in half of L2."""
    nr = 3 * _VECTOR_BYTES // itemsize
    per_panel = (KC * nr + m_panels * _MR * nr) * itemsize
    return max(1, cache_sizes.l2_bytes() // 2 // per_panel)


def available(dtype) -> bool:
    """Whether the compiled kernels run ``dtype`` arrays."""
    return _functions(np.dtype(dtype)) is not None


@functools.cache
def _masked_runs(itemsize: int) -> bool:
    """Whether the compiled packing copies runs of columns a masked vector at a time."""
    from . import ccompile

    dtype = np.dtype(np.float32 if itemsize == 4 else np.float64)
    source = _header(dtype) + SOURCE
    try:
        fn = ccompile.load(source, "conv_masked_runs", [_P])
    except ccompile.CompileError:
        return False
    answer = ctypes.c_int(0)
    fn(ctypes.byref(answer))
    return bool(answer.value)


_WIDE = "conv_forward_wide_step"


@functools.cache
def _step_function(dtype: np.dtype, name: str = "conv_forward_step"):
    from . import ccompile

    source = _header(dtype) + SOURCE
    try:
        return ccompile.load(source, name, [_P])
    except ccompile.CompileError:
        return None
