"""``interpolate`` along a dimension whose size is symbolic (an input signature's ``None``).

The NumPy taps of functional/resample.py need the sizes' values. Upsampling by a whole factor
``k`` does not: output ``k*j + r`` reads source ``j`` (nearest, nearest-exact) or blends source
``j`` with its neighbour at a weight that depends on the phase ``r`` alone (linear modes without
``align_corners``: PyTorch's source position ``(i + 0.5) / k - 0.5``, clamped at the borders).
So each phase is a weighted sum of the input and its copies shifted by one (the border
repeated), and the phases interleave by a stack and a reshape: ops whose sizes are expressions
of the symbol, which capture records and ONNX export computes at run time (a U-Net's
``nn.Upsample(scale_factor=2)``). Anything else (downsampling, a factor that is no whole
number, ``align_corners=True``, whose weights depend on the size) is refused by name.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ops import api as E
from ..ops.elementwise import to_tensor
from ..symbolic import SymDim


def whole_factor(n_in, n_out, mode: str, align_corners) -> int:
    """The whole factor ``n_out / n_in``, or a ShapeError saying why there is none."""
    ratio = n_out.ratio(n_in) if isinstance(n_out, SymDim) else None
    if ratio is None or ratio.denominator != 1 or ratio < 1:
        raise ShapeError(
            f"mode {mode!r} over the symbolic size {n_in} resizes it to {n_out}, which is no "
            "whole multiple of it (only upsampling by a whole factor has weights that do not "
            "depend on the size); give that dimension a fixed size",
            op="interpolate",
        )
    if align_corners:
        raise ShapeError(
            f"mode {mode!r} with align_corners=True over the symbolic size {n_in} has weights "
            "that depend on the size; give that dimension a fixed size or align_corners=False",
            op="interpolate",
        )
    return int(ratio)


def upsample(x, axis: int, k: int, linear: bool):
    """``x`` upsampled ``k`` times along ``axis`` (nearest, or linear without align_corners)."""
    if k == 1:
        return x
    if not linear:
        phases = [x] * k
    else:
        n = x.shape[axis]
        ahead = E.cat([E.narrow(x, axis, 1, n - 1), E.narrow(x, axis, n - 1, 1)], axis)
        behind = E.cat([E.narrow(x, axis, 0, 1), E.narrow(x, axis, 0, n - 1)], axis)
        phases = []
        for r in range(k):
            # PyTorch's source offset of this phase, computed as its kernel does, in float32
            delta = float(np.float32((r + 0.5) / k) - np.float32(0.5))
            if delta >= 0:
                phases.append(_blend(x, 1.0 - delta, ahead, delta))
            else:
                phases.append(_blend(behind, -delta, x, 1.0 + delta))
    stacked = E.stack(phases, axis + 1)
    shape = list(x.shape)
    shape[axis] = shape[axis] * k
    return E.reshape(stacked, tuple(shape))


def _blend(a, wa: float, b, wb: float):
    if wb == 0.0:
        return a
    return a * to_tensor(np.asarray(wa, a.dtype.np)) + b * to_tensor(np.asarray(wb, b.dtype.np))
