"""What an in-place masked write reads from a source that shares memory with its target.

PyTorch's CPU ``masked_scatter_`` walks the target's elements in order and copies the source's
next element into each masked one, reading the (contiguous) source as the loop runs: where
the source overlaps the target (``x.masked_scatter_(mask, x)``, ``x.masked_scatter_(m, x[1:])``)
a later read sees an element an earlier step wrote. ember computes the result out of place, so
it replaces such a source by what that loop would have read: the j-th masked element reads
source element ``j``, which is either untouched or was written at an earlier step t (then the
loop read source element ``t``'s value, and so on back to an untouched element). The chains
are followed by pointer jumping over the whole index arrays, never element by element.

A source that is not contiguous is copied by PyTorch before the loop (``source.contiguous()``),
so it reads the old values, as ember's out-of-place result does; a target that is not
contiguous is left to that result too.
"""

from __future__ import annotations

import numpy as np


def _element_offset(a: np.ndarray, b: np.ndarray) -> int | None:
    """b's first element's position counted in elements from a's, when both are contiguous
    runs of one dtype in one buffer; None otherwise."""
    if a.dtype != b.dtype or not (a.flags.c_contiguous and b.flags.c_contiguous):
        return None
    if not np.shares_memory(a, b):
        return None
    delta = b.__array_interface__["data"][0] - a.__array_interface__["data"][0]
    if delta % a.itemsize:
        return None
    return delta // a.itemsize


def sequential_reads(target: np.ndarray, mask: np.ndarray, source: np.ndarray):
    """The source positions PyTorch's in-place loop reads its values from, one per masked
    element (``mask`` already broadcast to ``target``'s shape), or None where the source does
    not overlap the target as a contiguous run (every read then sees the old values)."""
    offset = _element_offset(target, source)
    if offset is None:
        return None
    writes = np.flatnonzero(mask.reshape(-1))  # target positions, increasing
    n = min(len(writes), source.size)
    steps = np.arange(n)
    # step j reads target position offset + j: written at an earlier step t when writes[t]
    # equals it (writes is sorted, so searchsorted finds t)
    read_at = steps + offset
    t = np.searchsorted(writes, read_at)
    t_clipped = np.minimum(t, max(len(writes) - 1, 0))
    written = (t < len(writes)) & (t < steps)
    if n:
        written &= writes[t_clipped] == read_at
    origin = np.where(written, t_clipped, steps)
    while True:  # follow each chain to an untouched element, doubling the jumps
        nxt = origin[origin]
        if np.array_equal(nxt, origin):
            return origin
        origin = nxt
