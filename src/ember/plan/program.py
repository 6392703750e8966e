"""Memory plans of compiled programs, and the measured peak they are checked against.

This module plans what a compiled program tells it; it knows nothing of how the program was
captured or compiled. A program (``ember.trace`` / ``ember.function``'s `GraphFunction`,
capture/graph_function.py) implements `Program`: `ProgramParts` say how the graph's inputs and
outputs count (from what the trace found: a module's parameters and buffers are
``parameters``, an optimizer's buffers ``optimizer state``, gradients, fed ``.grad`` arrays and
gradient writebacks, ``gradients``) and which in-place updates its code generator chooses; a
`MemoryLayout` adds the graph that runs at a call and what its compilation fixed (the in-place
updates it made, the arena of planned execution).

`plan_program(program)` plans that graph. For a function whose backward stays on eager
autograd (AOT), the forward graph that runs at the call is planned. In planned execution
(``executor="arena"``) the buffers in the arena count as one block held all the time
(plan/arena.py) and fused loops reuse dying operands. `Planner(parts)` plans other graphs with
the same inputs and outputs (rewrites such as rematerialization's).

A program's plan also says what ember holds for it between calls (``MemoryPlan.held``, from
`MemoryLayout.held`): the kernel scratch its latest call keeps (kernels/conv_plan.py
`charged_to`) and the program itself. The C graph runner's arena (runtime/cgraph.py
``held_bytes``: its intermediate values' and its steps' scratch) counts in the peak, as one block
like an arena.

`measure_peak(fn, *args)` defines the *measured peak* of one call: the bytes of the distinct
arrays fed to the graph (parameters, optimizer state, gradients, the batch: alive when the call
starts) plus the largest increase of tracemalloc's traced memory during the call over its value
at the start (NumPy reports its allocations to tracemalloc), plus, in planned execution
(``executor="arena"``), the program's arena (allocated once, held between calls). Call once
before measuring, so that compiling is not measured.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .memory import MemoryPlan, plan_memory

__all__ = [
    "MemoryLayout",
    "Planner",
    "Program",
    "ProgramParts",
    "measure_peak",
    "plan_program",
    "runner_held_bytes",
]


@dataclass(frozen=True)
class ProgramParts:
    """How a program's graph inputs and outputs count in a memory plan: ``input_parts`` and
    ``output_parts`` map positions to parts (others get the planner's defaults), the first
    ``n_user`` outputs are the function's result, and ``in_place(graph)`` gives the in-place
    updates the program's code generator would choose for ``graph`` ({id(node): {output index:
    input value}}, as runtime/codegen.py's `planned_in_place` gives them)."""

    input_parts: dict
    output_parts: dict
    n_user: int
    in_place: Callable[[object], dict]


@dataclass(frozen=True)
class MemoryLayout:
    """What a call of a compiled program runs: its ``graph``, the graph's `ProgramParts`, and
    what compiling fixed: the in-place updates compiled in, the arena placement of planned
    execution (or None) and the bytes that arena holds between calls."""

    graph: object
    parts: ProgramParts
    in_place: dict
    arena: object = None
    arena_bytes: int = 0
    held: dict = field(default_factory=dict)  # part -> bytes held between calls (the arena not)
    runner_bytes: int = 0  # the C graph runner's arrays (`runner_held_bytes`)


class Program(Protocol):
    """What planning and measuring read of a compiled program."""

    def memory_parts(self) -> ProgramParts: ...

    def memory_layout(self) -> MemoryLayout: ...

    def fed_arrays(self, *args, **kwargs) -> list:
        """The arrays a call with these arguments feeds the graph (None: fed otherwise)."""


class Planner:
    """graph -> MemoryPlan for graphs with the inputs and outputs that ``parts`` describe (the
    graph a program runs, or a rewrite of it such as rematerialization's), with the in-place
    updates the code generator would choose for that graph."""

    def __init__(self, parts: ProgramParts, reuse: str = "codegen"):
        self.input_parts, self.output_parts = parts.input_parts, parts.output_parts
        self.n_user = parts.n_user
        self._in_place = parts.in_place
        self.reuse = reuse

    def __call__(self, graph) -> MemoryPlan:
        return plan_memory(
            graph,
            input_parts=self.input_parts,
            output_parts=self.output_parts,
            n_user=self.n_user,
            in_place=self._in_place(graph),
            reuse=self.reuse,
        )


def plan_program(program: Program, reuse: str = "codegen") -> MemoryPlan:
    """The memory plan of a call of ``program`` (see the module docstring)."""
    layout = program.memory_layout()
    plan = plan_memory(
        layout.graph,
        input_parts=layout.parts.input_parts,
        output_parts=layout.parts.output_parts,
        n_user=layout.parts.n_user,
        in_place=layout.in_place,
        reuse="planned" if layout.arena is not None else reuse,
        arena=layout.arena,
        runner_bytes=layout.runner_bytes,
    )
    plan.held = dict(layout.held)
    return plan


def runner_held_bytes(program) -> int:
    """Bytes an executor's program holds between calls beyond its arena: the C graph runner's
    arrays where the program runs one (the parallel executor's ``_c_program``), else 0."""
    runner = getattr(program, "_c_program", None)
    return int(getattr(runner, "held_bytes", 0) or 0)


def _distinct_bytes(arrays) -> int:
    """Bytes of the memory behind ``arrays``, each block counted once (views of one array)."""
    seen, total = set(), 0
    for a in arrays:
        if not isinstance(a, np.ndarray):
            continue
        base = a
        while isinstance(base.base, np.ndarray):
            base = base.base
        if id(base) not in seen:
            seen.add(id(base))
            total += base.nbytes
    return total


def measure_peak(fn, *args, **kwargs) -> int:
    """The measured peak of one call ``fn(*args, **kwargs)`` of an ``ember.function`` (see the
    module docstring), in bytes. ``fn.compile(*args, **kwargs)`` gives its `Program`."""
    program = fn.compile(*args, **kwargs)
    held = _distinct_bytes(program.fed_arrays(*args, **kwargs))
    # planned execution: the arena is allocated with the program and held between calls
    layout = program.memory_layout()
    held += layout.arena_bytes + layout.runner_bytes  # (the C graph runner's arrays likewise)
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before, _ = tracemalloc.get_traced_memory()
        fn(*args, **kwargs)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        if started:
            tracemalloc.stop()
    return held + peak - before
