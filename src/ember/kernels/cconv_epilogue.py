"""Convolution epilogues: a ``fused_epilogue`` node whose producer is ``conv`` (made by
transforms/epilogue.py), run by the compiled forward convolution (kernels/cconv.py), which
adds the bias, clamps (a ReLU, ReLU6, hardtanh: ops/_rules.py's `Clamp`) and writes the ReLU's
gradient mask while each output tile is still in cache, instead of a second pass over the
whole output.

The C store does a fixed set of things, described by a `Spec`: an optional per-channel bias,
an optional residual of the output's shape (a residual block's ``relu(conv(x) + shortcut)``:
the shortcut read as each tile is stored, rather than a pass of its own over both), an optional
clamp, the float output and an optional mask (the value > 0, or != 0 where the clamp block
says: kernels/cclamp.py). Which epilogue programs come down to a `Spec` is the convolution's
epilogue rule (ops/conv.py), which calls `build` and `c_step` with it; anything else stays a
separate elementwise node. The reference is the node's own kernel (ops/fused.py: the conv
kernel, then the program's NumPy kernels).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .conv_plan import conv_geometry

__all__ = ["Spec", "build", "c_step"]


class Spec(NamedTuple):
    bias: int | None  # position of the bias among the node's epilogue operands
    # the clamp applied before the float output is stored: (lo, hi, lo takes ties, hi takes
    # ties[, the mask is v != 0]), kernels/cclamp.py's `clamp_address`; None: none
    clamp: tuple | None
    value: int | None  # position in ``outputs`` of the float output
    mask: int | None  # position in ``outputs`` of the mask
    own_bias: bool = False  # the bias is the convolution's own operand (node input 2)
    # position among the node's epilogue operands of a residual of the result's shape, added
    # after the bias and before the clamp (a residual block's shortcut); None: none
    residual: int | None = None
    # an elementwise function of the clamped value stored in its place (SiLU, HardSwish, ...:
    # kernels/cconv_activation.py), also the sixth entry of ``clamp``; None: none
    activation: object = None


def c_step(node, plan: Spec, producer_attrs: dict):
    """The graph runner's C step (runtime/cgraph.py) of a ``fused_epilogue`` node of a 2-d,
    one-group convolution (attributes ``producer_attrs``) whose float result is wanted, or
    None. ``plan``: what the store does."""
    from . import cconv
    from .cconv_constant import frozen_weight
    from .cstep import CStep, function_address

    x_type, w_type = (v.type for v in node.inputs[:2])
    if producer_attrs["groups"] != 1 or plan.value is None or x_type.dtype != w_type.dtype:
        return None
    p = conv_geometry(producer_attrs, x_type.shape[2:], w_type.shape)
    constant = frozen_weight(node)  # (its panels packed once)
    made = cconv.forward_step(
        x_type.shape, w_type.shape, p, x_type.dtype.np, plan.clamp, weight_constant=constant
    )
    if made is None:
        return None
    step, args, keep = made
    slots = [(0, "in", 0), (1, "in", 1), (3, "out", plan.value)]
    if plan.own_bias:
        slots.append((2, "in", 2))
    elif plan.bias is not None:
        n, slot = node.attrs["n_producer"], node.attrs["slot"]
        slots.append((2, "in", n + plan.bias - (plan.bias > slot)))
    if plan.mask is not None:
        slots.append((4, "out", plan.mask))
    if plan.residual is not None:
        slots.append(
            (cconv.residual_slot(made, x_type.dtype.np), "in", _input(node, plan.residual))
        )
    return CStep(function_address(step), args, slots, keep)


def _input(node, operand: int) -> int:
    """The node input of the epilogue program's operand ``operand`` (the program's inputs are
    the node's after the producer's, with the producer's result inserted at ``slot``)."""
    n, slot = node.attrs["n_producer"], node.attrs["slot"]
    return n + operand - (operand > slot)


def depthwise_c_step(node, plan: Spec, producer_attrs: dict):
    """The graph runner's C step of a ``fused_epilogue`` node of a 2-d depthwise convolution
    (kernels/cdepthwise.py: the bias added and the clamp applied as each plane is stored; no
    mask), or None."""
    from . import cdepthwise

    x_type, w_type = (v.type for v in node.inputs[:2])
    if plan.value is None or plan.mask is not None or x_type.dtype != w_type.dtype:
        return None
    if plan.residual is not None:  # (its kernels store no residual)
        return None
    p = conv_geometry(producer_attrs, x_type.shape[2:], w_type.shape)
    biased = plan.own_bias or plan.bias is not None
    step = cdepthwise.forward_step(
        x_type.shape, w_type.shape, p, producer_attrs["groups"], x_type.dtype.np, biased,
        plan.clamp,
    )  # fmt: skip
    if step is None:
        return None
    n, slot = node.attrs["n_producer"], node.attrs["slot"]
    bias_input = 2 if plan.own_bias else n + (plan.bias or 0) - ((plan.bias or 0) > slot)
    slots = []
    for at, way, index in step.slots:
        if way == "out":
            index = plan.value
        elif index == 2:
            index = bias_input
        slots.append((at, way, index))
    step.slots = slots
    return step


def build(node, plan: Spec, producer_attrs: dict, result, depthwise: bool = False):
    """``(*arrays, out=None) -> tuple`` for a ``fused_epilogue`` node of a convolution
    (attributes ``producer_attrs``, result type ``result``) whose store does ``plan``
    (``depthwise``: in kernels/cdepthwise.py's kernels, which store no mask)."""
    from . import cconv, cconv_constant, cdepthwise

    attrs = node.attrs
    n, slot = attrs["n_producer"], attrs["slot"]
    groups = producer_attrs["groups"]
    shape = tuple(result.shape)
    # a frozen constant's weight: its panels packed once
    constant = cconv_constant.for_node(node, producer_attrs, plan.clamp)

    def call(*arrays, out=None):
        x, w = arrays[:2]
        operands = list(arrays[n:])
        operands.insert(slot, None)
        p = conv_geometry(producer_attrs, x.shape[2:], w.shape)
        bias = None if plan.bias is None else operands[plan.bias].reshape(-1)
        if plan.own_bias:
            bias = arrays[2]
        mask = np.empty(shape, np.bool_) if plan.mask is not None else None
        residual = None if plan.residual is None else operands[plan.residual]
        y = None if constant is None else constant(x, w, bias, mask, residual=residual)
        if y is None and depthwise and residual is None:
            y = cdepthwise.conv_forward(x, w, p, groups, bias, plan.clamp)
        elif y is None and not depthwise:
            y = cconv.conv_forward(x, w, p, groups, bias, plan.clamp, mask, residual)
        if y is None:  # (an empty batch, a residual the kernels decline)
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
