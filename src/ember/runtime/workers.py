"""The parallel executor's Python workers (runtime/parallel.py says when they run): a small
pool of threads, each running its own list of a graph's nodes, waiting on an Event per value
another worker computes. Also the callable each node runs as (`node_callable`: what generated
code calls), shared with the C runner's measurements."""

from __future__ import annotations

import os
import queue
import threading
from dataclasses import dataclass

import numpy as np

from ..errors import EmberError
from ..graph.printer import format_node
from ..kernels import blas_threads
from ..ops._registry import native_code

__all__ = [
    "Run",
    "WorkerPool",
    "initial_env",
    "node_callable",
    "run_steps",
    "worker_pool",
    "worker_steps",
]


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
    hook = node.op.compile if native_code(node) else None
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


class Run:
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


def initial_env(graph, arrays) -> dict:
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
    run = Run(initial_env(graph, arrays), 0)
    run.work(steps)
    return [run.env[id(v)] for v in graph.outputs]
