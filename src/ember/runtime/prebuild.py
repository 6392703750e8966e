"""Building a graph's C kernels before its program is made: the code generator
(runtime/codegen.py) and the C graph runner (runtime/cgraph.py) build each node's kernel as they
reach it, one compiler run per kernel; `prebuild` first asks every node for the C sources it
will build (its op's ``c_sources`` rule, ops/_rules.py) and builds the missing ones together
(kernels/cbatch.py), so those per-node builds find their libraries on disk."""

from __future__ import annotations

from ..kernels.cbatch import build_together
from ..ops._registry import native_code
from ..ops.fused import lone_c_sources

__all__ = ["prebuild"]


def prebuild(graph, lone_loops: bool = False) -> int:
    """Build the kernels of ``graph``'s nodes together; ``lone_loops``: also the loops of one
    elementwise op that the C graph runner makes of nodes no fused group took. Returns how
    many sources were built."""
    requests = []
    for node in graph.nodes:
        if node.kind != "call" or not native_code(node):
            continue
        rule = node.op.c_sources
        lone = node.op.c is not None or node.op.reduction is not None
        if rule is None and lone_loops and lone:
            rule = lone_c_sources
        if rule is not None:
            requests += rule(node)
    return build_together(requests) if len(requests) > 1 else 0
