"""Operator fusion: maximal groups of elementwise ops become one ``fused_elementwise`` node
(ops/fused.py), which the code generator runs as one compiled C loop (runtime/cfuse.py): one
pass over memory instead of one per op, and no intermediate arrays.

A group is grown in execution order. An elementwise call joins the group of an operand's
producer when

* the op can be written in C (its `OpDef` declares ``extra["c"]``), every dtype it touches is
  float32, float64 or bool (where C's arithmetic, comparisons and casts agree with NumPy's),
  and its result has the group's shape (the loop's iteration space; operands may broadcast);
* the group stays convex: no path leaves the group and comes back into it (else the fused node
  would need its own result), checked by walking the other operands' producers.

Values used outside the group (or returned) become the fused node's outputs; 0-d constants are
written into the kernel. Groups of one op stay as they are (the NumPy ufunc is as fast). Nodes
inside cond branches and loop bodies are never touched: fusion does not cross control flow.
Reductions at the end of a group and matmul / convolution epilogues are not fused yet.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..graph.ir import Graph
from ..ops._registry import TensorType
from ..ops.fused import FUSED
from .rewrite import Pass

__all__ = ["FUSE", "fuse_elementwise"]

FUSABLE_DTYPES = (dt.float32, dt.float64, dt.bool_)


def _fusable(node) -> bool:
    if node.kind != "call" or node.op.kind != "elementwise" or "c" not in node.op.extra:
        return False
    if len(node.outputs) != 1:
        return False
    return all(v.dtype in FUSABLE_DTYPES for v in list(node.inputs) + node.outputs)


def _depends_on(value, group: set, floor: int, position: dict) -> bool:
    """Whether ``value`` (outside the group) is computed from a group member. Producers placed
    before the group's first node (``floor``) cannot be."""
    stack, seen = [value], set()
    while stack:
        v = stack.pop()
        node = v.node
        if id(node) in seen or position[id(node)] < floor:
            continue
        seen.add(id(node))
        if id(node) in group:
            return True
        stack.extend(node.inputs)
    return False


def _groups(graph: Graph) -> list[list]:
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    group_of: dict[int, list] = {}  # id(node) -> its group (a list of nodes, in order)
    groups: list[list] = []
    for node in graph.nodes:
        if not _fusable(node):
            continue
        shape = tuple(node.outputs[0].shape)
        chosen = None
        for v in node.inputs:
            group = group_of.get(id(v.node))
            if group is None or tuple(group[0].outputs[0].shape) != shape:
                continue
            members = {id(n) for n in group}
            floor = position[id(group[0])]
            others = [u for u in node.inputs if id(u.node) not in members]
            if not any(_depends_on(u, members, floor, position) for u in others):
                chosen = group
                break
        if chosen is None:
            chosen = []
            groups.append(chosen)
        chosen.append(node)
        group_of[id(node)] = chosen
    return [g for g in groups if len(g) > 1]


def _constant_scalar(value):
    node = value.node
    if node.kind == "constant" and value.type.shape == () and value.dtype in FUSABLE_DTYPES:
        return ("k", node.graph.constants[node.name].item(), value.dtype.name)
    return None


def _fuse(graph: Graph, group: list) -> None:
    members = {id(n) for n in group}
    index = {id(n): j for j, n in enumerate(group)}
    inputs, program = [], []
    for node in group:
        operands = []
        for v in node.inputs:
            if id(v.node) in members:
                operands.append(("t", index[id(v.node)]))
            elif (k := _constant_scalar(v)) is not None:
                operands.append(k)
            else:
                if not any(v is u for u in inputs):
                    inputs.append(v)
                operands.append(("in", next(i for i, u in enumerate(inputs) if u is v)))
        attrs = tuple(sorted(node.attrs.items()))
        program.append((node.op.name, tuple(operands), attrs))
    returned = {id(v) for v in graph.outputs}
    escaping = [
        n
        for n in group
        if id(n.outputs[0]) in returned or any(id(u) not in members for u in n.outputs[0].users)
    ]
    last = group[-1]
    with graph.inserting_after(last):
        fused = graph.add_call(
            FUSED,
            inputs,
            {
                "program": tuple(program),
                "outputs": tuple(index[id(n)] for n in escaping),
                "out_types": tuple(
                    TensorType(n.outputs[0].shape, n.outputs[0].dtype) for n in escaping
                ),
            },
        )
    for n, new in zip(escaping, fused.outputs):
        old = n.outputs[0]
        graph.replace_all_uses(old, new)
        graph._taken.discard(new.name)
        new.name, old.name = old.name, new.name  # the value keeps its name for readers
    for n in reversed(group):
        graph.erase_node(n)


def fuse_elementwise(graph: Graph) -> tuple[Graph, bool]:
    groups = _groups(graph)
    for group in groups:
        _fuse(graph, group)
    if groups:  # a fused node sits after its last member: readers of earlier members follow it
        graph.nodes = graph.topological_order()
    return graph, bool(groups)


FUSE = Pass("fuse", fuse_elementwise, level=3, doc="elementwise groups into one compiled loop")
