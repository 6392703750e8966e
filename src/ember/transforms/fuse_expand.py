"""Broadcast expansions computed in each reader's fused loop instead of being stored.

An elementwise value made only of operands smaller than itself (each broadcast against the
others: ``where(class_position == target, g, 0)``, cross-entropy's one-hot gradient over
``(rows, 1)`` and ``(1, classes)`` operands) costs a few instructions an element to compute
but its full size to hold. Fusion (transforms/fuse.py) groups a value with one reader's loop;
a second reader in another loop (a group ends at its reductions, so a row sum and the
elementwise that reads that sum are two loops) would then read it from memory, so it was
written out whole. `expand_per_reader` gives each fusable reader after the first its own copy
of such a value (and of its expanding operands), so every loop recomputes it from the small
operands and the full-size value is never stored. The copies compute the same ops on the same
operands: every value is bitwise what it was.
"""

from __future__ import annotations

import math

from .fusable import fusable

__all__ = ["expand_per_reader"]


def _numel(value) -> int | None:
    shape = value.type.shape
    return math.prod(shape) if all(isinstance(d, int) for d in shape) else None


def _expansions(graph) -> dict:
    """{id(value): value} of the fusable elementwise values computed only from operands
    smaller than themselves or from such expansions of their own shape."""
    found: dict = {}
    for node in graph.nodes:
        if not fusable(node):
            continue
        out = node.outputs[0]
        size = _numel(out)
        if size is None:
            continue
        small = True
        for v in node.inputs:
            n = _numel(v)
            if n is None or (n >= size and not (id(v) in found and v.type.shape == out.type.shape)):
                small = False
                break
        if small:
            found[id(out)] = out
    return found


def expand_per_reader(graph, reads) -> bool:
    """Give each reader of an expansion (see the module docstring) after the first for which
    ``reads(node, value)`` holds (a node a fused loop can compute over ``value``'s shape:
    elementwise or a reduction it may end in) its own copy of the expansion, placed just before
    that reader. Returns whether the graph changed. Every reader must be such a node: one that
    needs the value stored (a product) keeps it stored, and the copies would save nothing."""
    expansions = _expansions(graph)
    changed = False
    # the outermost expansions first: their copies bring copies of the inner ones
    for node in list(graph.nodes):
        if not node.outputs or id(node.outputs[0]) not in expansions:
            continue
        value = node.outputs[0]
        readers = list({id(u): u for u in value.users}.values())
        if len(readers) < 2 or any(value is o for o in graph.outputs):
            continue
        if not all(u.kind == "call" and reads(u, value) for u in readers):
            continue  # a reader that needs it stored keeps it stored: no copy saves memory
        for reader in readers[1:]:
            with graph.inserting_before(reader):
                copy = _copy(graph, value, expansions, {})
            reader.replace_input(value, copy)
            changed = True
    return changed


def _copy(graph, value, expansions: dict, memo: dict):
    if id(value) in memo:
        return memo[id(value)]
    node = value.node
    inputs = [_copy(graph, v, expansions, memo) if id(v) in expansions else v for v in node.inputs]
    new = graph.add_call(node.op, inputs, node.attrs, [value.type], [f"{value.name}_x"]).outputs[0]
    memo[id(value)] = new
    return new
