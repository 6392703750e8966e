"""The layer_norm op's `PatternRule` (ops/_rules.py): layer normalization as exporters write it
without the operator (ONNX before opset 17, TorchScript's decomposition), one ``layer_norm``
call (ops/layer_norm.py) instead of a dozen nodes and two reductions:

    m = mean(x)               sum(x, axes, keepdims) / N, or mean
    d = x - m
    v = mean(d ** 2)          pow(d, 2) or d * d
    n = d / sqrt(v + eps)
    y = n * weight + bias     (optional, or n + bias: the call takes ones and zeros for what
                              is absent)

Conditions (the rule refuses otherwise): the axes are the trailing ones, of static sizes, the
same for both means, whose divisor is their element count; ``eps`` a constant holding one
finite value >= 0; every intermediate read only by the next op of the pattern (``d`` by the
square and the division) and no graph output; ``weight`` and ``bias`` have the normalized
dimensions' shape and x's dtype, and every value is x's floating dtype and shape (the
reductions' with ones). The op computes the variance and the reciprocal square root its own
way (PyTorch's kernel): equal but for rounding.
"""

from __future__ import annotations

import math

import numpy as np

from . import binary  # noqa: F401  (the roots, div and add, registered before they are read)
from ._registry import REGISTRY
from ._rules import PatternRule

__all__ = ["layer_norm_pattern"]


def _readers(value) -> list:
    """The nodes that read ``value`` and whose results are used (a rewrite earlier in the same
    pass, the simplifier's ``x * 1``, leaves dead readers until dead code goes)."""
    returned = {id(v) for v in value.node.graph.outputs}
    return [
        u
        for u in value.users
        if u.kind != "call" or any(o.users or id(o) in returned for o in u.outputs)
    ]


def _only(value, name: str):
    """The node making ``value`` when it is a call of the op ``name`` read by one node (and
    not returned), else None."""
    node = value.node
    if node.kind != "call" or node.op is not REGISTRY[name] or len(_readers(value)) != 1:
        return None
    if any(v is value for v in node.graph.outputs):
        return None
    return node


def _scalar(value, constant) -> float | None:
    array = constant(value)
    if array is None or array.size == 0 or array.dtype.kind != "f":
        return None
    first = float(array.reshape(-1)[0])
    return first if np.all(array == first) and math.isfinite(first) else None


def _mean(value, constant):
    """(x, axes) when ``value`` is a mean of x over ``axes`` kept as ones: ``sum(x) / N``."""
    div = _only(value, "div")
    if div is None or div.attrs:
        return None
    total = _only(div.inputs[0], "sum")
    if total is None or not total.attrs.get("keepdims"):
        return None
    x, axes = total.inputs[0], tuple(total.attrs["axes"])
    sizes = [x.shape[a] for a in axes]
    if not all(isinstance(s, int) for s in sizes):
        return None
    if _scalar(div.inputs[1], constant) != float(math.prod(sizes)):
        return None
    if div.outputs[0].type.dtype is not x.type.dtype:
        return None
    return x, axes


def _normalized(value, constant):
    """(x, axes, eps) when ``value`` is ``(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)``
    over trailing ``axes``; else None."""
    div = value.node
    if div.kind != "call" or div.op is not REGISTRY["div"] or div.attrs:
        return None
    d, root = div.inputs
    sqrt = _only(root, "sqrt")
    plus = None if sqrt is None else _only(sqrt.inputs[0], "add")
    if plus is None or plus.attrs:
        return None
    var, eps_value = plus.inputs
    eps = _scalar(eps_value, constant)
    if eps is None or eps < 0:
        return None
    found = _mean(var, constant)
    if found is None:
        return None
    square, axes = found
    sq = square.node
    if len(_readers(square)) != 1 or sq.kind != "call":
        return None
    if sq.op is REGISTRY["pow"]:
        if sq.inputs[0] is not d or _scalar(sq.inputs[1], constant) != 2.0:
            return None
    elif sq.op is not REGISTRY["mul"] or sq.inputs[0] is not d or sq.inputs[1] is not d:
        return None
    sub = d.node
    if sub.kind != "call" or sub.op is not REGISTRY["sub"] or sub.attrs:
        return None
    if {id(n) for n in _readers(d)} != {id(sq), id(div)} or any(v is d for v in div.graph.outputs):
        return None
    x, mean = sub.inputs
    found = _mean(mean, constant)
    if found is None or found[0] is not x or found[1] != axes:
        return None
    rank = len(x.shape)
    if not x.type.dtype.is_floating_point or axes != tuple(range(rank - len(axes), rank)):
        return None
    if any(v.type != x.type for v in (d, square, value)):
        return None
    return x, axes, eps


def _affine(value, constant, trailing):
    """(n, weight or None, bias) when ``value`` is ``n * weight + bias``, or ``n + bias`` (a
    weight of ones the simplifier took away), with weight and bias of the ``trailing`` shape;
    else None."""
    add = value.node
    if add.kind != "call" or add.op is not REGISTRY["add"] or add.attrs:
        return None
    for scaled, bias in (add.inputs, add.inputs[::-1]):
        if tuple(bias.shape) != trailing or bias.type.dtype is not value.type.dtype:
            continue
        if scaled.type != value.type:
            continue
        mul = _only(scaled, "mul")
        if mul is None or mul.attrs:
            if len(_readers(scaled)) == 1 and scaled.node.kind == "call":
                return scaled, None, bias
            continue
        for n, weight in (mul.inputs, mul.inputs[::-1]):
            same = tuple(weight.shape) == trailing and weight.type.dtype is value.type.dtype
            if same and n.type == value.type:
                return n, weight, bias
    return None


def _match(layer_norm, node, constant):
    affine = None
    if node.op is REGISTRY["add"]:
        rank = len(node.outputs[0].shape)
        for k in range(1, rank + 1):  # (the trailing shape is the weight's: try each length)
            affine = _affine(node.outputs[0], constant, tuple(node.outputs[0].shape[rank - k :]))
            if affine is not None:
                break
        if affine is None or len(_readers(affine[0])) != 1:
            return None
        found = _normalized(affine[0], constant)
    else:
        found = _normalized(node.outputs[0], constant)
        if found is not None and _followed_by_affine(node, constant):
            return None  # (matched with the affine step, at its add)
    if found is None:
        return None
    x, axes, eps = found
    trailing = tuple(x.shape[a] for a in axes)
    if affine is not None and tuple(affine[2].shape) != trailing:
        return None
    weight, bias = (None, None) if affine is None else affine[1:]

    def build(graph):
        dtype = x.type.dtype.np
        w = weight or graph.add_constant(np.ones(trailing, dtype), frozen=True)
        b = bias or graph.add_constant(np.zeros(trailing, dtype), frozen=True)
        return graph.add_call(layer_norm, [x, w, b], {"eps": eps}).outputs[0]

    return build


def _followed_by_affine(node, constant) -> bool:
    """Whether the normalization ``node`` computes is scaled and shifted right after (the rule
    then matches at the shift, taking both)."""
    value = node.outputs[0]
    readers = _readers(value)
    if len(readers) != 1:
        return False
    add = readers[0]
    if add.kind == "call" and add.op is REGISTRY["mul"] and len(_readers(add.outputs[0])) == 1:
        add = _readers(add.outputs[0])[0]
    if add.kind != "call" or add.op is not REGISTRY["add"]:
        return False
    trailing_rank = len(value.shape)
    return any(
        _affine(add.outputs[0], constant, tuple(value.shape[trailing_rank - k :])) is not None
        for k in range(1, trailing_rank + 1)
    )


def layer_norm_pattern() -> PatternRule:
    return PatternRule(roots=(REGISTRY["div"], REGISTRY["add"]), match=_match)
