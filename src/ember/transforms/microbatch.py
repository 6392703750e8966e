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
"""

from __future__ import annotations

from ..graph.ir import Graph
from ..ops import _batching
from ..ops._batching import NotBatchable
from ..ops._registry import KIND_DEFAULT
from ..ops.elementwise import ADD
from ..ops.shape import CONCAT, SPLIT

__all__ = ["NotBatchable", "batch_inputs", "split_batch"]


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
