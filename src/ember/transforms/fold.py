"""Constant folding: a pure call whose inputs are all constants is computed once, at compile
time, with its reference kernel, and becomes a constant: a 0-d constant broadcast to the shape
when every element is the same (``full``, ``ones`` and what is computed from them stay one
number, whatever their size), else an array of at most `MAX_FOLDED_ELEMENTS` elements. Larger
varied results stay computed at run time (a folded ``arange(10**7)`` would cost memory and file
size to save one cheap kernel); results over `MAX_COMPUTED_ELEMENTS` or with symbolic sizes are
not even tried."""

from __future__ import annotations

import math

import numpy as np

from ..graph.ir import Graph
from ..graph.rewrite import Pass, constant_value, is_pure, replace_with_constant
from ..symbolic import has_symbols

__all__ = ["FOLD", "MAX_COMPUTED_ELEMENTS", "MAX_FOLDED_ELEMENTS", "fold_constants"]

MAX_FOLDED_ELEMENTS = 1 << 16
MAX_COMPUTED_ELEMENTS = 1 << 22


def _foldable(node) -> bool:
    if node.kind != "call" or node.op.kind == "control" or not is_pure(node):
        return False
    if node.op.broadcast:
        return False  # a broadcast is a free view; folding it would only materialize it
    if len(node.outputs) != 1 or has_symbols(node.attrs):
        return False
    shape = node.outputs[0].shape
    # (Python ints: an int64 product of (2**32, 2**32) wraps to 0, and the kernel would run)
    if has_symbols(shape) or math.prod(shape) > MAX_COMPUTED_ELEMENTS:
        return False
    return all(constant_value(v) is not None for v in node.inputs)


def fold_constants(graph: Graph) -> tuple[Graph, bool]:
    changed = False
    for node in list(graph.nodes):
        if not _foldable(node):
            continue
        arrays = [constant_value(v) for v in node.inputs]
        result = np.asarray(node.op.kernel(*arrays, **node.attrs))
        want = node.outputs[0].type
        if result.shape != tuple(want.shape) or result.dtype != want.dtype.np:
            continue  # a kernel that disagrees with its rule: leave it to run (and be checked)
        if result.size > 1 and _uniform(result):  # one value everywhere: a broadcast scalar
            with graph.inserting_before(node):
                scalar = graph.add_constant(result.reshape(-1)[:1].reshape(()).copy(), frozen=True)
                broadcast = graph.add_call(_broadcast_op(), [scalar], {"shape": result.shape})
            graph.replace_all_uses(node.outputs[0], broadcast.outputs[0])
            graph.erase_node(node)
        elif result.size <= MAX_FOLDED_ELEMENTS:
            # a kernel may return a view of a constant: the folded constant owns its memory
            replace_with_constant(graph, node, np.array(result, copy=True))
        else:
            continue
        changed = True
    return graph, changed


def _uniform(array: np.ndarray) -> bool:
    """Every element has the same bits (NaN and -0.0 compared exactly)."""
    if array.dtype.itemsize not in (1, 2, 4, 8):
        return False
    bits = np.ascontiguousarray(array).reshape(-1).view(f"u{array.dtype.itemsize}")
    return bool(np.all(bits == bits[0]))


def _broadcast_op():
    from ..ops._registry import REGISTRY

    return next(op for op in REGISTRY.values() if op.broadcast)


FOLD = Pass("fold", fold_constants, level=1, doc="compute constant-only calls at compile time")
