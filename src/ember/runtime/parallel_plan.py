"""Scheduling a graph for the parallel executor (runtime/parallel.py): `plan` and `ParallelPlan`.

List scheduling onto as many workers as the machine has cores: call nodes in order of their
longest path to the end (their *rank*), each placed on the worker where it would finish first,
counting a hand-off wherever an input comes from another worker, and stretching each node by its
pair factor (what sharing the cores costs it; runtime/parallel_cost.py). A node the model marks
*exclusive* (a kernel that already takes every core, a random draw, whose order is part of the
result, a control op) starts only when every other worker is idle, and they wait for it; random
draws also keep the graph's order among themselves. The plan is kept only if its predicted time,
fork/join included, beats the sequential estimate by `MARGIN`.

Invariant: a node waits only for nodes scheduled before it, and each worker's list is in
scheduling order, so the workers can never wait on each other in a cycle.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from ..graph.printer import format_node
from ..symbolic import SymDim
from .parallel_cost import Calibration, calibrate, estimate

__all__ = ["MARGIN", "ParallelPlan", "plan"]

MARGIN = 0.10  # a parallel plan must be predicted at least this much faster than sequential


@dataclass
class ParallelPlan:
    """Which worker runs which nodes, in what order, what each waits for, and why."""

    graph_name: str
    parallel: bool
    reason: str
    workers: list = field(default_factory=list)  # per worker: node positions, in run order
    waits: dict = field(default_factory=dict)  # node position -> positions on other workers
    sequential_s: float = 0.0
    parallel_s: float = 0.0
    labels: dict = field(default_factory=dict)  # node position -> printed node
    names: dict = field(default_factory=dict)  # node position -> its first output's %name
    # "python": the workers' lists run by runtime/parallel.py; "c": every node a C step, run by
    # runtime/cgraph.py, whose threads claim ready nodes in ``order`` (the lists are the model's)
    runner: str = "python"
    order: list = field(default_factory=list)  # call node positions, highest rank first

    @property
    def predicted_speedup(self) -> float:
        return self.sequential_s / self.parallel_s if self.parallel_s else 1.0

    def __str__(self) -> str:
        mode = "parallel" if self.parallel else "sequential"
        if self.parallel and self.runner == "c":
            mode = "the C graph runner" + (" on one thread" if len(self.workers) < 2 else "")
        head = (
            f"parallel plan of {self.graph_name}: {mode} ({self.reason}); predicted "
            f"sequential {self.sequential_s * 1e6:.0f} us, parallel {self.parallel_s * 1e6:.0f} us "
            f"(x{self.predicted_speedup:.2f})"
        )
        if not self.parallel:
            return head
        lines = [head]
        for w, positions in enumerate(self.workers):
            lines.append(f"  worker {w}{' (caller)' if w == 0 else ''}: {len(positions)} nodes")
            for p in positions:
                after = sorted(self.waits.get(p, ()))
                waits = ", ".join(self.names.get(q, f"#{q}") for q in after)
                note = f"   [waits for {waits}]" if after else ""
                lines.append(f"    {self.labels.get(p, f'node #{p}')}{note}")
        return "\n".join(lines)


def _concrete(graph) -> bool:
    return not any(
        isinstance(d, SymDim) for n in graph.nodes for v in n.outputs for d in v.type.shape
    )


def plan(
    graph,
    calibration: Calibration | None = None,
    *,
    workers: int | None = None,
    force=False,
    measured: dict | None = None,
) -> ParallelPlan:
    """Schedule ``graph``'s call nodes (see the module docstring). ``calibration``: the
    machine's (`parallel_cost.calibrate`) unless given; ``workers``: its core count unless
    given; ``force=True`` keeps a schedule that uses several workers even when it is predicted
    slower (for tests and measurements); ``measured``: node position -> (seconds in generated
    code, seconds in a worker) timed on this machine (`cgraph.measure_nodes`), used instead of
    the calibration's tables for those nodes."""
    calibration = calibration or calibrate()
    workers = max(1, workers or calibration.cores)
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    calls = [n for n in graph.nodes if n.kind == "call"]
    labels = {position[id(n)]: format_node(n) for n in calls}
    names = {position[id(n)]: f"%{n.name}" for n in calls}
    result = ParallelPlan(
        graph.name, False, "", labels=labels, names=names, runner=calibration.runner
    )
    if not _concrete(graph):
        result.reason = "symbolic shapes: sizes unknown until run time"
        return result
    measured = measured or {}
    estimates = {id(n): estimate(n, calibration, measured.get(position[id(n)])) for n in calls}
    result.sequential_s = sum(e.seconds for e in estimates.values())
    # (the C runner's steps run on one thread: a node takes its worker time there)
    alone = {
        k: e.worker_seconds if calibration.runner == "c" else e.seconds
        for k, e in estimates.items()
    }
    # (on one thread, a step has the pool to itself)
    one = {
        k: e.alone_seconds if e.alone_seconds is not None else alone[k]
        for k, e in estimates.items()
    }
    if workers == 1 or len(calls) < 2:
        result.reason = "one worker" if workers == 1 else "fewer than two nodes"
        result.parallel_s = result.sequential_s
        return _on_one_thread(result, calls, one, calibration, position)
    preds = _dependencies(graph, calls)
    duration = {
        k: alone[k] + calibration.step_s
        if e.exclusive
        else alone[k] * e.factor + calibration.step_s
        for k, e in estimates.items()
    }
    worker_of, waits, lists, makespan, order = _list_schedule(
        calls, preds, duration, estimates, workers, calibration.handoff_s, position
    )
    result.parallel_s = makespan + calibration.fork_s
    result.workers = [[position[id(n)] for n in nodes] for nodes in lists]
    result.order = [position[id(n)] for n in order]
    result.waits = {position[k]: {position[id(p)] for p in ps} for k, ps in waits.items() if ps}
    used = sum(1 for nodes in lists if nodes)
    gain = 1 - result.parallel_s / result.sequential_s if result.sequential_s else 0.0
    if used < 2:
        result.reason = "no independent work worth a hand-off"
        return _on_one_thread(result, order, one, calibration, position)
    elif force:
        result.parallel, result.reason = True, f"forced; predicted gain {gain:+.0%}"
    elif gain < MARGIN:
        result.reason = f"predicted gain {gain:+.0%} is below the {MARGIN:.0%} margin"
    else:
        result.parallel, result.reason = True, f"predicted gain {gain:+.0%}"
    if not result.parallel:
        result.workers, result.waits, result.order = [], {}, []
        single = _on_one_thread(result, order, one, calibration, position)
        if single.parallel and single.parallel_s < makespan + calibration.fork_s:
            return single
    return result


def _on_one_thread(result: ParallelPlan, order, alone: dict, calibration, position):
    """``result`` turned into a plan running every node in ``order`` on the calling thread
    with the C graph runner (``alone``: each node's time there, its kernel sharing its work
    over the pool as in generated code), where that is predicted faster than generated code by
    `MARGIN` (no Python runs between the nodes: graphs of small nodes gain most); else
    ``result`` unchanged (its workers cleared)."""
    result.workers, result.waits, result.order = [], {}, []
    if calibration.runner != "c" or not result.sequential_s:
        return result
    seconds = calibration.fork_s + sum(alone[id(n)] + calibration.step_s for n in order)
    gain = 1 - seconds / result.sequential_s
    if gain < MARGIN:
        return result
    result.parallel, result.parallel_s = True, seconds
    result.reason = f"one thread, no Python between nodes: predicted gain {gain:+.0%}"
    result.workers = [[position[id(n)] for n in order]]
    result.order = list(result.workers[0])
    return result


def _dependencies(graph, calls) -> dict:
    """Each call node's predecessors: the call nodes making its inputs, and for a random draw
    or a call with an effect (a collective) the previous one (draws keep the graph's order, so
    the same numbers come out; collectives start in the same order on every rank)."""
    preds = {id(n): {v.node for v in n.inputs if v.node.kind == "call"} for n in calls}
    previous = None
    for n in calls:
        if n.op.kind in ("random", "control") or n.op.effect is not None:
            if previous is not None:
                preds[id(n)].add(previous)
            previous = n
    return preds


def _list_schedule(calls, preds, duration, estimates, workers, handoff, position):
    successors: dict = {id(n): [] for n in calls}
    for n in calls:
        for p in preds[id(n)]:
            successors[id(p)].append(n)
    rank: dict = {}
    for n in reversed(calls):  # graph order is topological
        rank[id(n)] = duration[id(n)] + max((rank[id(s)] for s in successors[id(n)]), default=0)
    missing = {id(n): len(preds[id(n)]) for n in calls}
    ready = [(-rank[id(n)], position[id(n)], n) for n in calls if not missing[id(n)]]
    heapq.heapify(ready)
    free = [0.0] * workers
    last: list = [None] * workers
    barrier: list = [None] * workers  # an exclusive node a worker's next node must wait for
    worker_of, finish, waits = {}, {}, {}
    lists: list = [[] for _ in range(workers)]
    order = []
    while ready:
        _, _, node = heapq.heappop(ready)
        order.append(node)
        key = id(node)
        exclusive = estimates[key].exclusive

        def start_on(w, node=node, exclusive=exclusive):
            start = free[w]
            for p in preds[id(node)]:
                start = max(start, finish[id(p)] + (handoff if worker_of[id(p)] != w else 0.0))
            if exclusive:  # every other worker must be done first
                for o in range(workers):
                    if o != w and last[o] is not None:
                        start = max(start, free[o] + handoff)
            return start

        best = min(range(workers), key=lambda w: (start_on(w) + duration[key], w))
        start = start_on(best)
        end = start + duration[key]
        deps = {p for p in preds[key] if worker_of[id(p)] != best}
        if barrier[best] is not None:
            deps.add(barrier[best])
            barrier[best] = None
        if exclusive:
            for o in range(workers):
                if o != best:
                    if last[o] is not None:
                        deps.add(last[o])
                    free[o] = max(free[o], end + handoff)
                    barrier[o] = node
        worker_of[key], finish[key], waits[key] = best, end, deps
        free[best], last[best] = end, node
        lists[best].append(node)
        for s in successors[key]:
            missing[id(s)] -= 1
            if not missing[id(s)]:
                heapq.heappush(ready, (-rank[id(s)], position[id(s)], s))
    return worker_of, waits, lists, max(finish.values(), default=0.0), order
