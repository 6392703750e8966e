"""The memory plan of a graph: predicted peak bytes, what they are, and what is live there.

`plan_memory(graph, ...)` walks the graph in its execution order with the buffers of
plan/liveness.py (views, in-place updates and operand reuse included) and adds, at each node,
the workspace its kernel allocates beyond its outputs (an op's ``workspace`` rule,
measured against tracemalloc per op family: softmax's exponentials, a convolution's columns, a
fused loop's copies of non-contiguous operands; a control-flow node's subgraphs are planned
recursively). The peak is the largest total over nodes of the buffers alive there plus that
workspace; buffers that exist before the call (graph inputs: parameters, optimizer state, the
batch) count all the time.

Each buffer belongs to one *part*: ``parameters``, ``gradients``, ``optimizer state``, ``saved
activations`` (forward values the backward reads), ``temporaries`` (everything else, kernel
workspace included) and ``inputs`` (other graph inputs, e.g. the batch). A `MemoryPlan` holds
``peak_bytes``, the ``breakdown`` of the peak by part, the ``live_at_peak`` set and a per-node
``timeline``; ``str(plan)`` is a table.

What it predicts is the peak of the *measured peak* (plan/program.py `measure_peak`): the bytes
of the arrays fed to the graph plus the most bytes allocated at once during the call, as
tracemalloc sees NumPy's allocations.

Beyond one call, ember holds memory for a compiled program as long as it lives: the scratch its
kernels keep between calls (convolutions' padded inputs and packed weights, per thread) and the
program itself (its graphs, generated code and kernels); an arena (planned execution) or the C
graph runner's arena (its intermediate values', runtime/cgraph_memory.py, held as long as the
program) count in the peak as one block held all the time. A program's plan lists the others
in ``held`` (part -> bytes, plan/program.py fills it); ``total_bytes`` = ``peak_bytes`` +
``held_bytes`` is what the process holds for the program at the call's peak, beyond the Python
objects of the model and optimizer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .layout import Layouts
from .liveness import liveness

__all__ = ["PARTS", "LiveBuffer", "MemoryPlan", "plan_memory", "workspace_bytes"]

PARTS = (
    "parameters",
    "gradients",
    "optimizer state",
    "saved activations",
    "temporaries",
    "inputs",
)


@dataclass(frozen=True)
class LiveBuffer:
    """One buffer alive at the peak: the value that allocated it, its bytes, its part."""

    name: str
    nbytes: int
    part: str


@dataclass
class MemoryPlan:
    """See the module docstring. ``timeline[p]``: predicted bytes while node ``p`` runs."""

    graph_name: str
    peak_bytes: int
    peak_node: str
    peak_position: int
    breakdown: dict
    live_at_peak: list
    timeline: list
    buffers: list = field(repr=False, default_factory=list)
    part_of: dict = field(repr=False, default_factory=dict)
    held: dict = field(default_factory=dict)  # held between calls (see the module docstring)
    # what planning the same nodes in another order reuses (`plan_memory`'s ``reorders``):
    # the layouts, and each call node's workspace by id
    layouts: object = field(repr=False, default=None)
    workspaces: dict = field(repr=False, default_factory=dict)

    @property
    def held_bytes(self) -> int:
        """Bytes ember holds for the program between calls (``held``)."""
        return sum(self.held.values())

    @property
    def total_bytes(self) -> int:
        """The peak of a call plus what ember holds for the program between calls."""
        return self.peak_bytes + self.held_bytes

    @property
    def arena(self):
        """The placement of the buffers allocated during the call in one arena (plan/arena.py:
        offsets, size, fragmentation); buffers held by the caller are not in it."""
        if getattr(self, "_arena", None) is None:
            from .arena import place

            self._arena = place([b for b in self.buffers if b.start >= 0])
        return self._arena

    @property
    def arena_bytes(self) -> int:
        """Bytes of the arena that holds every buffer allocated during the call."""
        return self.arena.size

    @property
    def offsets(self) -> dict:
        """Arena offset of each buffer allocated during the call, by the name of the value
        that allocates it."""
        return {self.buffers[i].name: o for i, o in self.arena.offsets.items()}

    def __str__(self) -> str:
        mib = 2**20
        lines = [
            f"memory plan of {self.graph_name}: peak {self.peak_bytes / mib:.2f} MiB at node "
            f"%{self.peak_node} ({self.peak_position + 1} of {len(self.timeline)})",
            f"  {'part':<18} {'MiB':>9} {'share':>6}",
        ]
        for part in PARTS:
            b = self.breakdown.get(part, 0)
            share = b / self.peak_bytes if self.peak_bytes else 0.0
            lines.append(f"  {part:<18} {b / mib:9.2f} {share:6.1%}")
        lines.append("  live at the peak (largest first):")
        for live in sorted(self.live_at_peak, key=lambda b: -b.nbytes)[:12]:
            lines.append(f"    %{live.name:<24} {live.nbytes / mib:9.3f} MiB  {live.part}")
        if len(self.live_at_peak) > 12:
            lines.append(f"    ... and {len(self.live_at_peak) - 12} more")
        lines.append(f"  {self.arena}")
        if self.held:
            lines.append(
                f"  held by ember between calls: {self.held_bytes / mib:.2f} MiB (total "
                f"{self.total_bytes / mib:.2f} MiB)"
            )
            for part, b in self.held.items():
                lines.append(f"    {part:<26} {b / mib:9.3f} MiB")
        return "\n".join(lines)


def workspace_bytes(node, layouts: Layouts) -> int:
    """Bytes ``node``'s kernel allocates beyond its outputs, at its peak: the op's
    ``workspace(node, layouts)`` rule; control-flow nodes, the peak of their
    subgraphs (each planned on its own, inputs excluded since the caller holds them)."""
    rule = node.op.workspace
    if rule is not None:
        return int(rule(node, layouts))
    from ..graph.ir import Graph

    inner = 0
    for a in node.attrs.values():
        if isinstance(a, Graph):
            plan = plan_memory(a)
            held = sum(b.nbytes for b in plan.buffers if b.start < 0)
            inner = max(inner, plan.peak_bytes - held)
    return inner


def _forward_values(graph, n_user: int | None) -> set:
    """Ids of the values the first ``n_user`` outputs (the loss) depend on."""
    if not n_user:
        return set()
    seen, stack = set(), [v.node for v in graph.outputs[:n_user]]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(v.node for v in node.inputs)
    return {id(v) for node in graph.nodes if id(node) in seen for v in node.outputs}


def plan_memory(
    graph,
    *,
    input_parts: dict | None = None,
    output_parts: dict | None = None,
    n_user: int | None = None,
    in_place: dict | None = None,
    reuse: str = "codegen",
    arena=None,
    runner_bytes: int = 0,
    reorders: MemoryPlan | None = None,
) -> MemoryPlan:
    """Plan ``graph`` as it runs in its node order (see the module docstring).

    ``input_parts`` / ``output_parts``: position -> part for graph inputs and outputs
    (parameters, gradients, optimizer state; unnamed inputs are ``inputs``); ``n_user``: how
    many leading outputs are the function's own (a loss): the values they depend on are the
    forward pass, and those of them a later node reads are the saved activations;
    ``in_place``: codegen's in-place updates ({id(node): {output index: input value}});
    ``reuse``: see `liveness`; ``arena``: planned execution's `Arena` (plan/arena.py, placed
    over the buffers of this liveness): its buffers count as one block held all the time;
    ``runner_bytes``: a program that holds every intermediate value in memory of its own, of
    these bytes in all (the C graph runner's arena, runtime/cgraph_memory.py): every buffer
    allocated during the call but the graph's outputs is in that block instead, held all the
    time.
    ``reorders``: a plan of this graph's very nodes (unchanged since) in another order: its
    layouts and workspaces, which do not depend on the order, are reused (a pass comparing
    two orders of one graph plans the second at about two thirds of the cost)."""
    known = reorders.layouts if reorders is not None else None
    live = liveness(graph, in_place=in_place, reuse=reuse, layouts=known)
    workspaces = reorders.workspaces if reorders is not None else {}
    in_arena = set(arena.offsets) if arena is not None else set()
    held_block = ("(arena)", arena.size) if arena is not None else None
    if runner_bytes:
        outputs = {id(v) for v in graph.outputs}
        in_arena = {
            b.index
            for b in live.buffers
            if b.start >= 0 and not any(id(v) in outputs for v in b.values)
        }
        held_block = ("(graph runner arrays)", runner_bytes)
    part_of = _parts(graph, live, input_parts or {}, output_parts or {}, n_user)
    n = len(live.order)
    timeline = []
    starts: dict[int, list] = {}
    ends: dict[int, list] = {}
    for b in live.buffers:
        starts.setdefault(max(b.start, 0), []).append(b)
        ends.setdefault(b.end, []).append(b)
    alive, total = set(), held_block[1] if held_block is not None else 0
    peak, peak_position, peak_live, peak_workspace = -1, 0, [], 0
    for p, node in enumerate(live.order):
        for b in starts.get(p, ()):
            alive.add(b.index)
            total += 0 if b.index in in_arena else b.nbytes
        ws = 0
        if node.kind == "call":
            ws = workspaces.get(id(node))
            if ws is None:
                ws = workspaces[id(node)] = workspace_bytes(node, live.layouts)
        timeline.append(total + ws)
        if total + ws > peak:
            peak, peak_position, peak_workspace = total + ws, p, ws
            peak_live = sorted(alive)
        for b in ends.get(p, ()):
            alive.discard(b.index)
            total -= 0 if b.index in in_arena else b.nbytes
    if n == 0:
        peak = sum(b.nbytes for b in live.buffers)
        peak_live = [b.index for b in live.buffers]
    breakdown = dict.fromkeys(PARTS, 0)
    live_at_peak = []
    for i in peak_live:
        b = live.buffers[i]
        if i in in_arena:
            continue
        breakdown[part_of[i]] += b.nbytes
        live_at_peak.append(LiveBuffer(b.name, b.nbytes, part_of[i]))
    if held_block is not None and held_block[1]:
        breakdown["temporaries"] += held_block[1]
        live_at_peak.append(LiveBuffer(held_block[0], held_block[1], "temporaries"))
    if peak_workspace:
        breakdown["temporaries"] += peak_workspace
        node = live.order[peak_position]
        live_at_peak.append(LiveBuffer(f"{node.name} (workspace)", peak_workspace, "temporaries"))
    return MemoryPlan(
        graph.name,
        max(peak, 0),
        live.order[peak_position].name if n else "",
        peak_position,
        breakdown,
        live_at_peak,
        timeline,
        live.buffers,
        part_of,
        layouts=live.layouts,
        workspaces=workspaces,
    )


def _parts(graph, live, input_parts, output_parts, n_user) -> dict:
    """Buffer index -> part."""
    parts = {}
    inputs = {id(v): input_parts.get(i, "inputs") for i, v in enumerate(graph.inputs)}
    outputs = {}
    for i, v in enumerate(graph.outputs):
        if i in output_parts:
            outputs.setdefault(id(v), output_parts[i])
    forward = _forward_values(graph, n_user)
    position = {id(node): p for p, node in enumerate(live.order)}
    for b in live.buffers:
        part = None
        for v in b.values:
            part = part or inputs.get(id(v)) or outputs.get(id(v))
        if part is None and forward and any(id(v) in forward for v in b.values):
            read_later = any(
                id(user.outputs[0]) not in forward if user.outputs else False
                for v in b.values
                for user in v.users
                if position.get(id(user), -1) > position[id(b.owner.node)]
            )
            part = "saved activations" if read_later else None
        parts[b.index] = part or "temporaries"
    return parts
