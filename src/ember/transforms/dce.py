"""Dead-code elimination: remove pure nodes (and constants) whose values nothing reads and the
graph does not return. Inputs always stay: they are how the graph is fed."""

from __future__ import annotations

from ..graph.ir import Graph
from ..graph.rewrite import Pass, erase_if_dead

__all__ = ["DCE", "eliminate_dead_code"]


def eliminate_dead_code(graph: Graph) -> tuple[Graph, bool]:
    changed = False
    returned = {id(v) for v in graph.outputs}
    with graph.erasing():
        for node in reversed(list(graph.nodes)):  # users before producers: one sweep
            changed |= erase_if_dead(graph, node, returned)
    return graph, changed


DCE = Pass("dce", eliminate_dead_code, level=1, doc="remove values nothing reads")
