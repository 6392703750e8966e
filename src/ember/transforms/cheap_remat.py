"""Cheap values recomputed in the backward pass of every captured training step.

A training step under autocast casts each parameter to 16 bits for its product; the backward
reads the same cast for the input's gradient. Kept from the forward, the cast stays alive
across the forward's end, where the step's peak usually is, while the float32 parameter it was
made from is alive there anyway. An op whose ``remat_free`` rule says its result costs next to
nothing beside the memory it writes (`cast`) is instead recomputed for its backward readers,
by transforms/remat.py's `recompute` (a copy just before its first backward reader, or one
before each), where the memory plan says that lowers the planned peak or, at an equal peak,
the memory held over the call (remat.py's `score`). Only values live at the planned peak are
tried: compiling plans each trial as fused. The copy runs the same kernel on the same
operand, so every value is bitwise what it was; only where it lives changes.

Unlike a memory budget's rematerialization (transforms/remat.py), this needs no budget and
never recomputes anything else: it runs on the joint graph of every training step at O3,
after the exact passes (CSE would merge a copy back into its original) and before fusion (the
late passes, ``finish``, each trial planned as they leave it).
"""

from __future__ import annotations

from .dce import eliminate_dead_code
from .remat import candidates, forward_nodes, recompute, score

__all__ = ["MAX_TRIALS", "recompute_cheap"]

# trials planned at most: each plans the graph as the late passes leave it
MAX_TRIALS = 16


def recompute_cheap(graph, plan, *, finish, n_user: int):
    """``graph`` with the results of ``remat_free`` ops that the backward reads recomputed
    there, each kept only where ``plan`` (graph -> MemoryPlan) of ``finish(graph)`` scores
    lower; returns (graph, [names of the recomputed values])."""
    current = plan(finish(graph.copy()))
    copies: dict = {}
    done: list = []
    tried: set = set()
    trials = 0
    accepted_since_sweep = False
    while trials < MAX_TRIALS:
        forward = forward_nodes(graph, n_user)
        improved = False
        at_peak = {b.name.lstrip("%") for b in current.live_at_peak}
        for node, _ in candidates(graph, forward):
            if not node.op.remat_free or node.name in tried or trials >= MAX_TRIALS:
                continue
            if not any(v.name in at_peak for v in node.outputs):
                continue  # (recomputed, it would still be made before the peak or not live there)
            tried.add(node.name)
            for each in (False, True):
                trials += 1
                trial_copies = dict(copies)
                trial = recompute(graph, node, forward, each, trial_copies)
                trial, _ = eliminate_dead_code(trial)
                trial_plan = plan(finish(trial.copy()))
                if score(trial_plan) < score(current):
                    graph, current, copies = trial, trial_plan, trial_copies
                    done.append(node.name)
                    improved = accepted_since_sweep = True
                    break
            if improved:
                break  # positions changed: list the candidates again
        if not improved:
            # what was recomputed since may make a candidate that did not help pay now
            if not accepted_since_sweep:
                break
            tried.clear()
            accepted_since_sweep = False
    return graph, done
