"""A strided forward convolution's input split by stride phases, so that the column panels of
kernels/cconv.py's forward read contiguous runs (or read a panel in place) instead of packing
every ``stride``-th value.

Output position ``o`` of a dimension with stride ``s`` and dilation ``d`` reads padded input
position ``s * o + d * k`` for kernel offset ``k``: in the plane of phase ``(d * k) % s`` (the
padded positions ``q * s + phase``) that is position ``o + (d * k) // s``. So the step's
zero-bordered copy of the input stores, per channel, one plane per phase the kernel reads (a
1x1 stride-2 shortcut reads one: a quarter of the input, the rest never copied), each
``ceil(padded / s)`` long per dimension; each (channel, kernel offset) row then starts at its
phase plane plus its shifted offset, and the columns step by one along the phase planes: the
layout of a stride-1 convolution, whose panels are contiguous runs (or, on the extended grid
along a phase plane's width, one run a panel wide: read unpacked). The products and their
order are the unsplit layout's (the same rows, the same columns), so the result is bit for
bit the same; only what packing copies changes.

`split_of(plan)` says whether a plan splits (a stride above one, no negative padding) and how;
`reads_fewer` whether its counted choice splits it; `tables` lays the forward's columns and
rows out over the split copy; the C of the copy is
`SPLIT_SOURCE` (``copy_phases``, part of kernels/cconv_source.py's source, whose step calls it
in place of its padded copy where the argument block names a split).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from .conv_plan import Plan

__all__ = ["SPLIT_SOURCE", "Split", "descriptor", "reads_fewer", "split_of", "tables"]


class Split(NamedTuple):
    """A 2-d plan's input split by stride phases: per dimension the phases the kernel reads
    (ascending) and the extent of one phase plane; ``plane``: a channel's elements (all its
    phase planes)."""

    phases: tuple  # (rows' phases, columns' phases)
    extent: tuple  # (rows, columns) of one phase plane
    plane: int
    strides: int  # the phases there are: the strides' product


@functools.lru_cache(maxsize=256)
def split_of(p: Plan) -> Split | None:
    """The split of a 2-d plan's input, or None where it has none: every stride one (the
    padded copy's runs are contiguous already), or a negative padding before (a cropped input;
    past the last window read, the copy stops at the phase planes' end)."""
    if len(p.stride) != 2 or all(s == 1 for s in p.stride):
        return None
    if any(lo < 0 for lo in p.lo):
        return None
    phases = tuple(
        tuple(sorted({d * k % s for k in range(size)}))
        for s, d, size in zip(p.stride, p.dilation, p.kernel)
    )
    extent = tuple(-(-padded // s) for padded, s in zip(p.padded, p.stride))
    plane = math.prod(len(ph) for ph in phases) * math.prod(extent)
    return Split(phases, extent, plane, math.prod(p.stride))


def reads_fewer(split: Split) -> bool:
    """The counted choice: split where the kernel reads fewer phases than there are (a 1x1
    convolution of stride 2 reads one of four): the copy then holds only what is read, every
    value of it used, where packing the plain layout's strided runs reads whole cache lines to
    use part of each. Where every phase is read (a 3x3 kernel of stride 2) the two layouts
    pack the same values, contiguous or de-interleaved, and time alike on the layers measured
    (benchmarks/conv_kernels.py), so the plain layout stays unless a measurement says
    otherwise (kernels/cconv_choice.py)."""
    return len(split.phases[0]) * len(split.phases[1]) < split.strides


def tables(p: Plan, split: Split, channels: int, flat: bool) -> tuple:
    """(src, dst, roff) of the forward over the split input of one sample: per column its
    offset in a channel's phase planes (stepping by one: the phase planes' positions) and in
    the output (-1 outside it: the extended grid's columns past a row's end, ``flat``), per
    (channel, kernel offset) row its offset: its phase plane's start plus its shifted
    position."""
    (h_out, w_out), (eh, ew) = p.out_size, split.extent
    width = ew if flat else w_out
    cols = np.arange(width, dtype=np.int64)
    src = (np.arange(h_out, dtype=np.int64)[:, None] * ew + cols).reshape(-1)
    inside = np.broadcast_to(cols < w_out, (h_out, width)).reshape(-1)
    out_offsets = (np.arange(h_out, dtype=np.int64)[:, None] * w_out + cols).reshape(-1)
    dst = np.where(inside, out_offsets, -1)
    (kh, kw), (sh, sw), (dh, dw) = p.kernel, p.stride, p.dilation
    rows_phases, cols_phases = split.phases
    tap = []
    for ky in range(kh):
        ia = rows_phases.index(dh * ky % sh)
        for kx in range(kw):
            ib = cols_phases.index(dw * kx % sw)
            start = (ia * len(cols_phases) + ib) * eh * ew
            tap.append(start + (dh * ky // sh) * ew + dw * kx // sw)
    taps = np.array(tap, np.int64)
    roff = (np.arange(channels, dtype=np.int64)[:, None] * split.plane + taps).reshape(-1)
    return src, dst, roff


def descriptor(p: Plan, split: Split, planes: int) -> np.ndarray:
    """``copy_phases``' description of the copy of ``planes`` input planes: its kind (0; the
    step's other relayout, kernels/cconv_side.py's, is 1), their rows and columns, the padding
    before, the strides, a phase plane's rows and columns, the phases' counts, then the rows'
    phases and the columns'."""
    (rows, cols), (cr, cc) = split.phases, split.extent
    head = [0, planes, *p.in_size, *p.lo, *p.stride, cr, cc, len(rows), len(cols)]
    return np.array(head + list(rows) + list(cols), np.int64)


SPLIT_SOURCE = r"""
/* the split copy of x into the zero-bordered scratch xp (kernels/cconv_split.py): per plane,
   per phase (a, b) read, xp[i][j] = padded x[i * sh + a][j * sw + b]; d = its kind (0),
   planes, the input's rows and columns, the padding before, the strides, a phase plane's rows
   and columns, the phases' counts, the rows' phases, the columns' (positions outside the
   input are never written: the scratch's zeros) */
void copy_phases(const S *x, S *xp, const long *d) {
  d++; /* (the kind) */
  long planes = d[0], in_h = d[1], in_w = d[2], lo_h = d[3], lo_w = d[4], sh = d[5], sw = d[6];
  long eh = d[7], ew = d[8], nh = d[9], nw = d[10];
  const long *ph = d + 11, *pw = d + 11 + nh;
  long phase_plane = eh * ew;
  for (long p = 0; p < planes; p++)
    for (long ia = 0; ia < nh; ia++) {
      /* phase rows i whose padded row i * sh + a lies in the input */
      long a = ph[ia], i1 = lo_h + in_h - 1 - a;
      if (i1 < 0) continue;
      long i0 = lo_h > a ? (lo_h - a + sh - 1) / sh : 0;
      i1 = i1 / sh < eh - 1 ? i1 / sh : eh - 1;
      for (long ib = 0; ib < nw; ib++) {
        long b = pw[ib], j1 = lo_w + in_w - 1 - b;
        if (j1 < 0) continue;
        long j0 = lo_w > b ? (lo_w - b + sw - 1) / sw : 0;
        j1 = j1 / sw < ew - 1 ? j1 / sw : ew - 1;
        S *to = xp + ((p * nh + ia) * nw + ib) * phase_plane;
        for (long i = i0; i <= i1; i++) {
          const S *row = x + (p * in_h + i * sh + a - lo_h) * in_w + b - lo_w;
          S *dst = to + i * ew;
          if (sw == 1)
            memcpy(dst + j0, row + j0, (size_t)(j1 - j0 + 1) * sizeof(S));
          else
            for (long j = j0; j <= j1; j++) dst[j] = row[j * sw];
        }
      }
    }
}
"""
