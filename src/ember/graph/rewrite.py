"""What every graph pass shares: the pass convention, purity, and safe value replacement.

A pass is a function ``graph -> (graph, changed)`` (DESIGN.md principle 3) wrapped in a `Pass`
with a name and the level (O1..O3) from which pipelines include it. Passes rewrite the graph in
place and return it; they keep the graph's inputs and outputs (their number, order and types),
which is what lets a caller swap an optimized graph for the captured one without touching how
it is fed or how its outputs are used. Passes work on the top-level graph only: cond branches
and loop bodies are subgraphs they do not enter, so nothing moves across a control-flow
boundary.

A node is *pure* when running it twice, or not at all, changes nothing but its outputs: every
op except random draws (they advance a generator), ops with an ``effect`` rule (collectives:
they talk to the other ranks) and control-flow nodes whose subgraphs hold either. Only pure
nodes may be removed, merged or evaluated at compile time. `ordered_predecessors` gives, for
each node whose effect is ordered, the previous node of its channel: orders and schedules keep
those edges as if they were data (the ranks must start collectives in one order).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..symbolic import has_symbols
from .ir import Graph, Node, Value

__all__ = [
    "Pass",
    "constant_value",
    "has_effects",
    "is_pure",
    "ordered_predecessors",
    "replace_value",
]


@dataclass(frozen=True)
class Pass:
    """A named graph rewrite, ``run(graph) -> (graph, changed)``, in pipelines from ``level``."""

    name: str
    run: Callable[[Graph], tuple[Graph, bool]]
    level: int
    doc: str = ""
    # the rewrite rounds differently (it reassociates float arithmetic, as folding a scale into
    # weights does): the differential check compares within the dtype's rounding at the
    # outputs' scale, not within a fixed tolerance
    rounds: bool = False

    def __call__(self, graph: Graph) -> tuple[Graph, bool]:
        return self.run(graph)


def is_pure(node: Node) -> bool:
    if node.kind != "call":
        return True
    if node.op.kind == "random" or node.op.effect is not None:
        return False
    subgraphs = [a for a in node.attrs.values() if isinstance(a, Graph)]
    return all(is_pure(n) for g in subgraphs for n in g.nodes)


def has_effects(graph: Graph) -> bool:
    """Whether a call of ``graph`` has an ``effect`` rule (ops/_rules.py)."""
    return any(n.kind == "call" and n.op.effect is not None for n in graph.nodes)


def ordered_predecessors(nodes) -> dict:
    """id(node) -> the previous node of the same ordered effect channel, for each call of
    ``nodes`` (in their order) whose op's effect is ordered."""
    last: dict = {}
    previous: dict = {}
    for n in nodes:
        effect = n.op.effect if n.kind == "call" else None
        if effect is None or effect.ordered is None:
            continue
        if effect.ordered in last:
            previous[id(n)] = last[effect.ordered]
        last[effect.ordered] = n
    return previous


def replace_value(graph: Graph, old: Value, new: Value) -> bool:
    """Make every reader of ``old`` read ``new`` (same type); False, changing nothing, where that
    would make one array two graph outputs or an input an output twice, which callers that hand
    each output to a different owner cannot take, or where a returned ``old`` would become a
    graph input or a view of one: the caller's own array handed back as a result (``x * 1`` or
    ``x.clone()`` of an input must give a new tensor, as PyTorch's)."""
    if old.type != new.type:
        return False
    outputs = graph.outputs
    if old in outputs and new in outputs:  # (values compare by identity)
        return False
    if _root(new).node.kind == "input" and any(old in _view_chain(v) for v in outputs):
        return False
    graph.replace_all_uses(old, new)
    return True


def _view_chain(value: Value) -> list:
    """``value`` and what it views through view or aliasing ops (reshape, transpose, split,
    ...), down to the value that owns the memory."""
    chain = [value]
    while value.node.kind == "call" and (value.node.op.view or value.node.op.aliases):
        value = value.node.inputs[0]
        chain.append(value)
    return chain


def _root(value: Value) -> Value:
    return _view_chain(value)[-1]


def erase_if_dead(graph: Graph, node: Node, returned: set | None = None) -> bool:
    """Erase ``node`` when it is pure and none of its values is read or returned.
    ``returned``: the ids of the graph's outputs, when the caller asks about many nodes."""
    if node.kind == "input" or not is_pure(node):
        return False
    if returned is None:
        returned = {id(v) for v in graph.outputs}
    if any(v.users or id(v) in returned for v in node.outputs):
        return False
    graph.erase_node(node)
    return True


def replace_with_constant(graph: Graph, node: Node, array) -> Value:
    """Replace single-output ``node`` by a constant holding ``array`` (which the caller made:
    the constant is frozen), under the same value name (so a differential check can still find
    it), and erase it."""
    old = node.outputs[0]
    with graph.inserting_before(node):
        value = graph.add_constant(array, name=old.name + "_folded", frozen=True)
    graph.replace_all_uses(old, value)
    graph.erase_node(node)
    graph.constants[old.name] = graph.constants.pop(value.name)
    graph._taken.discard(value.name)
    value.name = old.name
    return value


def constant_value(value: Value):
    """The array ``value`` always holds when it is a constant or a broadcast of one (a read-only
    broadcast view, as the broadcast's kernel gives); None otherwise."""
    node = value.node
    if node.kind == "constant":
        return node.graph.constants[node.name]
    if node.kind == "call" and node.op.broadcast and not has_symbols(node.attrs):
        inner = constant_value(node.inputs[0])
        return None if inner is None else node.op.kernel(inner, **node.attrs)
    return None
