"""The default executor, ``"auto"``: each graph runs the way predicted (and, where the
predictions are close, measured) to be fastest on this machine, never asked for.

The candidates:

* generated code (runtime/codegen.py): also what runs wherever nothing else applies: no C
  compiler, symbolic sizes (known only when the graph runs), or no other candidate predicted
  faster;
* the C graph runner (runtime/cgraph.py) on one thread, where every node has a C step: no
  Python between nodes, which is most of the time of a graph of small nodes (a batch of one);
* the C graph runner on several threads, where independent nodes at once are predicted faster.

Not the parallel executor's Python workers (runtime/parallel.py): a value read on another
worker lives until the run ends there, which the memory plans (plan/program.py) do not model,
so the default program's measured peak would no longer be the planned one; they stay
available as ``executor="parallel"``.

The prediction is the parallel executor's: its calibrated cost model (runtime/parallel_cost.py,
measured once per machine and cached), with each node of a C-runner graph timed on this machine
(`cgraph.measure_nodes`), planned for the machine's cores and for one thread
(`parallel.plan`); a plan is a candidate only where it is predicted faster than generated code
by the plan's margin. Where another candidate is predicted within `CLOSE` of the best, the
model cannot tell them apart (its tables are calibrated on square products and copies, not on
this graph's nodes): the candidates run on random inputs of the graph's types, interleaved, and
the fastest measured wins where it beats generated code by `MEASURED_MARGIN` (what a few rounds
can tell apart). Measuring stops at `MEASURE_BUDGET_S`; past it the prediction decides.
Decisions are kept per graph structure (its printed text, the in-place outputs, the machine's
calibration), so a graph traced again (another function, a retrace) is neither measured nor
timed again.

``program.choice`` (a `Choice`, which ``fn.parallel_plan()`` and ``program.parallel_plan``
print) says what was chosen and why, with the predicted and measured times, and then the
chosen parallel plan.

Invariants. Every candidate computes what generated code computes, bit for bit, so that a
result never depends on the choice (the C runner's steps and the workers run the same kernels,
a product the kernel its size gets and NumPy's BLAS calls where generated code hands it to
NumPy; tests/runtime/test_cgraph.py checks the steps against generated code,
tests/runtime/test_auto.py the candidates against the interpreter). While ember.profiler
records (``codegen.profiler`` set), a call runs the generated code, instrumented, whatever
was chosen: a profile shows every node.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np

from ..graph.rewrite import has_effects
from ..kernels.ccompile import compiler_available
from . import codegen
from .codegen import compile_graph
from .parallel_plan import ParallelPlan, _concrete

__all__ = ["CLOSE", "MEASURED_MARGIN", "MEASURE_BUDGET_S", "AutoProgram", "Choice", "prepare"]

# candidates predicted within this factor of the best are measured: the model's tables are
# calibrated on square products and copies, and its error on a graph's own nodes is of this order
CLOSE = 2.0
# a measured candidate replaces generated code only when faster by this fraction (a few rounds of
# a graph of small nodes on a shared machine do not resolve less)
MEASURED_MARGIN = 0.05
MEASURE_BUDGET_S = 0.2  # the most prepare time spent timing candidates (predicted)
_ROUNDS = 5  # interleaved rounds of timing
_BATCH_S = 5e-4  # each timed sample runs a candidate about this long
CODEGEN = "generated code"

_decisions: dict = {}  # structure key -> (label, plan or None, Choice)
_decisions_lock = threading.Lock()
_MAX_DECISIONS = 512


@dataclass
class Choice:
    """What ``"auto"`` chose for a graph (`chosen`: the candidate's label), ``why``, each
    candidate's predicted and measured seconds per call, and the chosen parallel plan (None
    for generated code chosen without one). The plan's fields (``parallel``, ``workers``,
    ``runner``, ...) read through."""

    graph_name: str
    chosen: str
    why: str
    predicted: dict = field(default_factory=dict)
    measured: dict = field(default_factory=dict)
    plan: ParallelPlan | None = None
    cached: bool = False

    def __getattr__(self, name):
        plan = self.__dict__.get("plan")
        if plan is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(plan, name)

    def __str__(self) -> str:
        times = []
        for label in dict.fromkeys([*self.predicted, *self.measured]):
            cells = []
            if label in self.predicted:
                cells.append(f"predicted {self.predicted[label] * 1e6:.0f} us")
            if label in self.measured:
                cells.append(f"measured {self.measured[label] * 1e6:.0f} us")
            times.append(f"{label}: {', '.join(cells)}")
        head = f"executor auto for {self.graph_name}: {self.chosen} ({self.why})"
        if self.cached:
            head += "; decided for this graph's structure before"
        lines = [head] + [f"  {t}" for t in times]
        if self.plan is not None:
            lines.append(str(self.plan))
        return "\n".join(lines)


class AutoProgram:
    """A graph run the way `prepare` chose: ``program(*arrays)`` -> output arrays. ``choice``
    says which and why; ``source`` is the graph's generated code (what runs under the
    profiler, and the readable form); the memory plan reads the chosen program's in-place
    updates, arena and (``_c_program``) the C runner's arrays."""

    def __init__(self, graph, program, generated, choice: Choice):
        self.graph = graph
        self.choice = choice
        self._program = program
        self._generated = generated
        self._c_program = getattr(program, "_c_program", None)

    source = property(lambda self: self._generated.source)
    in_place = property(lambda self: self._program.in_place)
    arena = property(lambda self: self._program.arena)
    arena_bytes = property(lambda self: self._program.arena_bytes)

    @property
    def plan(self) -> ParallelPlan | None:
        return self.choice.plan

    def __call__(self, *arrays) -> list:
        if codegen.profiler is not None:  # a profile shows every node of generated code
            return self._generated(*arrays)
        return self._program(*arrays)


def prepare(
    graph, inplace: dict | None = None, *, calibration=None, measure: bool = True
) -> AutoProgram:
    """``graph`` prepared the fastest way (see the module docstring). ``calibration``: the
    machine's (`parallel_cost.calibrate`) unless given; ``measure=False`` decides from the
    predictions alone, the C runner's nodes priced by the calibration's tables instead of
    timed (deterministic for a given calibration: tests)."""
    generated = compile_graph(graph, inplace)
    name = graph.name
    if not compiler_available():
        return _made(graph, generated, Choice(name, CODEGEN, "no C compiler"))
    if not _concrete(graph):
        why = "symbolic sizes: known only when the graph runs"
        return _made(graph, generated, Choice(name, CODEGEN, why))
    if has_effects(graph):  # never run on made-up inputs to time it: it would talk to the ranks
        why = "collectives (an effect rule): run in graph order, never timed"
        return _made(graph, generated, Choice(name, CODEGEN, why))
    from .parallel import ParallelProgram, plan  # (the thread pool starts with it)
    from .parallel_cost import calibrate

    machine = calibration is None
    calibration = calibration or calibrate()
    key = None
    if machine and measure:  # (a given calibration decides afresh: tests force one)
        key = (str(graph), tuple(sorted((inplace or {}).items())), id(calibration))
        with _decisions_lock:
            known = _decisions.get(key)
        if known is not None and known[3] is calibration:
            label, schedule, choice, _ = known
            program = generated
            if schedule is not None:
                program = ParallelProgram(graph, inplace, schedule=schedule, sequential=generated)
            cached = Choice(**{**choice.__dict__, "cached": True})
            return _made(graph, program, cached)
    full = ParallelProgram(
        graph, inplace, calibration=calibration, sequential=generated, measure=measure
    )
    candidates = {CODEGEN: (generated, full.plan.sequential_s, None)}
    if full.plan.parallel and full.plan.runner == "c":  # (not the workers: module docstring)
        candidates[_label(full.plan)] = (full, full.plan.parallel_s, full.plan)
    one_thread = full.plan.runner == "c" and not (
        full.plan.parallel and len(full.plan.workers) == 1
    )
    if one_thread:  # the C runner on one thread: planned for one worker
        single = plan(graph, full.calibration, workers=1, measured=full.measured)
        if not single.parallel:  # predicted below the plan's margin: close enough to measure?
            single = _one_thread_plan(graph, single, full.calibration, full.measured)
        if single.parallel and single.parallel_s <= CLOSE * full.plan.sequential_s:
            program = ParallelProgram(graph, inplace, schedule=single, sequential=generated)
            candidates[_label(single)] = (program, single.parallel_s, single)
    predicted = {label: seconds for label, (_, seconds, _) in candidates.items()}
    best = min(predicted, key=predicted.get)
    choice = Choice(name, best, "", predicted, {}, candidates[best][2])
    close = [k for k, s in predicted.items() if s <= CLOSE * predicted[best]]
    if len(candidates) == 1 and full.plan.parallel:  # (the workers' plan: not a candidate)
        choice.why = "only the Python workers were predicted faster (executor='parallel')"
    elif len(candidates) == 1:
        choice.why = full.plan.reason or "no other way predicted faster"
        choice.plan = full.plan
    elif len(close) < 2:
        choice.why = f"predicted x{predicted[CODEGEN] / predicted[best]:.2f} of generated code"
    elif not measure:
        choice.why = "predicted fastest (not measured)"
    elif _ROUNDS * 2 * sum(predicted[k] for k in close) > MEASURE_BUDGET_S:
        choice.why = "predicted fastest (too long to measure at prepare time)"
    else:
        measured = _time_candidates(graph, {k: candidates[k][0] for k in close})
        choice.measured = measured
        if len(measured) == len(close):
            fastest = min(measured, key=measured.get)
            if CODEGEN in measured:
                if measured[fastest] > (1 - MEASURED_MARGIN) * measured[CODEGEN]:
                    fastest = CODEGEN
                gain = measured[CODEGEN] / measured[fastest]
                choice.why = f"measured fastest, x{gain:.2f} of generated code"
            else:  # (generated code predicted more than CLOSE times slower: not timed)
                choice.why = f"measured fastest of those predicted within x{CLOSE:g} of the best"
            choice.chosen, choice.plan = fastest, candidates[fastest][2]
        else:
            choice.why = "predicted fastest (a candidate failed on random inputs)"
    if choice.plan is None and choice.chosen == CODEGEN:
        choice.plan = full.plan  # (what the parallel executor would run, as before)
    program = candidates[choice.chosen][0]
    if key is not None:
        schedule = candidates[choice.chosen][2]
        with _decisions_lock:
            if len(_decisions) >= _MAX_DECISIONS:
                _decisions.clear()
            _decisions[key] = (choice.chosen, schedule, choice, calibration)
    return _made(graph, program, choice)


def _one_thread_plan(graph, sequential: ParallelPlan, calibration, measured) -> ParallelPlan:
    """``sequential`` (a one-worker plan the margin kept on generated code) turned into the C
    runner's plan on one thread, every node in graph order, with its predicted time (as
    `parallel.plan` predicts it), so that a prediction close to generated code's is measured
    rather than trusted."""
    from dataclasses import replace

    from .parallel_cost import estimate

    position = {id(n): i for i, n in enumerate(graph.nodes)}
    calls = [n for n in graph.nodes if n.kind == "call"]
    seconds = calibration.fork_s
    for n in calls:
        e = estimate(n, calibration, (measured or {}).get(position[id(n)]))
        alone = e.alone_seconds if e.alone_seconds is not None else e.worker_seconds
        seconds += alone + calibration.step_s
    order = [position[id(n)] for n in calls]
    gain = 1 - seconds / sequential.sequential_s if sequential.sequential_s else 0.0
    return replace(
        sequential,
        parallel=True,
        reason=f"one thread, no Python between nodes: predicted gain {gain:+.0%}, measured",
        workers=[order],
        order=list(order),
        parallel_s=seconds,
        runner="c",
    )


def _made(graph, program, choice: Choice) -> AutoProgram:
    generated = program if not hasattr(program, "_sequential") else program._sequential
    return AutoProgram(graph, program, generated, choice)


def _label(plan: ParallelPlan) -> str:
    n = len(plan.workers)
    if plan.runner == "c":
        return "the C graph runner on " + ("one thread" if n == 1 else f"{n} threads")
    return f"{n} parallel workers"


def _example(value_type, rng) -> np.ndarray:
    shape, dtype = tuple(value_type.shape), value_type.dtype.np
    if np.issubdtype(dtype, np.floating):
        return rng.standard_normal(shape).astype(dtype)
    return np.zeros(shape, dtype)


def _clock():
    """The clock candidates are timed by: with one thread, every candidate runs on the calling
    thread alone, so the process's CPU time, which other processes on a loaded machine do not
    add to (wall time there decided between candidates 10% apart by which ran while the cores
    were free); with several, wall time, which sees the threads' work shared."""
    from ..kernels import cpool

    return time.process_time if cpool.get_num_threads() == 1 else time.perf_counter


def _time_candidates(graph, programs: dict) -> dict:
    """Label -> the fastest per-call seconds of each program over `_ROUNDS` interleaved rounds
    on random inputs of ``graph``'s types (by `_clock`); a program that raises is left out."""
    clock = _clock()
    rng = np.random.default_rng(0)
    arrays = [_example(v.type, rng) for v in graph.inputs]
    calls: dict = {}
    with np.errstate(all="ignore"):
        for label, program in programs.items():
            run = _plain(program)
            inputs = [a.copy() for a in arrays]  # (a program may update its inputs in place)
            try:
                start = clock()
                run(*inputs)
                once = clock() - start
            except Exception:  # noqa: BLE001 - a candidate that fails here is not chosen
                continue
            reps = max(1, min(50, int(_BATCH_S / max(once, 1e-7))))
            calls[label] = (run, inputs, reps)
        best = {label: float("inf") for label in calls}
        for _ in range(_ROUNDS):
            for label, (run, inputs, reps) in calls.items():
                start = clock()
                for _ in range(reps):
                    run(*inputs)
                best[label] = min(best[label], (clock() - start) / reps)
    return best


def _plain(program):
    """The callable that times ``program`` as it runs outside the test suite's checks:
    generated code's function itself (the suite wraps `CompiledGraph.__call__`)."""
    fn = getattr(program, "_fn", None)
    return fn if fn is not None and getattr(program, "_arena_lock", None) is None else program
