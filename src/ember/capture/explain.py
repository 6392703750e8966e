"""``torch._dynamo.explain(fn)(*args)``: what capturing ``fn`` on those arguments gives.

`explain` captures the call with a fresh `ember.function` (so no other compiled function's cache
changes) and reports it as PyTorch's ``ExplainOutput``: the graphs, their number, the graph
breaks and why, the ops of each graph, the guards (what the call's key compares) and how long
capturing took. ember never splits a function at a graph break: it captures the whole call or
none of it, and ``ember.compile`` then runs the function eagerly. So where PyTorch reports two
graphs around one break, ember reports no graph and one break, whose reason and user line are
the capture's error; a function captured whole has one graph and no break. The ops are those
of the graph as traced, before ember's passes fuse them.
"""

from __future__ import annotations

import time
import traceback
import warnings
from dataclasses import dataclass, field

from ..errors import TraceError
from .function import Function

__all__ = ["ExplainOutput", "GraphCompileReason", "explain"]


@dataclass
class GraphCompileReason:
    """Why a graph ended (PyTorch's name): ``reason``, the user's frames at the break
    (``user_stack``), and whether it was a graph break (always, in ember)."""

    reason: str
    user_stack: list = field(default_factory=list)
    graph_break: bool = True


@dataclass
class ExplainOutput:
    """PyTorch's ``ExplainOutput`` fields, for an ember capture (see the module docstring)."""

    graphs: list
    graph_count: int
    graph_break_count: int
    break_reasons: list
    op_count: int
    ops_per_graph: list | None = None
    out_guards: list | None = None
    compile_times: str | None = None

    def __str__(self) -> str:
        lines = [
            f"Graph Count: {self.graph_count}",
            f"Graph Break Count: {self.graph_break_count}",
            f"Op Count: {self.op_count}",
            "Break Reasons:",
        ]
        for i, reason in enumerate(self.break_reasons, 1):
            lines += [f"  Break Reason {i}:", f"    Reason: {reason.reason}", "    User Stack:"]
            lines += [f"      {frame!r}" for frame in reason.user_stack]
        lines.append("Ops per Graph:")
        for i, ops in enumerate(self.ops_per_graph or [], 1):
            lines.append(f"  Ops {i}:")
            lines += [f"    {op}" for op in ops]
        lines.append("Out Guards:")
        for i, guard in enumerate(self.out_guards or [], 1):
            lines.append(f"  Guard {i}: {guard}")
        if self.compile_times is not None:
            lines.append(f"Compile Times: {self.compile_times}")
        return "\n".join(lines) + "\n"


def explain(fn, *extra_args, **extra_kwargs):
    """``explain(fn)(*args, **kwargs)``: capture ``fn`` on the arguments and return an
    `ExplainOutput`. PyTorch's older form ``explain(fn, *args, **kwargs)`` returns it at once,
    with PyTorch's FutureWarning."""

    def inner(*args, **kwargs) -> ExplainOutput:
        function = Function(fn)
        start = time.perf_counter()
        try:
            function(*args, **kwargs)
        except TraceError as error:
            seconds = time.perf_counter() - start
            reason = GraphCompileReason(error.detail, _frames(error.location))
            return ExplainOutput([], 0, 1, [reason], 0, [], [], _times(function, seconds))
        seconds = time.perf_counter() - start
        entry = function._latest()
        graph = entry.call.graph
        ops = [node.target for node in graph.call_nodes()]
        key = function._last_key
        guards = [_short(f"{label} == {value!r}") for label, value in zip(key.labels, key.values)]
        return ExplainOutput([graph], 1, 0, [], len(ops), [ops], guards, _times(function, seconds))

    if extra_args or extra_kwargs:
        warnings.warn(
            "explain(f, *args, **kwargs) is deprecated, use explain(f)(*args, **kwargs) instead",
            FutureWarning,
            stacklevel=2,
        )
        return inner(*extra_args, **extra_kwargs)
    return inner


def _frames(location: str) -> list:
    """The user's frame a capture error names (``file:line``), as PyTorch's FrameSummary."""
    filename, _, line = location.rpartition(":")
    if not filename or not line.isdigit():
        return []
    return [traceback.FrameSummary(filename, int(line), "")]


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _times(function: Function, seconds: float) -> str:
    return f"ember.function {function.name}: captured and compiled in {seconds:.4f} s"
