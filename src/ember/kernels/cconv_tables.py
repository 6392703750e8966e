"""The column-panel tables of kernels/cconv.py's forward convolution: element strides, the input
offsets of a kernel's grid, the forward's offset tables, the output's segments, and the
zero-padded copy of the input the kernels read.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .conv_plan import Plan, interior, scratch, source_region
from .cstep import data_address

# ------------------------------------------------------------------------------- geometry


def _strides(shape) -> np.ndarray:
    return np.array([math.prod(shape[i + 1 :]) for i in range(len(shape))], np.int64)


def _grid_offsets(grid, steps) -> np.ndarray:
    """Offsets sum(g_d * steps_d) over the row-major positions g of ``grid``."""
    total = np.zeros((), np.int64)
    for size, step in zip(grid, steps):
        total = total[..., None] + np.arange(size, dtype=np.int64) * step
    return total.reshape(-1)


@functools.lru_cache(maxsize=64)
def _forward_tables(p: Plan, group_channels: int, flat: bool):
    """(src, dst, roff) of the forward kernel: per column of one sample its offset in the
    sample's padded input and in its output (-1 outside it), per (channel of a group, kernel
    offset) row its offset in the padded input. (The kernel adds the samples' own offsets:
    tables over the whole batch would take 16 bytes per output position.) ``flat``: the
    columns run along the padded width (see `_flat_columns`)."""
    out = p.out_size
    grid = out[:-1] + ((p.padded[-1],) if flat else (out[-1],))
    steps = _strides(p.padded) * np.array(p.stride[:-1] + ((1,) if flat else p.stride[-1:]))
    inside = np.ones(grid, bool)
    if flat:
        inside[..., out[-1] :] = False
    dst = np.where(inside.reshape(-1), _grid_offsets(grid, _strides(out)), -1)
    return _grid_offsets(grid, steps), dst, _row_offsets(p, group_channels)


def _row_offsets(p: Plan, channels: int) -> np.ndarray:
    """Offset in the padded input of each (channel, kernel offset) row, row-major."""
    plane = math.prod(p.padded)
    kernel_offsets = _grid_offsets(p.kernel, _strides(p.padded) * np.array(p.dilation))
    return (np.arange(channels, dtype=np.int64)[:, None] * plane + kernel_offsets).reshape(-1)


@functools.lru_cache(maxsize=64)
def _segment_tables(out_size: tuple, grid: tuple) -> tuple:
    rows = out_size[:-1] + (1,)
    return _grid_offsets(rows, _strides(out_size)), _grid_offsets(rows, _strides(grid))


def _segments(out_size: tuple, grid: tuple) -> tuple:
    """Where the rows (last dimension) of a gy plane go in the extended grid, as the weight
    gradient kernels take it: source offsets, destination offsets, count, row length, plane
    size (the tables stay alive in `_segment_tables`' cache)."""
    src, dst = _segment_tables(out_size, grid)
    return data_address(src), data_address(dst), len(src), out_size[-1], math.prod(out_size)


def _padded(x: np.ndarray, p: Plan, size: int, tag: str) -> np.ndarray:
    """``x`` zero-padded to the plan's padded extent, flat, in a scratch buffer of ``size``
    elements (the tail past the planes is zero: kernels may read into it)."""
    n, c = x.shape[:2]
    buf = scratch(tag, (size,), x.dtype, fill=0, key=(p, n, c))
    planes = buf[: n * c * math.prod(p.padded)].reshape((n, c) + p.padded)
    planes[(slice(None), slice(None)) + interior(p)] = x[source_region(p)]
    return buf


def _address(a: np.ndarray, offset: int = 0) -> int:
    return data_address(a) + offset * a.itemsize
