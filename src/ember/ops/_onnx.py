"""Helpers for the ops' ``onnx`` rules (ops/_rules.py): small builders over the emitter ``e``
the exporter passes (onnx/export_emit.py). Nothing here imports ``onnx``."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt

__all__ = [
    "composite",
    "node",
    "reduce",
    "scalar",
    "squeeze",
    "unsqueeze",
]


def node(op_type: str, **fixed):
    """The rule of an op that is one ONNX node on the same operands, with fixed attributes."""

    def rule(e):
        return e.node(op_type, e.inputs, **fixed)

    rule.__name__ = f"onnx_{op_type}"
    return rule


def composite(build):
    """A rule written as ``build(e, *inputs) -> name``: shorthand for many-node forms."""

    def rule(e):
        return build(e, *e.inputs)

    rule.__name__ = getattr(build, "__name__", "onnx_rule")
    return rule


def scalar(e, value, like_dtype) -> str:
    """A 0-d constant of ``like_dtype`` (an ember dtype) holding ``value``."""
    return e.constant(np.asarray(value, dtype=dt.as_dtype(like_dtype).np))


def reduce(e, op_type: str, x: str, axes, keepdims: bool) -> str:
    """``op_type`` (ReduceSum, ReduceMax, ...) over ``axes``; empty ``axes`` reduce nothing."""
    axes = tuple(int(a) for a in axes)
    if not axes:
        return e.node("Identity", [x])
    if op_type == "ReduceSum" or e.opset >= 18:
        return e.node(op_type, [x, e.ints(axes)], keepdims=int(keepdims))
    return e.node(op_type, [x], axes=list(axes), keepdims=int(keepdims))


def squeeze(e, x: str, axes) -> str:
    axes = tuple(int(a) for a in axes)
    return e.node("Squeeze", [x, e.ints(axes)]) if axes else x


def unsqueeze(e, x: str, axes) -> str:
    axes = tuple(int(a) for a in axes)
    return e.node("Unsqueeze", [x, e.ints(axes)]) if axes else x
