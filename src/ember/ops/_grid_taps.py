"""Where grid_sample reads: the taps of one spatial axis, written once over two array
namespaces, NumPy's (the reference kernels, ops/_grid_sample_kernels.py) and ember's ops (the
second derivative, ops/_grid_sample_second.py), so both compute the same coordinates with the
same float operations.

A grid value ``u`` in [-1, 1] along an axis of ``size`` pixels becomes the pixel coordinate
``(u + 1) * s`` (align_corners: ``s = (size - 1) / 2``) or ``(u + 1) * s - 0.5`` (otherwise,
``s = size / 2``). The padding mode then moves it, as PyTorch's CPU kernel for 4-D inputs
(aten's GridSamplerKernel.cpp):

* ``border``: clipped into [0, size - 1]; NaN goes to 0 (its "clamp NaNs to zero");
* ``reflection``: reflected about ``low`` (-0.5, or 0 with align_corners) with period
  ``2 * span`` (``extra = r - trunc(r / 2span) * 2span`` of ``r = |c - low|``, then
  ``min(extra, 2span - extra) + low``), then clipped; an axis of one pixel with
  align_corners reflects everything to 0;
* ``zeros``: unchanged; a tap outside the image reads 0.

``bilinear`` (trilinear in 5-D) reads the two pixels around the moved coordinate, ``floor(c)``
with weight ``1 - t`` and ``floor(c) + 1`` with weight ``t = c - floor(c)``; ``nearest`` the
pixel ``rint(c)`` (half to even); ``bicubic`` the four pixels ``floor(c) - 1 ... + 2`` of the
unmoved coordinate with Keys' weights (A = -0.75), each pixel moved by the padding mode on its
own. ``mult`` is d(coordinate)/du: the scale, times the reflection's sign, times 0 where the
clip holds the coordinate at or beyond a border (its gradient there is 0, as PyTorch's); for
bicubic only the scale (the pixels' positions are integers).

NaN and infinite grid values give a NaN weight (bilinear, bicubic: the output is NaN, as
PyTorch's 4-D kernel gives) or an invalid tap (nearest, zeros padding: 0). PyTorch's 5-D kernel
differs there (it maps them to -100 first, so a NaN reads 0, and clips NaN to the far border);
ember's 5-D follows its 4-D rules.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

A = -0.75  # Keys' cubic convolution constant, PyTorch's


@dataclass
class AxisTaps:
    """One axis's taps: ``pos[k]`` (integer-valued floats, moved into the image except under
    zeros padding), ``valid[k]`` (inside the image), ``w[k]`` the weights and ``dw[k]`` their
    derivatives in the coordinate (None for nearest), ``d2w[k]`` the second derivatives (only
    where asked), and ``mult``, d(coordinate)/du."""

    pos: list
    valid: list
    w: list | None
    dw: list | None
    d2w: list | None
    mult: object


class NumpyOps:
    """The array operations the tap rules use, on NumPy arrays of one float dtype."""

    @staticmethod
    def where(cond, a, b):
        return np.where(cond, a, b)

    floor, trunc, abs, rint = np.floor, np.trunc, np.abs, np.rint

    @staticmethod
    def fill(like, value):
        return np.full(np.shape(like), value, dtype=like.dtype)


def unnormalize(u, size: int, align: bool):
    """(pixel coordinate, its scale d(coordinate)/du as a Python float)."""
    if align:
        s = (size - 1) / 2
        return (u + 1) * s, s
    s = size / 2
    return (u + 1) * s - 0.5, s


def clip(xp, c, size: int):
    """(c clipped into [0, size - 1], NaN to 0; where the clip left c alone, strictly)."""
    hi = float(size - 1)
    inside = (c > 0) & (c < hi)
    return xp.where(c > 0, xp.where(c < hi, c, hi), 0.0), inside


def reflect(xp, c, size: int, align: bool):
    """(c reflected into [low, low + span], the sign of its derivative as a bool: negative),
    or None for an empty span (an axis of one pixel with align_corners)."""
    if align:
        if size <= 1:
            return None
        low, twice = 0.0, 2.0 * (size - 1)
    else:
        low, twice = -0.5, 2.0 * size
    a = c - low if low else c
    negative = a < 0
    r = xp.abs(a)
    extra = r - xp.trunc(r / twice) * twice
    flip = extra > twice - extra
    value = xp.where(flip, twice - extra, extra)
    return (value + low if low else value), flip != negative


def moved(xp, c, size: int, padding: str, align: bool):
    """(the coordinate moved by the padding mode, its derivative's factor: None for 1, else
    an array of 0, 1 and -1 in c's dtype)."""
    if padding == "zeros":
        return c, None
    one, zero = xp.fill(c, 1.0), xp.fill(c, 0.0)
    if padding == "border":
        value, inside = clip(xp, c, size)
        return value, xp.where(inside, one, zero)
    reflected = reflect(xp, c, size, align)
    if reflected is None:
        return zero, zero
    r, negative = reflected
    value, inside = clip(xp, r, size)
    return value, xp.where(inside, xp.where(negative, -one, one), zero)


def _inside(pos, size: int):
    return (pos >= 0) & (pos <= size - 1)


def cubic_weights(t):
    """Keys' weights of the taps -1, 0, 1, 2 around a fraction ``t``, PyTorch's expressions."""
    x0, x2, x3 = t + 1, 1 - t, 2 - t
    return [
        ((A * x0 - 5 * A) * x0 + 8 * A) * x0 - 4 * A,
        ((A + 2) * t - (A + 3)) * t * t + 1,
        ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1,
        ((A * x3 - 5 * A) * x3 + 8 * A) * x3 - 4 * A,
    ]


def cubic_derivatives(t):
    """d(weight)/dt of `cubic_weights`."""
    x0, x2, x3 = t + 1, 1 - t, 2 - t
    return [
        (3 * A * x0 - 10 * A) * x0 + 8 * A,
        (3 * (A + 2) * t - 2 * (A + 3)) * t,
        -((3 * (A + 2) * x2 - 2 * (A + 3)) * x2),
        -((3 * A * x3 - 10 * A) * x3 + 8 * A),
    ]


def cubic_second(t):
    """d2(weight)/dt2 of `cubic_weights`."""
    x0, x2, x3 = t + 1, 1 - t, 2 - t
    return [
        6 * A * x0 - 10 * A,
        6 * (A + 2) * t - 2 * (A + 3),
        6 * (A + 2) * x2 - 2 * (A + 3),
        6 * A * x3 - 10 * A,
    ]


def axis_taps(xp, u, size: int, mode: str, padding: str, align: bool, second: bool = False):
    """The taps of grid values ``u`` along an axis of ``size`` pixels (see the module's
    docstring). ``second``: also the weights' second derivatives."""
    c, scale = unnormalize(u, size, align)
    if mode == "bicubic":
        base = xp.floor(c)
        t = c - base
        pos, valid = [], []
        for k in range(4):
            p = base + float(k - 1)
            if padding != "zeros":
                p = xp.trunc(moved(xp, p, size, padding, align)[0])
            pos.append(p)
            valid.append(_inside(p, size))
        d2w = cubic_second(t) if second else None
        return AxisTaps(pos, valid, cubic_weights(t), cubic_derivatives(t), d2w, scale)
    c, factor = moved(xp, c, size, padding, align)
    mult = scale if factor is None else factor * scale
    if mode == "nearest":
        p = xp.rint(c)
        return AxisTaps([p], [_inside(p, size)], None, None, None, mult)
    base = xp.floor(c)
    t = c - base
    pos = [base, base + 1.0]
    zero = xp.fill(t, 0.0) if second else None
    return AxisTaps(
        pos,
        [_inside(p, size) for p in pos],
        [1 - t, t],
        [xp.fill(t, -1.0), xp.fill(t, 1.0)],
        [zero, zero] if second else None,
        mult,
    )
