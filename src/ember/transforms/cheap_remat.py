"""Cheap values recomputed in the backward pass of every captured training step.

A training step under autocast casts each parameter to 16 bits for its product; the backward
reads the same cast for the input's gradient. Kept from the forward, the cast stays alive
across the forward's end, where the step's peak usually is, while the float32 parameter it was
made from is alive there anyway. An op whose ``remat_free`` rule says its result costs next to
nothing beside the memory it writes (`cast`) is instead recomputed for its backward readers,
by transforms/remat.py's `recompute` (a copy just before its first backward reader), where
the memory plan says that lowers the planned peak. Only values live at the planned peak are
tried, the casts of the step's inputs at once, others one by one: compiling plans each
trial as fused and scheduled. The copy runs the same kernel on the same operand, so every
value is bitwise what it was; only where it lives changes.

Unlike a memory budget's rematerialization (transforms/remat.py), this needs no budget and
never recomputes anything else: it runs on the joint graph of every training step at O3,
after the exact passes (CSE would merge a copy back into its original) and before fusion (the
late passes, ``finish``, each trial planned as they leave it: capture/compile.py).
"""

from __future__ import annotations

from .dce import eliminate_dead_code
from .remat import candidates, forward_nodes, recompute, score

__all__ = ["MAX_ALONE", "MAX_TRIALS", "recompute_cheap"]

# trials at most: each fuses, schedules and plans the whole step
MAX_TRIALS = 8
# values tried alone per round (a 16-bit copy of a float32 activation, which only pays where
# its source is alive anyway at the peak: rarely)
MAX_ALONE = 3


def recompute_cheap(graph, plan, *, finish, n_user: int):
    """``graph`` with the results of ``remat_free`` ops that the backward reads recomputed
    there, kept only where ``plan`` (graph -> MemoryPlan) of ``finish(graph)`` scores lower;
    returns (graph, [names of the recomputed values]).

    Each round tries together such values live at the current plan's peak (only those can
    lower it) whose operands are the step's inputs (parameters, the batch: alive over the
    whole call, so recomputing only shortens what is held), then each of the others alone
    (the first `MAX_ALONE`); the first trial that scores lower (remat.py's `score`: the
    peak, then the memory held over the call) is kept, and the next round looks at the new
    peak. At most `MAX_TRIALS` trials."""
    current = plan(finish(graph.copy()))
    copies: dict = {}
    done: list = []
    tried: set = set()
    trials = 0
    while trials < MAX_TRIALS:
        at_peak = {b.name.lstrip("%") for b in current.live_at_peak}
        nodes = [
            node
            for node, _ in candidates(graph, forward_nodes(graph, n_user))
            if _cheap(node) is not None
            and node.name not in tried
            and any(v.name in at_peak for v in node.outputs)
        ]
        inputs = {id(v) for v in graph.inputs}
        of_inputs = [n.name for n in nodes if id(_source(_cheap(n))) in inputs]
        rest = [n for n in nodes if n.name not in of_inputs]
        kept = None
        for group in ([of_inputs] if of_inputs else []) + _shared(rest) + _alone(rest):
            if trials >= MAX_TRIALS:
                break
            trials += 1
            trial_copies = dict(copies)
            trial = _recomputed(graph, group, n_user, trial_copies)
            trial_plan = plan(finish(trial.copy()))
            if score(trial_plan) < score(current):
                graph, current, copies, kept = trial, trial_plan, trial_copies, group
                break
        if kept is None:
            break
        done += kept
        tried.update(kept)
    return graph, done


def _cheap(node):
    """The operand ``node`` is recomputed from when it costs next to nothing beside the memory
    it writes, else None: a ``remat_free`` op's (a cast), or that of an elementwise op reading
    one such result and 0-d values only (the float32 query's scale after its cast)."""
    if node.kind != "call":
        return None
    if node.op.remat_free:
        return node.inputs[0] if len(node.inputs) == 1 else None
    if node.op.kind != "elementwise" or len(node.outputs) != 1:
        return None
    wide = [v for v in node.inputs if v.type.shape]
    if len(wide) != 1 or wide[0].type.shape != node.outputs[0].type.shape:
        return None
    inner = wide[0].node
    if len(wide[0].users) != 1 or inner.kind != "call" or not inner.op.remat_free:
        return None
    return _cheap(inner)


def _shared(nodes: list) -> list:
    """Groups of the ``nodes`` recomputed from one value (through views: the query's, key's
    and value's casts of one projection), tried together: alone, each keeps the whole source
    alive for what it frees."""
    by_source: dict = {}
    for n in nodes:
        by_source.setdefault(id(_source(_cheap(n))), []).append(n.name)
    return [names for names in by_source.values() if len(names) > 1]


def _alone(nodes: list) -> list:
    return [[n.name] for n in nodes][:MAX_ALONE]


def _source(v):
    """The value ``v`` is a view of (through views of views), or ``v``."""
    while v.node.kind == "call" and (v.node.op.view or v.node.op.aliases):
        v = v.node.inputs[0]
    return v


def _recomputed(graph, names: list, n_user: int, copies: dict):
    """A copy of ``graph`` with the values of ``names`` recomputed for their backward readers
    (one copy before the first of them; remat.py's `recompute`), and what that leaves dead
    removed."""
    for name in names:
        node = next(n for n in graph.nodes if n.name == name)
        graph = recompute(graph, node, forward_nodes(graph, n_user), False, copies)
    graph, _ = eliminate_dead_code(graph)
    return graph
