"""The column-layout forward's packed weight kept between calls: a watched parameter's panels
(kernels/cprepack.py's rules: packed on the second sight of one version of a parameter, used
while its version counter stands, dropped when the array is exposed or gone, bounded by the
packs' budget), so an inference forward skips re-packing its weight on every call as the
channels-wide layout already does (kernels/cconv_wide.py's `use_prepacked`).

The panels are kernels/cconv.py's `_packed_weight` for one group in float32/float64: MR output
channels per panel, each panel's rows (channel, kernel offset) of MR values, zero past the
last channel; the step's packing loop (kernels/cconv_source.py's ``conv_forward_step``) writes
the same values.
"""

from __future__ import annotations

import numpy as np

from .._env import setting
from . import cprepack
from .cpanels import aligned

__all__ = ["kept", "use_column_pack"]

_MR = 8  # cmicro.py's rows per panel: output channels per panel of the packed weight


def column_panels(b: np.ndarray) -> np.ndarray | None:
    """The weight ``b`` (cout, then its rows: (channel, kernel offset) row-major) packed as
    the column-layout forward reads it, flat, 64-byte aligned; None for dtypes other than
    float32/float64."""
    if b.dtype not in (np.float32, np.float64):
        return None
    b = b.reshape(b.shape[0], -1)
    cout, rows = b.shape
    panels = -(-cout // _MR)
    padded = np.zeros((panels * _MR, rows), b.dtype)
    padded[:cout] = b
    bp = aligned(panels * _MR * rows, b.dtype)
    bp[:] = padded.reshape(panels, _MR, rows).transpose(0, 2, 1).reshape(-1)
    return bp


def kept(w: np.ndarray) -> bool:
    """Whether ``w``'s panels may be kept packed between calls (a watched parameter's array or
    a view of it, packs on): then its steps skip their packing once it is seen again."""
    if w.dtype not in (np.float32, np.float64) or setting("EMBER_PREPACK") == "0":
        return False
    return cprepack._owner(w) is not None


def use_column_pack(args: np.ndarray, w: np.ndarray, own_wp: int, usable: bool = True):
    """Point a column-layout step's packed weight (``args``, its argument block: the weight's
    buffer at 6, whether it is packed already at 33 and 34) at the panels kept for ``w`` where
    ``w`` (contiguous, float32/float64) is a watched parameter seen at this version before,
    else back at the step's own buffer ``own_wp``, packed by the call. Returns the pack, which
    the caller keeps until the step has run, or None (always where not ``usable``).
    ``EMBER_PREPACK=0`` turns it off."""
    entry = None  # (nothing watched: no parameter, no pack; the cheap test first)
    if usable and cprepack._watched and setting("EMBER_PREPACK") != "0":
        entry = cprepack.lookup(w, first_sight=False, packer=column_panels)
    if entry is not None:
        # (the step skips its packing when a[33] is set and a[34] is the weight: a[1])
        args[6], args[33], args[34] = entry.at, 1, args[1]
        return entry
    args[6], args[33], args[34] = own_wp, 0, 0
    return None
