"""Compiling a captured call: `CompileOptions`, and the steps from the traced graph to a
runnable program.

`compile_call(call, options)` takes a `CapturedCall` (capture/call.py) through

1. `optimize_joint`: the pass pipeline of ``options.opt_level`` (transforms/pipeline.py) on a
   copy of the traced graph, each pass checked on the call's inputs with ``verify``; under a
   memory budget the passes that must see the final graph (fusion) are held back
   (transforms/remat.py `split_late`);
2. where the step has checkpoint regions or ``options.remat_policy`` is given:
   `transforms.checkpoint.recompute` moves what they do not save into the backward pass; then
   with ``options.memory_budget``: `transforms.remat.fit_budget` rematerializes activations
   until the planned peak (plan/program.py `Planner`) fits, and the held-back passes run;
   without one, a training step's cheap values (its 16-bit casts of parameters) are
   recomputed in the backward where that plans lower (transforms/cheap_remat.py), then the
   held-back passes run;
3. the executor's ``prepare`` (runtime/executors.py), with the in-place updates the call's
   writebacks allow.

A call whose backward stays on eager autograd is compiled as its forward and backward graphs
instead (capture/aot.py `AutogradPlan`), with the same options.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..plan.arena import concrete
from ..plan.program import Planner
from ..runtime.executors import DEFAULT_EXECUTOR, Executor, Program, get_executor
from ..transforms import checkpoint as _checkpoint
from ..transforms.cheap_remat import recompute_cheap
from ..transforms.dce import eliminate_dead_code
from ..transforms.pipeline import PassStat, optimize, passes_for
from ..transforms.remat import RematReport, fit_budget, split_late
from .call import CapturedCall

__all__ = ["DEFAULT_OPT_LEVEL", "CompileOptions", "Compiled", "compile_call", "optimize_joint"]

DEFAULT_OPT_LEVEL = 3  # transforms/pipeline.py: O3 runs every pass


@dataclass(frozen=True)
class CompileOptions:
    """How ``ember.trace`` / ``ember.function`` compile what they capture: the ``executor``
    by name (runtime/executors.py), the pass pipeline ``opt_level`` (0..3, "O0".."O3" or a
    list of passes), ``verify`` (check every pass on the tracing call's inputs) and
    ``memory_budget`` (bytes the planned peak must fit, or None), ``remat_policy`` (what a
    training step saves for its backward: transforms/checkpoint.py, or None). Checked when
    made, so a bad option fails before anything is traced."""

    executor: str = DEFAULT_EXECUTOR
    opt_level: object = DEFAULT_OPT_LEVEL
    verify: bool = False
    memory_budget: int | None = None
    remat_policy: object = None

    def __post_init__(self):
        object.__setattr__(self, "remat_policy", _checkpoint.resolve_policy(self.remat_policy))
        if self.memory_budget is not None and int(self.memory_budget) <= 0:
            raise ValueError(f"memory_budget is a number of bytes > 0, got {self.memory_budget!r}")
        get_executor(self.executor)
        passes_for(self.opt_level)

    @property
    def runner(self) -> Executor:
        """The executor that runs the compiled graphs. Under a memory budget, ``"auto"`` runs
        generated code: the budget is planned for its order and in-place updates (parallel
        runs hold values longer, the C runner holds its arrays between calls)."""
        if self.executor == DEFAULT_EXECUTOR and self.memory_budget is not None:
            return get_executor("codegen")
        return get_executor(self.executor)


@dataclass
class Compiled:
    """A compiled call: the ``graph`` that runs (after the passes), its ``program``, each
    pass's `PassStat` and, under a memory budget, what rematerialization recomputed;
    ``checkpoint``: what checkpoint regions or the policy recomputed."""

    graph: object
    program: Program
    pass_stats: list[PassStat]
    remat: RematReport | None = None
    checkpoint: object = None


def recomputes(graph, options: CompileOptions) -> bool:
    """Whether ``graph`` compiled with ``options`` runs `transforms.checkpoint.recompute`."""
    return options.remat_policy is not None or _checkpoint.has_regions(graph)


def recomputes_cheap(call: CapturedCall, options: CompileOptions) -> bool:
    """Whether `compile_call` runs transforms/cheap_remat.py: a training step (it has a
    backward pass) of concrete sizes (a symbolic one's bytes are known only at the call)
    whose pipeline fuses, without a memory budget (which recomputes more)."""
    fuses = any(p.name == "fuse" for p in passes_for(options.opt_level))
    training = call.backward_start is not None and options.memory_budget is None
    return training and fuses and concrete(call.graph)


def optimize_joint(
    graph, options: CompileOptions, check=None, hold_late: bool = False
) -> tuple[object, list, list]:
    """(the optimized copy of ``graph``, the pass stats, the passes held back for after
    rematerialization); ``check``: input arrays to verify each pass on, or None;
    ``hold_late``: hold the late passes back even without a budget or checkpointing."""
    passes, late = passes_for(options.opt_level), []
    if options.memory_budget is not None or recomputes(graph, options) or hold_late:
        passes, late = split_late(passes)
    graph, stats = optimize(graph.copy(), passes=passes, check=check, label="joint")
    return graph, stats, late


def compile_call(call: CapturedCall, options: CompileOptions, check=None) -> Compiled:
    """The steps of the module docstring; ``check``: the call's input arrays when
    ``options.verify`` asks to check the passes, else None."""
    graph, stats, late = call.graph, [], []
    returned = len(graph.outputs)
    loss = None
    if recomputes(call.graph, options) and call.backward_start is not None:
        loss = _checkpoint.forward_outputs(call.graph, call.n_user, call.backward_start)
        if not loss and call.backward_roots:
            graph, loss = _losses_returned(call)  # (dropped again before the runner prepares)
    cheap = options.opt_level and recomputes_cheap(call, options)
    if options.opt_level:
        graph, stats, late = optimize_joint(graph, options, check, hold_late=cheap)
    remat = checkpointed = None
    if loss is not None:
        graph, checkpointed = _checkpoint.recompute(graph, options.remat_policy, outputs=loss)
    if cheap:
        graph = _recompute_cheap(graph, call, late)
    if options.memory_budget is None and late:
        graph, fitted = optimize(graph, passes=late, check=check, label="joint")
        stats = stats + fitted
    if options.memory_budget is not None:
        planner = Planner(call.memory_parts())
        graph, remat, fitted = fit_budget(graph, int(options.memory_budget), planner, late)
        stats = stats + fitted
    if len(graph.outputs) > returned:  # the losses `_losses_returned` added
        graph.set_outputs(graph.outputs[:returned])
        eliminate_dead_code(graph)
    program = options.runner.prepare(graph, call.inplace())
    return Compiled(graph, program, stats, remat, checkpointed)


def _losses_returned(call: CapturedCall) -> tuple[object, list[int]]:
    """A copy of the traced graph that also returns the values its backward passes ran from
    (the losses), and their output positions: a step that returns no loss (only gradients, or
    nothing) still has a forward pass to recompute checkpointed regions from, and passes keep
    a graph's outputs in place, so the positions name the losses in the optimized graph."""
    graph = call.graph.copy()
    where = {id(v): (p, v.index) for p, n in enumerate(call.graph.nodes) for v in n.outputs}
    roots = [where[id(v)] for v in call.backward_roots if id(v) in where]
    first = len(graph.outputs)
    graph.set_outputs(graph.outputs + [graph.nodes[p].outputs[i] for p, i in roots])
    return graph, list(range(first, first + len(roots)))


def _recompute_cheap(graph, call: CapturedCall, late: list):
    """``graph`` with transforms/cheap_remat.py's recomputations, each trial planned as the
    ``late`` passes leave it (scheduling included: it may lower one trial's peak and not
    another's)."""

    def finish(g):
        return optimize(g, passes=late)[0]

    planner = Planner(call.memory_parts())
    graph, _ = recompute_cheap(graph, planner, finish=finish, n_user=planner.n_user)
    return graph
