"""Optimization levels, the pass pipeline, its statistics and its differential check.

Levels select pipelines the way ONNX Runtime's do: ``O0`` runs nothing; ``O1`` the basic
clean-ups (constant folding, common-subexpression and dead-code elimination); ``O2`` adds
algebraic simplification and masks moved before scatter-adds (transforms/scatter_masks.py);
``O3`` adds loop unrolling (static trip counts), subgraphs one op computes replaced by its call
(transforms/patterns.py: attention as exporters write it), elementwise fusion
(compiled to C by the code generator), matmul epilogues and memory-aware scheduling (kept only
where it lowers the planned peak, plan/schedule.py).
A pipeline runs its passes in order and repeats the whole sequence while any pass changes the
graph (at most `MAX_ROUNDS` times), recording one `PassStat` per pass run: nodes before and
after, seconds taken, whether it changed anything. A pass is a function of the graph it is
given: one that left a graph unchanged is not run again on it, so a round runs only the passes
that have not yet seen the graph as it is (the last round of a pipeline usually finds nothing
to do: fusion, epilogues and scheduling, which plan memory, are not repeated there).

``optimize(graph, level, check=arrays)`` is the differential check (``ember.function(...,
verify=True)``): before each pass it keeps a copy of the graph; after it, both run on ``arrays``
with the reference interpreter, and the first pass whose graph computes different outputs raises
`PassCheckError`, naming the pass and the first node (in execution order) whose values differ.
Graphs that draw random numbers cannot be compared run against run and are not checked.
"""

from __future__ import annotations

import contextlib
import gc
import time
from dataclasses import dataclass

import numpy as np

from ..errors import EmberError
from ..graph import interpreter
from ..graph.ir import Graph
from ..graph.rewrite import Pass, is_pure
from ..plan.schedule import SCHEDULE
from .cse import CSE
from .dce import DCE
from .epilogue import EPILOGUE
from .fold import FOLD
from .fold_affine import FOLD_AFFINE
from .fold_affine_inputs import FOLD_AFFINE_INPUTS
from .fuse import FUSE
from .patterns import PATTERNS
from .scatter_masks import SCATTER_MASKS
from .simplify import SIMPLIFY
from .unroll import unroll_loops
from .widened_reads import WIDENED_READS

__all__ = ["LEVELS", "PASSES", "PassCheckError", "PassStat", "optimize", "passes_for"]

# unrolling first, so the passes after it see through the loops it removes; fusion last
UNROLL = Pass("unroll", unroll_loops, level=3, doc="loops with a static trip count <= 16")
PASSES: tuple[Pass, ...] = (
    UNROLL,
    FOLD,
    FOLD_AFFINE,
    FOLD_AFFINE_INPUTS,
    SIMPLIFY,
    PATTERNS,
    SCATTER_MASKS,
    WIDENED_READS,
    CSE,
    DCE,
    FUSE,
    EPILOGUE,
    SCHEDULE,
)
LEVELS = (0, 1, 2, 3)
MAX_ROUNDS = 4


class PassCheckError(EmberError):
    """A pass changed what the graph computes (found by the differential check)."""


@dataclass
class PassStat:
    """One pass run: call nodes before and after, seconds taken, whether it changed anything,
    and which graph it ran on (``'joint'``, ``'forward'``, ``'backward'``)."""

    name: str
    nodes_before: int
    nodes_after: int
    seconds: float
    changed: bool
    graph: str = ""

    def __str__(self) -> str:
        mark = "changed" if self.changed else "no change"
        where = f"{self.graph:<9}" if self.graph else ""
        return (
            f"{where}{self.name:<10} {self.nodes_before:>5} -> {self.nodes_after:<5} nodes "
            f"{self.seconds * 1e3:8.2f} ms  {mark}"
        )


def passes_for(level) -> list[Pass]:
    """The passes of optimization level ``level`` (0..3, or "O0".."O3"), in pipeline order; a
    sequence of `Pass` objects is a custom pipeline and is returned as it is."""
    if isinstance(level, (list, tuple)):
        if not all(isinstance(p, Pass) for p in level):
            raise TypeError("a custom pipeline is a sequence of ember.transforms.Pass objects")
        return list(level)
    if isinstance(level, str) and level.upper().startswith("O"):
        level = level[1:]
    try:
        level = int(level)
    except (TypeError, ValueError):
        level = -1
    if level not in LEVELS:
        raise ValueError(f"opt_level must be one of 0, 1, 2, 3 (or 'O0'..'O3'), got {level!r}")
    return [p for p in PASSES if p.level <= level]


def _calls(graph: Graph) -> int:
    return sum(1 for n in graph.nodes if n.kind == "call")


def optimize(
    graph: Graph, level: int | str = 3, *, passes=None, check=None, label: str = ""
) -> tuple[Graph, list[PassStat]]:
    """Run the pipeline of ``level`` (or the given ``passes``) on ``graph`` (rewritten in place)
    and return it with the per-pass statistics. ``check``: arrays for the graph's inputs; each
    pass's output is then compared with its input on them (see the module docstring)."""
    pipeline = passes_for(level) if passes is None else list(passes)
    if check is not None and not all(is_pure(n) for n in graph.nodes):
        check = None  # random draws differ run to run: nothing to compare
    with _collection_paused():
        return _run(graph, pipeline, check, label)


@contextlib.contextmanager
def _collection_paused():
    """Python's cyclic garbage collector off while the passes run (as it was after): the
    nodes and values they make would otherwise start a collection every few hundred, each
    walking every object the process holds (40% of the passes' time in a test process that
    has imported PyTorch). The passes' garbage is collected after them."""
    enabled = gc.isenabled()
    if enabled:
        gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _run(graph: Graph, pipeline: list, check, label: str) -> tuple[Graph, list[PassStat]]:
    stats: list[PassStat] = []
    # a pass is a function of the graph: one that changed nothing on this very graph (no pass
    # has changed it since) would change nothing again, and is not run (`version`: how many
    # changes the graph has had; `clean[i]`: the version pass i last left unchanged)
    version, clean = 0, {}
    for _ in range(MAX_ROUNDS):
        any_change = False
        for i, p in enumerate(pipeline):
            if clean.get(i) == version:
                continue
            before = graph.copy() if check is not None else None
            n_before, start = _calls(graph), time.perf_counter()
            graph, changed = p.run(graph)
            seconds = time.perf_counter() - start
            stats.append(PassStat(p.name, n_before, _calls(graph), seconds, changed, label))
            if changed and before is not None:
                _compare(p.name, before, graph, check, p.rounds)
            if changed:
                version += 1
            else:
                clean[i] = version
            any_change |= changed
        if not any_change:
            break
    return graph, stats


def _same(a: np.ndarray, b: np.ndarray, rounds: bool = False) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "fc":
        rtol, atol = 1e-6, 1e-7
        if rounds:  # a few hundred ulps of the largest finite value: sums rounded anew
            finite = np.abs(a[np.isfinite(a)])
            scale = float(finite.max()) if finite.size else 0.0
            rtol = max(rtol, 256 * float(np.finfo(a.dtype).eps))
            atol = max(atol, rtol * scale)
        return bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))
    return bool(np.array_equal(a, b))


def _compare(name: str, before: Graph, after: Graph, arrays, rounds: bool = False) -> None:
    got = interpreter.all_values(after, list(arrays))
    outs_after = [got[v.name] for v in after.outputs]
    want = interpreter.all_values(before, list(arrays))
    outs_before = [want[v.name] for v in before.outputs]
    bad = [i for i, (a, b) in enumerate(zip(outs_before, outs_after)) if not _same(a, b, rounds)]
    if not bad:
        return
    culprit = next(
        (
            v.name
            for node in before.nodes
            for v in node.outputs
            if v.name in got and not _same(want[v.name], got[v.name], rounds)
        ),
        None,
    )
    where = (
        f"the first node whose values differ is %{culprit}"
        if culprit
        else f"output {bad[0]} (%{before.outputs[bad[0]].name}) differs"
    )
    a, b = np.asarray(outs_before[bad[0]]), np.asarray(outs_after[bad[0]])
    detail = (
        f"shape/dtype {a.shape} {a.dtype} became {b.shape} {b.dtype}"
        if a.shape != b.shape or a.dtype != b.dtype
        else f"largest difference {np.nanmax(np.abs(a.astype(np.float64) - b)):.3g}"
        if a.dtype.kind in "fcui"
        else "values differ"
    )
    raise PassCheckError(
        f"pass {name!r} changed the results of graph {before.name}: {where} (output "
        f"{bad[0]}: {detail}). Run with opt_level lowered or without this pass to work around it.",
        op=name,
    )
