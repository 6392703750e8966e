"""Convolution epilogues: a ``fused_epilogue`` node whose producer is ``conv`` (made by
transforms/epilogue.py), run by the compiled forward convolution (kernels/cconv.py), which
adds the bias, applies the ReLU and writes the ReLU's gradient mask while each output tile is
still in cache, instead of a second pass over the whole output.

The C store does a fixed set of things, so only programs made of them are fused (`spec`):
an optional per-channel ``add`` of the convolution's result and a bias, an optional ``relu``,
an optional ``gt(value, 0)`` (the mask), with one float output (the last value) and at most
one mask. Anything else stays a separate elementwise node. The reference is the node's own
kernel (ops/fused.py: the conv kernel, then the program's NumPy kernels).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import dtypes as dt

__all__ = ["Spec", "build", "spec"]


class Spec(NamedTuple):
    bias: int | None  # position of the bias among the node's epilogue operands
    relu: bool  # whether the float output is after the ReLU
    value: int | None  # position in ``outputs`` of the float output
    mask: int | None  # position in ``outputs`` of the mask


def _per_channel(t, result) -> bool:
    """Whether ``t`` broadcasts against the conv result as one value per output channel."""
    shape = (1,) * (len(result.shape) - len(t.shape)) + tuple(t.shape)
    return (
        len(shape) == len(result.shape)
        and shape[1] == result.shape[1]
        and all(d == 1 for i, d in enumerate(shape) if i != 1)
        and t.dtype == result.dtype
    )


def spec(program, outputs, out_types, operand_types, slot: int, result) -> Spec | None:
    """What the C store must do for this epilogue program, or None when it cannot.

    ``operand_types``: the node's epilogue operands with the conv result's type at ``slot``."""
    kinds: list[str] = []  # per program result: "pre" (after the bias), "act", "mask"
    bias = None
    relu = False
    for name, operands, attrs in program:
        if attrs:
            return None
        sources = []
        for ref in operands:
            if ref[0] == "in":
                sources.append("conv" if ref[1] == slot else ("in", ref[1]))
            elif ref[0] == "t":
                sources.append(kinds[ref[1]])
            else:
                sources.append(("k", ref[1]))
        if name == "add" and not kinds and len(sources) == 2 and "conv" in sources:
            other = sources[1 - sources.index("conv")]
            if not isinstance(other, tuple) or other[0] != "in":
                return None
            if not _per_channel(operand_types[other[1]], result):
                return None
            bias = other[1]
            kinds.append("pre")
        elif name == "relu" and not relu and sources[0] in ("conv", "pre") and len(kinds) < 2:
            if sources[0] == "conv" and bias is not None:
                return None
            relu = True
            kinds.append("act")
        elif name == "gt" and sources[1] == ("k", 0.0) and sources[0] in ("conv", "pre", "act"):
            if sources[0] == "conv" and bias is not None:
                return None  # the mask of the value before the bias: not what the store has
            kinds.append("mask")
        else:
            return None
    value = mask = None
    for position, j in enumerate(outputs):
        kind = kinds[j]
        dtype = dt.as_dtype(out_types[position][1])
        if kind == "mask" and mask is None and dtype is dt.bool_:
            mask = position
        elif kind in ("pre", "act") and value is None and dtype == result.dtype:
            if relu != (kind == "act"):
                return None  # (the value before the ReLU and the ReLU both wanted)
            value = position
        else:
            return None
    return Spec(bias, relu, value, mask)


def _spec_of(node):
    """(the node's `Spec`, its convolution's attributes, the convolution's result type), or
    None when the C store cannot run it."""
    from . import cconv

    attrs = node.attrs
    n, slot = attrs["n_producer"], attrs["slot"]
    x_type, w_type = (v.type for v in node.inputs[:2])
    if n != 2 or not cconv.available(x_type.dtype.np):
        return None
    producer_attrs = dict(attrs["producer_attrs"])
    from ..ops.conv import CONV

    result = CONV.infer(x_type, w_type, **producer_attrs)
    operand_types = [v.type for v in node.inputs[n:]]
    operand_types.insert(slot, result)
    plan = spec(attrs["program"], attrs["outputs"], attrs["out_types"], operand_types, slot, result)
    return None if plan is None else (plan, producer_attrs, result)


def c_step(node):
    """The graph runner's C step (runtime/cgraph.py) of a ``fused_epilogue`` node of a 2-d,
    one-group convolution whose float result is wanted, or None."""
    from ..ops.conv import _geometry
    from . import cconv
    from .cstep import CStep, function_address

    found = _spec_of(node)
    if found is None:
        return None
    plan, producer_attrs, result = found
    x_type, w_type = (v.type for v in node.inputs[:2])
    if producer_attrs["groups"] != 1 or plan.value is None or x_type.dtype != w_type.dtype:
        return None
    p = _geometry(producer_attrs, x_type.shape[2:], w_type.shape)
    made = cconv.forward_step(x_type.shape, w_type.shape, p, x_type.dtype.np, plan.relu)
    if made is None:
        return None
    step, args, keep = made
    slots = [(0, "in", 0), (1, "in", 1), (3, "out", plan.value)]
    if plan.bias is not None:
        n, slot = node.attrs["n_producer"], node.attrs["slot"]
        slots.append((2, "in", n + plan.bias - (plan.bias > slot)))
    if plan.mask is not None:
        slots.append((4, "out", plan.mask))
    return CStep(function_address(step), args, slots, keep)


def build(node):
    """``(*arrays, out=None) -> tuple`` for a ``fused_epilogue`` node of a convolution, or None."""
    from ..ops.conv import _geometry
    from . import cconv

    found = _spec_of(node)
    if found is None:
        return None
    plan, producer_attrs, result = found
    attrs = node.attrs
    n, slot = attrs["n_producer"], attrs["slot"]
    groups = producer_attrs["groups"]
    shape = tuple(result.shape)

    def call(*arrays, out=None):
        x, w = arrays[:2]
        operands = list(arrays[n:])
        operands.insert(slot, None)
        p = _geometry(producer_attrs, x.shape[2:], w.shape)
        bias = None if plan.bias is None else operands[plan.bias].reshape(-1)
        mask = np.empty(shape, np.bool_) if plan.mask is not None else None
        y = cconv.conv_forward(x, w, p, groups, bias, plan.relu, mask)
        if y is None:  # (an empty batch)
            return node.op.kernel(*arrays, **attrs)
        results = [None] * len(attrs["outputs"])
        if plan.value is not None:
            results[plan.value] = y
        if plan.mask is not None:
            results[plan.mask] = mask
        if out is not None:
            for i, target in enumerate(out):
                if target is not None:
                    np.copyto(target, results[i])
                    results[i] = target
        return tuple(results)

    return call
