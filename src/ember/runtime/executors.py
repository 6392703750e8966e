"""Executors: the ways a graph can run, behind one interface, and the registry of their names.

An `Executor` prepares a graph once into a `Program`, a callable ``program(*arrays) -> output
arrays``. ``ember.trace`` / ``ember.function`` (capture/graph_function.py) and the AOT forward
and backward graphs (capture/aot.py) run whatever program their executor prepared, never
switching on its name. A program also tells what the views of a compiled function show: the
generated Python (``source``), the in-place updates compiled into it and the arena of planned
execution (the memory plan reads them), and, through its executor, the parallel plan.

The executors, by the public names ``executor=`` takes:

* ``"auto"``: the default: per graph, generated code, the C graph runner on one thread or
  several, or the parallel workers, whichever the calibrated cost model predicts (and, where
  the predictions are close, measures) fastest (runtime/auto.py);
* ``"codegen"``: generated Python (runtime/codegen.py);
* ``"interpreter"``: the reference interpreter (graph/interpreter.py);
* ``"parallel"``: independent nodes at once on a thread pool where the calibrated cost model
  predicts a gain, else the generated code (runtime/parallel.py);
* ``"arena"``: generated code whose kernels write into one planned arena (plan/arena.py).

`get_executor(name)` looks one up; an unknown name raises ValueError listing the valid ones.
"""

from __future__ import annotations

from typing import Protocol

from ..graph import interpreter
from .codegen import compile_graph

__all__ = ["DEFAULT_EXECUTOR", "EXECUTORS", "Executor", "Program", "get_executor"]


class Program(Protocol):
    """A graph prepared by an `Executor`."""

    graph: object  # the graph it runs
    source: str  # the generated Python of the graph (what a sequential run executes)
    in_place: dict  # {id(node): {output index: input value}}: outputs computed into inputs
    arena: object  # planned execution: the placement (plan/arena.py) its slots follow, or None
    arena_bytes: int  # bytes the program holds between calls (its arena)

    def __call__(self, *arrays) -> list: ...


class Executor:
    """One way to run graphs. ``prepare(graph, inplace)`` makes the `Program`; ``inplace``
    (output position -> input position) names outputs the caller writes back into those
    inputs' buffers, which a program may compute in place (`codegen.compile_graph`)."""

    name: str

    def prepare(self, graph, inplace: dict | None = None) -> Program:
        raise NotImplementedError

    def parallel_plan(self, program: Program):
        """What the parallel executor runs concurrently for ``program``'s graph and the
        predicted gain (a `runtime.parallel.ParallelPlan`): for another executor, the plan it
        would run."""
        from .parallel import plan

        return plan(program.graph)

    def __repr__(self) -> str:
        return f"<executor {self.name}>"


class CodegenExecutor(Executor):
    """Generated Python; with ``arena``, planned execution into one arena."""

    def __init__(self, name: str, arena: bool = False):
        self.name = name
        self.arena = arena

    def prepare(self, graph, inplace: dict | None = None) -> Program:
        return compile_graph(graph, inplace, arena=self.arena)


class InterpretedProgram:
    """A graph run by the reference interpreter, each value freed after its last use."""

    arena = None
    arena_bytes = 0

    def __init__(self, graph):
        self.graph = graph
        self.in_place: dict = {}  # the interpreter computes nothing into its inputs
        self._frees = interpreter.last_uses(graph)
        self._source: str | None = None

    def __call__(self, *arrays) -> list:
        return interpreter.run(self.graph, list(arrays), frees=self._frees)

    @property
    def source(self) -> str:
        """The generated Python of the graph (made to be read; the interpreter runs the
        graph itself)."""
        if self._source is None:
            self._source = compile_graph(self.graph).source
        return self._source


class InterpreterExecutor(Executor):
    name = "interpreter"

    def prepare(self, graph, inplace: dict | None = None) -> Program:
        return InterpretedProgram(graph)


class ParallelExecutor(Executor):
    name = "parallel"

    def prepare(self, graph, inplace: dict | None = None) -> Program:
        from .parallel import ParallelProgram  # (imported once a graph runs in parallel)

        return ParallelProgram(graph, inplace)

    def parallel_plan(self, program: Program):
        return program.plan


class AutoExecutor(Executor):
    """The default: the fastest way to run each graph (runtime/auto.py). ``calibration``: a
    forced calibration instead of the machine's; ``measure=False``: decide from the
    predictions alone (both for tests: the choice is then deterministic)."""

    def __init__(self, name: str = "auto", calibration=None, measure: bool = True):
        self.name = name
        self.calibration = calibration
        self.measure = measure

    def prepare(self, graph, inplace: dict | None = None) -> Program:
        from .auto import prepare  # (imported once a graph is prepared)

        return prepare(graph, inplace, calibration=self.calibration, measure=self.measure)

    def parallel_plan(self, program: Program):
        """The choice and why (a `runtime.auto.Choice`), with the chosen parallel plan."""
        return program.choice


# the public names, in the order error messages list them
EXECUTORS: dict[str, Executor] = {
    executor.name: executor
    for executor in (
        CodegenExecutor("codegen"),
        InterpreterExecutor(),
        ParallelExecutor(),
        CodegenExecutor("arena", arena=True),
        AutoExecutor(),
    )
}


# what ember.function, ember.trace, ember.compile and the AOT graphs run on when not told
DEFAULT_EXECUTOR = "auto"


def get_executor(name: str) -> Executor:
    """The executor called ``name`` (see the module docstring)."""
    executor = EXECUTORS.get(name) if isinstance(name, str) else None
    if executor is None:
        raise ValueError(f"executor must be one of {tuple(EXECUTORS)}, got {name!r}")
    return executor
