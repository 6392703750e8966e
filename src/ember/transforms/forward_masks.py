"""Masks computed in the forward pass when that saves fewer bytes: before the AOT partition
(transforms/partition.py) decides what the forward saves for the backward.

A ReLU's gradient reads its result only through the mask ``ne(relu(x), 0)``. Where nothing
else in the backward reads the result (a ReLU before average pooling, before a flatten and a
linear layer's input gradient only, or before the last pooling of a network), the forward
saved the whole float result for that comparison: four bytes (float32) per element where the
mask takes one. Computing the mask at the end of the forward instead saves the mask, and the
comparison then sits beside the ReLU, where fusion groups it with the ReLU and a convolution
stores both (ops/conv_epilogue.py: the ``!= 0`` mask).

The move is exact: the same op on the same values, only earlier. A backward node moves when it
is pure, elementwise, not returned, reads one forward value (produced by a call, not returned,
read by no other backward node that stays) and otherwise only constants (copied into the
forward: a constant read by both halves would be saved too), and the results of all the
value's moved readers take fewer bytes than the value. What an op is comes from its rules
(``kind``, purity), never its name.
"""

from __future__ import annotations

import math

from ..graph.ir import Graph
from ..graph.rewrite import is_pure

__all__ = ["compute_masks_forward"]


def _bytes(value) -> int | None:
    if any(not isinstance(d, int) for d in value.shape):
        return None
    return math.prod(value.shape) * value.dtype.itemsize


def _reads_only(node, value) -> bool:
    """Whether ``node`` is a pure elementwise call reading ``value`` and constants only."""
    if node.kind != "call" or node.op.kind != "elementwise" or not is_pure(node):
        return False
    if len(node.outputs) != 1:
        return False
    return all(v is value or v.node.kind == "constant" for v in node.inputs)


def _moves(graph: Graph, start: int) -> list:
    """(value, its backward readers) pairs whose readers are cheaper to save than it."""
    position = {id(n): p for p, n in enumerate(graph.nodes)}
    returned = {id(v) for v in graph.outputs}
    found = []
    for node in graph.nodes[:start]:
        if node.kind != "call":
            continue
        for value in node.outputs:
            later = [u for u in value.users if position[id(u)] >= start]
            if not later or id(value) in returned:
                continue
            readers = list({id(u): u for u in later}.values())
            if not all(_reads_only(u, value) for u in readers):
                continue
            if any(id(u.outputs[0]) in returned for u in readers):
                continue  # (a joint output made by the backward stays there: its position)
            held = _bytes(value)
            moved = [_bytes(u.outputs[0]) for u in readers]
            if held is None or None in moved or sum(moved) >= held:
                continue
            found.append((value, readers))
    return found


def compute_masks_forward(graph: Graph, backward_start: int) -> int:
    """Move the backward's cheap readers of forward values into the forward where they are
    saved in fewer bytes than the values (see the module docstring); the new position where
    the backward begins."""
    start = backward_start
    for value, readers in _moves(graph, start):
        for reader in readers:
            first = graph.nodes[start]
            before = len(graph.nodes)
            with graph.inserting_before(first):
                inputs = [
                    v if v is value else graph.add_constant(graph.constants[v.node.name], v.name)
                    for v in reader.inputs
                ]
                copy = graph.add_call(
                    reader.op, inputs, dict(reader.attrs), out_types=[reader.outputs[0].type]
                )
            copy.scope, copy.region = reader.scope, reader.region
            start += len(graph.nodes) - before
            graph.replace_all_uses(reader.outputs[0], copy.outputs[0])
            graph.erase_node(reader)
    return start
