"""Rematerialization under a memory budget: recompute saved activations in the backward pass.

``ember.function(..., memory_budget=bytes)`` runs `rematerialize` on a training step's graph
when its planned peak (plan/memory.py) exceeds the budget. A *saved activation* is a value of
the forward pass (what the function's own outputs, the loss, depend on) that a later node
reads. Recomputing it means a copy of its node placed just before its first later reader,
which then reads the copy: the original dies at the end of the forward pass, while the copy's
inputs must live until the copy runs.

A copy reads, where it can, an earlier copy of its operand (recomputed for another reader and
still there), and recomputes along the way the cheap elementwise forward values only it would
read: ``gelu``'s ``1 + erf(h / sqrt 2)`` is recomputed from ``h`` as a whole, not traded for
``erf(h / sqrt 2)`` saved instead.

Rematerialization runs on the joint graph after the exact passes and *before* fusion
(`LATE_PASSES`, given as ``finish``, with `share_reshaped_copies`): fused forward loops would
otherwise compute values only the backward needs (a GELU loop's derivative terms) at the end of
the forward pass, live there whatever is recomputed later, while a recomputed elementwise chain
placed before its backward reader joins that reader's fused loop and costs no memory of its
own. Each trial is planned as the late passes leave it.

Candidates are tried cheap elementwise results first, then the others by FLOPs per byte saved
(the op's cost rule); a candidate is kept when it lowers the planned peak (or, at an equal
peak, the memory held over the call). Rounds repeat (a copy makes its own inputs candidates)
until the plan fits the budget; a candidate that did not help is tried again only after a
whole round found nothing, and when such a round finds nothing either, `fit_budget` splits
the batch into slices (transforms/microbatch.py; see `_split_batch_and_fit`); where the step
cannot run in slices (batch normalization), it runs regions of it in slices instead: a
convolution or product and the per-sample work around it (`_tile_and_fit`), and only when
that cannot fit either does `MemoryBudgetError` state the lowest peak reached. Nodes drawing
random numbers, holding subgraphs, or views are never recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import EmberError
from ..graph.ir import Graph
from ..graph.rewrite import Pass
from .dce import eliminate_dead_code

__all__ = [
    "LATE_PASSES",
    "MemoryBudgetError",
    "RematReport",
    "candidates",
    "fit_budget",
    "forward_nodes",
    "recompute",
    "rematerialize",
    "score",
    "split_late",
]

# passes that run after rematerialization: fusion groups recomputed chains with their readers
LATE_PASSES = ("fuse", "epilogue", "schedule")
# the most slices a budget splits the batch into: each is a copy of the step's graph, and past
# this the copies' per-op costs outweigh what thinner slices save
MAX_SLICES = 16


class MemoryBudgetError(EmberError):
    """No rematerialization (on the whole batch or on slices of it) brings the planned peak
    under the memory budget; ``plan`` is the memory plan of the lowest peak reached (what is
    live there); ``graph`` and ``report``: the graph of that plan and what was recomputed."""

    plan = None
    graph = None
    report = None


@dataclass
class RematReport:
    """What `rematerialize` did: the values recomputed (name, op, FLOPs, bytes), the extra
    FLOPs per call, and the planned peak before and after."""

    budget: int
    peak_before: int
    peak_after: int
    recomputed: list = field(default_factory=list)
    microbatches: int = 1  # the batch's slices (transforms/microbatch.py): 1 when not split
    # regions run in slices of the batch (`_tile_and_fit`): (their nodes, the products and
    # convolutions among them, slices)
    tiles: list = field(default_factory=list)

    @property
    def extra_flops(self) -> int:
        return sum(r[2] for r in self.recomputed)

    def __str__(self) -> str:
        mib = 2**20
        split = f", the batch in {self.microbatches} slices" if self.microbatches > 1 else ""
        lines = [
            f"memory budget {self.budget / mib:.2f} MiB: planned peak "
            f"{self.peak_before / mib:.2f} -> {self.peak_after / mib:.2f} MiB{split}, "
            f"{len(self.recomputed)} values recomputed, {self.extra_flops:,} extra FLOPs"
        ]
        lines += [
            f"  %{n:<20} {op:<18} {f:>12,} FLOPs {b / mib:8.3f} MiB"
            for n, op, f, b in self.recomputed
        ]
        lines += [
            f"  tiled: {size} nodes ({', '.join(heavy) or 'elementwise'}) in {k} slices of "
            "the batch"
            for size, heavy, k in self.tiles
        ]
        return "\n".join(lines)


def split_late(passes: list) -> tuple[list, list]:
    """(the passes that run before rematerialization, those after: `LATE_PASSES`, with
    `SHARE_COPIES` before scheduling)."""
    early = [p for p in passes if p.name not in LATE_PASSES]
    late = [p for p in passes if p.name in LATE_PASSES and p.name != "schedule"]
    return early, late + [SHARE_COPIES] + [p for p in passes if p.name == "schedule"]


def share_reshaped_copies(graph) -> tuple[Graph, bool]:
    """Where two nodes of one op copy the same non-contiguous value (``reshape``: a permuted
    gradient reshaped for the input gradient's matmul and again for the weight's), and the
    op's ``compose`` rule says applying it to the earlier's result gives the later's (a reshape
    of a reshape is the outer reshape), the later reads the earlier's result instead: a view of
    a contiguous array, one copy fewer alive. Exact by the rule. The opposite of
    simplification's composition of such chains, so it runs after it, with the late passes.
    Only where the earlier copy is still read after the later one: else sharing would hold it
    from its last reader on, undoing a recomputation's (transforms/cheap_remat.py)."""
    from ..plan.layout import Layouts

    layouts = Layouts(graph)
    position = {id(n): p for p, n in enumerate(graph.nodes)}
    changed = False
    for node in graph.nodes:
        for v in node.outputs:
            if layouts.contiguous(v) or any(isinstance(d, str) for d in v.type.shape):
                continue
            copies = [
                u
                for u in v.users
                if u.op is not None and u.op.compose is not None and u.inputs[0] is v
            ]
            copies = [u for u in copies if id(u.outputs[0]) not in layouts.alias]
            copies.sort(key=lambda u: position[id(u)])
            for later in copies[1:]:
                first = next(u for u in copies if u.op is later.op)
                if first is later or not _outer_decides(first, later, v):
                    continue
                if max(position[id(u)] for u in first.outputs[0].users) < position[id(later)]:
                    # first's copy is dead by then: reading it would hold it from its last
                    # reader to here (a cast recomputed in the backward, held from the forward)
                    continue
                later.replace_input(v, first.outputs[0])
                changed = True
    return graph, changed


def _outer_decides(first, later, v) -> bool:
    """Whether ``later`` applied to ``first``'s result equals ``later`` applied to ``v``."""
    composed = later.op.compose(first.attrs, later.attrs, v.type)
    return composed is not None and dict(composed) == dict(later.attrs)


SHARE_COPIES = Pass(
    "share_copies", share_reshaped_copies, level=3, doc="one copy for two reshapes of a value"
)


def fit_budget(graph, budget: int, plan, late: list) -> tuple[Graph, RematReport, list]:
    """`rematerialize` ``graph`` for ``budget`` with the ``late`` passes (from `split_late`)
    finishing each trial, scheduling excepted: it runs once on the result (it only keeps an
    order that plans a lower peak, so the result still fits). Returns (graph, report, the
    late passes' statistics)."""
    from .pipeline import optimize

    trial_passes = [p for p in late if p.name != "schedule"]

    def finish(g):
        return optimize(g, passes=trial_passes)[0]

    try:
        graph, report = rematerialize(graph, budget, plan, finish=finish)
    except MemoryBudgetError as error:
        graph, report = _split_batch_and_fit(graph, budget, plan, finish, error)
    graph, stats = optimize(graph, passes=trial_passes, label="joint")  # no change: statistics
    graph, schedule_stats = optimize(
        graph, passes=[p for p in late if p.name == "schedule"], label="joint"
    )
    return graph, report, stats + schedule_stats


def _split_batch_and_fit(graph, budget: int, plan, finish, error: MemoryBudgetError):
    """When recomputation alone cannot reach ``budget``: the batch split into 2, 4, 8, ...
    slices (transforms/microbatch.py), the fewest that fit, each count tried first on
    ``graph`` as it is, then on the graph of the lowest peak recomputation reached (each slice
    recomputing what it chose; cheap to try, unlike a new search on a graph ``k`` times the
    size); at most `MAX_SLICES`, and no more once doubling the slices lowered nothing. Raises
    the error of the lowest peak reached, or ``error`` (saying why) when the batch cannot be
    split."""
    from .microbatch import NotBatchable, batch_inputs, split_batch

    batch = batch_inputs(graph, plan.input_parts)
    size = graph.inputs[batch[0]].type.shape[0] if batch else 1
    counts = [k for k in (2**e for e in range(1, MAX_SLICES.bit_length())) if size % k == 0]
    if not counts:  # (split_batch says why: no batch input, or one of an odd size)
        try:
            split_batch(graph, 2, batch)
        except NotBatchable as why:
            raise _with_note(error, f"the batch cannot be split: {why.detail}") from None
    try:
        split_batch(graph, counts[0], batch)
    except NotBatchable as why:  # the whole step cannot run in slices: tile parts of it
        return _tile_and_fit(graph, budget, plan, finish, error, batch, counts, why.detail)
    bases = [(graph, [])]
    if error.report.recomputed:  # the graph recomputation reached, when it differs
        bases.append((error.graph, error.report.recomputed))
    lowest, lowest_k, lowest_graph, tried = error.plan, 1, error.graph, 1
    previous = None  # the lowest peak of the previous count of slices
    for k in counts:
        best_here = None
        for base, recomputed in bases:
            try:
                split = finish(split_batch(base, k, batch))
            except NotBatchable as why:
                raise _with_note(error, f"the batch cannot be split: {why.detail}") from None
            trial = plan(split)
            if trial.peak_bytes <= budget:
                report = RematReport(budget, error.report.peak_before, trial.peak_bytes)
                report.recomputed, report.microbatches = list(recomputed), k
                return split, report
            if trial.peak_bytes < lowest.peak_bytes:
                lowest, lowest_k, lowest_graph = trial, k, split
            if best_here is None or trial.peak_bytes < best_here:
                best_here = trial.peak_bytes
        tried = k
        if previous is not None and best_here >= previous:
            break  # twice the slices gained nothing: more will not either
        previous = best_here
    if lowest_k == 1:  # (the parameters, optimizer state and gradients alone exceed it)
        raise _with_note(error, f"slicing the batch, up to {tried} slices, reaches no lower")
    mib = 2**20
    failed = MemoryBudgetError(
        f"memory budget {budget / mib:.2f} MiB ({budget:,} bytes) is below what "
        f"rematerialization and splitting the batch reach for graph {graph.name}: the minimum "
        f"achievable peak is {lowest.peak_bytes / mib:.2f} MiB ({lowest.peak_bytes:,} bytes, "
        f"the batch in {lowest_k} slices; {error.report.peak_before / mib:.2f} MiB without "
        f"either; live at %{lowest.peak_node}). Raise the budget to at least that, or lower "
        "the batch size",
        op="memory_budget",
        location=error.location,
    )
    failed.plan, failed.graph, failed.report = lowest, lowest_graph, error.report
    raise failed


# tiling: how many regions are tried per round (the largest first), and rounds at most
MAX_TILE_SEEDS = 10
MAX_TILE_ROUNDS = 8


def _tile_and_fit(graph, budget, plan, finish, error, batch, counts, why: str):
    """When the whole step cannot run in slices (``why``): regions of it can
    (transforms/microbatch.py `tile_region`). Each round grows a region around each of the
    graph's per-sample nodes (`_tile_seeds`: the most per-sample bytes first, `MAX_TILE_SEEDS`
    distinct regions), tries each in 2, 4, ... slices and keeps the tiling that lowers the
    plan most (its peak, then the memory it holds over the call, as recomputation scores a
    step: regions that only pay together are taken one after the other); rounds repeat until
    the plan fits, from ``graph`` and from the graph of the lowest peak recomputation
    reached. Raises the lowest peak reached when nothing fits."""
    from .microbatch import batch_axes, grow_region, tile_region

    bases = [(graph, [])]
    if error.report.recomputed:
        bases.append((error.graph, error.report.recomputed))
    lowest, lowest_graph, lowest_tiles = error.plan, error.graph, []
    for base, recomputed in bases:
        current_graph, current, tiles = base, plan(finish(base.copy())), []
        for _ in range(MAX_TILE_ROUNDS):
            analyses = {k: batch_axes(current_graph, batch, k) for k in counts}
            axes, _, rules = analyses[counts[0]]
            regions: dict = {}
            for seed in _tile_seeds(current_graph, axes, rules):
                region = grow_region(current_graph, seed, axes, rules)
                regions.setdefault(frozenset(region[0]), region)
                if len(regions) >= MAX_TILE_SEEDS:
                    break

            def tiled(region, k):
                axes_k, _, rules_k = analyses[k]
                if not region[0] <= rules_k.keys():
                    return None  # (a node of it does not divide into k slices)
                made = tile_region(current_graph, region, k, axes_k, rules_k)
                made, _ = eliminate_dead_code(made)  # (originals the copies replaced)
                return plan(finish(made.copy())), made, _tile_entry(current_graph, region[0], k)

            # the region that pays most in 2 slices, then that one in more while they pay
            trials = [t for r in regions.values() if (t := tiled(r, counts[0])) is not None]
            if not trials:
                break
            best = min(trials, key=lambda t: score(t[0]))
            region = next(r for r in regions.values() if len(r[0]) == best[2][0])
            for k in counts[1:]:
                more = tiled(region, k)
                if more is None or score(more[0]) >= score(best[0]):
                    break
                best = more
            if not _pays(best[0], current):
                break
            current, current_graph = best[0], best[1]
            tiles.append(best[2])
            if current.peak_bytes <= budget:
                report = RematReport(budget, error.report.peak_before, current.peak_bytes)
                report.recomputed, report.tiles = list(recomputed), tiles
                return finish(current_graph), report
        if current.peak_bytes < lowest.peak_bytes:
            lowest, lowest_graph, lowest_tiles = current, current_graph, tiles
    mib = 2**20
    note = (
        f"the batch cannot be split: {why}; running regions of the step in slices of the "
        f"batch ({len(lowest_tiles)} tiled) reaches {lowest.peak_bytes / mib:.2f} MiB"
    )
    failed = _with_note(error, note)
    if lowest_tiles:
        failed.plan, failed.graph = lowest, lowest_graph
    raise failed


def _pays(trial, current) -> bool:
    """Whether a tiling is worth keeping: a lower peak, or at the same peak a hundredth less
    memory held over the call (a step towards a lower peak that needs regions together)."""
    if trial.peak_bytes != current.peak_bytes:
        return trial.peak_bytes < current.peak_bytes
    return sum(trial.timeline) < 0.99 * sum(current.timeline)


def _tile_entry(graph, region: set, k: int) -> tuple:
    """What a report says of a tiled region: (its nodes, the products and convolutions among
    them by op, the slices)."""
    heavy = sorted({n.op.name for n in graph.nodes if id(n) in region and _heavy(n)})
    return (len(region), heavy, k)


def _heavy(node) -> bool:
    """A product or a convolution (ops of kind ``linalg`` and ``nn``)."""
    return node.op.kind in ("linalg", "nn")


def _tile_seeds(graph, axes: dict, rules: dict) -> list:
    """The nodes a region may grow from: those that slices of the batch can run (a batch
    rule) reading per-sample values, the products and convolutions first, then by the
    per-sample bytes they touch."""
    from ..plan.layout import nbytes

    seeds = [
        n
        for n in graph.nodes
        if id(n) in rules
        and any(id(v) in axes for v in n.inputs)
        and not n.name.endswith(tuple(f"_t{c}" for c in range(MAX_SLICES)))
    ]
    touched = {
        id(n): sum(nbytes(v) for v in [*n.inputs, *n.outputs] if id(v) in axes) for n in seeds
    }
    return sorted(seeds, key=lambda n: (not _heavy(n), -touched[id(n)]))


def _with_note(error: MemoryBudgetError, note: str) -> MemoryBudgetError:
    """``error`` with ``note`` added to its findings (before its advice)."""
    head, advice, tail = error.detail.partition(". Raise the budget")
    out = MemoryBudgetError(f"{head}; {note}{advice}{tail}", op=error.op, location=error.location)
    out.plan, out.graph, out.report = error.plan, error.graph, error.report
    return out


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
        and node.op.effect is None
        and not node.op.view
        and not node.op.aliases  # views are recomputed with their base
        and not any(isinstance(a, Graph) for a in node.attrs.values())
        and all(v.type.shape for v in node.outputs)  # 0-d values save nothing
    )


def forward_nodes(graph, n_user: int) -> set:
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
            if (user.op.view or user.op.aliases) and user.inputs[0] is v:
                stack.extend(user.outputs)
    return values


def candidates(graph, forward: set) -> list:
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


def recompute(graph, node, forward: set, each: bool, copies: dict) -> Graph:
    """A copy of ``graph`` where the non-forward readers of ``node``'s outputs (and of their
    views) read a recomputed copy: one before the first of them, or (``each``) one before each
    of them. Views on the way are copied too (they cost nothing). The copy's operands are, in
    order of preference: an earlier copy of the operand already placed before the insertion
    point (``copies``: copy name -> original name; it lives on instead of the original), a
    recomputed copy of the operand when it is a cheap elementwise forward value nothing in the
    backward reads (so a chain ``h -> h * c -> erf -> + 1`` is recomputed whole from ``h``
    rather than saving its inner link instead), or the original. ``copies`` gains the new
    copies."""
    new = graph.copy()
    original = new.nodes[graph.nodes.index(node)]
    forward_new = {id(new.nodes[p]) for p, n in enumerate(graph.nodes) if id(n) in forward}
    family = _family(original)
    readers = {id(u): u for v in family for u in v.users if id(u) not in forward_new}
    readers = sorted(readers.values(), key=new.nodes.index)
    position = {id(n): p for p, n in enumerate(new.nodes)}
    by_original: dict = {}  # original name -> copies (values) in graph order
    for n in new.nodes:
        for o in n.outputs:
            if o.name in copies:
                by_original.setdefault(copies[o.name], []).append(o)
    for group in [[r] for r in readers] if each else [readers]:
        memo: dict = {}
        before = position[id(group[0])]

        def operand(u):
            earlier = [c for c in by_original.get(u.name, ()) if position[id(c.node)] < before]
            if earlier:
                return earlier[-1]
            producer = u.node
            inner = (
                id(producer) in forward_new
                and _recomputable(producer)
                and producer.op.kind == "elementwise"
                and all(id(r) in forward_new for r in u.users)
            )
            return cloned(u) if inner else u

        def cloned(v):
            if id(v) in memo:
                return memo[id(v)]
            producer = v.node
            if producer is not original and any(producer.inputs[0] is f for f in family):
                inputs = [cloned(producer.inputs[0]), *producer.inputs[1:]]
            else:
                inputs = [operand(u) for u in producer.inputs]
            copy = new.add_call(
                producer.op,
                inputs,
                producer.attrs,
                [o.type for o in producer.outputs],
                [f"{o.name}_remat" for o in producer.outputs],
            )
            for o, c in zip(producer.outputs, copy.outputs):
                memo[id(o)] = c
                copies[c.name] = copies.get(o.name, o.name)
            return memo[id(v)]

        with new.inserting_before(group[0]):
            for user in group:
                for v in list(user.inputs):
                    if any(v is f for f in family):
                        user.replace_input(v, cloned(v))
    return new


def score(plan) -> tuple:
    # the peak first; at an equal peak, less memory held over the whole call (a step towards
    # a lower peak that needs several recomputations)
    return (plan.peak_bytes, sum(plan.timeline))


def rematerialize(
    graph, budget: int, plan, *, finish=None, n_user: int | None = None
) -> tuple[Graph, RematReport]:
    """Recompute saved activations of ``graph`` until the planned peak fits ``budget`` (see
    the module docstring); ``plan``: graph -> MemoryPlan, with the graph's parts and in-place
    updates. ``finish``: graph -> graph, the passes that run after rematerialization (fusion:
    a recomputed elementwise chain joins its reader's fused loop), applied to each trial
    before it is planned and to the result. ``n_user``: how many leading outputs are the
    function's own (the loss); ``plan.n_user`` when None."""
    finish = finish or (lambda g: g)
    n_user = plan.n_user if n_user is None else n_user

    def planned(g):
        return plan(finish(g.copy()))

    current = planned(graph)
    report = RematReport(budget, current.peak_bytes, current.peak_bytes)
    if current.peak_bytes <= budget:
        return finish(graph), report
    copies: dict = {}  # copy name -> original name
    tried: set = set()
    accepted_since_sweep = False
    while True:
        forward = forward_nodes(graph, n_user)
        listed = sorted(candidates(graph, forward), key=lambda c: _priority(c[0]))
        improved = False
        for node, _ in listed:
            for each in (False, True):
                # a candidate that did not help is tried again only after a sweep that
                # found nothing (what others recomputed since may make it pay)
                if (node.name, each) in tried:
                    continue
                tried.add((node.name, each))
                trial_copies = dict(copies)
                trial = recompute(graph, node, forward, each, trial_copies)
                # views whose readers now read the copy's views would keep the original alive
                trial, _ = eliminate_dead_code(trial)
                trial_plan = planned(trial)
                if score(trial_plan) < score(current):
                    from ..plan.layout import nbytes

                    saved = sum(nbytes(v) for v in node.outputs)
                    names = {n.name for n in graph.nodes}
                    flops = sum(_flops(n) for n in trial.nodes if n.name not in names)
                    report.recomputed.append((node.name, node.op.name, flops, saved))
                    graph, current, copies = trial, trial_plan, trial_copies
                    improved = accepted_since_sweep = True
                    report.peak_after = current.peak_bytes
                    if current.peak_bytes <= budget:
                        return finish(graph), report
                    break
            if improved:
                break  # positions changed: list the candidates again
        if not improved:
            if not accepted_since_sweep:
                break
            tried.clear()
            accepted_since_sweep = False
    mib = 2**20
    held = sum(b.nbytes for b in current.buffers if b.start < 0)
    error = MemoryBudgetError(
        f"memory budget {budget / mib:.2f} MiB ({budget:,} bytes) is below what "
        f"rematerialization reaches for graph {graph.name}: the minimum achievable peak is "
        f"{current.peak_bytes / mib:.2f} MiB ({current.peak_bytes:,} bytes; "
        f"{report.peak_before / mib:.2f} MiB without recomputation, "
        f"{len(report.recomputed)} values recomputed; {held / mib:.2f} MiB of it are the arrays "
        f"the call is given, such as parameters and optimizer state, and the rest is live at "
        f"%{current.peak_node}). Raise the budget to at least that, or lower the batch size",
        op="memory_budget",
    )
    error.plan = current  # the lowest plan reached: what is live at its peak
    error.graph, error.report = graph, report
    raise error
