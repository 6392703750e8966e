"""A stride-1 forward convolution's batch laid side by side, so that the column panels of
kernels/cconv.py's forward read one contiguous run each (in place, unpacked) on small planes.

On a small plane (ResNet's 8x8 or 7x7 ones) the plain layout's columns are the output
positions: runs of one output row (8 values), each packed on its own; the extended layout
(columns along the padded width) reads panels in place but computes ``padded / out - 1`` of
its columns for nothing (3x3, padding 1, on 4x4: half). Here the step's padded copy puts the
samples' planes side by side along each row, one gap of zeros between neighbours serving as
the padding after one and before the next: row ``r`` of channel ``c`` holds every sample's row
``r``, sample ``i`` from column ``i * width`` (``width``: the plane's columns and the gap).
The whole batch is then one image whose extended columns waste only the gaps (one column in
nine on an 8x8 plane with padding 1, where the padded width wastes one in four), and every
panel is one contiguous run of it. The products and their order are the plain layout's (the
same rows, the same columns), so the result is bit for bit the same; only the copy and the
wasted columns change.

`side_of(plan, n)` says whether a plan lays out so and how; `tables` lays the forward's columns
and rows over the copy (one "sample": the whole batch); the C of the copy is `SIDE_SOURCE`
(``copy_side``, which kernels/cconv_source.py's step calls where its split description's kind
is 1).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from .conv_plan import Plan

__all__ = ["SIDE_SOURCE", "Side", "descriptor", "side_of", "tables"]


class Side(NamedTuple):
    """A 2-d stride-1 plan's batch side by side: per sample its columns and the zero gap after
    them (``width``), a row of the image (every sample's width and the padding before:
    ``pitch``), the image's rows and one channel's elements."""

    width: int
    pitch: int
    rows: int
    plane: int


@functools.lru_cache(maxsize=256)
def side_of(p: Plan, n: int) -> Side | None:
    """The side-by-side layout of ``n`` samples of a 2-d plan, or None: another stride, one
    sample, or a padding that crops the input (negative)."""
    if len(p.stride) != 2 or any(s != 1 for s in p.stride) or n < 2:
        return None
    if any(lo < 0 for lo in p.lo) or any(
        padded < lo + size for padded, lo, size in zip(p.padded, p.lo, p.in_size)
    ):
        return None
    lo_w, in_w = p.lo[1], p.in_size[1]
    # (the gap is the padding after one sample's row and before the next one's, but no
    # narrower than leaves each sample its own output columns: a kernel narrower than both
    # paddings has outputs in both)
    width = max(in_w + max(lo_w, p.padded[1] - lo_w - in_w), p.out_size[1])
    pitch = n * width + lo_w
    return Side(width, pitch, p.padded[0], p.padded[0] * pitch)


def waste(p: Plan, side: Side) -> float:
    """The columns computed for nothing per output column."""
    return side.width / p.out_size[1] - 1


def tables(p: Plan, side: Side, n: int, channels: int, cout: int) -> tuple:
    """(src, dst, roff) of the forward over the side-by-side copy as one sample: per column
    (output rows by the image's whole pitch) its offset in a channel's image and in the
    output (-1 for a gap's or the row's end's column), per (channel, kernel offset) row its
    offset in the copy."""
    (h_out, w_out), (dh, dw) = p.out_size, p.dilation
    cols = np.arange(side.pitch, dtype=np.int64)
    src = (np.arange(h_out, dtype=np.int64)[:, None] * side.pitch + cols).reshape(-1)
    sample, ox = np.divmod(cols, side.width)
    inside = (sample < n) & (ox < w_out)
    plane = h_out * w_out
    offsets = sample * cout * plane + np.arange(h_out, dtype=np.int64)[:, None] * w_out + ox
    dst = np.where(np.broadcast_to(inside, offsets.shape), offsets, -1).reshape(-1)
    kh, kw = p.kernel
    taps = (np.arange(kh)[:, None] * dh * side.pitch + np.arange(kw) * dw).reshape(-1)
    roff = (np.arange(channels, dtype=np.int64)[:, None] * side.plane + taps).reshape(-1)
    return src, dst, roff


def descriptor(p: Plan, side: Side, n: int, channels: int) -> np.ndarray:
    """``copy_side``'s description: its kind (1), the samples, channels, the input's rows and
    columns, the padding before, the image's rows and pitch, a sample's width."""
    return np.array(
        [1, n, channels, *p.in_size, *p.lo, side.rows, side.pitch, side.width], np.int64
    )


SIDE_SOURCE = r"""
/* the side-by-side copy of x into the zero-bordered scratch xp (kernels/cconv_side.py): row r
   of sample i's channel c to xp[c][r + lo_h][i * width + lo_w ...]; d = its kind (1), the
   samples, channels, the input's rows and columns, the padding before, the image's rows and
   pitch, a sample's width (the gaps are never written: the scratch's zeros) */
void copy_side(const S *x, S *xp, const long *d) {
  long n = d[1], c = d[2], in_h = d[3], in_w = d[4], lo_h = d[5], lo_w = d[6];
  long rows = d[7], pitch = d[8], width = d[9];
  for (long i = 0; i < n; i++)
    for (long ch = 0; ch < c; ch++)
      for (long r = 0; r < in_h; r++)
        memcpy(xp + (ch * rows + r + lo_h) * pitch + i * width + lo_w,
               x + ((i * c + ch) * in_h + r) * in_w, (size_t)in_w * sizeof(S));
}
"""
