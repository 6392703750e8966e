"""Common-subexpression elimination: two pure calls of one op on the same values with equal
attributes compute the same thing, so the later one's readers read the earlier one; equal
constants (same dtype, shape and bytes, so -0.0 and 0.0 stay apart) are merged the same way.
The dead duplicates are left for DCE."""

from __future__ import annotations

import numpy as np

from ..graph.ir import Graph
from ..graph.rewrite import Pass, is_pure, replace_value

__all__ = ["CSE", "eliminate_common_subexpressions"]

MAX_CONSTANT_BYTES = 1 << 20  # hashing bigger constants costs more than merging them saves


def _frozen(value):
    """A hashable stand-in for an attribute value (subgraphs by identity), or None."""
    if isinstance(value, (list, tuple)):
        parts = [_frozen(v) for v in value]
        return None if any(p is None for p in parts) else (type(value).__name__, tuple(parts))
    if isinstance(value, Graph):
        return ("graph", id(value))
    if isinstance(value, float) and value != value:
        return ("nan",)
    try:
        hash(value)
    except TypeError:
        return None
    return (type(value).__name__, value)


def _key(node):
    if node.kind == "constant":
        array = node.graph.constants[node.name]
        if array.nbytes > MAX_CONSTANT_BYTES:
            return None
        return ("constant", array.dtype.str, array.shape, np.ascontiguousarray(array).tobytes())
    if node.kind != "call" or not is_pure(node):
        return None
    attrs = tuple(sorted((k, _frozen(v)) for k, v in node.attrs.items()))
    if any(v is None for _, v in attrs):
        return None
    return (node.op.name, tuple(id(v) for v in node.inputs), attrs)


def eliminate_common_subexpressions(graph: Graph) -> tuple[Graph, bool]:
    seen: dict = {}
    changed = False
    for node in list(graph.nodes):
        key = _key(node)
        if key is None:
            continue
        first = seen.setdefault(key, node)
        if first is node:
            continue
        for old, new in zip(node.outputs, first.outputs):
            changed |= replace_value(graph, old, new)
    return graph, changed


CSE = Pass("cse", eliminate_common_subexpressions, level=1, doc="compute equal values once")
