"""The parallel executor: independent nodes of a graph run at once on a small thread pool, only
where the calibrated cost model (runtime/parallel_cost.py) predicts a gain.

`plan(graph)` schedules the call nodes onto as many workers as the machine has cores, by list
scheduling: nodes in order of their longest path to the end (their *rank*), each placed on the
worker where it would finish first, counting a hand-off wherever an input comes from another
worker, and stretching each node by its pair factor (what sharing the cores costs it). A node
the model marks *exclusive* (a kernel that already takes every core, such as a large BLAS matmul
or a loop on ember's own pool, or a random draw, whose order is part of the result) starts only
when every other worker is idle, and they wait for it. The plan is kept only if its predicted
time, fork/join included, beats the sequential estimate by `MARGIN`; otherwise the program runs
the generated code (runtime/codegen.py), exactly as ``executor="codegen"``, so choosing
``executor="parallel"`` never costs more than the plan-time check. ``print(plan)`` shows the
workers' lists, what each waits for, and the predicted times.

`ParallelProgram(graph)` runs the plan: the calling thread is worker 0, the pool's threads the
others, each running its own list of nodes with the ops' kernels (or the C implementations their
``compile`` hooks give, as generated code does) and waiting on an Event per node another worker
needs. NumPy's kernels and the ctypes-called C loops release the GIL, so the lists run
concurrently. A value is freed after its last reader when all its readers are on one worker;
values read across workers live until the run ends. An exception on any worker stops the others
and is re-raised in the caller. One parallel run uses the pool at a time; a call made while
another runs (another thread) runs the generated code instead of waiting.
"""

from __future__ import annotations

import heapq
import queue
import threading
from dataclasses import dataclass, field

import numpy as np

from ..errors import EmberError
from ..graph.printer import format_node
from ..graph.symbolic import SymDim
from . import blas_threads
from .codegen import compile_graph
from .parallel_cost import Calibration, calibrate, estimate

__all__ = ["ParallelPlan", "ParallelProgram", "WorkerPool", "plan", "worker_pool"]

MARGIN = 0.10  # a parallel plan must be predicted at least this much faster than sequential


# ------------------------------------------------------------------------------------ pool
class WorkerPool:
    """Daemon threads that each run one function at a time for the caller (worker i+1 is
    thread i); ``lock`` is held by the run using them."""

    def __init__(self, threads: int):
        self.lock = threading.Lock()
        self._queues: list[queue.SimpleQueue] = []
        for i in range(threads):
            q: queue.SimpleQueue = queue.SimpleQueue()
            threading.Thread(
                target=_serve, args=(q,), name=f"ember-parallel-{i}", daemon=True
            ).start()
            self._queues.append(q)

    @property
    def size(self) -> int:
        return len(self._queues)

    def run_beside(self, main, *others) -> None:
        """Run ``others[i]`` on worker thread i while ``main`` runs on the calling thread; return
        when all are done, re-raising the first exception."""
        if len(others) > len(self._queues):
            raise EmberError(f"the pool has {self.size} threads, asked for {len(others)}")
        boxes = []
        for q, fn in zip(self._queues, others):
            box = [threading.Event(), None]
            q.put((fn, box))
            boxes.append(box)
        error = None
        try:
            main()
        except BaseException as exc:
            error = exc
        for done, _ in boxes:
            done.wait()
        error = error or next((box[1] for box in boxes if box[1] is not None), None)
        if error is not None:
            raise error


def _serve(q: queue.SimpleQueue) -> None:
    from . import blas_threads

    blas_threads.single_threaded().__enter__()  # for the thread's life: it is ember's own
    while True:
        fn, box = q.get()
        try:
            fn()
        except BaseException as exc:
            box[1] = exc
        finally:
            box[0].set()


_pool: dict = {}


def worker_pool() -> WorkerPool:
    """The process's pool: one thread fewer than the cores this process may use (the caller
    is a worker too), started at first use."""
    from .parallel_cost import _cores

    if "pool" not in _pool:
        _pool["pool"] = WorkerPool(max(1, _cores() - 1))
    return _pool["pool"]


# ------------------------------------------------------------------------------------ plan
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

    @property
    def predicted_speedup(self) -> float:
        return self.sequential_s / self.parallel_s if self.parallel_s else 1.0

    def __str__(self) -> str:
        mode = "parallel" if self.parallel else "sequential"
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
                after = self.waits.get(p)
                note = f"   [after {', '.join(f'#{q}' for q in sorted(after))}]" if after else ""
                lines.append(f"    #{p} {self.labels[p]}{note}")
        return "\n".join(lines)


def _concrete(graph) -> bool:
    return not any(
        isinstance(d, SymDim) for n in graph.nodes for v in n.outputs for d in v.type.shape
    )


def plan(
    graph, calibration: Calibration | None = None, *, workers: int | None = None, force=False
) -> ParallelPlan:
    """Schedule ``graph``'s call nodes (see the module docstring). ``calibration``: the
    machine's (`parallel_cost.calibrate`) unless given; ``workers``: its core count unless
    given; ``force=True`` keeps a schedule that uses several workers even when it is predicted
    slower (for tests and measurements)."""
    calibration = calibration or calibrate()
    workers = max(1, workers or calibration.cores)
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    calls = [n for n in graph.nodes if n.kind == "call"]
    labels = {position[id(n)]: format_node(n) for n in calls}
    result = ParallelPlan(graph.name, False, "", labels=labels)
    if not _concrete(graph):
        result.reason = "symbolic shapes: sizes unknown until run time"
        return result
    estimates = {id(n): estimate(n, calibration) for n in calls}
    result.sequential_s = sum(e.seconds for e in estimates.values())
    if workers == 1 or len(calls) < 2:
        result.reason = "one worker" if workers == 1 else "fewer than two nodes"
        result.parallel_s = result.sequential_s
        return result
    preds = _dependencies(graph, calls)
    duration = {
        k: e.seconds + calibration.step_s
        if e.exclusive
        else e.seconds * e.factor + calibration.step_s
        for k, e in estimates.items()
    }
    worker_of, waits, lists, makespan = _list_schedule(
        calls, preds, duration, estimates, workers, calibration.handoff_s, position
    )
    result.parallel_s = makespan + calibration.fork_s
    result.workers = [[position[id(n)] for n in nodes] for nodes in lists]
    result.waits = {position[k]: {position[id(p)] for p in ps} for k, ps in waits.items() if ps}
    used = sum(1 for nodes in lists if nodes)
    gain = 1 - result.parallel_s / result.sequential_s if result.sequential_s else 0.0
    if used < 2:
        result.reason = "no independent work worth a hand-off"
    elif force:
        result.parallel, result.reason = True, f"forced; predicted gain {gain:+.0%}"
    elif gain < MARGIN:
        result.reason = f"predicted gain {gain:+.0%} is below the {MARGIN:.0%} margin"
    else:
        result.parallel, result.reason = True, f"predicted gain {gain:+.0%}"
    if not result.parallel:
        result.workers, result.waits = [], {}
    return result


def _dependencies(graph, calls) -> dict:
    """Each call node's predecessors: the call nodes making its inputs, and for a random draw
    the previous one (draws keep the graph's order, so the same numbers come out)."""
    preds = {id(n): {v.node for v in n.inputs if v.node.kind == "call"} for n in calls}
    previous = None
    for n in calls:
        if n.op.kind in ("random", "control"):
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
    while ready:
        _, _, node = heapq.heappop(ready)
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
    return worker_of, waits, lists, max(finish.values(), default=0.0)


# ------------------------------------------------------------------------------------- run
@dataclass
class _Step:
    fn: object  # the kernel with its attributes bound, or the op's compiled implementation
    inputs: list  # env keys (ids of values)
    outputs: list
    single: bool  # one output (a NumPy scalar result is wrapped into a 0-d array)
    waits: list  # indices into the run's events
    signal: int | None  # the event this node sets, when another worker waits for it
    frees: list  # env keys whose last reader this is
    node: object


def _callable(node):
    hook = node.op.extra.get("compile")
    impl = hook(node) if hook is not None else None
    if impl is not None:
        return impl
    kernel, attrs = node.op.kernel, node.attrs
    return (lambda *arrays: kernel(*arrays, **attrs)) if attrs else kernel


def worker_steps(graph, workers: list, waits: dict) -> list[list[_Step]]:
    """The per-worker step lists of a schedule (``workers``: node positions per worker,
    ``waits``: node position -> positions it waits for on other workers)."""
    nodes = graph.nodes
    signalled = sorted({q for qs in waits.values() for q in qs})
    event_of = {q: i for i, q in enumerate(signalled)}
    readers: dict = {}  # value id -> (worker, index in its list) of each reader
    for w, positions in enumerate(workers):
        for i, p in enumerate(positions):
            for v in nodes[p].inputs:
                readers.setdefault(id(v), []).append((w, i))
    kept = {id(v) for v in graph.outputs}
    frees: dict = {}
    for key, where in readers.items():
        if key not in kept and len({w for w, _ in where}) == 1:
            frees.setdefault(max(where), []).append(key)
    steps = []
    for w, positions in enumerate(workers):
        steps.append(
            [
                _Step(
                    _callable(nodes[p]),
                    [id(v) for v in nodes[p].inputs],
                    [id(v) for v in nodes[p].outputs],
                    nodes[p].op.num_outputs == 1,
                    [event_of[q] for q in sorted(waits.get(p, ()))],
                    event_of.get(p),
                    frees.get((w, i), []),
                    nodes[p],
                )
                for i, p in enumerate(positions)
            ]
        )
    return steps


class _Run:
    """The shared state of one run: values by id, the events, and the abort flag."""

    __slots__ = ("env", "events", "failed")

    def __init__(self, env: dict, n_events: int):
        self.env = env
        self.events = [threading.Event() for _ in range(n_events)]
        self.failed = False

    def work(self, steps: list[_Step]) -> None:
        env, events = self.env, self.events
        step = None
        try:
            for step in steps:
                for e in step.waits:
                    events[e].wait()
                if self.failed:
                    return
                result = step.fn(*[env[k] for k in step.inputs])
                if step.single:
                    env[step.outputs[0]] = (
                        result if type(result) is np.ndarray else np.asarray(result)
                    )
                else:
                    for k, r in zip(step.outputs, result):
                        env[k] = r
                if step.signal is not None:
                    events[step.signal].set()
                for k in step.frees:
                    del env[k]
        except BaseException as exc:
            self.failed = True
            for e in events:  # wake every waiter: they see `failed` and stop
                e.set()
            if isinstance(exc, EmberError) or step is None:
                raise
            raise EmberError(
                f"kernel failed at {format_node(step.node)}: {exc}", op=step.node.op.name
            ) from exc


def _initial_env(graph, arrays) -> dict:
    if len(arrays) != len(graph.inputs):
        raise EmberError(
            f"graph {graph.name} takes {len(graph.inputs)} inputs, got {len(arrays)}", op="run"
        )
    env = {id(v): a for v, a in zip(graph.inputs, arrays)}
    for node in graph.nodes:
        if node.kind == "constant":
            env[id(node.outputs[0])] = graph.constants[node.name]
    return env


def run_steps(graph, steps: list[_Step], arrays) -> list:
    """Run one worker's steps on the calling thread (the whole graph when ``steps`` hold every
    node); returns the graph's outputs."""
    run = _Run(_initial_env(graph, arrays), 0)
    run.work(steps)
    return [run.env[id(v)] for v in graph.outputs]


class ParallelProgram:
    """``graph`` compiled for the parallel executor: ``program(*arrays)`` -> output arrays.
    ``plan`` says what runs where; ``source`` is the generated code that runs when the plan is
    sequential. ``inplace``: as for `codegen.compile_graph` (used by the sequential code)."""

    def __init__(
        self, graph, inplace: dict | None = None, *, calibration=None, force=False, schedule=None
    ):
        self.graph = graph
        if schedule is None:
            calibration = calibration or calibrate()
            workers = min(worker_pool().size + 1, calibration.cores)
            schedule = plan(graph, calibration, workers=workers, force=force)
        elif len(schedule.workers) > worker_pool().size + 1:
            raise EmberError(
                f"the schedule has {len(schedule.workers)} workers; this process's pool runs "
                f"{worker_pool().size + 1}",
                op="parallel",
            )
        self.plan = schedule  # ``schedule``: a ParallelPlan made elsewhere (tests, tools)
        self._sequential = compile_graph(graph, inplace)
        self._steps = None
        if self.plan.parallel:
            self._steps = worker_steps(graph, self.plan.workers, self.plan.waits)
            self._n_events = len({q for qs in self.plan.waits.values() for q in qs})

    @property
    def source(self) -> str:
        return self._sequential.source

    def __call__(self, *arrays) -> list:
        if self._steps is None:
            return self._sequential(*arrays)
        pool = worker_pool()
        if not pool.lock.acquire(blocking=False):  # another thread's run holds the pool
            return self._sequential(*arrays)
        try:
            run = _Run(_initial_env(self.graph, arrays), self._n_events)
            first, *others = self._steps
            with blas_threads.single_threaded():
                pool.run_beside(
                    lambda: run.work(first), *[lambda s=s: run.work(s) for s in others if s]
                )
            return [run.env[id(v)] for v in self.graph.outputs]
        finally:
            pool.lock.release()
