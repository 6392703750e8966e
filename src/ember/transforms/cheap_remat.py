"""Cheap values recomputed in the backward pass of every captured training step.

A training step under autocast casts each parameter to 16 bits for its product; the backward
reads the same cast for the input's gradient. Kept from the forward, the cast stays alive
across the forward's end, where the step's peak usually is, while the float32 parameter it was
made from is alive there anyway. An op whose ``remat_free`` rule says its result costs next to
nothing beside the memory it writes (`cast`) is instead recomputed for its backward readers,
by transforms/remat.py's `recompute` (a copy just before its first backward reader), where
the memory plan says that lowers the planned peak. So is an elementwise result made from
values that the backward reads anyway (a GELU's output, which the next product's weight
gradient reads, from its input, which GELU's own gradient reads; in float32 GELU is its
composite, whose inner links, `x * 0.5` and `1 + erf(...)`, were each held too): a pass over
memory, and nothing kept alive that was not. Only values live at the planned peak are tried:
the casts of the step's inputs at once, the elementwise results at once (every block's
GELU), others one by one, the largest first; compiling plans each trial as fused and
scheduled. The copy runs the same kernel on the same operand, so every
value is bitwise what it was; only where it lives changes.

A result whose op's ``row_statistics`` rule writes it from per-row statistics of a narrower
operand (the loss's float32 log_softmax of 16-bit logits) is split into those nodes and its
elementwise rest recomputed likewise (transforms/row_statistics.py): the forward saves the
16-bit operand and the statistics, the same values in half the bytes.

Unlike a memory budget's rematerialization (transforms/remat.py), this needs no budget and
recomputes no product, reduction or random value: it runs on the joint graph of every
training step at O3, after the exact passes (CSE would merge a copy back into its original)
and before fusion (the late passes, ``finish``, each trial planned as they leave it:
capture/compile.py).
"""

from __future__ import annotations

from ..plan.layout import nbytes
from .dce import eliminate_dead_code
from .remat import candidates, forward_nodes, recompute, score
from .row_statistics import saves_bytes, split

__all__ = ["MAX_ALONE", "MAX_CHAIN", "MAX_TRIALS", "recompute_cheap"]

# trials at most: each fuses, schedules and plans the whole step
MAX_TRIALS = 8
# values tried alone per round (a 16-bit copy of a float32 activation, which only pays where
# its source is alive anyway at the peak: rarely)
MAX_ALONE = 3
# elementwise nodes at most in a chain recomputed from saved values (`_beside_saved`)
MAX_CHAIN = 8


def recompute_cheap(graph, plan, *, finish, n_user: int):
    """``graph`` with the results of ``remat_free`` ops that the backward reads recomputed
    there, kept only where ``plan`` (graph -> MemoryPlan) of ``finish(graph)`` scores lower;
    returns (graph, [names of the recomputed values]).

    Each round first tries the splits of transforms/row_statistics.py (every saved result
    at the peak whose op's ``row_statistics`` rule saves fewer bytes, together), then
    together such values live at the current plan's peak (only those can lower it) whose
    operands are the step's inputs (parameters, the batch: alive over the whole call, so
    recomputing only shortens what is held), then together the elementwise
    results whose operand the backward reads anyway (`_beside_saved`), then each of the
    others alone (the largest `MAX_ALONE`); the first trial that scores lower (remat.py's
    `score`: the peak, then the memory held over the call) is kept, and the next round looks
    at the new peak. At most `MAX_TRIALS` trials."""
    current = plan(finish(graph.copy()))
    copies: dict = {}
    done: list = []
    tried: set = set()
    trials = 0
    while trials < MAX_TRIALS:
        at_peak = {b.name.lstrip("%") for b in current.live_at_peak}
        forward = forward_nodes(graph, n_user)
        saved = [
            node
            for node, _ in candidates(graph, forward)
            if node.name not in tried and any(v.name in at_peak for v in node.outputs)
        ]
        nodes = [n for n in saved if _cheap(n) is not None or _beside_saved(n, forward) is not None]
        # (every loss's log_softmax at once)
        splits = [[n.name for n in saved if saves_bytes(n)]]
        inputs = {id(v) for v in graph.inputs}
        of_inputs = [
            n.name for n in nodes if _cheap(n) is not None and id(_source(_cheap(n))) in inputs
        ]
        rest = [n for n in nodes if n.name not in of_inputs]
        # (every block's GELU output at once: alike blocks peak alike)
        beside = [n.name for n in rest if _cheap(n) is None]
        groups = ([of_inputs] if of_inputs else []) + ([beside] if len(beside) > 1 else [])
        kept = None
        tries = [(g, False) for g in groups + _shared(rest, forward) + _alone(rest)]
        for group, splitting in [(g, True) for g in splits if g] + tries:
            if trials >= MAX_TRIALS:
                break
            trials += 1
            trial_copies = dict(copies)
            if splitting:
                trial = _split(graph, group, n_user)
            else:
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


def _beside_saved(node, forward: set):
    """The value an elementwise ``node`` is recomputed from when that costs a few passes and
    keeps nothing alive that would not be anyway, else None: its operands that are not 0-d
    lead, through elementwise forward values nothing in the backward reads (at most
    `MAX_CHAIN` nodes: GELU written out, ``x * 0.5 * (1 + erf(x / sqrt(2)))``), to values
    that a backward node reads or the step's inputs, the first such value returned (a GELU's
    input, read by GELU's gradient; a ReLU's, whose gradient reads its output instead, is
    not)."""
    if node.kind != "call" or node.op.kind != "elementwise" or len(node.outputs) != 1:
        return None
    if node.op.effect is not None:
        return None
    leaves, seen, stack = [], set(), [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if len(seen) > MAX_CHAIN:
            return None
        for v in n.inputs:
            if not v.type.shape:
                continue
            readers = [u for w in _views_of(_source(v)) for u in w.users]
            if v.node.kind == "input" or any(id(u) not in forward for u in readers):
                leaves.append(v)
            elif _inner(v, forward):
                stack.append(v.node)
            else:
                return None
    return leaves[0] if leaves else None


def _inner(v, forward: set) -> bool:
    """Whether ``v`` is a link remat.py's `recompute` copies along: an elementwise forward
    value of one output that only forward nodes read."""
    producer = v.node
    return (
        producer.kind == "call"
        and id(producer) in forward
        and producer.op.kind == "elementwise"
        and producer.op.effect is None
        and len(producer.outputs) == 1
        and all(id(u) in forward for u in v.users)
    )


def _views_of(v) -> list:
    """``v`` and the views of it, recursively (remat.py's family of a value)."""
    values, stack = [], [v]
    while stack:
        w = stack.pop()
        values.append(w)
        for user in w.users:
            if user.kind == "call" and (user.op.view or user.op.aliases) and user.inputs[0] is w:
                stack.extend(user.outputs)
    return values


def _shared(nodes: list, forward: set) -> list:
    """Groups of the ``nodes`` recomputed from one value (through views: the query's, key's
    and value's casts of one projection), tried together: alone, each keeps the whole source
    alive for what it frees."""
    by_source: dict = {}
    for n in nodes:
        operand = _cheap(n)
        operand = _beside_saved(n, forward) if operand is None else operand
        by_source.setdefault(id(_source(operand)), []).append(n.name)
    return [names for names in by_source.values() if len(names) > 1]


def _alone(nodes: list) -> list:
    """The first `MAX_ALONE` of ``nodes``, the largest results first: they free the most."""
    largest = sorted(nodes, key=lambda n: -sum(nbytes(v) for v in n.outputs))
    return [[n.name] for n in largest][:MAX_ALONE]


def _source(v):
    """The value ``v`` is a view of (through views of views), or ``v``."""
    while v.node.kind == "call" and (v.node.op.view or v.node.op.aliases):
        v = v.node.inputs[0]
    return v


def _split(graph, names: list, n_user: int):
    """A copy of ``graph`` with the nodes of ``names`` split by their ``row_statistics`` rules
    (transforms/row_statistics.py), and what that leaves dead removed."""
    graph = graph.copy()
    for name in names:
        split(graph, next(n for n in graph.nodes if n.name == name), forward_nodes(graph, n_user))
    graph, _ = eliminate_dead_code(graph)
    return graph


def _recomputed(graph, names: list, n_user: int, copies: dict):
    """A copy of ``graph`` with the values of ``names`` recomputed for their backward readers
    (one copy before the first of them; remat.py's `recompute`), and what that leaves dead
    removed."""
    for name in names:
        node = next(n for n in graph.nodes if n.name == name)
        graph = recompute(graph, node, forward_nodes(graph, n_user), False, copies)
    graph, _ = eliminate_dead_code(graph)
    return graph
