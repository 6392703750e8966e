"""The forward convolution's layouts over the column panels (kernels/cconv.py): which
columns a panel covers (the output's own width, or the padded width's extended grid where its
wasted columns cost less than packing each output row), the tables of a geometry's layout, the
input relaid by stride phases (kernels/cconv_split.py) or side by side (kernels/cconv_side.py),
the packed weight, and the store tables of a result written into another array's phase
(`forward_into`)."""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from . import cconv_side, cconv_split
from .cconv_library import _MR, _VECTOR_BYTES, _compute_dtype, _masked_runs, pairs
from .cconv_tables import _forward_tables, _strides
from .conv_plan import ELEMENT_COST, RUN_COST, Plan


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


class _Into(NamedTuple):
    """Where a forward convolution stores its result instead of a fresh array: every
    ``stride``-th position, from ``phase``, of each plane of ``array`` (contiguous, of the
    result's samples and channels)."""

    array: np.ndarray
    stride: tuple
    phase: tuple


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
