"""`verify(graph)`: the checks every pass and loader relies on.

* every node's inputs are values of this graph, defined by an earlier node (so the stored order
  is an execution order and the graph is acyclic);
* ``users`` agree with the inputs;
* every call node's output types equal what its op's rule infers from its input types (the rule
  also re-validates the attributes);
* inputs, constants and outputs are consistent;
* every graph held in an attribute (a cond branch, a loop body) verifies too; how it must fit
  its node (both branches return the same types, a body keeps its carries' types) is the op's
  shape rule, checked with the others.

A failure raises `GraphError` naming the node and what is wrong.
"""

from __future__ import annotations

from collections import Counter

from ..dtypes import DType
from ..symbolic import SymDim
from ..types import TensorType
from ._base import GraphBase, GraphError
from .printer import format_node, format_type


def verify(graph) -> None:
    """Raise `GraphError` unless ``graph`` is well formed (see the module docstring); time
    linear in the size of the graph."""
    defined: set[int] = set()
    in_graph = {id(n) for n in graph.nodes}
    for position, node in enumerate(graph.nodes):
        where = _Where(position, node)
        if node.graph is not graph:
            raise GraphError(f"{where}: belongs to another graph")
        for i, v in enumerate(node.inputs):
            if v.node.graph is not graph:
                raise GraphError(f"{where}: input {i} (%{v.name}) belongs to another graph")
            if id(v) not in defined:
                later = id(v.node) in in_graph
                raise GraphError(
                    f"{where}: input {i} (%{v.name}) is "
                    + (
                        "defined later: the graph has a cycle or is out of order"
                        if later
                        else "not defined by any node of the graph (a dangling input)"
                    )
                )
        if node.kind == "call":
            _check_subgraphs(node, where)
            _check_types(node, where)
        elif node.inputs:
            raise GraphError(f"{where}: a {node.kind} node takes no inputs")
        if node.kind == "constant" and node.name not in graph.constants:
            raise GraphError(f"{where}: no array is stored for this constant")
        for v in node.outputs:
            defined.add(id(v))
    _check_users(graph)
    for v in graph.outputs:
        if id(v) not in defined:
            raise GraphError(f"output %{v.name} is not defined by any node of the graph")
    seen_inputs = set()
    for position, v in enumerate(graph.inputs):
        if v.node.kind != "input" or id(v.node) not in in_graph:
            raise GraphError(f"graph input %{v.name} is not an input node of the graph")
        if id(v) in seen_inputs:  # a caller's argument would have two places to go
            raise GraphError(f"graph input {position} (%{v.name}) is listed twice")
        seen_inputs.add(id(v))


class _Where:
    """The place of a node in an error (``node 3 (...)``), printed only when one is raised."""

    __slots__ = ("position", "node")

    def __init__(self, position: int, node):
        self.position, self.node = position, node

    def __str__(self) -> str:
        try:
            return f"node {self.position} ({format_node(self.node)})"
        except Exception:  # noqa: BLE001 (attributes or types of kinds no printer knows)
            return f"node {self.position} (a call of {self.node.target})"


def _check_subgraphs(node, where: str) -> None:
    for key, value in node.attrs.items():
        if isinstance(value, GraphBase):
            try:
                verify(value)
            except GraphError as exc:
                raise GraphError(f"{where}: its {key} graph is malformed: {exc.detail}") from exc


def _check_types(node, where: str) -> None:
    try:
        inferred = node.op.infer(*node.inputs, **node.attrs)
    except Exception as exc:  # the rule's own error, re-raised with the node's place
        raise GraphError(f"{where}: the rule of {node.op.name} rejects its inputs: {exc}") from exc
    expected = (inferred,) if node.op.num_outputs == 1 else tuple(inferred)
    for t in expected:
        if not _well_formed(t):
            # (a rule passes some attributes through: a loaded file's ``full`` of shape=0 or
            # dtype=7, whose "type" then broke the comparison below, or named a size of -1)
            raise GraphError(
                f"{where}: the rule of {node.op.name} gives no valid type for these attributes "
                f"({_short(t)})"
            )
    if len(expected) != len(node.outputs):
        raise GraphError(
            f"{where}: {node.op.name} produces {len(expected)} outputs, the node has "
            f"{len(node.outputs)}"
        )
    for v, t in zip(node.outputs, expected):
        if tuple(t.shape) != tuple(v.type.shape) or t.dtype != v.type.dtype:
            raise GraphError(
                f"{where}: %{v.name} is typed {format_type(v.type)} but {node.op.name} gives "
                f"{format_type(t)} for these inputs (a shape or dtype mismatch)"
            )


def _well_formed(t) -> bool:
    """Whether ``t`` is a tensor type: a tuple of sizes (whole numbers from 0, or symbolic)
    and a dtype."""
    return (
        isinstance(t, TensorType)
        and isinstance(t.dtype, DType)
        and isinstance(t.shape, (tuple, list))
        and all(isinstance(d, SymDim) or (type(d) is int and d >= 0) for d in t.shape)
    )


def _short(value, limit: int = 80) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 (a malformed value's repr may fail any way)
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_users(graph) -> None:
    uses: dict[int, Counter] = {}  # id(value) -> how often each node (by id) reads it
    for node in graph.nodes:
        for v in node.inputs:
            uses.setdefault(id(v), Counter())[id(node)] += 1
    for node in graph.nodes:
        for v in node.outputs:
            recorded = Counter(id(u) for u in v.users)
            if recorded != uses.get(id(v), Counter()):
                raise GraphError(f"the users of %{v.name} do not match the nodes that read it")
