"""Algebraic simplification: rewrites that are exact for every value, NaN, Inf and -0.0
included. What an op allows is declared on its `OpDef` (ops/_rules.py), never listed here by name:

* ``identity = Identity(left=c, right=c)``: ``op(c, x)`` / ``op(x, c)`` is ``x`` when the
  constant operand holds only ``c`` (compared bit for bit on floats, so ``x + 0.0``, which turns
  -0.0 into 0.0, is kept, while ``x + (-0.0)``, ``x * 1``, ``x - 0`` and ``x / 1`` go) and
  the result has ``x``'s shape and dtype;
* ``noop(in_type, **attrs)``: the op returns its input unchanged (a reshape or broadcast
  to the same shape, an identity permutation);
* ``compose(inner_attrs, outer_attrs, in_type)``: ``op(op(x, a), b)`` is
  ``op(x, compose(a, b))``, or None where that would not be exact (reshape and broadcast chains,
  permutation chains, a cast after a lossless cast);
* ``broadcast``: the op only broadcasts, so an elementwise reader may take its operand
  directly when the reader's result type stays the same (elementwise kernels broadcast anyway).
"""

from __future__ import annotations

import numpy as np

from ..graph.ir import Graph
from ..graph.rewrite import Pass, constant_value, replace_value

__all__ = ["SIMPLIFY", "simplify"]


def _holds_only(array, c) -> bool:
    if array.size == 0:
        return False
    if not np.all(array == c):
        return False
    if array.dtype.kind == "f" or array.dtype.kind == "V":  # bfloat16 is 'V' to NumPy
        return bool(np.all(np.signbit(array.astype(np.float64)) == np.signbit(c)))
    return True


def _identity_operand(node):
    """The operand ``node`` passes through unchanged, or None."""
    identity = node.op.identity
    if identity is None or len(node.inputs) != 2:
        return None
    out = node.outputs[0].type
    for c, (const, other) in ((identity.right, (1, 0)), (identity.left, (0, 1))):
        if c is None:
            continue
        array = constant_value(node.inputs[const])
        operand = node.inputs[other]
        if array is not None and operand.type == out and _holds_only(array, c):
            return operand
    return None


def _compose_chain(node) -> bool:
    compose = node.op.compose
    inner = node.inputs[0].node if node.inputs else None
    if compose is None or inner is None or inner.kind != "call" or inner.op is not node.op:
        return False
    attrs = compose(inner.attrs, node.attrs, inner.inputs[0].type)
    if attrs is None:
        return False
    source = inner.inputs[0]
    node.replace_input(node.inputs[0], source)
    node.attrs = attrs
    return True


def _skip_broadcasts(node) -> bool:
    if node.op.kind != "elementwise":
        return False
    changed = False
    for v in list(node.inputs):
        if v.node.kind != "call" or not v.node.op.broadcast:
            continue
        source = v.node.inputs[0]
        trial = [source if u is v else u for u in node.inputs]
        try:
            types = node.op.infer(*trial, **node.attrs)
        except Exception:  # the narrower operand does not fit: keep the broadcast
            continue
        types = types if isinstance(types, tuple) and node.op.num_outputs != 1 else (types,)
        if all(t == o.type for t, o in zip(types, node.outputs)):
            node.replace_input(v, source)
            changed = True
    return changed


def simplify(graph: Graph) -> tuple[Graph, bool]:
    changed = False
    for node in list(graph.nodes):
        if node.kind != "call":
            continue
        changed |= _skip_broadcasts(node)
        changed |= _compose_chain(node)
        noop = node.op.noop
        if noop is not None and len(node.outputs) == 1:
            if noop(node.inputs[0].type, **node.attrs):
                changed |= replace_value(graph, node.outputs[0], node.inputs[0])
                continue
        operand = _identity_operand(node)
        if operand is not None:
            changed |= replace_value(graph, node.outputs[0], operand)
    return graph, changed


SIMPLIFY = Pass("simplify", simplify, level=2, doc="exact algebraic identities and chains")
