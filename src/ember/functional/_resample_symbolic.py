"""``interpolate`` along a dimension whose size is symbolic (an input signature's ``None``).

The NumPy taps of functional/resample.py need the sizes' values. Upsampling by a whole factor
``k`` does not: output ``k*j + r`` reads source ``j`` (nearest, nearest-exact) or blends source
``j`` with its neighbour at a weight that depends on the phase ``r`` alone (linear modes without
``align_corners``: PyTorch's source position ``(i + 0.5) / k - 0.5``, clamped at the borders).
So each phase is a weighted sum of the input and its copies shifted by one (the border
repeated), and the phases interleave by a stack and a reshape: ops whose sizes are expressions
of the symbol, which capture records and ONNX export computes at run time (a U-Net's
``nn.Upsample(scale_factor=2)``).

The linear modes at any other ratio (downsampling, ``align_corners=True``, a size that is no
whole multiple: a segmentation head resized to its input) compute PyTorch's source positions
in the graph (`linear_taps`): the output positions from arange, the sizes as float counts, the
two taps gathered and weighted; nearest modes gather at PyTorch's float32 source index
(`nearest_taps`).
"""

from __future__ import annotations

import numpy as np

from ..ops import api as E
from ..ops.promotion import to_tensor
from ..symbolic import SymDim


def whole_factor(n_in, n_out, mode: str, align_corners) -> int | None:
    """The whole factor ``k`` with ``n_out`` exactly ``k * n_in``, where the phases serve
    (a mode without align_corners); None where the taps follow the output size instead (the
    factor is no whole number, or the output size another expression, equal to ``k * n_in``
    only for aligned sizes: ``size=skip.shape`` of ``H`` from ``H // 2``)."""
    ratio = n_out.ratio(n_in, relied_on=False) if isinstance(n_out, SymDim) else None
    if align_corners or ratio is None or ratio.denominator != 1 or ratio < 1:
        return None
    return int(ratio) if n_out._terms == (n_in * int(ratio))._terms else None


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


def _count(n, dtype):
    """The size ``n`` (symbolic or not) as a 0-d tensor of ``dtype``."""
    if isinstance(n, int):
        return to_tensor(np.asarray(n, dtype.np))
    return E.sum(E.full((n,), 1.0, dtype=dtype))


def linear_taps(x, axis: int, n_out, scale, align_corners: bool):
    """``x`` resampled linearly to ``n_out`` along ``axis`` with PyTorch's source positions
    (area_pixel_compute_scale, then compute_source_index_and_lambda), computed in float64 in
    the graph: ``scale`` is the given scale factor (None: from the sizes)."""
    from .. import dtypes as dt

    n_in = x.shape[axis]
    f64 = dt.float64
    n, m = _count(n_in, f64), _count(n_out, f64)
    positions = E.cast(E.arange(n_out), f64)
    one = to_tensor(np.asarray(1.0))
    if align_corners:
        real = positions * ((n - one) / (m - one))
    else:
        step = to_tensor(np.asarray(1.0 / scale)) if scale else n / m
        half = to_tensor(np.asarray(0.5))
        real = E.clamp(step * (positions + half) - half, min=0.0)
    last = n - one
    i0 = E.minimum(E.floor(real), last)
    lam = E.clamp(real - i0, 0.0, 1.0)
    i1 = E.minimum(i0 + one, last)
    shape = [1] * x.ndim
    shape[axis] = -1
    w1 = E.reshape(E.cast(lam, x.dtype), tuple(shape))
    w0 = E.reshape(E.cast(one - lam, x.dtype), tuple(shape))
    a = E.index_select(x, axis, E.cast(i0, dt.int64))
    b = E.index_select(x, axis, E.cast(i1, dt.int64))
    return a * w0 + b * w1


def nearest_taps(x, axis: int, n_out, scale, exact: bool):
    """``x`` resampled to ``n_out`` along ``axis`` by PyTorch's nearest (or nearest-exact)
    source index, in float32 as its kernel computes it: ``min(floor(i * s), n - 1)`` (exact:
    ``floor((i + 0.5) * s)`` with the product in double rounded to float), ``s`` the inverse
    of the given scale or ``n / n_out``."""
    from .. import dtypes as dt

    n_in = x.shape[axis]
    f32, f64 = dt.float32, dt.float64
    if scale:
        s = to_tensor(np.asarray(1.0 / scale, np.float32))
    else:
        s = _count(n_in, f32) / _count(n_out, f32)
    positions = E.arange(n_out)
    if exact:
        product = (E.cast(positions, f64) + to_tensor(np.asarray(0.5))) * E.cast(s, f64)
        source = E.floor(E.cast(product, f32))
    else:
        source = E.floor(E.cast(positions, f32) * s)
    last = E.cast(_count(n_in, f32), f32) - to_tensor(np.asarray(1.0, np.float32))
    index = E.cast(E.minimum(source, last), dt.int64)
    return E.index_select(x, axis, index)


def cubic_taps(x, axis: int, n_out, scale, align_corners: bool):
    """Bicubic resampling along ``axis`` (Keys' kernel, a = -0.75, as `_cubic_weights`): the
    source coordinate from the sizes in the graph, its four taps floor(x) - 1 .. + 2 clamped
    to the border, gathered and weighted."""
    from .. import dtypes as dt

    f64 = dt.float64
    n, m = _count(x.shape[axis], f64), _count(n_out, f64)
    positions = E.cast(E.arange(n_out), f64)
    one, half = to_tensor(np.asarray(1.0)), to_tensor(np.asarray(0.5))
    if align_corners:
        real = positions * ((n - one) / (m - one))
    else:
        step = to_tensor(np.asarray(1.0 / scale)) if scale else n / m
        real = step * (positions + half) - half
    base = E.floor(real)
    t = real - base
    a = -0.75

    def near(v):  # |v| <= 1
        return ((v * (a + 2) - (a + 3)) * v) * v + 1.0

    def far(v):  # 1 < |v| < 2
        return ((v * a - 5 * a) * v + 8 * a) * v - 4 * a

    weights = [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
    shape = [1] * x.ndim
    shape[axis] = -1
    last = n - one
    out = None
    for k, w in enumerate(weights):
        index = E.cast(E.clamp(E.minimum(base + (k - 1.0), last), min=0.0), dt.int64)
        term = E.index_select(x, axis, index) * E.reshape(E.cast(w, x.dtype), tuple(shape))
        out = term if out is None else out + term
    return out
