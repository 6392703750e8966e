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
straight into their positions of the result (the forward kernel's store steps through them),
and, for one group in 2-d, read their flipped, transposed sub-kernel in the weight itself (the
forward step's packer gathers it by a table of offsets; other convolutions copy it); the
phases' plans and tables are computed once per geometry. The weight gradient copies each phase
of the input.

Both return None where a stride-1 kernel declines (no compiler, an unsupported dtype, a wide
extended grid) and the caller runs NumPy.
"""

from __future__ import annotations

import functools
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


class _InputPhase(NamedTuple):
    """One product of phases of the input gradient, as a stride-1 forward convolution."""

    target: tuple  # its positions of the result: an index
    phase: tuple  # its first position per dimension
    crop: tuple | None  # the index of gy it reads; None: no kernel offset reaches it
    kernel: tuple  # the sub-kernel's extent
    index: tuple  # the sub-kernel's index of the weight
    plan: Plan | None  # the stride-1 convolution's
    gather: tuple | None  # forward_into's: the flipped, transposed sub-kernel read in place


@functools.lru_cache(maxsize=64)
def _input_phases(p: Plan, w_shape: tuple, groups: int) -> tuple:
    """The phases of the input gradient of a geometry (weight of shape ``w_shape``), each with
    its stride-1 plan and (one group) the offsets that read its flipped, transposed
    sub-kernel in the weight; or None where a phase's plan does not give its positions."""
    cout, cg = w_shape[:2]
    nd = len(p.kernel)
    result = []
    for combo in _all_phases(p):
        target = (slice(None), slice(None)) + tuple(
            slice(ph.r, None, s) for ph, s in zip(combo, p.stride)
        )
        phase = tuple(ph.r for ph in combo)
        crop, pads, kernel = [], [], []
        for ph, o in zip(combo, p.out_size):
            reach = ph.dilation * (ph.count - 1)
            # phase position q reads gy[q - t0 - j * d'], j < count: as a forward convolution
            # of gy with the flipped sub-kernel, the low padding is reach + t0
            low = reach + ph.t0
            start = max(0, -low)
            low += start
            length = o - start
            if ph.count == 0 or length <= 0:  # no kernel offset, or padding only
                crop = None
                break
            crop.append(slice(start, None))
            pads.append((low, ph.q - length - low + reach))
            kernel.append(ph.count)
        if crop is None:
            result.append(_InputPhase(target, phase, None, (), (), None, None))
            continue
        dil = tuple(ph.dilation for ph in combo)
        in_size = tuple(o - c.start for o, c in zip(p.out_size, crop))
        rows = cout // groups * math.prod(kernel)  # of one output channel
        p2 = plan(in_size, tuple(kernel), (1,) * nd, tuple(pads), dil, rows, cg)
        if p2.out_size != tuple(ph.q for ph in combo):
            return None
        gather = None
        if groups == 1 and nd == 2:  # (forward_into's step: one group, 2-d)
            # row (j, a) of output channel o of the flipped, transposed sub-kernel is
            # w[j, o, k0 + (count - 1 - a) * step] (per dimension)
            steps = [math.prod(w_shape[3 + d :]) for d in range(nd)]
            offsets = np.arange(cout, dtype=np.int64) * (cg * math.prod(w_shape[2:]))
            for ph, st in zip(combo, steps):
                taps = (ph.k0 + (ph.count - 1 - np.arange(ph.count)) * ph.step) * st
                offsets = offsets[..., None] + taps
            gather = ((cg, cout) + tuple(kernel), math.prod(w_shape[2:]), offsets.reshape(-1))
        crop = (slice(None), slice(None)) + tuple(crop)
        index = (slice(None), slice(None)) + tuple(
            slice(ph.k0, ph.k0 + (ph.count - 1) * ph.step + 1, ph.step) for ph in combo
        )
        result.append(_InputPhase(target, phase, crop, tuple(kernel), index, p2, gather))
    return tuple(result)


def input_grad(gy: np.ndarray, w: np.ndarray, p: Plan, groups: int, forward, store=None, bias=None):
    """The input gradient of a strided convolution, phase by phase through ``forward``
    (`cconv.conv_forward`), or None. ``store`` (`cconv.forward_into`), where given, writes
    each phase's forward convolution straight into its positions of the result (no copy of
    the phase), with one group reading the phase's sub-kernel in place; where it declines,
    the phase is computed by ``forward`` and copied. ``bias`` (one value per channel of the
    result): added by each phase's store (a transposed convolution's); the positions no kernel
    offset reaches hold it alone."""
    phases = _input_phases(p, tuple(w.shape), groups)
    if phases is None:
        return None
    n = gy.shape[0]
    cout, cg = w.shape[:2]
    cog = cout // groups
    nd = len(p.kernel)
    gx = np.empty((n, groups * cg) + tuple(p.in_size), gy.dtype)
    # what the positions no kernel offset reaches hold: 0, or 0 + the bias
    alone = 0 if bias is None else (bias + np.zeros((), bias.dtype)).reshape((1, -1) + (1,) * nd)
    w = np.ascontiguousarray(w)
    for ph in phases:
        if ph.crop is None:
            gx[ph.target] = alone
            continue
        operand = gy[ph.crop]
        if store is not None and ph.gather is not None:
            stored = store(operand, w, ph.plan, groups, gx, p.stride, ph.phase, bias, ph.gather)
            if stored is not None:
                continue
        flipped = w[ph.index].reshape((groups, cog, cg) + ph.kernel)[
            (Ellipsis,) + (slice(None, None, -1),) * nd
        ]
        w2 = np.ascontiguousarray(flipped.swapaxes(1, 2)).reshape((groups * cg, cog) + ph.kernel)
        if store is not None:
            if store(operand, w2, ph.plan, groups, gx, p.stride, ph.phase, bias) is not None:
                continue
        part = forward(operand, w2, ph.plan, groups, bias)
        if part is None:
            return None
        gx[ph.target] = part
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
    flipped sub-kernel (input gradient, but for one 2-d group, whose packer reads it in the
    weight; the phase is stored into the result), or the phase's result (weight gradient),
    beside the stride-1 kernel's own."""
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
            flipped = 0 if groups == 1 and len(kernel) == 2 else math.prod(w2)
            peak = max(peak, (flipped + crop) * item + below)
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
