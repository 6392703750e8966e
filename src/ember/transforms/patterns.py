"""Subgraphs that one op computes, replaced by that op's call: each op's `PatternRule`
(ops/_rules.py ``pattern``) says which ops such a subgraph ends in and matches it, refusing
wherever a condition of the equivalence does not hold (attention: ops/_attention_pattern.py,
the product, scale, mask, softmax and product ONNX exporters write). The pass asks the rules
of a node's op at every call node, in graph order; a match adds the op's call before the node,
its readers read the new value, and the nodes nothing reads any more are erased.

Runs before fusion (which would take the subgraph's elementwise ops into loops). An op may
round differently from its subgraph (attention scales q where exporters scale the scores), so
the pass's differential check compares within rounding.
"""

from __future__ import annotations

from ..graph.ir import Graph
from ..graph.rewrite import Pass, constant_value, erase_if_dead, replace_value
from ..ops._registry import REGISTRY

__all__ = ["PATTERNS", "rewrite_patterns"]

_by_root: dict = {}  # id(root op) -> [(the op, its PatternRule), ...]
_seen = [0]  # how many ops the table was built from (ops registered later extend it)


def _rules_by_root() -> dict:
    if _seen[0] != len(REGISTRY):
        table: dict = {}
        for op in list(REGISTRY.values()):
            rule = op.pattern
            for root in rule.roots if rule is not None else ():
                table.setdefault(id(root), []).append((op, rule))
        _by_root.clear()
        _by_root.update(table)
        _seen[0] = len(REGISTRY)
    return _by_root


def _erase_dead(graph: Graph, node, erased: set) -> None:
    """Erase ``node`` and then its producers while nothing reads them (ids into ``erased``)."""
    returned = {id(v) for v in graph.outputs}
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) not in erased and erase_if_dead(graph, n, returned):
            erased.add(id(n))
            stack.extend(v.node for v in n.inputs if v.node.kind == "call")


def rewrite_patterns(graph: Graph) -> tuple[Graph, bool]:
    table = _rules_by_root()
    if not table:
        return graph, False
    changed, erased = False, set()
    with graph.erasing():
        for node in list(graph.nodes):
            if node.kind != "call" or id(node) in erased:
                continue
            for op, rule in table.get(id(node.op), ()):
                build = rule.match(op, node, constant_value)
                if build is None:
                    continue
                with graph.inserting_before(node):
                    value = build(graph)
                if replace_value(graph, node.outputs[0], value):
                    changed = True
                    _erase_dead(graph, node, erased)
                else:  # the graph's outputs forbid it: what build added goes again
                    _erase_dead(graph, value.node, erased)
                break
    return graph, changed


PATTERNS = Pass(
    "patterns",
    rewrite_patterns,
    level=3,
    doc="subgraphs one op computes (each op's pattern rule), replaced by its call",
    rounds=True,
)
