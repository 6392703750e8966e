"""Masks moved before a scatter-add: ``where(m, scatter(g, idx), 0)`` becomes
``scatter(where(gather(m, idx), g, 0), idx)``.

A ReLU before max pooling differentiates to ``where(relu_out > 0, pool_scatter(g, codes),
0)``: a boolean mask of the full activation, saved from the forward to the backward of every
convolutional block. The scatter's result is zero wherever ``idx`` names no position, so the
mask matters only at the scattered positions, and there it may be read first: the selection
then runs on the pooled gradient and reads the mask at the pooled positions (several windows
adding into one position each select by that position's mask element: the same sum). Where the
mask is elementwise in the pooled tensor itself (``relu_out > 0`` over max pooling's input),
reading it at the pooling's winners is the same elementwise op on the pooled values
(`PickRule`), so the full-size mask is never computed: the forward keeps the pooled values it
keeps anyway, and the backward one activation-sized buffer fewer.

The rewrite is exact for every value (a selection moved across an addition of zeros; no
arithmetic changes order): ``fill`` must hold only +0.0 (a -0.0 fill would turn the scatter's
untouched zeros negative), the select's result must be the scatter's type, and the mask
operands of the scatter's shape or 0-d. It fires only where the gathered mask reaches a
`PickRule` output, that is where the full-size mask can go; elsewhere the masked scatter
(one C pass: transforms/epilogue.py) is already the better form. What an op allows is read
from its rules (ops/_rules.py ``selects``, ``scatter``, ``picks``), never from its name.

`move_masks(graph, start=0)` rewrites selects and scatters at node positions ``start`` and
later (the AOT partition calls it on the joint graph's backward, capture/aot.py, so the
forward keeps its node positions); `SCATTER_MASKS` is the O2 pass.
"""

from __future__ import annotations

import numpy as np

from ..graph.ir import Graph
from ..graph.rewrite import Pass, constant_value, erase_if_dead, is_pure, replace_value
from ..types import TensorType

__all__ = ["SCATTER_MASKS", "move_masks"]

_DEPTH = 4  # elementwise ops a gather is pushed through on its way to a pick


def _static(shape) -> bool:
    return all(isinstance(d, int) for d in shape)


def _positive_zero(value) -> bool:
    array = constant_value(value)
    if array is None or value.type.shape != () or not value.dtype.is_floating_point:
        return False
    x = np.asarray(array, dtype=np.float64)
    return bool(x == 0 and not np.signbit(x))


def _pick_of(value, index, gather):
    """The values output of the pick that ``index`` comes from, when it reads ``value`` through
    ``gather``; else None."""
    node = index.node
    rule = node.op.picks if node.kind == "call" else None
    if rule is None or index is not node.outputs[rule.index]:
        return None
    if node.inputs[rule.source] is not value or rule.gather(node.attrs) != gather:
        return None
    return node.outputs[rule.values]


def _pushes_through(node, shape) -> bool:
    """Whether a gather may be pushed through ``node``: a pure elementwise call of one output
    whose operands are of ``shape`` or 0-d."""
    return (
        node.kind == "call"
        and node.op.kind == "elementwise"
        and len(node.outputs) == 1
        and is_pure(node)
        and all(tuple(v.shape) in (shape, ()) for v in node.inputs)
    )


def _reaches_pick(value, index, gather, depth: int) -> bool:
    if _pick_of(value, index, gather) is not None:
        return True
    node = value.node
    if depth == 0 or not _pushes_through(node, tuple(value.shape)):
        return False
    return any(_reaches_pick(v, index, gather, depth - 1) for v in node.inputs if v.shape != ())


def _gathered(graph: Graph, value, index, gather, depth: int):
    """``value`` read at ``index``'s positions: a pick's values where there is one, the
    elementwise op on gathered operands where that reaches one, else a gather call."""
    picked = _pick_of(value, index, gather)
    if picked is not None:
        return picked
    node = value.node
    if depth and _pushes_through(node, tuple(value.shape)):
        if any(_reaches_pick(v, index, gather, depth - 1) for v in node.inputs if v.shape != ()):
            operands = [
                v if v.shape == () else _gathered(graph, v, index, gather, depth - 1)
                for v in node.inputs
            ]
            return graph.add_call(node.op, operands, dict(node.attrs)).outputs[0]
    op, attrs = gather
    return graph.add_call(op, [value, index], dict(attrs)).outputs[0]


def _candidate(node, position, returned):
    """(select, scatter node, gather) where ``node`` selects from a scatter's result it alone
    reads and the rewrite applies (see the module docstring); else None."""
    for select in node.op.selects:
        scattered = node.inputs[select.value]
        scatter = scattered.node
        rule = scatter.op.scatter if scatter.kind == "call" else None
        if rule is None or position.get(id(scatter), -1) < 0:
            continue
        if scattered.users != [node] or id(scattered) in returned:
            continue
        if sum(1 for v in node.inputs if v is scattered) != 1:
            continue
        shape = tuple(scattered.shape)
        if not _static(shape) or node.outputs[0].type != scattered.type:
            continue
        if not _positive_zero(node.inputs[select.fill]):
            continue
        masks = [v for k, v in enumerate(node.inputs) if k not in (select.value, select.fill)]
        if not all(tuple(v.shape) in (shape, ()) for v in masks):
            continue
        index = scatter.inputs[rule.index]
        gather = rule.gather(scatter.attrs)
        if not any(_reaches_pick(v, index, gather, _DEPTH) for v in masks if v.shape != ()):
            continue
        values = scatter.inputs[rule.values]
        types = [
            v.type if v.shape == () else TensorType(tuple(values.shape), v.dtype)
            for v in node.inputs
        ]
        types[select.value] = values.type
        if node.op.infer(*types, **node.attrs) != values.type:
            continue  # (the select would promote the unscattered values: not the same rounding)
        return select, scatter, gather
    return None


def move_masks(graph: Graph, start: int = 0) -> tuple[Graph, bool]:
    """Move selects of a scatter's result before the scatter (see the module docstring), for
    selects and scatters at node positions ``start`` and later."""
    position = {id(n): (p if p >= start else -1) for p, n in enumerate(graph.nodes)}
    returned = {id(v) for v in graph.outputs}
    changed = False
    for node in [n for n in graph.nodes[start:] if n.kind == "call" and n.op.selects]:
        if position[id(node)] < 0:
            continue  # (erased as dead by an earlier rewrite)
        found = _candidate(node, position, returned)
        if found is None:
            continue
        select, scatter, gather = found
        rule = scatter.op.scatter
        index = scatter.inputs[rule.index]
        with graph.inserting_before(node):
            operands = list(node.inputs)
            operands[select.value] = scatter.inputs[rule.values]
            for k, v in enumerate(node.inputs):
                if k not in (select.value, select.fill) and v.shape != ():
                    operands[k] = _gathered(graph, v, index, gather, _DEPTH)
            selected = graph.add_call(node.op, operands, dict(node.attrs)).outputs[0]
            inputs = list(scatter.inputs)
            inputs[rule.values] = selected
            result = graph.add_call(scatter.op, inputs, dict(scatter.attrs)).outputs[0]
        if not replace_value(graph, node.outputs[0], result):
            raise AssertionError(f"scatter_masks: {node!r} and its rewrite differ in type")
        dropped = [v.node for v in (*node.inputs, *scatter.inputs)]
        graph.erase_node(node)
        graph.erase_node(scatter)
        position[id(node)] = position[id(scatter)] = -1  # (erased: not to be visited again)
        _erase_dead(graph, dropped, position, returned)
        changed = True
    return graph, changed


def _erase_dead(graph: Graph, nodes: list, position: dict, returned: set) -> None:
    """Erase the nodes of ``nodes`` (in the rewritten region) that nothing reads any more, and
    then their operands': the full-size mask a rewrite replaced (an AOT partition would
    otherwise save its operand for it)."""
    while nodes:
        node = nodes.pop()
        if position.get(id(node), -1) < 0:
            continue  # (before the region, or erased already)
        operands = [v.node for v in node.inputs]
        if erase_if_dead(graph, node, returned):
            position[id(node)] = -1
            nodes.extend(operands)


SCATTER_MASKS = Pass(
    "scatter_masks",
    move_masks,
    level=2,
    doc="a mask on a scatter-add's result read at the scattered positions (ReLU before pooling)",
)
