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

import numpy as np

from . import cconv_col2im, cconv_dx_choice, cconv_packs, cconv_taps, cconv_wide, chalf
from .cclamp import clamp_address
from .cconv_forward_steps import _steps, _thread_step, forward_step, held_bytes, residual_slot
from .cconv_layout import _forward_layout, _Into, _into_table, _packed_weight, _plane
from .cconv_library import (
    _HALF,
    _P,
    _RESIDUAL_SLOT,
    _WIDE,
    SOURCE,
    _compute_dtype,
    _functions,
    _header,
    _panel_group,
    _step_function,
    available,
    compute_itemsize,
    pairs,
)
from .cconv_tables import _address, _padded
from .conv_plan import Plan
from .cstep import data_address

# (the library's, the layouts' and the steps' names other modules and tests read here)
__all__ = [
    "available",
    "conv_forward",
    "forward_step",
    "conv_input_grad",
    "held_bytes",
    "SOURCE",
    "pairs",
    "compute_itemsize",
    "residual_slot",
    "forward_into",
    "padded_input_grad",
    "col2im_runs",
    "taps_win",
    "clamp_address",
    "_P",
    "_WIDE",
    "_compute_dtype",
    "_functions",
    "_header",
    "_packed_weight",
    "_step_function",
    "_steps",
]


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
