"""How ``scan`` and ``while_loop`` unroll themselves: their ``unroll`` rules, which
transforms/unroll.py's pass calls for every loop node (it owns the driver, the copying and the
clean-up; these own when a trip count is static and what an iteration is).

* ``scan`` is static when its sequences' leading length is an int (not a symbolic size) of at
  most ``max_trips``. Step ``t`` slices ``x[t]`` (a ``getitem`` view) and inlines the body; the
  ``ys`` are stacked at the end (``y[None]`` views joined by one ``concat``). A zero-length scan
  passes its carries through and returns empty constants (left alone if a ``y`` has a symbolic
  size, which no constant can have).
* ``while_loop`` (and ``fori_loop``, built on it) is static when its *counter slice* is: the
  carries the cond reads, closed under the carries and lifted operands the body computes them
  from. Each slice operand must be computable at compile time (a constant, possibly through a
  few pure calls on constants: `transforms.unroll.Folder`), and the cond and body restricted to
  the slice are run with the reference interpreter for at most ``max_trips + 1`` tests. A loop
  that stops within ``max_trips`` is unrolled that many times and its cond dropped; every other
  loop is left as it is. Each iteration's copy reads the simulated slice values as constants,
  so in iteration ``k`` of a ``fori_loop`` the counter is the constant ``k`` (and a nested loop
  whose bounds come from it becomes static too).

A rule returns None (the loop stays) or the number of the loop's former operands erased before
it (transforms/unroll.py `replace_loop`).
"""

from __future__ import annotations

import numpy as np

from ..errors import EmberError
from ..graph import interpreter
from ..graph.ir import Graph, Node, Value
from ..graph.rewrite import is_pure
from ..ops.concat import CONCAT
from ..ops.indexing import GETITEM
from ..symbolic import has_symbols
from ..transforms.unroll import call, fits, inline, replace_loop, replay, scope_of

__all__ = ["unroll_scan", "unroll_while"]


def unroll_scan(graph: Graph, node: Node, max_trips: int, folder) -> int | None:
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
    scope = scope_of(node, "scan")
    start = graph.nodes.index(node)
    steps = []
    with graph.inserting_before(node):
        for t in range(length):
            prefix = f"{scope}_it{t}_"
            sliced = [
                call(graph, GETITEM, [x], {"index": (t,)}, prefix + body.inputs[nc + j].name)
                for j, x in enumerate(xs)
            ]
            outs = inline(body, graph, [*carries, *sliced, *lifted], prefix)
            carries = outs[:nc]
            steps.append(outs[nc:])
        ys = [
            _stack(graph, [step[k] for step in steps], y_types[k], f"{scope}_y{k}")
            for k in range(len(y_types))
        ]
    return replace_loop(graph, node, start, [*carries, *ys])


def _stack(graph: Graph, values: list[Value], y_type, name: str) -> Value:
    if not values:
        empty = np.empty((0, *y_type.shape), dtype=y_type.dtype.np)
        return graph.add_constant(empty, name)
    rows = [
        call(graph, GETITEM, [v], {"index": (None,)}, f"{name}_row{t}")
        for t, v in enumerate(values)
    ]
    if len(rows) == 1:
        return rows[0]
    return call(graph, CONCAT, rows, {"axis": 0}, name)


def unroll_while(graph: Graph, node: Node, max_trips: int, folder) -> int | None:
    body = node.attrs["body"]
    n = len(body.outputs)
    plan = _trip_count(node, n, max_trips, folder)
    if plan is None:
        return None
    trips, history = plan
    scope = scope_of(node, "loop")
    carries, lifted = list(node.inputs[:n]), list(node.inputs[n:])
    start = graph.nodes.index(node)
    with graph.inserting_before(node):
        for k in range(trips):
            prefix = f"{scope}_it{k}_"
            for p, array in history[k].items():
                # the simulated value: the copy's counter is a constant later passes can fold
                carries[p] = graph.add_constant(array, prefix + body.inputs[p].name)
            carries = inline(body, graph, [*carries, *lifted], prefix)
    return replace_loop(graph, node, start, carries)


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
                    if not fits(array, body.inputs[p]):
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
    piece.set_outputs(replay(graph, piece, env, "", needed, outputs))
    return piece
