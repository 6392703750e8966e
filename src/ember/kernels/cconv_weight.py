"""The weight gradient of a convolution in C (kernels/cconv_source.py): the adjoint of
`cconv.conv_forward` in w, equal to ops/_conv_kernels.py's NumPy kernel within float rounding.

Three ways, by shape: a pointwise (1x1, stride 1) convolution's per-sample products through the
GEMM; with many input channels, one GEMM per kernel offset over a channels-last copy of the
input, reducing over the real output positions (at any stride where the windows cover the
input); otherwise a dot-product kernel over an extended output grid (stride 1; strided ones run
phase by phase, kernels/cconv_phases.py). Returns None where it does not apply and the caller
runs NumPy.

Half precision (bfloat16, float16) is computed in float32 from the 16-bit operands: gy is
widened as the kernels lay it out (the extended grid's rows, the packed panels), x as it is
copied into the kernels' float32 padded (or channels-last) scratch, and the float32 result is
rounded once. bfloat16 with AVX512_BF16 (`cconv.pairs`) keeps both in 16 bits and sums pairs of
positions with vdpbf16ps: along the extended grid's rows, or the channels-last kernel's chunk
of positions taken two at a time (gy's values and x's channels packed as pairs). The pointwise
products and the strided phases decline it (`reads_half`): the caller then widens the operands.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from . import cconv, chalf
from .cconv_library import _BLOCKS, _C, _HALF, _L, _MAX_WASTE, _MR, _P, _VECTOR_BYTES
from .cconv_source import SOURCE
from .cconv_tables import _address, _grid_offsets, _padded, _row_offsets, _segments, _strides
from .conv_plan import Plan, interior, scratch, source_region
from .cstep import data_address

__all__ = ["conv_weight_grad"]


def conv_weight_grad(x, gy, p: Plan, groups: int):
    """The adjoint of `conv_forward` in w, or None (half precision where `reads_half` says
    no: the caller widens the operands)."""
    functions = cconv._functions(x.dtype)  # (one switch for every convolution kernel)
    if functions is None or x.dtype != gy.dtype or x.size == 0 or gy.size == 0:
        return None
    half = x.dtype in _HALF
    if half and not reads_half(x.shape, gy.shape[1], p, groups):
        return None
    _, weight, weight_cl, pool = functions
    compute = cconv._compute_dtype(x.dtype)
    n, c = x.shape[:2]
    cout = gy.shape[1]
    cg, cog = c // groups, cout // groups
    if groups == 1 and not half and _pointwise_by_sample(p, cout):
        gw = _pointwise_weight_grad(x, gy)
        if gw is not None:
            return gw.reshape((cout, c) + p.kernel)
    layout = cl_layout(cg, p, compute.itemsize)
    if groups == 1 and layout is not None and _windows_cover(p):
        gy = np.ascontiguousarray(gy)
        gw = _weight_grad_channels_last(x, gy, p, weight_cl, pool, layout)
        return _rounded(gw, x.dtype)
    if groups == 1 and not half and _patches(p):
        gw = _patch_weight_grad(x, gy, p)
        if gw is not None:
            return gw
    if any(s != 1 for s in p.stride):
        from . import cconv_phases

        return cconv_phases.weight_grad(x, gy, p, groups, conv_weight_grad)
    gy = np.ascontiguousarray(gy)
    grid = p.out_size[:1] + p.padded[1:]
    segments = _segments(p.out_size, grid)
    if math.prod(grid) > _MAX_WASTE * math.prod(p.out_size):
        return None
    # (bfloat16 pairs: the dot products read two vectors' worth of 16-bit positions at a time)
    pairs = cconv.pairs(x.dtype)
    lanes = _VECTOR_BYTES // compute.itemsize * (2 if pairs else 1)
    length = -(-math.prod(grid) // lanes) * lanes
    plane = math.prod(p.padded)
    roff = _row_offsets(p, cg)
    size = max(n * c * plane, (n - 1) * c * plane + (groups - 1) * cg * plane + int(roff[-1]))
    if half and not pairs:
        xp = _padded_wide(x, p, size + length, "cconv_xw")
    else:  # (the pairs read x's 16-bit values where they are)
        xp = _padded(x, p, size + length, "cconv_xw")
    rows = len(roff)
    per_block = max(1, -(-n // _BLOCKS))
    blocks = -(-n // per_block)
    gw = np.empty((cout, cg) + p.kernel, compute)
    partial = np.empty((blocks, cog, rows), compute)
    for g in range(groups):
        weight(
            _address(gy, g * cog * math.prod(p.out_size)),
            _address(xp, g * cg * plane),
            _address(gw, g * cog * rows),
            data_address(partial),
            data_address(roff),
            n,
            cog,
            rows,
            length,
            gy[0].size,
            c * plane,
            per_block,
            *segments,
            pool,
        )
    # an inf or NaN in x read by a column outside the output, times its zero, gives NaN where
    # the NumPy kernel has a number: such results are recomputed there
    return _rounded(gw if np.isfinite(gw).all() else None, x.dtype)


def _rounded(gw, dtype):
    """The float32 weight gradient ``gw`` (or None) rounded to a half-precision ``dtype``."""
    if gw is None or gw.dtype == dtype:
        return gw
    return chalf.from_float32(gw, dtype)


class ClLayout(NamedTuple):
    """The channels-last kernel's layout: the copy's channels per position (``cp``), the
    values the product reads from each kernel offset's position (``cw``, a multiple of its
    tiles' two vectors) and its kernel offsets (``offsets``: every one, or where ``rows``, the
    first of each kernel row, whose offsets' channels lie side by side, ``cp`` apart, at
    adjacent positions)."""

    cp: int
    cw: int
    rows: bool
    offsets: int


def cl_layout(cg: int, p: Plan, itemsize: int) -> ClLayout | None:
    """The channels-last kernel's layout for ``cg`` input channels per group, where it runs:
    the one of least work of (a) each kernel offset's channels padded to the tiles and (b) a
    kernel row's offsets side by side (dilation 1 along the row: adjacent positions), padded
    to the tiles as a whole (for few channels: 16 channels of a 3-wide row are 48 values, two
    tiles of 32, where each offset alone takes a tile; the same sums, bit for bit), where
    that work is at most half again the product's own, else None; (b) alone runs only at a
    stride above 1, where the other kernel runs phase by phase on copies of the input; at
    stride 1 the extended grid reads the input in place."""
    wide = 2 * (_VECTOR_BYTES // itemsize)
    kk, kw = math.prod(p.kernel), p.kernel[-1]
    useful = 1.5 * cg * kk
    padded = -(-cg // wide) * wide
    best = ClLayout(padded, padded, False, kk) if padded * kk <= useful else None
    if p.dilation[-1] == 1 and kw > 1 and (best is not None or any(s > 1 for s in p.stride)):
        merged = ClLayout(cg, -(-kw * cg // wide) * wide, True, kk // kw)
        if merged.cw * merged.offsets <= useful and (
            best is None or merged.cw * merged.offsets < best.cw * best.offsets
        ):
            best = merged
    return best


def reads_half(x_shape: tuple, cout: int, p: Plan, groups: int) -> bool:
    """Whether `conv_weight_grad` computes a half-precision weight gradient from the 16-bit
    operands themselves: the channels-last kernel or the stride-1 extended grid (not the
    pointwise products, whose per-sample results would be rounded, nor the strided phases)."""
    cg = x_shape[1] // groups
    if groups == 1 and cl_layout(cg, p, 4) is not None and _windows_cover(p):
        return True
    if any(s != 1 for s in p.stride):
        return False
    grid = p.out_size[:1] + p.padded[1:]
    return math.prod(grid) <= _MAX_WASTE * math.prod(p.out_size)


@functools.cache
def _wide_copy_function(dtype: np.dtype):
    from . import ccompile

    try:
        return ccompile.load(cconv._header(dtype) + SOURCE, "copy_padded_wide", [_P, _P, _P])
    except ccompile.CompileError:
        return None


def _padded_wide(x, p: Plan, size: int, tag: str) -> np.ndarray:
    """`cconv_tables._padded` of a half-precision ``x`` into a float32 scratch, widened as it is
    copied (in C for a 2-d convolution's input)."""
    n, c = x.shape[:2]
    buf = scratch(tag, (size,), np.float32, fill=0, key=(p, n, c))
    copy = _wide_copy_function(x.dtype) if x.ndim == 4 and min(p.lo) >= 0 else None
    if copy is None:
        planes = buf[: n * c * math.prod(p.padded)].reshape((n, c) + p.padded)
        planes[(slice(None), slice(None)) + interior(p)] = x[source_region(p)]
        return buf
    x = np.ascontiguousarray(x)
    copied = [max(0, min(s, e - lo)) for lo, s, e in zip(p.lo, p.in_size, p.padded)]
    sizes = np.array([n * c, *copied, *x.shape[2:], *p.lo, *p.padded], np.int64)
    copy(data_address(x), data_address(buf), data_address(sizes))
    return buf


def _pointwise_by_sample(p: Plan, cout: int) -> bool:
    """Whether a weight gradient runs as one product per sample, gy[n] (Cout x HW) by x[n]
    transposed, summed over the samples: a 1x1 convolution, stride 1, no padding (x is the
    column matrix itself, read in place), with more than twice as many positions per sample
    as output channels: the products' results (Cout x Cin per sample) are written and read
    again by the sum, two passes that then cost less than the channels-last kernel's
    transposed copy of x (Cin x HW per sample)."""
    return (
        all(k == 1 for k in p.kernel)
        and all(s == 1 for s in p.stride)
        and not any(p.lo)
        and tuple(p.padded) == tuple(p.in_size) == tuple(p.out_size)
        and math.prod(p.out_size) > 2 * cout
    )


def _pointwise_weight_grad(x, gy):
    """sum over n of gy[n] @ x[n]^T (ember's GEMM over the batch), or None where the GEMM
    declines (a product too small to share)."""
    from . import cgemm

    n, c = x.shape[:2]
    x3 = np.ascontiguousarray(x).reshape(n, c, -1)
    g3 = gy.reshape(n, gy.shape[1], -1)
    per_sample = cgemm.matmul(g3, x3.transpose(0, 2, 1))
    return None if per_sample is None else per_sample.sum(axis=0)


def _patches(p: Plan) -> bool:
    """Whether the windows are disjoint patches tiling the input from its start (kernel ==
    stride > 1 somewhere, dilation 1, no padding read): a ViT's, ConvNeXt's or Swin's patch
    embedding. Its weight gradient is one product of gy by the patches (`_patch_weight_grad`),
    where the phases would run one 1x1 convolution per kernel offset over a few channels."""
    return (
        any(s > 1 for s in p.stride)
        and all(k == s for k, s in zip(p.kernel, p.stride))
        and all(d == 1 for d in p.dilation)
        and not any(p.lo)
        and all(o * s <= i for o, s, i in zip(p.out_size, p.stride, p.in_size))
    )


def _patch_weight_grad(x, gy, p: Plan):
    """gw[co, c, k] = sum over samples and patches of gy[n, co, o] x[n, c, o * s + k]: the
    patches laid out as rows (a transposing copy of the input's read part), gy's channels as
    rows, one GEMM (ember's, else NumPy's)."""
    from . import cgemm

    n, c = x.shape[:2]
    cout, nd = gy.shape[1], len(p.kernel)
    crop = tuple(slice(0, o * s) for o, s in zip(p.out_size, p.stride))
    split = [n, c]
    for o, k in zip(p.out_size, p.kernel):
        split += [o, k]
    xs = x[(slice(None), slice(None)) + crop].reshape(split)
    # (n, c, o1, k1, o2, k2, ...) -> (c, k1, k2, ..., n, o1, o2, ...): a patch element per row,
    # the samples' patches along it, so the long sum over them is the product's inner
    # dimension with the few patch elements as its rows (ember's GEMM ran the other
    # orientation, a few columns, an order of magnitude slower)
    order = [1] + [3 + 2 * d for d in range(nd)] + [0] + [2 + 2 * d for d in range(nd)]
    patches = np.ascontiguousarray(xs.transpose(order)).reshape(c * math.prod(p.kernel), -1)
    columns = np.ascontiguousarray(np.moveaxis(gy, 1, -1)).reshape(-1, cout)
    gw_t = cgemm.matmul(patches, columns)
    if gw_t is None:
        gw_t = patches @ columns
    return np.ascontiguousarray(gw_t.T).reshape((cout, c) + tuple(p.kernel))


def _windows_cover(p: Plan) -> bool:
    """Whether the windows together read every position of the padded input (a kernel at
    least as wide as the stride): the channels-last weight gradient copies all of it, and
    reads it at the stride directly. Where they do not (a 1x1 convolution of stride 2), the
    phases (kernels/cconv_phases.py) copy only the positions read."""
    return all(d * (k - 1) + 1 >= s for d, k, s in zip(p.dilation, p.kernel, p.stride))


@functools.lru_cache(maxsize=64)
def _cl_segment_tables(p: Plan) -> tuple:
    """Per output row (all but the last dimension), its offset in a gy plane and the padded
    input position its first window starts at."""
    rows = p.out_size[:-1] + (1,)
    steps = _strides(p.padded) * np.array(p.stride)
    return _grid_offsets(rows, _strides(p.out_size)), _grid_offsets(rows, steps)


def _cl_blocks() -> int:
    from . import cpool

    return max(1, cpool.get_num_threads())


@functools.cache
def _transpose_function(dtype: np.dtype):
    from . import ccompile

    source = cconv._header(dtype) + SOURCE
    try:
        return ccompile.load(source, "to_channels_last", [_P, _P] + [_L] * 11 + [_P])
    except ccompile.CompileError:
        return None


def _to_channels_last(x, xcl, p: Plan, cp: int) -> bool:
    """Copy the 2-d input ``x`` into the interior of the channels-last padded scratch ``xcl``
    in C (NumPy's transposing copy moves one element at a time); False where it does not
    apply (another rank, no compiler)."""
    if x.ndim != 4 or (x.dtype not in _C and x.dtype not in _HALF):
        return False
    fn = _transpose_function(x.dtype)
    if fn is None:
        return False
    from . import cpool

    x = np.ascontiguousarray(x)
    n, c, in_h, in_w = x.shape
    rows, cols = (max(0, min(s, e - lo)) for lo, s, e in zip(p.lo, p.in_size, p.padded))
    fn(data_address(x), data_address(xcl), n, c, in_h, in_w, rows, cols, cp, *p.padded, *p.lo,
       cpool.parallel_for())  # fmt: skip
    return True


@functools.lru_cache(maxsize=64)
def _padding_skips(p: Plan, layout: ClLayout) -> tuple | None:
    """Per kernel offset of the channels-last kernel (a kernel row's first, where its offsets
    lie side by side: their columns are not skipped), whether each output row's window reads
    a real input row (one byte a row) and the output columns ``[lo, hi)`` whose windows read
    real input columns: the positions whose products the kernel skips, as kernels/cconv_taps.py
    skips the forward's (a 3x3 'same' convolution's 4x4 planes: 31% of its products read the
    zero padding). The kernel skips them in the chunks of positions whose gy values are all
    finite, where each skipped term is a finite value times +0 (the sums start at +0, so those
    terms change nothing: the bits of summing every position); None where no window reads the
    padding."""
    lead = p.kernel[:-1] + (1,) if layout.rows else p.kernel

    def inside(axis: int) -> np.ndarray:
        """(kernel offsets, output positions): whether the offset's window reads a real input
        position along ``axis``."""
        at = np.arange(p.out_size[axis]) * p.stride[axis] - p.lo[axis]
        offsets = np.arange(lead[axis])[:, None] * p.dilation[axis]
        return (at + offsets >= 0) & (at + offsets < p.in_size[axis])

    rows = np.ones((1, 1), bool)  # (lead offsets so far, output rows so far)
    for axis in range(len(p.kernel) - 1):
        ok = inside(axis)
        rows = (rows[:, None, :, None] & ok[None, :, None, :]).reshape(
            rows.shape[0] * ok.shape[0], -1
        )
    if layout.rows:
        cols = np.ones((1, p.out_size[-1]), bool)
    else:
        cols = inside(len(p.kernel) - 1)
    if rows.all() and cols.all():
        return None
    count = cols.sum(axis=1)
    lo = np.where(count > 0, cols.argmax(axis=1), 0)
    # (a window's real columns are one run: [lo, lo + count))
    row_ok = np.repeat(rows, cols.shape[0], axis=0).astype(np.uint8)
    col_lo = np.tile(lo, rows.shape[0]).astype(np.int64)
    col_hi = np.tile(lo + count, rows.shape[0]).astype(np.int64)
    return np.ascontiguousarray(row_ok), col_lo, col_hi


def _weight_grad_channels_last(x, gy, p: Plan, weight_cl, pool, layout: ClLayout):
    """The weight gradient as one GEMM per kernel offset (or kernel row: `cl_layout`), over a
    channels-last copy of the padded input (each position's channels one contiguous run),
    reading the positions each output row's windows start at (every stride-th along the
    row)."""
    n, c = x.shape[:2]
    src, dst = _cl_segment_tables(p)
    segments = (
        data_address(src),
        data_address(dst),
        len(src),
        p.out_size[-1],
        math.prod(p.out_size),
    )
    cout = gy.shape[1]
    cp, cw = layout.cp, layout.cw
    lead = p.kernel[:-1] + (1,) if layout.rows else p.kernel
    koff = _grid_offsets(lead, _strides(p.padded) * np.array(p.dilation))
    positions = math.prod(p.padded)
    # (half precision: widened as it is copied, but for bfloat16 pairs, which keep 16 bits)
    compute = cconv._compute_dtype(x.dtype)
    kept = x.dtype if cconv.pairs(x.dtype) else compute
    # (a kernel row's last tile reads up to cw values past its offsets: zeros at the end)
    size = n * positions * cp
    xcl = scratch("cconv_xcl", (size + cw,), kept, fill=0, key=(p, n, c, cp))
    planes = xcl[:size].reshape((n,) + p.padded + (cp,))
    if not _to_channels_last(x, xcl, p, cp):
        planes[(slice(None),) + interior(p) + (slice(0, c),)] = np.moveaxis(
            x[source_region(p)], 1, -1
        )
    rows = -(-cout // _MR) * _MR
    # one block of samples per thread: each block's partial sums are as large as the weight
    # gradient, and the reduction inside a block already runs over all its positions
    per_block = -(-n // _cl_blocks())
    blocks = -(-n // per_block)
    out = np.empty((layout.offsets, rows, cw), compute)
    partial = np.empty((blocks,) + out.shape, compute)
    skip = _padding_skips(p, layout)
    weight_cl(
        data_address(gy),
        data_address(xcl),
        data_address(out),
        data_address(partial),
        data_address(koff),
        n,
        cout,
        layout.offsets,
        cp,
        gy[0].size,
        positions * cp,
        per_block,
        p.stride[-1],
        cw,
        *segments,
        *((0, 0, 0) if skip is None else (data_address(a) for a in skip)),
        pool,
    )
    if layout.rows:  # (rows, kernel row, offset along it, channel) -> per offset
        kw = p.kernel[-1]
        part = out[:, :cout, : kw * cp].reshape(layout.offsets, cout, kw, cp)[..., :c]
        part = np.moveaxis(part, 2, 1).reshape(-1, cout, c)
    else:
        part = out[:, :cout, :c]
    gw = np.ascontiguousarray(part.transpose(1, 2, 0)).reshape((cout, c) + p.kernel)
    return gw if np.isfinite(gw).all() else None
