"""Loop unrolling: ``unroll_loops(graph, max_trips=16) -> (graph, changed)``.

This module owns deciding when a loop node has a static trip count and replacing such a loop
by straight-line copies of its body, so that later passes (folding, fusion, memory planning)
see every iteration as ordinary nodes.

A loop op declares how it unrolls as its ``unroll`` rule (``scan`` and ``while_loop``:
control/unroll.py says when their trip counts are static and what an iteration is); this
module drives the rules and gives them the tools: compile-time values of outer values
(`Folder`), inlining a body (`inline`), and replacing a loop by its copies (`replace_loop`).

Copies are named after the loop and the iteration: the body value ``%3 = mul(...)`` of loop
``%0`` becomes ``%loop0_it2_mul`` in iteration 2 (``scan5_it0_tanh`` for a scan). Lifted
(closed-over) operands are the loop node's own operands, so every copy reads them directly.

Nested control flow: the copies land where the loop was and are visited next, so a loop in an
unrolled body is unrolled in turn when it qualifies, and a ``cond`` stays a ``cond``. Loops
inside a subgraph that stays (a cond branch, the body of a loop too long to unroll) are
unrolled in a rebuilt copy of that subgraph, which replaces the attribute: subgraphs are never
changed in place (graph/subgraph.py's invariant), since nodes may share them.

The pass rewrites ``graph`` in place and returns it; the graph's inputs and outputs keep their
number, order and types. A loop output that is a graph output never becomes an outer value
(an input, a constant, another output): a ``copy`` node gives it its own array.
"""

from __future__ import annotations

import numpy as np

from ..graph.ir import Graph, Node, Value
from ..graph.rewrite import is_pure
from ..ops.copies import COPY
from ..symbolic import has_symbols

__all__ = ["Folder", "call", "fits", "inline", "replace_loop", "replay", "scope_of", "unroll_loops"]

# compile-time evaluation is for loop counters and bounds: small values, short chains
MAX_FOLDED_ELEMENTS = 1 << 12
MAX_FOLD_DEPTH = 64


def unroll_loops(graph: Graph, max_trips: int = 16) -> tuple[Graph, bool]:
    """Unroll every loop of ``graph`` with a static trip count of at most ``max_trips`` (see the
    module docstring). Rewrites ``graph`` in place; returns it and whether anything changed."""
    folder = Folder()
    changed = False
    position = 0
    while position < len(graph.nodes):
        node = graph.nodes[position]
        if node.kind == "call" and node.op.unroll is not None:
            erased_before = node.op.unroll(graph, node, max_trips, folder)
            if erased_before is not None:
                changed = True
                # the copies start where the loop was, less the dead operands erased before it:
                # loops among the copies come next
                position -= erased_before
                continue
        if node.kind == "call":
            changed |= _unroll_inside(node, max_trips)
        position += 1
    return graph, changed


unroll_loops.name = "unroll"


def fits(array: np.ndarray, value: Value) -> bool:
    """Whether ``array`` has ``value``'s shape and dtype."""
    return array.shape == tuple(value.shape) and array.dtype == value.dtype.np


class Folder:
    """Compile-time values of outer-graph values: constants, and pure non-control calls of
    small static shape on such values, computed with the reference kernels (memoized)."""

    def __init__(self):
        self._memo: dict[int, tuple[Value, np.ndarray | None]] = {}

    def value(self, v: Value, depth: int = 0) -> np.ndarray | None:
        hit = self._memo.get(id(v))
        if hit is not None and hit[0] is v:  # the value is kept alive, so its id is not reused
            return hit[1]
        result = self._compute(v, depth)
        self._memo[id(v)] = (v, result)
        return result

    def _compute(self, v: Value, depth: int) -> np.ndarray | None:
        node = v.node
        if depth > MAX_FOLD_DEPTH or has_symbols(v.shape):
            return None
        if int(np.prod(v.shape, dtype=np.int64)) > MAX_FOLDED_ELEMENTS:
            return None
        if node.kind == "constant":
            return node.graph.constants[node.name]
        if node.kind != "call" or node.op.kind in ("control", "random") or node.op.effect:
            return None
        if has_symbols(node.attrs):
            return None
        args = [self.value(u, depth + 1) for u in node.inputs]
        if any(a is None for a in args):
            return None
        try:
            with np.errstate(all="ignore"):
                result = node.op.kernel(*args, **node.attrs)
        except Exception:  # noqa: BLE001  (any kernel failure means: not known at compile time)
            return None
        results = (result,) if node.op.num_outputs == 1 else tuple(result)
        array = np.asarray(results[v.index])
        return array if fits(array, v) else None


# ------------------------------------------------------------------------------ shared


def scope_of(node: Node, kind: str) -> str:
    """The prefix of a loop's copies: its value name, or ``kind`` (``loop``, ``scan``) and its
    number when numbered."""
    name = node.outputs[0].name
    return kind + name if name.isdigit() else name


def call(graph: Graph, op, inputs, attrs: dict, name: str) -> Value:
    """One new call node of ``op`` (an OpDef) named ``name``; its value."""
    return graph.add_call(op, inputs, attrs, names=[name]).outputs[0]


def replay(src: Graph, dst: Graph, env: dict, prefix: str, only=None, outputs=None) -> list:
    """Copy ``src``'s constant and call nodes (those in ``only`` when given) into ``dst`` at its
    insertion point, reading ``env`` (id of a ``src`` value -> ``dst`` value); returns the
    ``dst`` values of ``outputs`` (``src``'s outputs by default). Names: ``prefix`` + the
    value's name, or + the op name for numbered values; unchanged without a prefix (a copy)."""

    def name(node, v):
        return prefix + (node.target if prefix and v.name.isdigit() else v.name)

    for node in src.nodes:
        if node.kind == "input" or (only is not None and id(node) not in only):
            continue
        if node.kind == "constant":
            env[id(node.outputs[0])] = dst.add_constant(
                src.constants[node.name], name(node, node.outputs[0])
            )
            continue
        copy = dst.add_call(
            node.op,
            [env[id(v)] for v in node.inputs],
            node.attrs,
            out_types=[v.type for v in node.outputs],
            names=[name(node, v) for v in node.outputs],
        )
        env.update((id(old), new) for old, new in zip(node.outputs, copy.outputs))
    return [env[id(v)] for v in (src.outputs if outputs is None else outputs)]


def inline(body: Graph, graph: Graph, inputs: list[Value], prefix: str) -> list[Value]:
    env = {id(v): x for v, x in zip(body.inputs, inputs, strict=True)}
    return replay(body, graph, env, prefix)


def replace_loop(graph: Graph, node: Node, start: int, finals: list[Value]) -> int:
    """Make the loop's readers read ``finals`` (the copies made since ``start``), erase the loop,
    then the copies and the loop's former operands that nothing reads any more (an init
    constant, a bound computed for the cond): pure ones only. Returns how many of those
    operands (all defined before ``start``) were erased."""
    operands = [v.node for v in node.inputs]
    made = graph.nodes[start : graph.nodes.index(node)]
    made_ids = {id(n) for n in made}
    for old, new in zip(node.outputs, finals, strict=True):
        returned = any(v is old for v in graph.outputs)
        if returned and (
            id(new.node) not in made_ids
            or new.node.kind == "constant"
            or any(v is new for v in graph.outputs)
        ):
            # a graph output gets its own array: not an input's, a constant's or another output's
            with graph.inserting_before(node):
                new = call(graph, COPY, [new], {}, old.name + "_unrolled")
            made.append(new.node)
        graph.replace_all_uses(old, new)
    graph.erase_node(node)
    returned_ids = {id(v) for v in graph.outputs}
    erased: set[int] = set()

    def erase_if_dead(candidate: Node) -> bool:
        # a random draw advances its generator even when nothing reads it: it stays
        if id(candidate) in erased or candidate.kind == "input" or not is_pure(candidate):
            return False
        if any(v.users or id(v) in returned_ids for v in candidate.outputs):
            return False
        graph.erase_node(candidate)
        erased.add(id(candidate))
        return True

    for copy in reversed(made):  # readers before producers: dead chains go in one sweep
        erase_if_dead(copy)
    erased_operands = 0
    while operands:
        producer = operands.pop()
        if erase_if_dead(producer):
            erased_operands += 1
            operands.extend(v.node for v in producer.inputs)
    return erased_operands


def _has_loops(graph: Graph) -> bool:
    return any(
        n.kind == "call"
        and (
            n.op.unroll is not None
            or any(isinstance(a, Graph) and _has_loops(a) for a in n.attrs.values())
        )
        for n in graph.nodes
    )


def _unroll_inside(node: Node, max_trips: int) -> bool:
    """Unroll the loops inside the subgraphs of a node that stays (a cond, a long loop); each
    changed subgraph is a rebuilt copy put in the node's attributes."""
    rebuilt = {}
    for key, sub in node.attrs.items():
        if isinstance(sub, Graph) and _has_loops(sub):
            copy, changed = unroll_loops(_copy(sub), max_trips)
            if changed:
                rebuilt[key] = copy
    if rebuilt:
        node.attrs = {**node.attrs, **rebuilt}
    return bool(rebuilt)


def _copy(graph: Graph) -> Graph:
    new = Graph(graph.name)
    env = {id(v): new.add_input(v.type, v.name) for v in graph.inputs}
    new.set_outputs(replay(graph, new, env, ""))
    return new
