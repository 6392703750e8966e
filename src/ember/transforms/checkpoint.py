"""Activation checkpointing in a graph: recompute checkpoint regions, or whatever a policy does
not save, in the backward pass instead of saving it.

Two sources say what to recompute:

* **regions**: ``ember.utils.checkpoint.checkpoint(fn, ...)`` called while a training step is
  captured tags the nodes ``fn`` records with a region number (``node.region``,
  graph/scope.py `checkpoint_region`). As in PyTorch's eager checkpoint, the region keeps its
  inputs and its outputs (what the rest of the forward pass reads) and recomputes, before the
  backward pass first needs any of them, every other value of the region the backward reads;
  all of the region's recomputation sits at that one place, so per-block regions hold one
  block's intermediates at a time;
* a **policy** (`RematPolicy`; ``ember.function(step, remat_policy=...)``) says, by op rule, which
  forward values are worth saving: `nothing_saveable` (save only the region's inputs),
  `dots_saveable` / `save_only` (save the products, ``matmul``, and whatever other families are
  named: the family is the op's ``flop_family`` rule, else ``matmul`` for ``linalg`` ops, else
  its kind, as the FLOP counter reports it), `everything_saveable`. Inside regions the policy
  replaces the default (nothing saveable); given without regions, the whole forward pass is one
  region whose values are each recomputed just before their first backward reader, from the
  nearest saved values.

`recompute` runs on the joint graph: for ``ember.function`` after the exact passes and before
fusion (capture/compile.py, as rematerialization under a memory budget: the recomputed chains
then join their backward readers' fused loops), for a compiled model whose backward stays on
eager autograd before the AOT partition (capture/aot.py: the recomputation is placed in the
backward graph, and only the region inputs are saved). Nodes drawing random numbers, holding
subgraphs, or producing 0-d values are always saved (a dropout mask is saved, so recomputation
sees the same mask). Results are exactly those without recomputation: the copies are the same
ops on the same operands.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import EmberError
from ..graph.ir import Graph

__all__ = [
    "CheckpointReport",
    "RematPolicy",
    "dots_saveable",
    "everything_saveable",
    "family",
    "forward_outputs",
    "has_regions",
    "nothing_saveable",
    "recompute",
    "resolve_policy",
    "save_only",
]


def family(op) -> str:
    """The family an op is counted under: its ``flop_family`` rule, else ``matmul`` for the
    ``linalg`` ops, else its kind (tools/flops.py reports FLOPs under the same names)."""
    if op.flop_family is not None:
        return op.flop_family
    return "matmul" if op.kind == "linalg" else op.kind


@dataclass(frozen=True)
class RematPolicy:
    """Which forward values a checkpointed region saves: those whose op's `family` is in
    ``saveable`` (a frozenset of family names)."""

    name: str
    saveable: frozenset = field(default_factory=frozenset)

    def saves(self, node) -> bool:
        return family(node.op) in self.saveable

    def __str__(self) -> str:
        return self.name


nothing_saveable = RematPolicy("nothing_saveable")
dots_saveable = RematPolicy("dots_saveable", frozenset({"matmul"}))


def save_only(*families: str) -> RematPolicy:
    """A policy saving the values of the named op families (``"matmul"``, ``"conv"``,
    ``"attention"``, ``"reduce"``, ...) and recomputing the others."""
    for f in families:
        if not isinstance(f, str):
            raise TypeError(f"save_only: families are names such as 'matmul', got {f!r}")
    return RematPolicy(f"save_only{tuple(families)!r}", frozenset(families))


class _Everything(RematPolicy):
    def saves(self, node) -> bool:
        return True


everything_saveable = _Everything("everything_saveable")

_NAMED = {p.name: p for p in (nothing_saveable, dots_saveable, everything_saveable)}


def resolve_policy(policy) -> RematPolicy | None:
    """A `RematPolicy` from a policy or its name; None stays None."""
    if policy is None or isinstance(policy, RematPolicy):
        return policy
    if isinstance(policy, str) and policy in _NAMED:
        return _NAMED[policy]
    raise EmberError(
        f"remat_policy is one of {', '.join(map(repr, _NAMED))}, a save_only(...) policy "
        f"or None; got {policy!r}",
        op="remat_policy",
    )


@dataclass
class CheckpointReport:
    """What `recompute` did: the policy, the regions, and the values recomputed (name, op)."""

    policy: str
    regions: int = 0
    recomputed: list = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"checkpointing ({self.policy}): {self.regions} regions, "
            f"{len(self.recomputed)} values recomputed in the backward pass"
        )


def has_regions(graph) -> bool:
    return any(getattr(n, "region", None) is not None for n in graph.nodes)


def _ancestors(graph, roots) -> set:
    seen, stack = set(), [v.node for v in roots]
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen.add(id(node))
            stack.extend(v.node for v in node.inputs)
    return seen


def _recomputable(node) -> bool:
    return (
        node.kind == "call"
        and node.op.kind != "random"
        and node.op.effect is None
        and not any(isinstance(a, Graph) for a in node.attrs.values())
        and all(v.type.shape for v in node.outputs)
    )


def forward_outputs(graph: Graph, n_user: int, backward_start: int | None) -> list[int]:
    """The positions among the first ``n_user`` outputs of a traced joint ``graph`` (nodes
    from ``backward_start`` on: the backward pass) of those the forward pass computes (the
    loss, not the gradients a step returns). Passes keep a graph's outputs in place, so the
    positions hold for the optimized graph."""
    if backward_start is None:
        return []
    before = {id(n) for n in graph.nodes[:backward_start]}
    return [i for i, v in enumerate(graph.outputs[:n_user]) if id(v.node) in before]


def recompute(
    graph: Graph,
    policy=None,
    *,
    outputs: list[int] | None = None,
    backward_start: int | None = None,
) -> tuple[Graph, CheckpointReport]:
    """A copy of ``graph`` whose backward pass recomputes what the regions (and ``policy``)
    do not save (see the module docstring). The forward pass is the nodes before position
    ``backward_start`` when given (an AOT joint graph: the copies go after it), else the
    ancestors of the outputs at positions ``outputs`` (`forward_outputs`: the loss)."""
    policy = resolve_policy(policy)
    report = CheckpointReport(str(policy) if policy is not None else "nothing_saveable")
    graph = graph.copy()
    if backward_start is not None:
        forward = {id(n) for n in graph.nodes[:backward_start]}
    elif outputs is not None:
        forward = _ancestors(graph, [graph.outputs[i] for i in outputs])
    else:
        raise ValueError("recompute: give outputs or backward_start")
    whole_graph = policy is not None and not has_regions(graph)
    regions = {n.region for n in graph.nodes if id(n) in forward and n.region is not None}
    report.regions = len(regions)

    def recomputed(node) -> bool:
        if id(node) not in forward or not _recomputable(node):
            return False
        if node.region is None and not whole_graph:
            return False
        return not (policy or nothing_saveable).saves(node)

    # a region's outputs (values its forward readers outside it read, or the graph returns)
    # are saved: the rest of the forward pass reads them anyway
    returned = {id(v) for v in graph.outputs}
    chosen = set()
    for node in graph.nodes:
        if not recomputed(node):
            continue
        escapes = any(
            id(v) in returned or any(id(u) in forward and u.region != node.region for u in v.users)
            for v in node.outputs
        )
        if node.region is not None and escapes:
            continue
        chosen.add(id(node))
    if not chosen:
        return graph, report

    position = {id(n): p for p, n in enumerate(graph.nodes)}
    # what the backward reads of the chosen values: (reader, value), grouped by region (each
    # value of the whole-graph policy on its own)
    groups: dict = {}
    for node in graph.nodes:
        if id(node) not in chosen:
            continue
        for v in node.outputs:
            readers = [u for u in v.users if id(u) not in forward]
            if readers:
                key = node.region if node.region is not None else ("value", id(v))
                groups.setdefault(key, []).extend((u, v) for u in readers)
    copies: dict = {}  # original value id -> [(copy value, position of the node it precedes)]
    order = sorted(groups.values(), key=lambda g: min(position[id(u)] for u, _ in g))
    for group in order:
        first = min((u for u, _ in group), key=lambda u: position[id(u)])
        at = position[id(first)]
        memo: dict = {}

        def cloned(v, at=at, memo=memo):
            if id(v) in memo:
                return memo[id(v)]
            earlier = [c for c, p in copies.get(id(v), ()) if p <= at]
            if earlier:
                return earlier[-1]
            producer = v.node
            if id(producer) not in chosen:
                return v
            inputs = [cloned(u) for u in producer.inputs]
            copy = graph.add_call(
                producer.op,
                inputs,
                producer.attrs,
                [o.type for o in producer.outputs],
                [f"{o.name}_ckpt" for o in producer.outputs],
            )
            copy.scope = producer.scope
            for o, c in zip(producer.outputs, copy.outputs):
                memo[id(o)] = c
                copies.setdefault(id(o), []).append((c, at))
                report.recomputed.append((o.name, producer.op.name))
            return memo[id(v)]

        with graph.inserting_before(first):
            for reader, v in group:
                reader.replace_input(v, cloned(v))
    return graph, report
