"""Arena placement: every planned buffer gets an offset in one block of memory, and planned
execution writes kernels' results into their slots.

`place(buffers)` assigns offsets greedily, each buffer at the best-fitting gap (the smallest
that holds it, lowest offset on ties) among the buffers already placed whose lifetimes overlap
its own (plan/liveness.py: inclusive positions), none fitting, above the highest of them; it
places in three orders (largest first, earliest first, largest size x lifetime first) and keeps
the smallest arena. Buffers that never live at the same time may share bytes.
An `Arena` reports its ``size`` against the ``total`` of the buffers' sizes (no sharing) and
the ``live_peak`` (the most bytes of them alive at once, the lower bound of any placement):
``size / live_peak - 1`` is the fragmentation. `MemoryPlan.arena` is the placement of every
buffer allocated during a call.

Planned execution (``executor="arena"``, runtime/codegen.py): the arena is allocated once per
compiled program, and each node whose kernel takes ``out=`` (a NumPy ufunc, a matrix product, a
fused C loop or matmul epilogue) writes its result into its buffer's slot, when that buffer is
C-contiguous as planned and holds no graph output (an output is handed to the caller and must
outlive the call); other kernels allocate as before. `arena_slots` works that out for a graph
and `executor_arena` places the buffers concerned. The slots are reused by the next call: a
compiled program in this mode is not reentrant (one call at a time).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .liveness import liveness

__all__ = [
    "ALIGNMENT",
    "Arena",
    "accepts_out",
    "concrete",
    "arena_slots",
    "executor_arena",
    "place",
]

ALIGNMENT = 64  # bytes: a cache line, and what vector loads like


@dataclass
class Arena:
    """Offsets (buffer index -> byte offset) of placed buffers and the arena's ``size``;
    ``total``: the sum of their sizes; ``live_peak``: the most of them alive at once."""

    size: int
    offsets: dict = field(default_factory=dict)
    total: int = 0
    live_peak: int = 0

    @property
    def fragmentation(self) -> float:
        """How much larger the arena is than the bytes ever alive at once (0.0: none)."""
        return self.size / self.live_peak - 1.0 if self.live_peak else 0.0

    def __str__(self) -> str:
        mib = 2**20
        return (
            f"arena {self.size / mib:.2f} MiB for {len(self.offsets)} buffers of "
            f"{self.total / mib:.2f} MiB (at most {self.live_peak / mib:.2f} MiB alive at once: "
            f"fragmentation {self.fragmentation:.1%})"
        )


def _aligned(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


def place(buffers) -> Arena:
    """Offsets for ``buffers`` (plan/liveness.py `Buffer` objects; see the module docstring)."""
    todo = [b for b in buffers if b.nbytes > 0]
    # greedy placement depends on the order: largest first is the classic choice, while
    # earliest first packs a chain of short lives tightly; the smaller arena is kept
    orders = (
        lambda b: (-b.nbytes, b.start),
        lambda b: (b.start, -b.nbytes),
        lambda b: (-(b.end - b.start + 1) * b.nbytes, b.start),
    )
    size, offsets = min((_best_fit(sorted(todo, key=k)) for k in orders), key=lambda r: r[0])
    # the most bytes alive at once (the same sweep as plan/memory.py's timeline)
    events: dict = {}
    for b in todo:
        events.setdefault(b.start, []).append(b.nbytes)
        events.setdefault(b.end + 1, []).append(-b.nbytes)
    live = live_peak = 0
    for p in sorted(events):
        live += sum(events[p])
        live_peak = max(live_peak, live)
    return Arena(size, offsets, sum(b.nbytes for b in todo), live_peak)


def _best_fit(todo: list) -> tuple[int, dict]:
    """(arena size, offsets) placing ``todo`` in this order, each at the best-fitting gap."""
    placed: list = []  # (start, end, offset, size)
    offsets = {}
    size = 0
    for b in todo:
        need = _aligned(b.nbytes)
        overlapping = (p for p in placed if p[0] <= b.end and b.start <= p[1])
        busy = sorted((o, o + s) for _, _, o, s in overlapping)
        best, best_gap, cursor = None, None, 0
        for lo, hi in busy:
            gap = lo - cursor
            if gap >= need and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, hi)
        offset = best if best is not None else cursor
        offsets[b.index] = offset
        placed.append((b.start, b.end, offset, need))
        size = max(size, offset + need)
    return size, offsets


def concrete(graph) -> bool:
    """Whether every value of ``graph`` has a concrete shape (planning needs them)."""
    return all(isinstance(d, int) for n in graph.nodes for v in n.outputs for d in v.type.shape)


def accepts_out(node, compiled: dict) -> bool:
    """Whether the generated code can hand ``node``'s kernel an ``out=`` array per output: a
    one-ufunc node whose operands have its result's dtype (no casting into ``out``), or one
    whose op's ``accepts_out`` rule says so (``compiled``: id(node) -> the node's compiled
    implementation, which the rule is asked about where there is one)."""
    if node.kind != "call":
        return False
    rule = node.op.accepts_out
    if rule is not None:
        return rule(node, id(node) in compiled)
    if id(node) in compiled:
        return False
    if isinstance(node.op.kernel, np.ufunc) and not node.attrs and len(node.outputs) == 1:
        out = node.outputs[0].type
        return out.dtype.np == np.bool_ or all(v.type.dtype == out.dtype for v in node.inputs)
    return False


def executor_arena(graph, in_place: dict, compiled: dict, live=None):
    """(liveness, arena, ids of the values written into the arena) of planned execution of
    ``graph`` (see the module docstring). ``in_place``: codegen's in-place updates."""
    live = live or liveness(graph, in_place=in_place, reuse="planned")
    returned = {id(v) for v in graph.outputs}
    eligible = []
    for b in live.buffers:
        owner = b.owner
        if b.start < 0 or b.nbytes == 0 or owner.node.kind != "call":
            continue
        if any(id(v) in returned for v in b.values) or not live.layouts.contiguous(owner):
            continue
        if not owner.type.shape or not accepts_out(owner.node, compiled):
            continue
        eligible.append(b)
    arena = place(eligible)
    # the values a node writes (not views, not in-place updates of inputs) into placed buffers
    written = {
        id(v)
        for b in eligible
        for v in b.values
        if live.layouts.alias.get(id(v)) is None
        and accepts_out(v.node, compiled)
        and live.layouts.contiguous(v)
        and v.type == b.owner.type
    }
    return live, arena, written


def arena_slots(graph, in_place: dict, compiled: dict):
    """(the arena array, id(value) -> its slot: an array over the arena with the value's shape
    and dtype) for planned execution of ``graph``."""
    if not concrete(graph):  # a symbolic size: slot sizes are known only at the call
        return None, {}, None
    live, arena, written = executor_arena(graph, in_place, compiled)
    memory = np.empty(arena.size + ALIGNMENT, np.uint8)
    skip = (-memory.ctypes.data) % ALIGNMENT
    slots = {}
    for id_v in written:
        b = live.buffer_of[id_v]
        v = next(v for v in b.values if id(v) == id_v)
        start = skip + arena.offsets[b.index]
        dtype = v.type.dtype.np
        slots[id_v] = memory[start : start + b.nbytes].view(dtype).reshape(tuple(v.type.shape))
    return memory, slots, arena
