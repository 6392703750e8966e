"""Helpers for the ops' ``onnx`` rules (ops/_rules.py): small builders over the emitter ``e``
the exporter passes (onnx/export_emit.py). Nothing here imports ``onnx``."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt

__all__ = [
    "composite",
    "expm1",
    "log1p",
    "node",
    "reduce",
    "scalar",
    "select",
    "squeeze",
    "tri_mask",
    "trilu",
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


def select(e, cond: str, x: str, y: str, dtype) -> str:
    """``x`` where ``cond``, else ``y`` (of ember ``dtype``): Where, or on bool values the same
    choice in logic ops (onnxruntime implements Where on no bool values, at any opset)."""
    if dt.as_dtype(dtype) is not dt.bool_:
        return e.node("Where", [cond, x, y])
    chosen = e.node("And", [cond, x])
    return e.node("Or", [chosen, e.node("And", [e.node("Not", [cond]), y])])


def log1p(e, x: str, dtype) -> str:
    """log(1 + x) accurate for small x (ONNX has no Log1p): with u = 1 + x rounded,
    log(u) * x / (u - 1) cancels u's rounding error (Goldberg); x itself where u is 1."""
    u = e.node("Add", [x, scalar(e, 1, dtype)])
    d = e.node("Sub", [u, scalar(e, 1, dtype)])
    tiny = e.node("Equal", [d, scalar(e, 0, dtype)])
    safe = e.node("Where", [tiny, scalar(e, 1, dtype), d])
    ratio = e.node("Div", [e.node("Mul", [e.node("Log", [u]), x]), safe])
    # u = inf (x = inf) gives inf / inf: log(u) itself is right there
    ratio = e.node("Where", [e.node("IsInf", [u]), e.node("Log", [u]), ratio])
    return e.node("Where", [tiny, x, ratio])


def expm1(e, x: str, dtype) -> str:
    """exp(x) - 1 accurate for small x (ONNX has no Expm1): with u = exp(x) rounded,
    (u - 1) x / log(u) (Kahan); x where u is 1, -1 where u - 1 is -1, u where u is inf."""
    u = e.node("Exp", [x])
    d = e.node("Sub", [u, scalar(e, 1, dtype)])
    one_u = e.node("Equal", [d, scalar(e, 0, dtype)])
    log_u = e.node("Log", [u])
    safe = e.node("Where", [one_u, scalar(e, 1, dtype), log_u])
    out = e.node("Div", [e.node("Mul", [d, x]), safe])
    out = e.node("Where", [e.node("Equal", [d, scalar(e, -1, dtype)]), d, out])
    out = e.node("Where", [e.node("IsInf", [u]), u, out])
    return e.node("Where", [one_u, x, out])


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


def tri_mask(e, rows, cols, diagonal: int = 0, upper: bool = False) -> str:
    """A (rows, cols) bool mask of a triangle: ``col - row <= diagonal`` (``>=`` for the upper
    one); a constant for fixed sizes, else two Ranges over the run's sizes."""
    if isinstance(rows, int) and isinstance(cols, int) and isinstance(diagonal, int):
        below = np.tri(rows, cols, diagonal - 1 if upper else diagonal, dtype=bool)
        return e.constant(~below if upper else below)
    zero, one = e.scalar(0, dt.int64), e.scalar(1, dt.int64)

    def positions(n):  # 0 .. n - 1
        return e.node("Range", [zero, e.node("Squeeze", [e.dim(n), e.ints([0])]), one])

    row = e.node("Unsqueeze", [positions(rows), e.ints([1])])
    offset = e.node("Sub", [positions(cols), row])  # (rows, cols): col - row
    test = "GreaterOrEqual" if upper else "LessOrEqual"
    return e.node(test, [offset, _size_scalar(e, diagonal)])


def _size_scalar(e, n) -> str:
    """An int64 scalar of ``n``: a constant, or a symbolic size computed from the inputs'
    shapes (a diagonal ``S - T`` over a growing cache)."""
    if isinstance(n, int):
        return e.scalar(n, dt.int64)
    return e.node("Reshape", [e.dim(n), e.ints(())])


def trilu(e, x: str, shape, dtype, diagonal: int = 0, upper: bool = False) -> str:
    """ONNX's Trilu of ``x`` (of ``shape`` and ember ``dtype``; its last two axes the
    matrices); before opset 14, which has no Trilu, a Where over `tri_mask`."""
    if e.opset >= 14:
        return e.node("Trilu", [x, _size_scalar(e, diagonal)], upper=int(upper))
    keep = tri_mask(e, shape[-2], shape[-1], diagonal, upper)
    return select(e, keep, x, e.scalar(0, dtype), dtype)
