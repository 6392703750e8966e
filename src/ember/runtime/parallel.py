"""The parallel executor: independent nodes of a graph run at once on a small thread pool, only
where the calibrated cost model (runtime/parallel_cost.py) predicts a gain.

`plan(graph)` (runtime/parallel_plan.py) schedules the call nodes onto as many workers as the
machine has cores and keeps the schedule only if it is predicted faster than sequential
execution by `MARGIN`; otherwise the program runs the generated code (runtime/codegen.py),
exactly as ``executor="codegen"``, so choosing ``executor="parallel"`` costs nothing beyond the
plan-time check. ``print(plan)`` shows the workers' lists, what each waits for, and the
predicted times.

Where every node of the graph has a C step (convolutions with their epilogues, max pooling,
concatenation, reshapes: runtime/cgraph.py), the plan is made with the C graph runner's costs
(``Calibration.for_c_runner``) and each node's two times measured on this machine
(`cgraph.measure_nodes`: as generated code runs it, and alone on one thread), and a parallel
plan runs in one call into C: no Python, GIL or Event between nodes, whose hand-offs cost
about what a small convolution does. Otherwise:

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

import os
import queue
import threading
from dataclasses import dataclass

import numpy as np

from ..errors import EmberError
from ..graph.printer import format_node
from ..kernels import blas_threads
from . import cgraph
from .codegen import compile_graph
from .parallel_cost import calibrate
from .parallel_plan import MARGIN, ParallelPlan, plan

__all__ = ["MARGIN", "ParallelPlan", "ParallelProgram", "WorkerPool", "plan", "worker_pool"]


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
    blas_threads.pin_this_thread()
    while True:
        fn, box = q.get()
        try:
            fn()
        except BaseException as exc:
            box[1] = exc
        finally:
            box[0].set()


_pool: dict = {}
_pool_lock = threading.Lock()


def worker_pool() -> WorkerPool:
    """The process's pool: one thread fewer than the cores this process may use (the caller
    is a worker too), started at first use (in a forked child, at its first use there)."""
    from ..kernels.cpool import cpu_count

    with _pool_lock:
        if _pool.get("pid") != os.getpid():  # a forked child has none of its parent's threads
            # probe BLAS's thread setting here, before any worker exists: the probe sets and
            # restores it, and where it is process-wide, a probe in a starting worker racing a
            # run's `single_threaded` could restore a stale count (that run then used BLAS's
            # threads, and every call after it none)
            blas_threads.per_thread()
            _pool["pool"], _pool["pid"] = WorkerPool(max(1, cpu_count() - 1)), os.getpid()
        return _pool["pool"]


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


def node_callable(node):
    """``node``'s kernel as generated code calls it (its op's compiled implementation, else
    `OpDef.run` with the attributes bound)."""
    hook = node.op.compile
    impl = hook(node) if hook is not None else None
    if impl is not None:
        return impl
    kernel, attrs = node.op.run, node.attrs
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
                    node_callable(nodes[p]),
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
        steps = None
        if schedule is None:
            calibration = calibration or calibrate()
            workers = min(worker_pool().size + 1, calibration.cores)
            c_costs = calibration.for_c_runner()
            steps = cgraph.c_steps(graph) if c_costs is not None else None
            measured = None
            if steps is not None:  # every node a C step: the C runner's costs decide, with
                calibration = c_costs  # each node's two times measured here
                measured = cgraph.measure_nodes(graph, steps)
            schedule = plan(graph, calibration, workers=workers, force=force, measured=measured)
        elif len(schedule.workers) > worker_pool().size + 1:
            raise EmberError(
                f"the schedule has {len(schedule.workers)} workers; this process's pool runs "
                f"{worker_pool().size + 1}",
                op="parallel",
            )
        self.plan = schedule  # ``schedule``: a ParallelPlan made elsewhere (tests, tools)
        self._sequential = compile_graph(graph, inplace)
        self._steps = self._c_program = None
        if self.plan.parallel and self.plan.runner == "c":
            if steps is None:
                steps = cgraph.c_steps(graph)
            if steps is None:
                raise EmberError("the schedule wants the C runner; a node has no C step")
            threads = len(self.plan.workers)
            self._c_program = cgraph.CGraphProgram(graph, steps, self.plan.order, threads)
            self._c_lock = threading.Lock()
        elif self.plan.parallel:
            self._steps = worker_steps(graph, self.plan.workers, self.plan.waits)
            self._n_events = len({q for qs in self.plan.waits.values() for q in qs})

    @property
    def source(self) -> str:
        return self._sequential.source

    # what the memory plan reads of a program (runtime/executors.py `Program`): a sequential plan
    # runs the generated code, with its in-place updates; parallel runs compute none in place
    @property
    def in_place(self) -> dict:
        return {} if self.plan.parallel else self._sequential.in_place

    arena = None
    arena_bytes = 0

    def __call__(self, *arrays) -> list:
        if self._c_program is not None:
            if len(arrays) != len(self.graph.inputs):
                return self._sequential(*arrays)  # (which says what is wrong)
            if not self._c_lock.acquire(blocking=False):  # another thread runs it now
                return self._sequential(*arrays)
            try:
                return self._c_program(*arrays)
            finally:
                self._c_lock.release()
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
