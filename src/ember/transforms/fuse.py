"""Operator fusion: maximal groups of elementwise ops become one ``fused_elementwise`` node
(ops/fused.py), which the code generator runs as one compiled C loop (kernels/cfuse.py): one
pass over memory instead of one per op, and no intermediate arrays.

A group is grown in execution order. An elementwise call joins the group of an operand's
producer when

* the op can be written in C (its `OpDef` declares ``c``), every dtype it touches is
  float32, float64 or bool (where C's arithmetic, comparisons and casts agree with NumPy's),
  or, where a C compiler runs the loop, bfloat16 or float16 (float arithmetic, each result
  rounded to 16 bits as NumPy rounds it), and its result has the group's shape (the loop's
  iteration space; operands may broadcast);
* the group stays convex: no path leaves the group and comes back into it (else the fused node
  would need its own result), checked by walking the other operands' producers;
* joining does not run the group after a product of the group's size computed since its last
  member (a matmul's result the joining node reads), which would hold all the group reads
  until then: a chain of gradient accumulations over a split batch stays one add per slice.
* where a node outside the group reads a member before the joining node (the loop must run
  before that reader), joining computes the node early and holds its result from there: a
  ReLU's mask joining the forward's loop that makes the activation, though only the backward
  reads it. Whether such nodes join or run where they are is decided for the whole graph by
  the planned peak of each (`_grouping`).

A group may end with reductions of a member (ops declaring a `ReductionRule`, ``sum``, ``max``
and ``min`` among them; float32 or float64, or bfloat16 and float16 where the loop is C, a
product excepted: `_reduction`), all over the same axes: its trailing axes, its leading axes,
or a leading and a trailing block of them (kernels/creduce.py), every input of the group
being either full or broadcast across each reduced block. The loop accumulates the
reductions as it computes the elementwise values (a ``fused_reduce`` node): row by row for
trailing axes, so ``sum(x * x)``, a layer norm's variance or a softmax's denominator cost one
pass over memory; column-wise for leading axes, so a layer's masked output gradient and its
bias gradient ``sum(g * mask, axis=0)`` come out of one pass (the node returns both). Nothing
in the group may read a reduction's result (it is the end of the group). The fused node runs
where its last elementwise member was, not where its reductions were: nodes traced in between
that do not read it stay after it (the GPT step's lowest budget: 24.04 MiB with the loop placed
late, 23.04 without).

Values used outside the group (or returned) become the fused node's outputs; 0-d constants are
written into the kernel. Groups of one op stay as they are (the NumPy ufunc is as fast). Nodes
inside cond branches and loop bodies are never touched: fusion does not cross control flow.
A matmul's reader group becomes its epilogue in transforms/epilogue.py (after this pass).
A group ending in reductions (a masked gradient's bias gradient) is measured as fast as the
epilogue and a separate sum, but keeps the matmul's result alive beside the loop's outputs:
that pass splits its reductions off again and makes the rest the epilogue where that lowers
the planned peak (the GPT block's GELU backward).
"""

from __future__ import annotations

import heapq
import math

from .. import dtypes as dt
from ..graph.ir import Graph
from ..graph.rewrite import Pass
from ..kernels.ccompile import compiler_available
from ..kernels.creduce import split_axes
from ..ops._registry import native_code
from ..ops.fused import FUSED, FUSED_REDUCE
from ..ops.program import Const, Input, Instr, Program, Temp
from ..plan.arena import concrete
from ..plan.layout import Layouts
from ..plan.memory import plan_memory
from ..types import TensorType
from .dce import eliminate_dead_code
from .fusable import HALF as _HALF
from .fusable import fusable, fusable_dtypes
from .fuse_expand import expand_per_reader

__all__ = ["FUSE", "fuse_elementwise"]

_REDUCIBLE = (dt.float32, dt.float64)


def _reduction(node) -> bool:
    """Whether ``node`` is a reduction a fused loop can end in: float32 or float64 terms, or
    half precision (accumulated in float or double, each result rounded once to 16 bits:
    kernels/creduce.py) where the loop is C, like elementwise ops (`fusable_dtypes`), and the
    loop then gives the reference kernel's result: a rule exact in any order (max, min) or
    ``wide`` (the sum, whose kernel accumulates 16-bit terms in float32 and float64, as the
    loop does). NumPy multiplies a half-precision product in 16 bits, each step rounded, which
    float accumulators do not (2-3% apart over 30 bfloat16 terms): such a product keeps its
    own node, as does any half-precision reduction without a compiler."""
    if node.kind != "call" or node.op.reduction is None or not native_code(node):
        return False
    dtype, rule = node.inputs[0].dtype, node.op.reduction
    if dtype in _REDUCIBLE:
        return True
    return dtype in _HALF and (rule.exact or rule.wide) and compiler_available()


def _reducible_axes(node) -> bool:
    """Whether a fused loop can run ``node``'s reduction: over static sizes, the reduced axes
    (other than those of size 1) a leading block, a trailing block, or both
    (kernels/creduce.py)."""
    axes, shape = tuple(node.attrs["axes"]), node.inputs[0].shape
    if not axes or not all(isinstance(shape[a], int) for a in axes):
        return False
    return split_axes(shape, axes) is not None


def _depends_on(values, group: set, floor: int, position: dict) -> bool:
    """Whether any of ``values`` (outside the group) is computed from a group member. Producers
    placed before the group's first node (``floor``) cannot be. One walk for all of them: a
    producer reached once and found outside the group's reach need not be walked again."""
    stack, seen = list(values), set()
    while stack:
        v = stack.pop()
        node = v.node
        if id(node) in seen or position[id(node)] < floor:
            continue
        seen.add(id(node))
        if id(node) in group:
            return True
        stack.extend(node.inputs)
    return False


class _Group(list):
    """A growing group: its nodes (in graph order once `in_order` has run: a merge appends a
    group's nodes after another's), and what joining it asks of them kept up to date as it
    grows (its node ids, first and last positions, reductions, the operands its members read
    from outside it), so that growing a long chain one node at a time, or merging groups into
    the largest of them, stays linear."""

    def __init__(self, nodes, position: dict):
        super().__init__()
        self.position = position
        self.ids: set = set()
        self.floor = self.last = None
        self.ends: list = []  # its reductions
        self.readers: list = []  # a heap of (position, id) of the members' readers
        # operands whose producer was outside the group when their reader joined (producers
        # join before their readers: only a merge can bring one in since)
        self.operands: list = []
        for n in nodes:
            self.append(n)

    def append(self, node) -> None:
        super().append(node)
        self.ids.add(id(node))
        p = self.position[id(node)]
        self.floor = p if self.floor is None else min(self.floor, p)
        self.last = p if self.last is None else max(self.last, p)
        if _reduction(node):
            self.ends.append(node)
        self.operands.extend(u for u in node.inputs if id(u.node) not in self.ids)
        for v in node.outputs:
            for u in v.users:
                heapq.heappush(self.readers, (self.position[id(u)], id(u)))

    def read_before(self, node) -> bool:
        """Whether a node outside the group, placed before ``node``, reads a member: the loop
        must run before that reader, so ``node`` joining would compute its result early and
        hold it from there (a ReLU's mask, read in the backward, made in the forward's loop
        beside the activation it is computed from)."""
        readers = self.readers
        while readers and readers[0][1] in self.ids:
            heapq.heappop(readers)
        return bool(readers) and readers[0][0] < self.position[id(node)]

    def absorb(self, other: _Group) -> None:
        """Take ``other``'s nodes (the group is out of graph order until `in_order`)."""
        for n in other:
            self.append(n)

    def in_order(self) -> _Group:
        self.sort(key=lambda n: self.position[id(n)])
        return self


def _groups(graph: Graph, defer: bool = False) -> tuple[list[list], list]:
    """The groups to fuse, and the nodes that joined a group read before them (``defer``:
    none join such groups; see `fuse_elementwise`), each with where the group's loop then
    computes it: (node, the position after which it runs)."""
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    early: list = []
    group_of: dict[int, _Group] = {}  # id(node) -> its group (its nodes, in order)
    groups: dict[int, _Group] = {}  # id(group) -> group, in order of creation
    for node in graph.nodes:
        if _reduction(node):
            group = group_of.get(id(node.inputs[0].node))
            if (
                group is not None
                and not _reduction(node.inputs[0].node)
                and _reducible_axes(node)
                and not (defer and group.read_before(node))
            ):
                ends = group.ends
                if not ends or ends[0].attrs["axes"] == node.attrs["axes"]:
                    if group.read_before(node):
                        early.append((node, _runs_after(node, [group], position)))
                    group.append(node)
                    group_of[id(node)] = group
            continue
        if not fusable(node):
            continue
        shape = tuple(node.outputs[0].shape)
        candidates: list[list] = []  # the groups of its operands it could join
        for v in node.inputs:
            group = group_of.get(id(v.node))
            if group is None or tuple(group[0].outputs[0].shape) != shape:
                continue
            if any(group is c for c in candidates):
                continue
            if any(id(u.node) in group.ids and _reduction(u.node) for u in node.inputs):
                continue  # a group's reductions end it: nothing in it reads them
            candidates.append(group)
        chosen = _join(node, candidates, position, defer)
        if chosen is not None and any(g.read_before(node) for g in chosen):
            early.append((node, _runs_after(node, chosen, position)))
        if chosen is None:
            chosen = _Group((), position)
            groups[id(chosen)] = chosen
        elif len(chosen) > 1:  # several groups merged through this node: into the largest
            merged = max(chosen, key=len)
            for g in chosen:
                if g is not merged:
                    merged.absorb(g)
                    del groups[id(g)]
                    for n in g:
                        group_of[id(n)] = merged
            groups[id(merged)] = groups.pop(id(merged))  # (last, as a new group would be)
            chosen = merged
        else:
            chosen = chosen[0]
        chosen.append(node)
        group_of[id(node)] = chosen
    ordered = (g.in_order() for g in groups.values())
    groups = [g for g in (_check_reductions(g) for g in ordered) if len(g) > 1 or _alone(g)]
    if any(len(g) == 1 for g in groups):
        layouts = Layouts(graph)
        groups = [
            g for g in groups if len(g) > 1 or all(layouts.contiguous(v) for v in g[0].inputs)
        ]
    return _without_cycles(graph, groups), early


def _runs_after(node, groups: list, position: dict) -> int:
    """Where a group's loop computes ``node`` joining it early: after the group's last member
    and the producers of ``node``'s operands."""
    return max(max(g.last for g in groups), *(position[id(v.node)] for v in node.inputs))


def _alone(group: list) -> bool:
    """Whether a lone elementwise node is worth a C loop of its own: one large enough for the
    loop's threads (kernels/cfuse.py's PARALLEL_MIN), which NumPy's one thread cannot match
    (the GPT block's attention mask, a broadcast ``where`` over 512K values, ran in about a
    quarter of NumPy's time). Only over contiguous inputs (the caller checks): the loop would
    copy a strided one first, where NumPy reads it in place (slower than NumPy there)."""
    from ..kernels.cfuse import PARALLEL_MIN

    if len(group) != 1 or _reduction(group[0]):
        return False
    shape = group[0].outputs[0].shape
    return all(isinstance(d, int) for d in shape) and math.prod(shape) >= PARALLEL_MIN


def _join(node, candidates: list[_Group], position: dict, defer: bool) -> list[_Group] | None:
    """Which of the ``candidates`` (groups of ``node``'s operands) ``node`` joins: all of them,
    merged, when the union stays convex (an Adam update reads the gradient, both moments and
    the parameter, each first touched by its own group), else the first it can join alone.
    Convex: no operand from outside the union depends on a member of it. Groups ending in
    reductions merge only with groups that have none."""
    options = [[g] for g in candidates]
    if len(candidates) > 1 and sum(bool(g.ends) for g in candidates) <= 1:
        options.insert(0, candidates)
    for option in options:
        if defer and any(g.read_before(node) for g in option):
            continue
        members = option[0].ids if len(option) == 1 else set().union(*(g.ids for g in option))
        floor = min(g.floor for g in option)
        outside = [u for u in node.inputs if id(u.node) not in members]
        if _delays(option, outside, position):
            continue
        if len(option) > 1:
            # (a member reads no value of its own group's reductions: only another group's)
            crossing = [u for g in option for u in g.operands if id(u.node) in members]
            if any(_reduction(u.node) for u in crossing):
                continue  # a member would read a reduction of the union, which ends it
            if _crosses(option, members, position):
                continue
        if not _depends_on(outside, members, floor, position):
            return option
    return None


def _crosses(option: list[_Group], members: set, position: dict) -> bool:
    """Whether a path leads from one group of ``option`` through nodes outside them all to
    another: an operand a group's members read from outside the union computed from another
    group. (Not from its own: each group is convex, and nodes that joined it since were placed
    after its operands.) Each group's operands are walked back only as far as the other
    groups' first node: a long group merging with a short recent one walks little."""
    for g in option:
        others = [h for h in option if h is not g]
        target = others[0].ids if len(others) == 1 else set().union(*(h.ids for h in others))
        operands = [u for u in g.operands if id(u.node) not in members]
        if _depends_on(operands, target, min(h.floor for h in others), position):
            return True
    return False


def _delays(option: list[_Group], outside: list, position: dict) -> bool:
    """Whether joining would run the groups of ``option`` after a product computed since
    their last member, of a group's size, that the joining node reads: the group's loop runs
    where its last member is, so all it reads would live until then. A chain of
    accumulations ``acc + partial`` (the slices of a split batch, transforms/microbatch.py)
    would become one loop after the last partial, holding every partial until then."""
    last = max(g.last for g in option)
    shape = tuple(option[0][0].outputs[0].shape)
    return any(
        position[id(u.node)] > last
        and u.node.kind == "call"
        and not fusable(u.node)
        and not _reduction(u.node)
        and tuple(u.shape) == shape
        for u in outside
    )


def _without_cycles(graph: Graph, groups: list[list]) -> list[list]:
    """``groups`` less those on a cycle of the graph in which each group is one node.

    Growing a group checks that the new member's operands do not depend on the group, but a
    dependence can run through a second group as a whole: G -> (a non-fused op) -> member of
    H, and a later member of G reading another member of H. Each of G and H is convex, yet the
    fused nodes would need each other. Found here, after grouping, as strongly connected
    components of the contracted graph (rare: seen in a loss's backward graph). The smallest
    group of each cycle is dissolved, and the check repeats until no cycle is left."""
    while True:
        group_of = {id(n): i for i, g in enumerate(groups) for n in g}
        key = {}  # id(node) -> the contracted node: ("g", group index) or ("n", id(node))
        for node in graph.nodes:
            i = group_of.get(id(node))
            key[id(node)] = ("g", i) if i is not None else ("n", id(node))
        edges: dict = {}
        for node in graph.nodes:
            k = key[id(node)]
            for v in node.inputs:
                src = key.get(id(v.node))
                if src is not None and src != k:
                    edges.setdefault(src, set()).add(k)
        bad = set()
        for component in _strongly_connected(edges):
            members = [i for kind, i in component if kind == "g"]
            if len(component) > 1 and members:  # the smallest group goes: the least lost
                bad.add(min(members, key=lambda i: len(groups[i])))
        if not bad:
            return groups
        groups = [g for i, g in enumerate(groups) if i not in bad]


def _strongly_connected(edges: dict) -> list[list]:
    """Tarjan's strongly connected components of the graph ``edges`` (node -> successors),
    iteratively (graphs may be deep)."""
    index: dict = {}
    low: dict = {}
    on_stack: set = set()
    stack: list = []
    components: list[list] = []
    counter = 0
    nodes = set(edges) | {m for succ in edges.values() for m in succ}
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(edges.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(edges.get(succ, ()))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
    return components


def _check_reductions(group: list) -> list:
    """``group`` without its reductions when an input of the group varies across only part of
    a reduced block (the reduced leading axes, or the trailing ones): the loop reads each input
    either per element of a block or once for all of it."""
    ends = [n for n in group if _reduction(n)]
    if not ends:
        return group
    shape = tuple(ends[0].inputs[0].shape)
    blocks = [[a for a in b if shape[a] != 1] for b in split_axes(shape, ends[0].attrs["axes"])]
    members = {id(n) for n in group}
    for node in group:
        for v in node.inputs:
            if id(v.node) in members:
                continue
            padded = (1,) * (len(shape) - len(v.shape)) + tuple(v.shape)
            if any(len({padded[a] != 1 for a in block}) > 1 for block in blocks):
                return [n for n in group if not _reduction(n)]
    return group


def _constant_scalar(value):
    node = value.node
    if node.kind == "constant" and value.type.shape == () and value.dtype in fusable_dtypes():
        return Const(node.graph.constants[node.name].item(), value.dtype)
    return None


def _fuse(graph: Graph, group: list, position: dict) -> None:
    """Replace ``group`` by one fused node. ``position``: the nodes' places in the graph's
    order (fusing other groups keeps the order of the nodes it leaves)."""
    ends = [n for n in group if _reduction(n)]
    # after the last elementwise member, where the unfused loop would run (a reduction reads
    # members only): not after the reductions, which can sit much later, past independent
    # nodes that would then run first and hold their results across the loop
    last = max((n for n in group if not _reduction(n)), key=lambda n: position[id(n)])
    group = [n for n in group if not _reduction(n)] + ends  # the reductions end the program
    members = {id(n) for n in group}
    index = {id(n): j for j, n in enumerate(group)}
    inputs, program = [], []
    for node in group:
        operands = []
        for v in node.inputs:
            if id(v.node) in members:
                operands.append(Temp(index[id(v.node)]))
            elif (k := _constant_scalar(v)) is not None:
                operands.append(k)
            else:
                if not any(v is u for u in inputs):
                    inputs.append(v)
                operands.append(Input(next(i for i, u in enumerate(inputs) if u is v)))
        program.append(Instr(node.op, tuple(operands), tuple(sorted(node.attrs.items()))))
    returned = {id(v) for v in graph.outputs}
    escaping = [
        n
        for n in group
        if id(n.outputs[0]) in returned or any(id(u) not in members for u in n.outputs[0].users)
    ]
    with graph.inserting_after(last):
        fused = graph.add_call(
            FUSED_REDUCE if ends else FUSED,
            inputs,
            {
                "program": Program(program),
                "outputs": tuple(index[id(n)] for n in escaping),
                "out_types": tuple(
                    TensorType(n.outputs[0].shape, n.outputs[0].dtype) for n in escaping
                ),
            },
        )
    for n, new in zip(escaping, fused.outputs):
        old = n.outputs[0]
        graph.replace_all_uses(old, new)
        graph._taken.discard(new.name)
        new.name, old.name = old.name, new.name  # the value keeps its name for readers
    for n in reversed(group):
        graph.erase_node(n)


def _grouping(graph: Graph) -> list[list]:
    """The groups to fuse. A node may join a group whose values a node before it reads (a
    ReLU's mask, computed from the activation, joins the forward's loop that makes the
    activation, though only the backward reads it): the loop computes it early, and its result
    is held from there. Left out of such groups, it runs where it is, reading its operands
    there (the activation: saved anyway, or kept a little longer), and joins its readers' loop
    (the masked gradient's) if it can, where it is never stored. Which lowers the peak depends
    on the graph: both groupings are fused on copies and planned (plan/memory.py), and the
    lower peak is taken, at an equal peak the lower next highest points (`_score`), then the
    one holding less over the call (an early mask is held from the forward on). A ResNet
    step's masks held over its forward peak cost more than they save; a transformer's FFN
    mask, deferred, is computed in its gradient's loop."""
    groups, early = _groups(graph)
    if not early or not concrete(graph):
        return groups
    deferred = _groups(graph, defer=True)[0]
    early_plan, late_plan = _fused_plan(graph, groups), _fused_plan(graph, deferred)
    return groups if _score(early_plan) <= _score(late_plan) else deferred


def _score(plan) -> tuple:
    """The planned peak, then the next highest points of the timeline, highest first (where
    both groupings peak alike somewhere they share, the optimizer's updates, the mask held
    from the forward still raises the backward's high points), then the memory held over the
    call."""
    return (sorted(plan.timeline, reverse=True), sum(plan.timeline))


def _fused_plan(graph: Graph, groups: list):
    """The memory plan of a copy of ``graph`` with ``groups`` fused and the products' readers
    made their epilogues (the pass after this one: a float32 FFN's ReLU gradient reads the
    activation in its product's epilogue, where a deferred mask costs a product-sized value)."""
    from .epilogue import fuse_epilogues

    copy = graph.copy()
    same = {id(n): c for n, c in zip(graph.nodes, copy.nodes)}
    _fuse_groups(copy, [[same[id(n)] for n in group] for group in groups])
    copy, _ = eliminate_dead_code(copy)  # (a group none of whose values is read)
    return plan_memory(fuse_epilogues(copy)[0])


def _fuse_groups(graph: Graph, groups: list) -> None:
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    with graph.erasing():  # (each fused node goes right after its group's last member)
        for group in groups:
            _fuse(graph, group, position)
    if groups:  # a fused node sits after its last elementwise member: readers of earlier
        # members follow it
        graph.nodes = graph.topological_order()


def _loop_reads(node, value) -> bool:
    """Whether a fused loop over ``value``'s shape can compute ``node`` (reading ``value``)."""
    if _reduction(node):
        return node.inputs[0] is value and _reducible_axes(node)
    return fusable(node) and node.outputs[0].type.shape == value.type.shape


def fuse_elementwise(graph: Graph) -> tuple[Graph, bool]:
    expanded = expand_per_reader(graph, _loop_reads)
    groups = _grouping(graph)
    _fuse_groups(graph, groups)
    return graph, bool(groups) or expanded


FUSE = Pass("fuse", fuse_elementwise, level=3, doc="elementwise groups into one compiled loop")
