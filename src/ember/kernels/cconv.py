"""Compiled convolution kernels: the forward convolution (optionally with its bias and ReLU
epilogue) and its input gradient, in C (kernels/cconv_source.py); the weight gradient is in
kernels/cconv_weight.py and the kernels' workspace sizes in kernels/cconv_workspace.py, both
built on the compiled functions here and the column-panel tables of kernels/cconv_tables.py.

The NumPy kernels of ops/_conv_kernels.py are the specification; these compute the same sums
in another order (equal within float rounding, tested against them). They replace im2col + one
BLAS matmul + a transposing copy: the forward packs blocks of the (never built) column matrix
straight from the zero-padded input (contiguous or evenly stepping runs of columns: a stride's;
a panel that is one contiguous run in every row is read in place, unpacked) and stores each
output tile in the NC* layout, fused with the bias and ReLU, running column panels in groups
sized from L2 so that the packed weight is read once per group; the input gradient of a
stride-1 convolution is the forward convolution of the output gradient with the flipped,
transposed weight (no col2im). Strided gradients otherwise run phase by phase as stride-1 ones
(kernels/cconv_phases.py). benchmarks/conv_kernels.py measures them against PyTorch per shape.

Half precision (bfloat16, float16): the forward convolution (and so the input gradient) reads
and writes the 16-bit values, computing in float32: its input is widened as it is packed (the
padded copy stays in 16 bits), the weight as it is packed, and each result is rounded as it is
stored, the bias added to the float32 sum before that one rounding, as PyTorch's
half-precision convolutions round (the ReLU epilogue then reads the rounded value; `HALF` in
the C source).
bfloat16 on a CPU with AVX512_BF16 keeps its panels in 16 bits instead, two rows per 32-bit
lane, summed by ``vdpbf16ps`` (`pairs`; twice the multiply-adds per instruction; the column
layout only, and ``EMBER_BF16_DOT=0`` turns it off, as for the GEMM). The weight gradient is
kernels/cconv_weight.py's.

Every entry returns None where it does not apply (no C compiler, a dtype other than float32,
float64 and, for the forward, the half types, an empty tensor, a non-finite weight for the
input gradient) and the caller runs NumPy.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import threading
from typing import NamedTuple

import numpy as np

from .. import dtypes as dt
from . import (
    cache_sizes,
    cconv_choice,
    cconv_col2im,
    cconv_dx_choice,
    cconv_packs,
    cconv_side,
    cconv_split,
    cconv_step_choice,
    cconv_taps,
    cconv_wide,
    chalf,
    conv_plan,
)
from .cclamp import clamp_address
from .cconv_source import SOURCE as _KERNELS
from .cconv_tables import _address, _forward_tables, _padded, _strides
from .cmicro import KC
from .conv_plan import ELEMENT_COST, RUN_COST, Plan, charge
from .cstep import STEP_CALL, data_address, function_address

# one library: the column-panel kernels and the channels-wide forwards (kernels/cconv_wide.py,
# and kernels/cconv_taps.py's over blocks of samples, which packs its weight as the former)
SOURCE = _KERNELS + cconv_wide.WIDE_SOURCE + cconv_taps.TAPS_SOURCE
cconv_step_choice.use_source(SOURCE)
cconv_dx_choice.use_source(SOURCE)

__all__ = [
    "available",
    "conv_forward",
    "forward_step",
    "conv_input_grad",
    "held_bytes",
]

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


def _flat_columns(p: Plan, out_channels: int, itemsize: int) -> bool:
    """Whether the forward's columns run along the padded width (see `_extend_columns`)."""
    if p.stride[-1] != 1:
        return False
    return _extend_columns(p.padded[-1], p.out_size[-1], out_channels, itemsize)


def _extend_columns(width: int, out: int, out_channels: int, itemsize: int) -> bool:
    """Whether the forward's columns run along the ``width`` of the rows they read (an extended
    grid: one contiguous run per output row to pack, but ``width / out - 1`` of the columns
    wasted on every output channel) rather than the output's own width (no waste, but one
    run per output row to pack and store). Per useful column, the waste costs ``waste *
    channels / lanes`` vector multiply-adds (the channels padded to the micro-kernel's
    rows); the short runs cost `RUN_COST` per run of up to a vector (``RUN_COST * ceil(out /
    lanes) / out``) where packing copies runs a masked vector at a time, else `ELEMENT_COST`
    per element. The columns are extended where the waste costs less."""
    lanes = _VECTOR_BYTES // itemsize
    waste = width / out - 1
    extra = waste * (-(-out_channels // _MR) * _MR) / lanes
    if _masked_runs(itemsize):
        return extra <= RUN_COST * -(-out // lanes) / out
    return extra <= ELEMENT_COST


# -------------------------------------------------------------------------------- kernels


class _Forward(NamedTuple):
    """What the forward kernel needs of a geometry (see `_forward_layout`)."""

    cg: int  # input channels per group
    cog: int  # output channels per group
    rows: int  # (channel, kernel offset) rows of one group
    tables: tuple  # (src, dst, roff)
    plane: int  # elements of one padded input plane
    size: int  # elements of the padded input (its tail past the planes zero)
    m: int  # output positions per channel
    panels: int  # panels of _MR output channels per group
    unpadded: bool  # the kernel reads the input itself: no padding, no cropping, no tail
    # the relayout copy's description (kernels/cconv_split.py, kernels/cconv_side.py), and the
    # samples the kernel sees (None: the batch's; one where the batch is side by side)
    split: np.ndarray | None = None
    samples: int | None = None


@functools.lru_cache(maxsize=256)
def _forward_layout(
    x_shape: tuple, w_shape: tuple, p: Plan, groups: int, itemsize: int
) -> _Forward:
    """The forward kernel's layout (its tables are read-only: one copy serves every call)."""
    n, c = x_shape[:2]
    cout = w_shape[0]
    cg, cog = c // groups, cout // groups
    src, dst, roff = _forward_tables(p, cg, _flat_columns(p, cog, itemsize))
    plane = math.prod(p.padded)
    last = (n - 1) * c * plane + int(src[-1]) + (groups - 1) * cg * plane + int(roff[-1])
    size = max(n * c * plane, last + 1)
    unpadded = not any(p.lo) and tuple(p.padded) == tuple(p.in_size) and size == n * c * plane
    return _Forward(
        cg, cog, cg * math.prod(p.kernel), (src, dst, roff), plane, size,
        math.prod(p.out_size), -(-cog // _MR), unpadded,
    )  # fmt: skip


# (not cached: a side-by-side layout's tables grow with the batch, a few megabytes at batch 128
# on 32x32, and a cache would hold those of layouts timed but not chosen, memory no step keeps
# and the memory plan does not count; the steps that run a layout keep its tables)
def _relayout(x_shape: tuple, w_shape: tuple, p: Plan, itemsize: int) -> tuple | None:
    """(the one-group forward's layout over its input relaid so that its columns' runs are
    contiguous, whether the counted choice takes it): a strided convolution's input split by
    stride phases (kernels/cconv_split.py: where it reads fewer phases than there are), a
    stride-1 batch side by side (kernels/cconv_side.py: where its gaps' wasted columns cost
    less than packing the output rows, as `_extend_columns` counts, and the plain layout
    packs them), or None."""
    n, c = x_shape[:2]
    cout = w_shape[0]
    split = cconv_split.split_of(p)
    if split is not None:
        flat = _extend_columns(split.extent[-1], p.out_size[-1], cout, itemsize)
        src, dst, roff = cconv_split.tables(p, split, c, flat)
        plane, samples = split.plane, n
        copy, counted = cconv_split.descriptor(p, split, n * c), cconv_split.reads_fewer(split)
    else:
        side = cconv_side.side_of(p, n)
        if side is None:
            return None
        src, dst, roff = cconv_side.tables(p, side, n, c, cout)
        plane, samples = side.plane, 1
        copy = cconv_side.descriptor(p, side, n, c)
        # (where the plain layout reads its panels in place already, along the padded width,
        # the side-by-side image's longer rows measured slower: each panel's rows then lie a
        # whole image row apart, more pages and streams than one sample's planes)
        packs_rows = not _flat_columns(p, cout, itemsize)
        counted = packs_rows and _extend_columns(side.width, p.out_size[-1], cout, itemsize)
    last = (samples - 1) * c * plane + int(src[-1]) + int(roff[-1])
    layout = _Forward(
        c, cout, c * math.prod(p.kernel), (src, dst, roff), plane,
        max(samples * c * plane, last + 1), math.prod(p.out_size), -(-cout // _MR), False,
        copy, samples,
    )  # fmt: skip
    return layout, counted


def conv_forward(x, w, p: Plan, groups: int, bias=None, relu=False, mask=None, residual=None):
    """conv(x, w) (+ bias per output channel) (+ ``residual``) (then clamped: ``relu`` True
    for a ReLU, or a clamp's (lo, hi, lo takes ties, hi takes ties): `clamp_address`), or None
    where it does not apply.
    ``x`` and ``w`` share a float dtype; ``bias``, if given, is (Cout,) (in half precision
    added to the float32 sums, the result rounded once); ``residual``, if given, has the
    result's shape and dtype (a residual block's shortcut, added as the store writes each
    tile: half precision rounds the biased sum, then the sum with it, as two adds round).
    ``mask``, a bool array of the output's shape, receives ``result > 0``."""
    if residual is not None:
        shape = (x.shape[0], w.shape[0]) + tuple(p.out_size)
        if tuple(residual.shape) != shape or residual.dtype != x.dtype:
            return None
        residual = np.ascontiguousarray(residual)
    return _forward(x, w, p, groups, bias, relu, mask, residual=residual)


def residual_slot(made, dtype) -> int:
    """The slot of a `forward_step`'s argument block (``made``: what it returned for ``dtype``)
    that takes the residual its store adds."""
    return _RESIDUAL_SLOT[bool(_channels_wide(made[0], np.dtype(dtype)))]


def _channels_wide(step, dtype: np.dtype) -> int:
    """Whether ``step`` runs a channels-wide layout, whose argument block's slots for the
    packed weight's flags and the residual are kernels/cconv_wide.py's: 0 (the column panels),
    1 (its packed weight kernels/cconv_wide.py's panels), 2 (its own panels:
    kernels/cconv_taps.py's wider blocking)."""
    if step is _step_function(dtype, _WIDE):
        return 1
    for blocking in cconv_taps.VARIANTS:
        if step is _step_function(dtype, cconv_taps.step_name(blocking)):
            return 1 if cconv_taps.shares_panels(blocking) else 2
    return 0


class _Into(NamedTuple):
    """Where a forward convolution stores its result instead of a fresh array: every
    ``stride``-th position, from ``phase``, of each plane of ``array`` (contiguous, of the
    result's samples and channels)."""

    array: np.ndarray
    stride: tuple
    phase: tuple


def forward_into(
    x, w, p: Plan, groups: int, array, stride: tuple, phase: tuple, bias=None, gather=None
):  # fmt: skip
    """conv(x, w) (+ bias) stored straight into ``array[..., phase::stride]`` (per spatial
    dimension; ``array`` contiguous, its samples and channels the result's), returning
    ``array``, or None (nothing written) where the C kernel does not apply. A strided
    convolution's input gradient writes each phase so (kernels/cconv_phases.py), with no copy
    of the phase. ``gather`` (one group, 2-d only): (the weight's shape as the convolution
    sees it, the stride of its output channels in ``w``, per row of an output channel its
    offset in ``w``: an int64 table); the packer reads those values of ``w`` in place."""
    if not array.flags.c_contiguous or array.dtype != x.dtype:
        return None
    into = _Into(array, tuple(stride), tuple(phase))
    return _forward(x, w, p, groups, bias, False, None, into, gather)


def _forward(
    x, w, p: Plan, groups: int, bias, relu, mask, into: _Into | None = None, gather=None,
    residual=None,
):  # fmt: skip
    functions = _functions(x.dtype)
    if functions is None or x.dtype != w.dtype or x.size == 0 or w.size == 0:
        return None
    forward, _, _, pool = functions
    n, c = x.shape[:2]
    cout = w.shape[0]
    if groups == 1 and x.ndim == 4:  # padding and packing in C too, on this thread's scratch
        # (a store into another array's phase rewrites the column layout's store table)
        w_shape = tuple(w.shape) if gather is None else gather[0]
        x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
        operands = (x, w) if into is None else None
        step = _thread_step(tuple(x.shape), w_shape, p, x.dtype, relu, into is None, operands)
        if step is not None:
            call, args, own_wp, wide, address = step
            if into is None:
                out = np.empty((n, cout) + p.out_size, x.dtype)
            else:
                out = into.array
                args = args.copy()  # (the kept block serves plain calls)
                key = (tuple(x.shape), w_shape, p, 1, compute_itemsize(x.dtype))
                dst = _into_table(key, into)
                # the store table, the channel and the sample strides (forward_step's layout)
                args[8], args[26], args[29] = data_address(dst), _plane(into), into.array[0].size
                if gather is not None:
                    args[35], args[36] = gather[1], gather[2].ctypes.data
            args[0], args[1], args[3] = data_address(x), data_address(w), data_address(out)
            pack = None  # a parameter's panels may be packed already (either layout)
            if x.dtype not in _HALF:  # (kernels/cprepack.py's: float32/float64)
                if wide == 1:
                    pack = cconv_wide.use_prepacked(args, w, own_wp)
                elif wide:  # (its own panels: packed by the call)
                    pack = None
                else:  # (a gathered phase packs its own: its w is not the weight's array)
                    pack = cconv_packs.use_column_pack(args, w, own_wp, gather is None)
            bias = None if bias is None else np.ascontiguousarray(bias, x.dtype)
            args[2] = 0 if bias is None else data_address(bias)
            args[4] = 0 if mask is None else data_address(mask)
            args[_RESIDUAL_SLOT[bool(wide)]] = 0 if residual is None else data_address(residual)
            call(address if into is None else data_address(args))
            del pack  # (held until the step has read it)
            return out
    if gather is not None:
        return None
    key = (tuple(x.shape), tuple(w.shape), p, groups, compute_itemsize(x.dtype))
    f = _forward_layout(*key)
    cg, cog, rows, plane, m, panels = f.cg, f.cog, f.rows, f.plane, f.m, f.panels
    src, dst, roff = f.tables
    # an unpadded convolution reads its (contiguous) input where it is
    xp = x if f.unpadded and x.flags.c_contiguous else _padded(x, p, f.size, "cconv_x")
    if into is None:
        out, chan, out_sample = np.empty((n, cout) + p.out_size, x.dtype), m, cout * m
    else:
        out, chan, out_sample = into.array, _plane(into), into.array[0].size
        dst = _into_table(key, into)
    packed = _packed_weight(w, groups, cog, rows, panels)
    if bias is not None:
        bias = np.ascontiguousarray(bias, x.dtype)
    for g in range(groups):
        forward(
            _address(xp, g * cg * plane),
            _address(packed[g]),
            None if bias is None else _address(bias, g * cog),
            _address(out, g * cog * chan),
            None if mask is None else _address(mask, g * cog * m),
            data_address(src),
            data_address(dst),
            data_address(roff),
            panels,
            rows,
            n * len(src),
            cog,
            chan,
            len(src),
            c * plane,
            out_sample,
            clamp_address(relu, x.dtype),
            pool,
            _panel_group(panels, compute_itemsize(x.dtype)),
            None if residual is None else _address(residual, g * cog * chan),
        )
    return out


def _packed_weight(w, groups: int, cog: int, rows: int, panels: int) -> np.ndarray:
    """The forward's packed weight: per group, panels of MR output channels, each stored
    (rows, MR), the micro-kernel's order; in the compute dtype, or (`pairs`) as bfloat16
    pairs of consecutive rows in 32-bit lanes, (rows + 1) // 2 of them."""
    if pairs(w.dtype):
        kp = (rows + 1) // 2
        bits = np.zeros((groups, panels * _MR, 2 * kp), np.uint32)
        bits[:, :cog, :rows] = np.ascontiguousarray(w).view(np.uint16).reshape(groups, cog, rows)
        packed, depth = bits[..., 0::2] | bits[..., 1::2] << 16, kp
    else:
        packed = np.zeros((groups, panels * _MR, rows), _compute_dtype(w.dtype))
        packed[:, :cog] = w.reshape(groups, cog, rows)
        depth = rows
    return np.ascontiguousarray(packed.reshape(groups, panels, _MR, depth).transpose(0, 1, 3, 2))


def _plane(into: _Into) -> int:
    return math.prod(into.array.shape[2:])


def _into_table(key: tuple, into: _Into) -> np.ndarray:
    return _into_dst(key, tuple(into.array.shape[2:]), into.stride, into.phase)


@functools.lru_cache(maxsize=64)
def _into_dst(key: tuple, size: tuple, stride: tuple, phase: tuple) -> np.ndarray:
    """The store table (``dst``: per column, its offset in the result plane, or -1) of the
    forward layout of ``key`` (`_forward_layout`'s arguments) mapped into a plane of spatial
    ``size`` at positions ``q * stride + phase``."""
    dst = _forward_layout(*key).tables[1]
    out_size = key[2].out_size
    q = np.unravel_index(np.maximum(dst, 0), out_size)
    offsets = sum((qd * s + r) * fs for qd, s, r, fs in zip(q, stride, phase, _strides(size)))
    return np.where(dst >= 0, offsets, -1).astype(np.int64)


_local = threading.local()
# per thread, the forward steps kept (their padded-input and packed-weight scratch), charged to
# the running caller (conv_plan.charged_to) like the scratch arrays
_STEP_CACHE_ENTRIES = 32
_STEP_CACHE_BYTES = 64 << 20


def _thread_step(x_shape, w_shape, p: Plan, dtype, relu, any_layout=True, operands=None):
    """(the forward step as a callable, its argument block, the address of its own packed
    weight, whether it runs the channels-wide layout, the block's address) for this geometry,
    kept per thread (its scratch is written by each call: threads running the same convolution
    at once must not share it), or None. ``operands`` (x, w): the layout is the one measured
    faster on them (kernels/cconv_choice.py), else counted."""
    cache = _steps()
    relu = relu or None  # (no clamp, False or None: one key, so eager calls and graphs share steps)
    key = (x_shape, w_shape, p, np.dtype(dtype), relu, any_layout)
    found = cache.get(key)
    if found is not None:
        charge(("cconv step", key), found[3], _step_kept)
    else:
        # (a store into another array's phase keeps the plain column layout, whose store
        # table forward_into maps)
        wide, split = (None, None) if any_layout else (False, False)
        if operands is not None and any_layout and not pairs(dtype):
            way = cconv_choice.layout(x_shape, w_shape, p, dtype, relu, operands, forward_step)
            if way is not None:
                wide, split = way
        made = forward_step(x_shape, w_shape, p, dtype, relu, wide=wide, split=split)
        if made is None:
            return None
        step, args, keep = made
        size = sum(a.nbytes for a in keep if isinstance(a, np.ndarray))
        call = STEP_CALL(function_address(step))
        wide = _channels_wide(step, np.dtype(dtype))
        found = cache[key] = (call, args, keep, size, int(args[6]), wide, data_address(args))
        # the oldest geometries go, their scratch with them
        while len(cache) > _STEP_CACHE_ENTRIES or (
            len(cache) > 1 and sum(v[3] for v in cache.values()) > _STEP_CACHE_BYTES
        ):
            del cache[next(iter(cache))]
        charge(("cconv step", key), size, _step_kept)
    return found[0], found[1], found[4], found[5], found[6]


def _steps() -> dict:
    cache = getattr(_local, "steps", None)
    if cache is None:
        cache = _local.steps = {}
    return cache


conv_plan.on_release(lambda: _steps().clear())


def _step_kept(charged: tuple) -> bool:
    """Whether this thread's step cache still holds a charged entry (conv_plan.charged_to)."""
    return charged[1] in _steps()


def held_bytes() -> int:
    """Bytes of the scratch this thread's kept forward steps hold (the padded inputs and
    packed weights)."""
    return sum(v[3] for v in _steps().values())


_WIDE = "conv_forward_wide_step"


@functools.cache
def _step_function(dtype: np.dtype, name: str = "conv_forward_step"):
    from . import ccompile

    source = _header(dtype) + SOURCE
    try:
        return ccompile.load(source, name, [_P])
    except ccompile.CompileError:
        return None


def forward_step(
    x_shape: tuple, w_shape: tuple, p: Plan, dtype, relu,
    weight_constant: bool = False, wide: bool | None = None, split: bool | None = None,
):  # fmt: skip
    """The graph runner's step of a 2-d, one-group forward convolution (runtime/cgraph.py):
    (the step function, its argument block with zeros in the x, w, bias, out and mask slots
    0 to 4, what must stay alive), or None where `conv_forward` would not run. The layout is
    the column panels' or the channels-wide one; ``wide`` True or False forces one (tests; a
    phase's store needs the columns'); both None, the one measured fastest for this geometry
    on this machine (kernels/cconv_step_choice.py), or with ``EMBER_CONV_LAYOUT=count`` the
    one doing less counted work (`cconv_wide.wins`, `_relayout`).
    The column panels read the input relaid where ``split`` is True, or, where it is None,
    where the count says so (`_relayout`): a strided convolution's split by stride phases
    (kernels/cconv_split.py), a stride-1 batch side by side (kernels/cconv_side.py);
    `forward_into`'s store tables are the plain layout's (False). ``wide`` and ``split`` both
    True: the channels-wide layout over blocks of samples, which skips the taps that read the
    padding (kernels/cconv_taps.py; None where it does not apply). ``weight_constant``: the
    weight is the same unchanging array at every call (a graph's constant), packed once."""
    from . import cpool

    dtype = np.dtype(dtype)
    if len(x_shape) != 4 or 0 in x_shape or 0 in w_shape or _functions(dtype) is None:
        return None
    n, c, h, w = x_shape
    itemsize, compute = compute_itemsize(dtype), _compute_dtype(dtype)
    key = (tuple(x_shape), tuple(w_shape), p, 1, itemsize)
    f = _forward_layout(*key)
    threads = cpool.get_num_threads()
    pool = _functions(dtype)[3] or 0
    # (none of a dimension where its low padding covers all the windows read: a negative high
    # padding can crop the padded extent to less than the low padding)
    copied = [max(0, min(s, n_ - lo)) for lo, s, n_ in zip(p.lo, p.in_size, p.padded)]
    copy = [n * c, *copied, h, w, *p.lo, *p.padded]
    if wide is None:  # (the channels-wide layout has no bfloat16 pairs)
        wide = not pairs(dtype) and cconv_wide.wins(n * f.m, f.cog, f.rows, threads, itemsize)
        if split is None and not pairs(dtype) and not cconv_choice.counted_only():
            # a step left to choose: the layout measured for this geometry on this machine
            relaid = None if wide else _relayout(*key[:3], itemsize)
            counted = (wide, relaid is not None and relaid[1])
            wide, split = cconv_step_choice.built_layout(
                x_shape, w_shape, p, dtype, weight_constant,
                functools.partial(forward_step, x_shape, w_shape, p, dtype, relu, weight_constant),
                counted,
            )  # fmt: skip
    if wide and pairs(dtype):
        return None
    if wide and split:  # the channels-wide layout over blocks of samples, skipping the padding
        if not cconv_taps.applies(x_shape, w_shape, p, dtype):
            return None
        blocking = cconv_taps.variant(n, w_shape[0], itemsize)
        step = _step_function(dtype, cconv_taps.step_name(blocking))
        if step is None:
            return None
        args, keep = cconv_taps.step_args(
            x_shape, w_shape, p, dtype, blocking, clamp_address(relu, dtype), pool, threads,
            weight_constant,
        )  # fmt: skip
        return step, args, (step, *keep)
    if wide:
        step = _step_function(dtype, _WIDE)
        if step is None:
            return None
        tables = _forward_tables(p, c, False)
        xp = None if f.unpadded else np.zeros(f.size, dtype)
        args, wp = cconv_wide.step_args(
            x_shape, w_shape, tables, f.rows, len(tables[0]), f.plane, f.m, xp, copy,
            clamp_address(relu, dtype),
            pool, threads, weight_constant, compute,
        )  # fmt: skip
        return step, args, (step, xp, wp.base, *tables)
    step = _step_function(dtype)
    if step is None:
        return None
    relaid = None if split is False else _relayout(*key[:3], itemsize)
    if relaid is not None and (split or relaid[1]):
        f = relaid[0]
    xp = None if f.unpadded else np.zeros(f.size, dtype)
    samples = n if f.samples is None else f.samples
    src, dst, roff = f.tables
    wp = np.empty((f.panels * _MR * f.rows,), compute)
    args = [0, 0, 0, 0, 0, 0 if xp is None else data_address(xp), data_address(wp)]
    args += [data_address(src), data_address(dst), data_address(roff), *copy]
    args += [f.cog, f.rows, f.panels]
    args += [f.panels, f.rows, samples * len(src), f.cog, f.m, len(src), c * f.plane]
    args += [f.cog * f.m]
    args += [clamp_address(relu, dtype), pool, _panel_group(f.panels, itemsize)]
    args += [int(weight_constant), 0, 0, 0]  # (then the weight's gather: forward_into's)
    args += [0 if f.split is None else data_address(f.split)]
    args += [0]  # (the residual: cconv_epilogue's steps)
    return step, np.array(args, np.int64), (step, xp, wp, src, dst, roff, f.split)


def _compute_itemsize(dtype) -> int:
    """Bytes of the type a ``dtype`` convolution sums in (float32 for half precision)."""
    return 4 if dtype in chalf.NAMES else np.dtype(dtype).itemsize


def conv_input_grad(gy, w, p: Plan, groups: int, bias=None):
    """The adjoint of `conv_forward` in x (+ ``bias`` per channel of the result, added as the
    forward adds it: a transposed convolution's): the product and a col2im
    (kernels/cconv_col2im.py) where `col2im_runs` says, else `padded_input_grad`. None where
    it does not apply."""
    if col2im_runs(gy.shape, w.shape, p, groups, gy.dtype):
        # small gradient planes under a large kernel: the product and a col2im, which
        # multiply no padding; half precision declined, so ops/conv.py widens it to float32
        # and rounds once (a 16-bit result is float32's rounded, whichever way float32 sums)
        return cconv_col2im.input_grad(gy, w, p, groups, bias)
    if not bool(np.isfinite(w).all()):
        # (a non-finite weight times the zero border would give NaN where the NumPy kernel's
        # col2im never adds those products: the col2im where it applies)
        itemsize = _compute_itemsize(gy.dtype)
        if cconv_col2im.wins(gy.shape, w.shape, p, groups, itemsize):
            return cconv_col2im.input_grad(gy, w, p, groups, bias)
        return None
    return padded_input_grad(gy, w, p, groups, bias)


def col2im_runs(gy_shape: tuple, w_shape: tuple, p: Plan, groups: int, dtype) -> bool:
    """Whether the input gradient runs the product and col2im: counted (the col2im's count
    below the padded forward's, and below kernels/cconv_taps.py's where that layout skips the
    padding's taps), measured once per machine and geometry where the counts are near
    (kernels/cconv_dx_choice.py); kernels/cconv_workspace.py asks it too."""

    # (half precision as float32: a 16-bit gradient the col2im takes is widened by the op to
    # float32's, so both decide alike and a 16-bit result is float32's rounded once)
    dtype = _compute_dtype(np.dtype(dtype))
    itemsize = dtype.itemsize
    counted = cconv_col2im.wins(gy_shape, w_shape, p, groups, itemsize) and not taps_win(
        gy_shape, w_shape, p, groups, dtype
    )
    return cconv_dx_choice.col2im_runs(
        gy_shape, w_shape, p, groups, dtype, counted, padded_input_grad
    )


def padded_input_grad(gy, w, p: Plan, groups: int, bias=None):
    """The input gradient as the forward convolution of ``gy``, padded by the kernel's reach,
    with the flipped, transposed weight (a finite one): at stride 1 directly, else phase by
    phase (kernels/cconv_phases.py). None where it does not apply."""
    nd = len(p.kernel)
    reach = [d * (k - 1) for d, k in zip(p.dilation, p.kernel)]
    lo = [r - lo for r, lo in zip(reach, p.lo)]
    hi = [i - o - low + r for i, o, low, r in zip(p.in_size, p.out_size, lo, reach)]
    if any(s != 1 for s in p.stride) or any(v < 0 for v in lo):
        # (phases crop gy where the padding exceeds the kernel's reach)
        from . import cconv_phases

        return cconv_phases.input_grad(gy, w, p, groups, conv_forward, forward_into, bias)
    from .conv_plan import plan

    cout, cg = w.shape[:2]
    cog = cout // groups
    flipped = w.reshape((groups, cog, cg) + p.kernel)[(Ellipsis,) + (slice(None, None, -1),) * nd]
    w2 = np.ascontiguousarray(flipped.swapaxes(1, 2)).reshape((groups * cg, cog) + p.kernel)
    p2 = plan(p.out_size, p.kernel, (1,) * nd, tuple(zip(lo, hi)), p.dilation)
    if p2.out_size != p.in_size:
        return None
    return conv_forward(gy, w2, p2, groups, bias)


def taps_win(gy_shape: tuple, w_shape: tuple, p: Plan, groups: int, dtype) -> bool:
    """Whether a stride-1 input gradient's padded forward, run by kernels/cconv_taps.py's
    layout (which skips the taps reading the padding), counts less work than the product and
    col2im (a 3x3 'same' convolution's 4x4 planes; a DCGAN layer's 1x1 planes under a 4x4
    kernel, whose forward reads one tap in sixteen, counts more); kernels/cconv_workspace.py
    asks it too."""
    from .conv_plan import plan

    if len(p.kernel) != 2 or groups != 1 or any(s != 1 for s in p.stride):
        return False
    reach = [d * (k - 1) for d, k in zip(p.dilation, p.kernel)]
    lo = [r - low for r, low in zip(reach, p.lo)]
    hi = [i - o - low + r for i, o, low, r in zip(p.in_size, p.out_size, lo, reach)]
    if min(lo) < 0:
        return False
    forward_w = (w_shape[1], w_shape[0]) + tuple(p.kernel)
    p2 = plan(p.out_size, p.kernel, (1, 1), tuple(zip(lo, hi)), p.dilation)
    if p2.out_size != p.in_size or not cconv_taps.applies(gy_shape, forward_w, p2, dtype):
        return False
    itemsize = _compute_itemsize(dtype)
    taps = cconv_taps.work(gy_shape, forward_w, p2, itemsize)
    return taps < cconv_col2im.work(gy_shape, w_shape, p, groups, itemsize)
