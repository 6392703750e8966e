"""Rematerialization under a memory budget: recompute saved activations in the backward pass.

``ember.function(..., memory_budget=bytes)`` runs `rematerialize` on a training step's graph
when its planned peak (plan/memory.py) exceeds the budget. A *saved activation* is a value of
the forward pass (what the function's own outputs, the loss, depend on) that a later node
reads. Recomputing it means a copy of its node placed just before its first later reader,
which then reads the copy: the original dies at the end of the forward pass, while the copy's
inputs must live until the copy runs.

Candidates are tried cheap elementwise results first, then the others by FLOPs per byte saved
(the op's cost rule); a candidate is kept when it lowers the planned peak. Rounds repeat (a copy
makes its own inputs candidates: chains are recomputed link by link) until the plan fits the
budget or nothing lowers the peak; then `MemoryBudgetError` states the lowest peak reached.
Nodes drawing random numbers, holding subgraphs, or views are never recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import EmberError
from ..graph.ir import Graph

__all__ = ["MemoryBudgetError", "RematReport", "rematerialize"]


class MemoryBudgetError(EmberError):
    """No rematerialization brings the planned peak under the memory budget."""


@dataclass
class RematReport:
    """What `rematerialize` did: the values recomputed (name, op, FLOPs, bytes), the extra
    FLOPs per call, and the planned peak before and after."""

    budget: int
    peak_before: int
    peak_after: int
    recomputed: list = field(default_factory=list)

    @property
    def extra_flops(self) -> int:
        return sum(r[2] for r in self.recomputed)

    def __str__(self) -> str:
        mib = 2**20
        lines = [
            f"memory budget {self.budget / mib:.2f} MiB: planned peak "
            f"{self.peak_before / mib:.2f} -> {self.peak_after / mib:.2f} MiB, "
            f"{len(self.recomputed)} values recomputed, {self.extra_flops:,} extra FLOPs"
        ]
        lines += [
            f"  %{n:<20} {op:<18} {f:>12,} FLOPs {b / mib:8.3f} MiB"
            for n, op, f, b in self.recomputed
        ]
        return "\n".join(lines)


def _flops(node) -> int:
    if node.op.cost is None:
        return 0
    try:
        cost = node.op.cost(
            [v.type for v in node.inputs], [v.type for v in node.outputs], node.attrs
        )
    except Exception:  # a cost rule that cannot price these types: treat as expensive
        return 1 << 40
    return int(cost.flops)


def _recomputable(node) -> bool:
    return (
        node.kind == "call"
        and node.op.kind != "random"
        and not node.op.view
        and not node.op.extra.get("aliases")  # views are recomputed with their base
        and not any(isinstance(a, Graph) for a in node.attrs.values())
        and all(v.type.shape for v in node.outputs)  # 0-d values save nothing
    )


def _forward_nodes(graph, n_user: int) -> set:
    seen, stack = set(), [v.node for v in graph.outputs[:n_user]]
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen.add(id(node))
            stack.extend(v.node for v in node.inputs)
    return seen


def _family(node) -> list:
    """The values sharing ``node``'s outputs' memory: its outputs and their views, recursively
    (a saved buffer is only freed when none of them is read)."""
    values, stack = [], list(node.outputs)
    while stack:
        v = stack.pop()
        values.append(v)
        for user in v.users:
            if (user.op.view or user.op.extra.get("aliases")) and user.inputs[0] is v:
                stack.extend(user.outputs)
    return values


def _candidates(graph, forward: set) -> list:
    """(node, first later reader position) for forward nodes owning memory that a non-forward
    node reads (through the node's outputs or views of them)."""
    position = {id(n): p for p, n in enumerate(graph.nodes)}
    found = []
    for node in graph.nodes:
        if id(node) not in forward or not _recomputable(node):
            continue
        later = [position[id(u)] for v in _family(node) for u in v.users if id(u) not in forward]
        if later:
            found.append((node, min(later)))
    return found


def _priority(node) -> tuple:
    from ..plan.layout import nbytes

    saved = sum(nbytes(v) for v in node.outputs) or 1
    cheap = node.op.kind == "elementwise"
    return (not cheap, _flops(node) / saved)


def _recompute(graph, node, forward: set, each: bool) -> Graph:
    """A copy of ``graph`` where the non-forward readers of ``node``'s outputs (and of their
    views) read a recomputed copy: one before the first of them, or (``each``) one before each
    of them. Views on the way are copied too (they cost nothing)."""
    new = graph.copy()
    original = new.nodes[graph.nodes.index(node)]
    forward_new = {id(new.nodes[p]) for p, n in enumerate(graph.nodes) if id(n) in forward}
    family = _family(original)
    readers = {id(u): u for v in family for u in v.users if id(u) not in forward_new}
    readers = sorted(readers.values(), key=new.nodes.index)
    for group in [[r] for r in readers] if each else [readers]:
        memo: dict = {}

        def cloned(v):
            if id(v) in memo:
                return memo[id(v)]
            producer = v.node
            if producer is original or not any(producer.inputs[0] is f for f in family):
                inputs = producer.inputs
            else:
                inputs = [cloned(producer.inputs[0]), *producer.inputs[1:]]
            copy = new.add_call(
                producer.op,
                inputs,
                producer.attrs,
                [o.type for o in producer.outputs],
                [f"{o.name}_remat" for o in producer.outputs],
            )
            for o, c in zip(producer.outputs, copy.outputs):
                memo[id(o)] = c
            return memo[id(v)]

        with new.inserting_before(group[0]):
            for user in group:
                for v in list(user.inputs):
                    if any(v is f for f in family):
                        user.replace_input(v, cloned(v))
    return new


def _score(plan) -> tuple:
    # the peak first; at an equal peak, less memory held over the whole call (a step towards
    # a lower peak that needs several recomputations)
    return (plan.peak_bytes, sum(plan.timeline))


def rematerialize(graph, budget: int, plan) -> tuple[Graph, RematReport]:
    """Recompute saved activations of ``graph`` until ``plan(graph).peak_bytes <= budget`` (see
    the module docstring); ``plan``: graph -> MemoryPlan, with the graph's parts and in-place
    updates. The graph's first ``n_user`` outputs (the loss) come from ``plan.n_user``."""
    current = plan(graph)
    report = RematReport(budget, current.peak_bytes, current.peak_bytes)
    if current.peak_bytes <= budget:
        return graph, report
    n_user = plan.n_user
    tried: set = set()
    while True:
        forward = _forward_nodes(graph, n_user)
        candidates = sorted(_candidates(graph, forward), key=lambda c: _priority(c[0]))
        improved = False
        for node, _ in candidates:
            for each in (False, True):
                key = (node.name, each, len(graph.nodes))
                if key in tried:
                    continue
                tried.add(key)
                trial = _recompute(graph, node, forward, each)
                trial_plan = plan(trial)
                if _score(trial_plan) < _score(current):
                    from ..plan.layout import nbytes

                    saved = sum(nbytes(v) for v in node.outputs)
                    copies = len(trial.nodes) - len(graph.nodes)
                    report.recomputed.append(
                        (node.name, node.op.name, _flops(node) * copies, saved)
                    )
                    graph, current, improved = trial, trial_plan, True
                    report.peak_after = current.peak_bytes
                    if current.peak_bytes <= budget:
                        return graph, report
                    break
            if improved:
                break  # positions changed: list the candidates again
        if not improved:
            break
    mib = 2**20
    raise MemoryBudgetError(
        f"memory budget {budget / mib:.2f} MiB ({budget:,} bytes) is below what "
        f"rematerialization reaches for graph {graph.name}: the minimum achievable peak is "
        f"{current.peak_bytes / mib:.2f} MiB ({current.peak_bytes:,} bytes; "
        f"{report.peak_before / mib:.2f} MiB without recomputation, "
        f"{len(report.recomputed)} values recomputed). Raise the budget to at least that, or "
        "lower the batch size",
        op="memory_budget",
    )
