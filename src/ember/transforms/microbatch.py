"""Micro-batching: a training step's batch run in ``k`` equal slices, one after another.

`split_batch(graph, k, batch_inputs)` returns a graph computing the same outputs where every
value that depends on the batch is computed ``k`` times, once per slice of the batch inputs
(their leading axis), and each result reduced over the batch (a weight's gradient, the loss's
sum) is the sum of the slices' partial results, accumulated as each slice finishes. What does
not depend on the batch (the optimizer's update of the summed gradients, constants) runs once.
The slices run in order, so the activations of one slice are dead before the next starts: the
activation memory of a step drops about ``k``-fold for the price of smaller matrix products.
This is gradient accumulation, done on the graph: the results equal the unsplit step's up to
the order of float additions.

Which values carry the batch, and along which axis, follows from each op's batch rule
(ops/_batching.py: ``batch`` rule, or its kind's default). It runs before fusion (fused
loops have no rule). The split is refused with
`NotBatchable`, naming the node, where it would change the results: an op without a rule, a
softmax or a statistic across the batch (batch normalization: a value reduced over the whole
batch read again by per-sample values), control flow.

The memory budget (transforms/remat.py `fit_budget`) splits the batch when recomputation alone
cannot reach the budget.

*Tiling* is the same on a part of the graph. Where the whole step cannot be split (batch
normalization: a statistic over the batch that per-sample values read again), a region of
per-sample work still can: `batch_axes` follows the batch through the graph taking the
statistics over the whole batch as the batch-free values they are, and `tile_region(graph,
region, k, ...)` runs a region of nodes (`grow_region`: a convolution or product and the
per-sample work only it reads or feeds) in ``k`` slices of the batch, its per-sample results
joined and its sums over the batch added up. A convolution over a batch in slices is exact
whatever the rest of the step does; the region's intermediates then exist one slice at a time.
"""

from __future__ import annotations

from ..graph.ir import Graph
from ..ops import _batching
from ..ops._batching import NotBatchable
from ..ops._registry import KIND_DEFAULT
from ..ops.binary import ADD
from ..ops.concat import CONCAT, SPLIT

__all__ = [
    "NotBatchable",
    "batch_axes",
    "batch_inputs",
    "grow_region",
    "split_batch",
    "tile_region",
]


def _rule(node):
    """The op's batch rule; else its kind's default (elementwise ops with one output, and
    reductions over ``axes`` with ``keepdims``); None: no rule (an op declaring
    ``batch=None``, such as a fused loop, has none)."""
    op = node.op
    if op.batch is not KIND_DEFAULT:
        return op.batch
    if op.kind == "elementwise" and len(node.outputs) == 1:
        return _batching.elementwise
    if op.kind == "reduce" and {"axes", "keepdims"} <= set(node.attrs):
        return _REDUCTION
    return None


_REDUCTION = _batching.reduce_rule(partial=False)  # the default of reductions other than sum


def batch_inputs(graph, input_parts: dict) -> list[int]:
    """Positions of the graph inputs holding the batch: those of part ``inputs`` (not
    parameters, optimizer state or gradients) with at least one dimension. An input without a
    part is an ``inputs`` one, as the memory planner counts it: a tensor argument of the step
    (``step(x, y)``) is the batch as much as a tensor the step reads from its closure."""
    return [
        i
        for i, v in enumerate(graph.inputs)
        if input_parts.get(i, "inputs") == "inputs" and v.type.shape
    ]


def _where(node) -> str:
    return f"%{node.name} ({node.op.name})"


def _analyse(graph, k: int, batch: list[int]) -> tuple[dict, dict, set]:
    """(value id -> its batch axis, node id -> the Batched of each batch-dependent call, the
    ids of the batch-free calls that read no sum over the batch: those that may run before
    the slices)."""
    if not batch:
        raise NotBatchable("the step reads no batch input (parameters and state only)")
    sizes = {graph.inputs[i].type.shape[0] for i in batch}
    if len(sizes) != 1:
        raise NotBatchable(f"the batch inputs have different leading sizes {sorted(sizes)}")
    (size,) = sizes
    if size % k:
        raise NotBatchable(f"the batch of {size} does not divide into {k} equal slices")
    axes = {id(graph.inputs[i]): 0 for i in batch}
    late: set = set()  # ids of batch-free values computed from a sum over the batch
    rules: dict = {}
    early: set = set()
    for node in graph.nodes:
        if node.kind != "call":
            continue
        in_axes = [axes.get(id(v)) for v in node.inputs]
        reads_late = [v for v in node.inputs if id(v) in late]
        if all(a is None for a in in_axes):
            if reads_late:
                late.update(id(o) for o in node.outputs)
            else:
                early.add(id(node))
            continue
        if reads_late:
            raise NotBatchable(
                f"{_where(node)} reads %{reads_late[0].name}, computed from the whole batch, "
                "together with per-sample values (a statistic over the batch)",
                op="microbatch",
            )
        if any(isinstance(a, Graph) for a in node.attrs.values()):
            raise NotBatchable(f"{_where(node)} holds control flow", op="microbatch")
        rule = _rule(node)
        if rule is None:
            raise NotBatchable(f"{_where(node)} has no batch rule", op="microbatch")
        try:
            batched = rule([v.type for v in node.inputs], in_axes, node.attrs, k)
        except NotBatchable as exc:
            raise NotBatchable(f"{_where(node)}: {exc.detail}", op="microbatch") from None
        rules[id(node)] = batched
        for o, axis in zip(node.outputs, batched.out_axes):
            if axis is None:
                late.add(id(o))
            else:
                axes[id(o)] = axis
    return axes, rules, early


def split_batch(graph, k: int, batch: list[int]) -> Graph:
    """``graph`` with its batch (the leading axis of the inputs at positions ``batch``) run in
    ``k`` slices (see the module docstring). Raises `NotBatchable` saying why it cannot."""
    axes, rules, early = _analyse(graph, k, batch)
    builder = _SliceBuilder(graph, k, axes, rules)
    builder.copy_early(early)
    for i in batch:
        for c, piece in enumerate(builder.sliced(graph.inputs[i], 0)):
            builder.slices[c][id(graph.inputs[i])] = piece
    for c in range(k):
        builder.run_slice(c)
    return builder.finish()


class _SliceBuilder:
    """The new graph of `split_batch` as it is built: ``env`` maps each batch-free value of
    ``graph`` to its value in the new graph, ``slices[c]`` each batched value to its ``c``-th
    slice, ``sums`` each partial result (a reduction over the batch) to the running sum of the
    slices so far."""

    def __init__(self, graph, k: int, axes: dict, rules: dict):
        self.graph, self.k, self.axes, self.rules = graph, k, axes, rules
        self.new = Graph(graph.name)
        self.env: dict = {id(v): self.new.add_input(v.type, v.name) for v in graph.inputs}
        self.slices: list[dict] = [{} for _ in range(k)]
        self.sums: dict = {}
        self.pieces: dict = {}  # (id(value), axis) -> its k slices
        self.needed: set = set()

    def copy(self, node, inputs, attrs=None, suffix=""):
        out = self.new.add_call(
            node.op,
            inputs,
            node.attrs if attrs is None else attrs,
            None if attrs is not None else [o.type for o in node.outputs],
            [o.name + suffix for o in node.outputs],
        )
        out.scope = getattr(node, "scope", None)
        out.region = getattr(node, "region", None)
        return out

    def copy_early(self, early: set) -> None:
        """The constants, and the batch-free calls the slices read, before the slices. Other
        batch-free calls run after them (the optimizer's weight decay of a parameter, also
        batch-free, would otherwise hold a second copy of it over all the slices)."""
        stack = [v.node for node in self.graph.nodes if id(node) in self.rules for v in node.inputs]
        while stack:
            node = stack.pop()
            if id(node) in early and id(node) not in self.needed:
                self.needed.add(id(node))
                stack.extend(v.node for v in node.inputs)
        for node in self.graph.nodes:
            if node.kind == "constant":
                value = node.outputs[0]
                self.env[id(value)] = self.new.add_constant(
                    self.graph.constants[value.name], value.name
                )
            elif id(node) in self.needed:
                self._copy_batch_free(node)

    def _copy_batch_free(self, node) -> None:
        made = self.copy(node, [self.env[id(v)] for v in node.inputs])
        self.env.update((id(o), m) for o, m in zip(node.outputs, made.outputs))

    def sliced(self, value, axis: int) -> list:
        """``value``'s k slices along ``axis`` (one split node per value and axis)."""
        key = (id(value), axis)
        if key not in self.pieces:
            size = value.type.shape[axis]
            attrs = {"sizes": (size // self.k,) * self.k, "axis": axis}
            self.pieces[key] = self.new.add_call(SPLIT, [self.env[id(value)]], attrs).outputs
        return self.pieces[key]

    def run_slice(self, c: int) -> None:
        """Every batched call on slice ``c``; partial results added to the running sums."""
        slices = self.slices[c]
        for node in self.graph.nodes:
            batched = self.rules.get(id(node))
            if batched is None:
                continue
            inputs = []
            for pos, v in enumerate(node.inputs):
                if id(v) in self.axes:
                    inputs.append(slices[id(v)])
                elif pos in batched.slices:
                    inputs.append(self.sliced(v, batched.slices[pos])[c])
                else:
                    inputs.append(self.env[id(v)])
            made = self.copy(node, inputs, batched.attrs, f"_mb{c}")
            for o, m, axis in zip(node.outputs, made.outputs, batched.out_axes):
                if axis is not None:
                    slices[id(o)] = m
                elif c == 0:
                    self.sums[id(o)] = m
                else:
                    names = [f"{o.name}_sum{c}"]
                    total = self.new.add_call(ADD, [self.sums[id(o)], m], {}, None, names)
                    self.sums[id(o)] = total.outputs[0]

    def finish(self) -> Graph:
        """The batch-free calls after the slices, and the outputs: per-sample ones joined."""
        for node in self.graph.nodes:
            for o in node.outputs:
                if id(o) in self.sums:
                    self.env[id(o)] = self.sums[id(o)]
            if node.kind == "call" and id(node) not in self.rules and id(node) not in self.needed:
                self._copy_batch_free(node)
        outputs = []
        for v in self.graph.outputs:
            if id(v) in self.axes:  # a per-sample output: the slices' results joined
                parts = [self.slices[c][id(v)] for c in range(self.k)]
                outputs.append(
                    self.new.add_call(CONCAT, parts, {"axis": self.axes[id(v)]}).outputs[0]
                )
            else:
                outputs.append(self.env[id(v)])
        self.new.set_outputs(outputs)
        return self.new


# ------------------------------------------------------------------------------- tiling


def batch_axes(graph, batch: list[int], k: int) -> tuple[dict, set, dict]:
    """Where the batch is, as far as it can be followed: (value id -> its batch axis for the
    per-sample values, the ids of the batch-free values, node id -> its `Batched` for ``k``
    slices for each call with per-sample operands whose rule applies). A value computed from
    the whole batch by a reduction (a statistic) is batch-free here, unlike in `split_batch`:
    a region read by it and not computing it may run in slices. Values past a node whose
    slices would differ (no rule, a refusal, control flow) are in neither: opaque, unless the
    refusal says where its results hold the batch (`NotBatchable.out_axes`)."""
    axes = {id(graph.inputs[i]): 0 for i in batch}
    free = {id(v) for v in graph.inputs if id(v) not in axes}
    rules: dict = {}
    for node in graph.nodes:
        if node.kind == "constant":
            free.add(id(node.outputs[0]))
            continue
        if node.kind != "call":
            continue
        if any(id(v) not in axes and id(v) not in free for v in node.inputs):
            continue  # reads an opaque value: opaque too
        in_axes = [axes.get(id(v)) for v in node.inputs]
        if all(a is None for a in in_axes):
            free.update(id(o) for o in node.outputs)
            continue
        rule = _rule(node)
        if rule is None or any(isinstance(a, Graph) for a in node.attrs.values()):
            continue
        try:
            batched = rule([v.type for v in node.inputs], in_axes, node.attrs, k)
        except NotBatchable as exc:
            # a call that needs the whole batch (batch normalization's statistics) may still
            # say where its results hold the batch: it runs whole, its readers may run sliced
            for o, axis in zip(node.outputs, exc.out_axes or ()):
                (free.add(id(o)) if axis is None else axes.__setitem__(id(o), axis))
            continue
        rules[id(node)] = batched
        for o, axis in zip(node.outputs, batched.out_axes):
            if axis is None:
                free.add(id(o))  # a sum over the whole batch
            else:
                axes[id(o)] = axis
    return axes, free, rules


def grow_region(graph, seed, axes: dict, rules: dict, limit: int = 64) -> tuple[set, set]:
    """A region to run in slices around ``seed`` (a node in ``rules``): (the ids of its nodes,
    the ids of those among them that are copies). It takes the per-sample work only it reads
    (producers all of whose outputs it reads) and that reads its per-sample results
    (consumers); a cheap producer (elementwise, or a view) whose results are read elsewhere
    too is copied into it: recomputed per slice, so the region needs no whole copy of its
    result. The region stays convex (no path leaves it and comes back), and none of its nodes
    reads a sum over the batch that another computes (a partial result before the slices are
    added up)."""
    region, copies = {id(seed)}, set()
    by_id = {id(n): n for n in graph.nodes}
    position = {id(n): p for p, n in enumerate(graph.nodes)}
    changed = True
    while changed and len(region) < limit:
        changed = False
        frontier = []
        for nid in list(region):
            node = by_id[nid]
            frontier += [(v.node, True) for v in node.inputs]
            if nid not in copies:
                frontier += [(u, False) for o in node.outputs for u in o.users]
        for cand, producer in frontier:
            if id(cand) in region or id(cand) not in rules or len(region) >= limit:
                continue
            elsewhere = any(id(u) not in region for o in cand.outputs for u in o.users)
            copy = producer and elsewhere
            if copy and not (
                (cand.op.kind == "elementwise" or cand.op.view)
                and _kept_anyway(cand, region, copies, axes, position)
            ):
                continue  # read elsewhere too, and computing it again would cost memory
            trial, trial_copies = region | {id(cand)}, copies | ({id(cand)} if copy else set())
            if _admissible(trial, trial_copies, by_id, axes):
                region, copies = trial, trial_copies
                changed = True
    return region, copies


def _kept_anyway(node, region: set, copies: set, axes: dict, position: dict) -> bool:
    """Whether copying ``node`` into the region keeps nothing alive longer: each value it
    reads is batch-free (a statistic, a parameter), or a graph input, or read after the
    region by a node outside it (a saved activation the backward reads later anyway)."""
    last = max(position[nid] for nid in region if nid not in copies)
    for v in node.inputs:
        if id(v) not in axes or v.node.kind in ("input", "constant"):
            continue
        if not any(id(u) not in region and position[id(u)] > last for u in v.users):
            return False
    return True


def _admissible(region: set, copies: set, by_id: dict, axes: dict) -> bool:
    """Whether ``region`` (with the ``copies`` among its nodes) can run in slices: every value
    one of its nodes reads from another is per-sample (a partial sum is added up only after
    the slices), and no node outside it is both downstream of it and upstream of it."""
    for nid in region:
        for v in by_id[nid].inputs:
            if id(v.node) in region and id(v) not in axes:
                return False
    own = [nid for nid in region if nid not in copies]  # (a copy's original stays outside)
    downstream, stack = set(), [u for nid in own for o in by_id[nid].outputs for u in o.users]
    while stack:
        node = stack.pop()
        if id(node) in downstream or (id(node) in region and id(node) not in copies):
            continue
        downstream.add(id(node))
        stack += [u for o in node.outputs for u in o.users]
    return not any(id(v.node) in downstream for nid in region for v in by_id[nid].inputs)


def tile_region(graph, region: tuple, k: int, axes: dict, rules: dict) -> Graph:
    """``graph`` with ``region`` (from `grow_region`, with ``axes`` and ``rules`` of
    `batch_axes` for ``k``) run in ``k`` slices of the batch, one after another where its
    inputs allow: what it reads from outside is sliced (a view) or read whole, its per-sample
    results read outside are joined, its sums over the batch added; the nodes it copies stay
    for their other readers (dead code once none is left)."""
    nodes, copies = region
    builder = _SliceBuilder(graph, k, axes, {i: r for i, r in rules.items() if i in nodes})
    new, env = builder.new, builder.env
    for node in _contracted_order(graph, nodes, copies):
        if node is None:  # the region, in slices
            for c in range(k):
                _run_region_slice(builder, graph, nodes, c)
            for v in _region_results(graph, nodes, copies):
                if id(v) in axes:
                    parts = [builder.slices[c][id(v)] for c in range(k)]
                    env[id(v)] = new.add_call(
                        CONCAT, parts, {"axis": axes[id(v)]}, None, [f"{v.name}_tiles"]
                    ).outputs[0]
                else:
                    env[id(v)] = builder.sums[id(v)]
        elif node.kind == "input":
            continue
        elif node.kind == "constant":
            value = node.outputs[0]
            env[id(value)] = new.add_constant(graph.constants[value.name], value.name)
        else:
            builder._copy_batch_free(node)
    new.set_outputs([env[id(v)] for v in graph.outputs])
    return new


def _region_results(graph, region: set, copies: set) -> list:
    """The values the region computes that are read outside it (or are graph outputs); a
    copied node's are its original's."""
    outputs = {id(v) for v in graph.outputs}
    return [
        o
        for node in graph.nodes
        if id(node) in region and id(node) not in copies
        for o in node.outputs
        if id(o) in outputs or any(id(u) not in region for u in o.users)
    ]


def _run_region_slice(builder, graph, region: set, c: int) -> None:
    slices = builder.slices[c]
    for node in graph.nodes:
        if id(node) not in region:
            continue
        batched = builder.rules[id(node)]
        inputs = []
        for pos, v in enumerate(node.inputs):
            if id(v) in slices:
                inputs.append(slices[id(v)])
            elif id(v) in builder.axes:  # a per-sample value from outside: its slice
                inputs.append(builder.sliced(v, builder.axes[id(v)])[c])
            elif pos in batched.slices:
                inputs.append(builder.sliced(v, batched.slices[pos])[c])
            else:
                inputs.append(builder.env[id(v)])
        made = builder.copy(node, inputs, batched.attrs, f"_t{c}")
        for o, m, axis in zip(node.outputs, made.outputs, batched.out_axes):
            if axis is not None:
                slices[id(o)] = m
            elif c == 0:
                builder.sums[id(o)] = m
            else:
                names = [f"{o.name}_sum{c}"]
                total = builder.new.add_call(ADD, [builder.sums[id(o)], m], {}, None, names)
                builder.sums[id(o)] = total.outputs[0]


def _contracted_order(graph, region: set, copies: set) -> list:
    """The nodes of ``graph`` in an order where each comes after what it reads, with the
    region as one step (None) placed as early as its inputs allow; otherwise the stored
    order. A copied node is its own step too (its original, for its other readers)."""
    import heapq

    position = {id(n): p for p, n in enumerate(graph.nodes)}
    own = region - copies
    unit = {id(n): ("r" if id(n) in own else id(n)) for n in graph.nodes}
    members: dict = {}
    for n in graph.nodes:
        members.setdefault(unit[id(n)], []).append(n)
    members["r"] = members.get("r", [])
    waiting = {u: set() for u in members}
    users: dict = {u: set() for u in members}

    def edge(a, b):
        if a != b:
            waiting[b].add(a)
            users[a].add(b)

    for n in graph.nodes:
        for v in n.inputs:
            if id(n) in region and id(v.node) in copies:
                continue  # the region computes its own copy
            edge(unit[id(v.node)], "r" if id(n) in region else unit[id(n)])
            if id(n) in copies:  # the original reads it too
                edge(unit[id(v.node)], unit[id(n)])
    first = {u: min((position[id(n)] for n in ns), default=0) for u, ns in members.items()}
    ready = [(first[u], str(u), u) for u, w in waiting.items() if not w]
    heapq.heapify(ready)
    order = []
    while ready:
        _, _, u = heapq.heappop(ready)
        order += [None] if u == "r" else members[u]
        for b in users[u]:
            waiting[b].discard(u)
            if not waiting[b]:
                heapq.heappush(ready, (first[b], str(b), b))
    return order
