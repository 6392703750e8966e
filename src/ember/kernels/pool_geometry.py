"""The geometry of pooling windows, shared by the NumPy reference kernels (ops/pool.py,
ops/pool_avg.py) and the C pooling kernels (kernels/cpooling.py): output sizes, the padded
extent the windows read, the padded input, each window's first element inside the input, and
the tables that turn window codes (ops/pool_codes.py) into plane positions.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .conv_plan import scratch

__all__ = [
    "first_inside_axis",
    "pad_input",
    "padded_extent",
    "plane_positions",
    "plane_strides",
    "pool_out_size",
]


def pool_out_size(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """torch's pooling_output_shape: with ceil_mode the last window may hang over the end, but
    it must start inside the input or its left padding. With stride 1 and padding within the
    dilated window every window starts inside, so the padding and kernel terms are summed first:
    a symbolic size (``TensorSpec((None, "T"))``) under a "same" pooling stays itself."""
    if s == 1 and p <= d * (k - 1):
        return size + (2 * p - d * (k - 1))
    span = size + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def padded_extent(in_size, kernel, stride, padding, dilation, out_size) -> tuple:
    """Spatial size of the padded input that the windows read (at least padding + input)."""
    return tuple(
        max(p + n, (o - 1) * s + d * (k - 1) + 1)
        for n, k, s, p, d, o in zip(in_size, kernel, stride, padding, dilation, out_size)
    )


def pad_input(x: np.ndarray, padding, extent, fill, tag: str) -> np.ndarray:
    """``x`` inside a buffer of spatial size ``extent`` filled with ``fill`` (``x`` itself when
    nothing is added)."""
    if extent == x.shape[2:] and not any(padding):
        return x
    shape = x.shape[:2] + tuple(extent)
    buf = scratch(tag, shape, x.dtype, fill=fill, key=(tuple(padding), x.shape[2:]))
    inner = tuple(slice(p, p + n) for p, n in zip(padding, x.shape[2:]))
    buf[(slice(None), slice(None)) + inner] = x
    return buf


def first_inside_axis(out: int, kernel: int, stride: int, padding: int, dilation: int, size: int):
    """Per window position along one axis, the first kernel offset whose element lies inside
    the input (padding is at most half the kernel, so every window has one)."""
    pos = np.arange(out)[:, None] * stride - padding + np.arange(kernel)[None, :] * dilation
    return np.argmax((pos >= 0) & (pos < size), axis=1)


def plane_strides(size) -> tuple:
    """Row-major strides (in elements) of a plane of spatial ``size``."""
    return tuple(math.prod(size[i + 1 :]) for i in range(len(size)))


@functools.lru_cache(maxsize=64)
def plane_positions(window: tuple, in_size: tuple, out_size: tuple) -> tuple:
    """(base, offsets): per output position of a plane (row-major), the plane position of its
    window's origin (negative or past the end where the window starts in the padding), and per
    code, its element's offset from the origin; code ``k`` of output ``i`` is the element at
    ``base[i] + offsets[k]``. Both int64, read-only (cached)."""
    kernel, stride, padding, dilation = window
    plane = plane_strides(in_size)
    base = np.zeros((), np.int64)
    offsets = np.zeros((), np.int64)
    for o, k, s, p, d, f in zip(out_size, kernel, stride, padding, dilation, plane):
        base = (base[..., None] + (np.arange(o, dtype=np.int64) * s - p) * f).copy()
        offsets = (offsets[..., None] + np.arange(k, dtype=np.int64) * d * f).copy()
    base, offsets = base.reshape(-1), offsets.reshape(-1)
    base.flags.writeable = offsets.flags.writeable = False
    return base, offsets
