"""The gradients of a strided convolution as stride-1 convolutions, one per phase, on the C
kernels of kernels/cconv.py.

A convolution of stride s reads x at ``o * s + k * d - lo`` (per spatial dimension: output
position o, kernel offset k, dilation d, low padding lo). Splitting the input positions by
their remainder modulo s (a *phase* r: positions ``q * s + r``), the kernel offsets that
reach phase r are those with ``(k * d - lo) % s == r``: an arithmetic progression ``k0 + j *
s'`` (``s' = s / gcd(d, s)``), which reads that phase's positions ``o + t0 + j * d'`` (``d' =
d * s' / s``, ``t0 = (k0 * d - lo - r) / s``). So per phase, and per product of phases over
the dimensions:

* the input gradient of phase r is the stride-1 input gradient of the sub-kernel ``w[k0::s']``
  (dilation d'), itself the forward convolution of gy with that sub-kernel flipped and
  transposed; it is written into ``gx[..., r::s]``. Phases no kernel offset reaches are zero.
* the weight gradient of the offsets ``k0::s'`` is the stride-1 weight gradient of the phase's
  input ``x[..., r::s]`` with gy over a kernel of those offsets.

A window that starts before the phase's positions (``t0 > 0``) or reads past them is a
negative padding: the operand is cropped at the start and the plan's high padding (which may be
negative) stops the rest. The work is the strided convolution's own (no product with an
inserted zero), in the stride-1 kernels' blocking. The input gradient's phases are stored
straight into their positions of the result (the forward kernel's store steps through them);
the weight gradient copies each phase of the input.

Both return None where a stride-1 kernel declines (no compiler, an unsupported dtype, a wide
extended grid) and the caller runs NumPy.
"""

from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

from .conv_plan import Plan, plan

__all__ = ["input_grad", "weight_grad"]


class _Phase(NamedTuple):
    """One phase of one spatial dimension."""

    r: int  # the phase: input positions q * s + r
    q: int  # how many there are
    k0: int  # first kernel offset reaching it
    step: int  # the kernel offsets k0, k0 + step, ... reaching it
    count: int  # how many
    dilation: int  # their distance in the phase's positions
    t0: int  # the phase position offset k0 reads at output position 0


def _phases(size: int, out: int, kernel: int, stride: int, dilation: int, lo: int) -> list:
    """The phases of one dimension (input size, output size, ...) that have positions."""
    phases = []
    for r in range(min(stride, size)):
        ks = [k for k in range(kernel) if (k * dilation - lo - r) % stride == 0]
        q = -(-(size - r) // stride)
        if not ks:
            phases.append(_Phase(r, q, 0, 1, 0, 1, 0))
            continue
        step = ks[1] - ks[0] if len(ks) > 1 else 1
        t0 = (ks[0] * dilation - lo - r) // stride
        phases.append(_Phase(r, q, ks[0], step, len(ks), step * dilation // stride, t0))
    return phases


def _sub_kernel(w: np.ndarray, combo) -> np.ndarray:
    """The weight's kernel offsets of a combination of phases (one per dimension)."""
    index = tuple(slice(ph.k0, ph.k0 + (ph.count - 1) * ph.step + 1, ph.step) for ph in combo)
    return w[(slice(None), slice(None)) + index]


def _all_phases(p: Plan) -> list:
    per_dim = [
        _phases(i, o, k, s, d, lo)
        for i, o, k, s, d, lo in zip(p.in_size, p.out_size, p.kernel, p.stride, p.dilation, p.lo)
    ]
    return list(itertools.product(*per_dim))


def input_grad(gy: np.ndarray, w: np.ndarray, p: Plan, groups: int, forward, store=None, bias=None):
    """The input gradient of a strided convolution, phase by phase through ``forward``
    (`cconv.conv_forward`), or None. ``store`` (`cconv.forward_into`), where given, writes
    each phase's forward convolution straight into its positions of the result (no copy of
    the phase); where it declines, the phase is computed by ``forward`` and copied. ``bias``
    (one value per channel of the result): added by each phase's store (a transposed
    convolution's); the positions no kernel offset reaches hold it alone."""
    n = gy.shape[0]
    cout, cg = w.shape[:2]
    cog = cout // groups
    nd = len(p.kernel)
    gx = np.empty((n, groups * cg) + tuple(p.in_size), gy.dtype)
    # what the positions no kernel offset reaches hold: 0, or 0 + the bias
    alone = 0 if bias is None else (bias + np.zeros((), bias.dtype)).reshape((1, -1) + (1,) * nd)
    for combo in _all_phases(p):
        target = (slice(None), slice(None)) + tuple(
            slice(ph.r, None, s) for ph, s in zip(combo, p.stride)
        )
        if any(ph.count == 0 for ph in combo):
            gx[target] = alone  # no kernel offset reaches these positions
            continue
        crop, pads, kernel = [], [], []
        empty = False
        for ph, o in zip(combo, p.out_size):
            reach = ph.dilation * (ph.count - 1)
            # phase position q reads gy[q - t0 - j * d'], j < count: as a forward convolution
            # of gy with the flipped sub-kernel, the low padding is reach + t0
            low = reach + ph.t0
            start = max(0, -low)
            low += start
            length = o - start
            if length <= 0:  # every window of these positions reads padding only
                empty = True
                break
            crop.append(slice(start, None))
            pads.append((low, ph.q - length - low + reach))
            kernel.append(ph.count)
        if empty:
            gx[target] = alone
            continue
        sub = _sub_kernel(w, combo)
        flipped = sub.reshape((groups, cog, cg) + tuple(kernel))[
            (Ellipsis,) + (slice(None, None, -1),) * nd
        ]
        w2 = np.ascontiguousarray(flipped.swapaxes(1, 2)).reshape(
            (groups * cg, cog) + tuple(kernel)
        )
        dil = tuple(ph.dilation for ph in combo)
        in_size = tuple(o - c.start for o, c in zip(p.out_size, crop))
        p2 = plan(in_size, tuple(kernel), (1,) * nd, tuple(pads), dil, w2[0].size, cg)
        if p2.out_size != tuple(ph.q for ph in combo):
            return None
        operand = gy[(slice(None), slice(None)) + tuple(crop)]
        phase = tuple(ph.r for ph in combo)
        if store is not None:
            if store(operand, w2, p2, groups, gx, p.stride, phase, bias) is not None:
                continue
        part = forward(operand, w2, p2, groups, bias)
        if part is None:
            return None
        gx[target] = part
    return gx


def weight_grad(x: np.ndarray, gy: np.ndarray, p: Plan, groups: int, stride1):
    """The weight gradient of a strided convolution, phase by phase through ``stride1``
    (`cconv_weight.conv_weight_grad` at stride 1), or None."""
    cout = gy.shape[1]
    cg = x.shape[1] // groups
    nd = len(p.kernel)
    gw = np.zeros((cout, cg) + tuple(p.kernel), x.dtype)
    for combo in _all_phases(p):
        if any(ph.count == 0 for ph in combo):
            continue
        crop, pads, size = [], [], []
        empty = False
        for ph, o in zip(combo, p.out_size):
            reach = ph.dilation * (ph.count - 1)
            # kernel offset j reads phase position o + t0 + j * d': a low padding of -t0,
            # a crop of the phase's first t0 positions where t0 > 0
            start = max(0, ph.t0)
            length = ph.q - start
            if length <= 0:
                empty = True
                break
            low = max(0, -ph.t0)
            crop.append(slice(ph.r + start * p.stride[len(crop)], None, p.stride[len(crop)]))
            pads.append((low, o + reach - length - low))
            size.append(length)
        if empty:
            continue
        kernel = tuple(ph.count for ph in combo)
        dil = tuple(ph.dilation for ph in combo)
        p2 = plan(tuple(size), kernel, (1,) * nd, tuple(pads), dil, cg * math.prod(kernel),
                  cout // groups)  # fmt: skip
        if p2.out_size != tuple(p.out_size):
            return None
        part = stride1(x[(slice(None), slice(None)) + tuple(crop)], gy, p2, groups)
        if part is None:
            return None
        index = tuple(slice(ph.k0, ph.k0 + (ph.count - 1) * ph.step + 1, ph.step) for ph in combo)
        gw[(slice(None), slice(None)) + index] = part
    return gw


def temporaries(op: str, a_shape: tuple, b_shape: tuple, p: Plan, groups: int, item: int, inner):
    """Bytes `input_grad` (``op`` ``conv_input_grad``) or `weight_grad` allocate beyond their
    result at their peak, for operands of shapes ``a_shape`` and ``b_shape``; ``inner(op,
    a_shape, b_shape, plan)`` gives a stride-1 kernel's (`cconv_workspace.temporaries`), None
    where it declines. Mirrors the allocations above: per phase, the copy of a cropped gy, the
    flipped sub-kernel (input gradient: the phase is stored into the result), or the phase's
    result (weight gradient), beside the stride-1 kernel's own."""
    peak = 0
    n = a_shape[0]
    for combo in _all_phases(p):
        if any(ph.count == 0 for ph in combo):
            continue
        kernel = tuple(ph.count for ph in combo)
        reaches = [ph.dilation * (ph.count - 1) for ph in combo]
        if op == "conv_input_grad":
            cout, cg = b_shape[:2]
            starts = [max(0, -(r + ph.t0)) for r, ph in zip(reaches, combo)]
            lengths = [o - s for o, s in zip(p.out_size, starts)]
            if min(lengths) <= 0:
                continue
            pads = tuple(
                (r + ph.t0 + s, ph.q - length - (r + ph.t0 + s) + r)
                for r, ph, s, length in zip(reaches, combo, starts, lengths)
            )
            dil = tuple(ph.dilation for ph in combo)
            p2 = plan(
                tuple(lengths), kernel, (1,) * len(kernel), pads, dil, cg * math.prod(kernel), cg
            )
            w2 = (groups * cg, cout // groups) + kernel
            below = inner("conv", (n, cout) + tuple(lengths), w2, p2)
            if below is None:
                return None
            crop = n * cout * math.prod(lengths) if any(starts) else 0
            # (the phase is stored straight into the result: no array of its own)
            peak = max(peak, (math.prod(w2) + crop) * item + below)
        else:
            cout = b_shape[1]
            cg = a_shape[1] // groups
            starts = [max(0, ph.t0) for ph in combo]
            lengths = [ph.q - s for ph, s in zip(combo, starts)]
            if min(lengths) <= 0:
                continue
            pads = tuple(
                (max(0, -ph.t0), o + r - length - max(0, -ph.t0))
                for ph, o, r, length in zip(combo, p.out_size, reaches, lengths)
            )
            dil = tuple(ph.dilation for ph in combo)
            p2 = plan(
                tuple(lengths),
                kernel,
                (1,) * len(kernel),
                pads,
                dil,
                cg * math.prod(kernel),
                cout // groups,
            )
            below = inner("conv_weight_grad", (n, a_shape[1]) + tuple(lengths), b_shape, p2)
            if below is None:
                return None
            peak = max(peak, cout * cg * math.prod(kernel) * item + below)
    return peak
