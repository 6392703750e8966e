"""Loop unrolling: ``unroll_loops(graph, max_trips=16) -> (graph, changed)``.

This module owns deciding when a loop node has a static trip count and replacing such a loop
by straight-line copies of its body, so that later passes (folding, fusion, memory planning)
see every iteration as ordinary nodes.

* ``scan`` is static when its sequences' leading length is an int (not a symbolic size) of at
  most ``max_trips``. Step ``t`` slices ``x[t]`` (a ``getitem`` view) and inlines the body; the
  ``ys`` are stacked at the end (``y[None]`` views joined by one ``concat``). A zero-length scan
  passes its carries through and returns empty constants (left alone if a ``y`` has a symbolic
  size, which no constant can have).
* ``while_loop`` (and ``fori_loop``, built on it) is static when its *counter slice* is: the
  carries the cond reads, closed under the carries and lifted operands the body computes them
  from. Each slice operand must be computable at compile time (a constant, possibly through a
  few pure calls on constants: `_Folder`), and the cond and body restricted to the slice are
  run with the reference interpreter for at most ``max_trips + 1`` tests. A loop that stops
  within ``max_trips`` is unrolled that many times and its cond dropped; every other loop is
  left as it is. Each iteration's copy reads the simulated slice values as constants, so in
  iteration ``k`` of a ``fori_loop`` the counter is the constant ``k`` (and a nested loop whose
  bounds come from it becomes static too).

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

from ..errors import EmberError
from ..graph import interpreter
from ..graph.ir import Graph, Node, Value
from ..graph.rewrite import is_pure
from ..ops._registry import REGISTRY
from ..symbolic import has_symbols

__all__ = ["unroll_loops"]

LOOPS = ("while_loop", "scan")
# compile-time evaluation is for loop counters and bounds: small values, short chains
MAX_FOLDED_ELEMENTS = 1 << 12
MAX_FOLD_DEPTH = 64


def unroll_loops(graph: Graph, max_trips: int = 16) -> tuple[Graph, bool]:
    """Unroll every loop of ``graph`` with a static trip count of at most ``max_trips`` (see the
    module docstring). Rewrites ``graph`` in place; returns it and whether anything changed."""
    folder = _Folder()
    changed = False
    position = 0
    while position < len(graph.nodes):
        node = graph.nodes[position]
        if node.kind == "call" and node.op.name in LOOPS:
            unroll = _unroll_scan if node.op.name == "scan" else _unroll_while
            erased_before = unroll(graph, node, max_trips, folder)
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


# ------------------------------------------------------------------------------ scan


def _unroll_scan(graph: Graph, node: Node, max_trips: int, folder) -> int | None:
    body = node.attrs["body"]
    nc, nx = node.attrs["num_carries"], node.attrs["num_xs"]
    carries = list(node.inputs[:nc])
    xs = node.inputs[nc : nc + nx]
    lifted = list(node.inputs[nc + nx :])
    length = xs[0].shape[0]
    if not isinstance(length, int) or length > max_trips:
        return None
    y_types = [v.type for v in body.outputs[nc:]]
    if length == 0 and any(has_symbols(t.shape) for t in y_types):
        return None
    scope = _scope(node)
    start = graph.nodes.index(node)
    steps = []
    with graph.inserting_before(node):
        for t in range(length):
            prefix = f"{scope}_it{t}_"
            sliced = [
                _call(graph, "getitem", [x], {"index": (t,)}, prefix + body.inputs[nc + j].name)
                for j, x in enumerate(xs)
            ]
            outs = _inline(body, graph, [*carries, *sliced, *lifted], prefix)
            carries = outs[:nc]
            steps.append(outs[nc:])
        ys = [
            _stack(graph, [step[k] for step in steps], y_types[k], f"{scope}_y{k}")
            for k in range(len(y_types))
        ]
    return _replace_loop(graph, node, start, [*carries, *ys])


def _stack(graph: Graph, values: list[Value], y_type, name: str) -> Value:
    if not values:
        empty = np.empty((0, *y_type.shape), dtype=y_type.dtype.np)
        return graph.add_constant(empty, name)
    rows = [
        _call(graph, "getitem", [v], {"index": (None,)}, f"{name}_row{t}")
        for t, v in enumerate(values)
    ]
    if len(rows) == 1:
        return rows[0]
    return _call(graph, "concat", rows, {"axis": 0}, name)


# ------------------------------------------------------------------------------ while_loop


def _unroll_while(graph: Graph, node: Node, max_trips: int, folder) -> int | None:
    body = node.attrs["body"]
    n = len(body.outputs)
    plan = _trip_count(node, n, max_trips, folder)
    if plan is None:
        return None
    trips, history = plan
    scope = _scope(node)
    carries, lifted = list(node.inputs[:n]), list(node.inputs[n:])
    start = graph.nodes.index(node)
    with graph.inserting_before(node):
        for k in range(trips):
            prefix = f"{scope}_it{k}_"
            for p, array in history[k].items():
                # the simulated value: the copy's counter is a constant later passes can fold
                carries[p] = graph.add_constant(array, prefix + body.inputs[p].name)
            carries = _inline(body, graph, [*carries, *lifted], prefix)
    return _replace_loop(graph, node, start, carries)


def _trip_count(node: Node, n: int, max_trips: int, folder):
    """(trips, history) when the loop stops within ``max_trips`` iterations, where
    ``history[k]`` maps each counter-slice carry position to its array at the start of
    iteration ``k``; None when the trip count is not static or too high."""
    cond, body = node.attrs["cond"], node.attrs["body"]
    positions: set[int] = set()
    todo = list(_inputs_read(cond, cond.outputs))
    while todo:
        p = todo.pop()
        if p not in positions:
            positions.add(p)
            if p < n:  # a carry: the body computes its next value from these
                todo.extend(_inputs_read(body, [body.outputs[p]]))
    order = sorted(positions)
    initial = [folder.value(node.inputs[p]) for p in order]
    if any(a is None for a in initial):
        return None
    carried = [p for p in order if p < n]
    test = _slice(cond, order, cond.outputs)
    step = _slice(body, order, [body.outputs[p] for p in carried])
    if test is None or step is None:
        return None
    state = dict(zip(order, initial))
    history = []
    try:
        with np.errstate(all="ignore"):
            for trips in range(max_trips + 1):
                if not bool(interpreter.run(test, [state[p] for p in order])[0]):
                    return trips, history
                if trips == max_trips:
                    return None
                history.append({p: np.array(state[p], copy=True) for p in carried})
                new = interpreter.run(step, [state[p] for p in order])
                for p, array in zip(carried, new):
                    if not _fits(array, body.inputs[p]):
                        return None
                    state[p] = array
    except EmberError:  # a kernel that fails on these values: the loop stays, and fails at run
        return None
    return None


def _inputs_read(graph: Graph, outputs) -> set[int]:
    """Positions of the inputs of ``graph`` that ``outputs`` are computed from."""
    position = {id(v): i for i, v in enumerate(graph.inputs)}
    seen: set[int] = set()
    found: set[int] = set()
    stack = list(outputs)
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if id(v) in position:
            found.add(position[id(v)])
        stack.extend(v.node.inputs)
    return found


def _slice(graph: Graph, positions: list[int], outputs) -> Graph | None:
    """A graph of ``graph``'s inputs at ``positions`` computing ``outputs`` with only the nodes
    they need; None when a needed node draws random numbers or has symbolic attributes."""
    needed: set[int] = set()
    stack = [v.node for v in outputs]
    while stack:
        node = stack.pop()
        if id(node) not in needed:
            needed.add(id(node))
            stack.extend(v.node for v in node.inputs)
    for node in graph.nodes:
        if id(node) in needed and node.kind == "call":
            if not is_pure(node) or has_symbols(node.attrs):
                return None
    piece = Graph(f"{graph.name}_slice")
    env = {
        id(graph.inputs[p]): piece.add_input(graph.inputs[p].type, graph.inputs[p].name)
        for p in positions
    }
    piece.set_outputs(_replay(graph, piece, env, "", needed, outputs))
    return piece


def _fits(array: np.ndarray, value: Value) -> bool:
    return array.shape == tuple(value.shape) and array.dtype == value.dtype.np


class _Folder:
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
        if node.kind != "call" or node.op.kind in ("control", "random"):
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
        return array if _fits(array, v) else None


# ------------------------------------------------------------------------------ shared


def _scope(node: Node) -> str:
    """The prefix of a loop's copies: its value name, or the op and its number when numbered."""
    name = node.outputs[0].name
    if name.isdigit():
        return ("scan" if node.op.name == "scan" else "loop") + name
    return name


def _call(graph: Graph, op: str, inputs, attrs: dict, name: str) -> Value:
    return graph.add_call(REGISTRY[op], inputs, attrs, names=[name]).outputs[0]


def _replay(src: Graph, dst: Graph, env: dict, prefix: str, only=None, outputs=None) -> list:
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


def _inline(body: Graph, graph: Graph, inputs: list[Value], prefix: str) -> list[Value]:
    env = {id(v): x for v, x in zip(body.inputs, inputs, strict=True)}
    return _replay(body, graph, env, prefix)


def _replace_loop(graph: Graph, node: Node, start: int, finals: list[Value]) -> int:
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
                new = _call(graph, "copy", [new], {}, old.name + "_unrolled")
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
            n.op.name in LOOPS
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
    new.set_outputs(_replay(graph, new, env, ""))
    return new
