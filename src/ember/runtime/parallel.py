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

import threading

from ..errors import EmberError
from ..kernels import blas_threads
from . import cgraph
from .codegen import compile_graph
from .parallel_cost import calibrate, scaled_to_measured
from .parallel_plan import MARGIN, ParallelPlan, plan
from .workers import Run, initial_env, worker_pool, worker_steps

__all__ = ["MARGIN", "ParallelPlan", "ParallelProgram", "plan"]


class ParallelProgram:
    """``graph`` compiled for the parallel executor: ``program(*arrays)`` -> output arrays.
    ``plan`` says what runs where; ``source`` is the generated code that runs when the plan is
    sequential. ``inplace``: as for `codegen.compile_graph` (used by the sequential code), which
    ``sequential`` gives when the caller compiled it already. ``measure=False``: plan a graph
    the C runner can run from the calibration's tables alone, without timing its nodes (the
    same plan every time for a given calibration)."""

    def __init__(
        self,
        graph,
        inplace: dict | None = None,
        *,
        calibration=None,
        force=False,
        schedule=None,
        sequential=None,
        measure: bool = True,
    ):
        self.graph = graph
        steps = measured = None
        if schedule is None:
            calibration = calibration or calibrate()
            workers = min(worker_pool().size + 1, calibration.cores)
            c_costs = calibration.for_c_runner()
            steps = cgraph.c_steps(graph) if c_costs is not None else None
            if steps is not None:  # every node a C step: the C runner's costs decide, with
                calibration = c_costs  # each node's two times measured here (``measure``)
                measured = cgraph.measure_nodes(graph, steps) if measure else None
                if measured:  # (the nodes its budget left: the tables, scaled to these)
                    measured = scaled_to_measured(graph, calibration, measured)
            schedule = plan(graph, calibration, workers=workers, force=force, measured=measured)
        elif len(schedule.workers) > worker_pool().size + 1:
            raise EmberError(
                f"the schedule has {len(schedule.workers)} workers; this process's pool runs "
                f"{worker_pool().size + 1}",
                op="parallel",
            )
        self.plan = schedule  # ``schedule``: a ParallelPlan made elsewhere (tests, tools)
        # the calibration the plan used and each node's measured times (None: the tables')
        self.calibration, self.measured = calibration, measured
        # ``sequential``: the generated code of ``graph`` with ``inplace``, when the caller has it
        self._sequential = sequential or compile_graph(graph, inplace)
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
            run = Run(initial_env(self.graph, arrays), self._n_events)
            first, *others = self._steps
            with blas_threads.single_threaded():
                pool.run_beside(
                    lambda: run.work(first), *[lambda s=s: run.work(s) for s in others if s]
                )
            return [run.env[id(v)] for v in self.graph.outputs]
        finally:
            pool.lock.release()
