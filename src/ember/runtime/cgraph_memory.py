"""Where the C graph runner's intermediate values live: one arena, each value at an offset that
no value alive at the same time shares, as generated code's order frees them.

Why. The runner holds its intermediate values between runs (their addresses are written into
the steps' arguments once). Holding each in an array of its own made a training step hold
every activation of the forward pass and every recomputation of a checkpointed region at once:
recomputation (transforms/checkpoint.py, remat under a memory budget) saved nothing, and the
runner's plan was far above generated code's, which frees each value after its last reader.

Lifetimes are those of the graph's own order, the order generated code runs and the passes
chose (the rematerializer puts a recomputation just before its backward reader; the scheduler
orders nodes for a low peak): a value lives from its producer's position to its last reader's,
and two values whose lives do not overlap may share bytes (plan/arena.py's best fit). A step
whose loop may write an output into an input's memory (``CStep.overwrites_operand``: a fused
loop, as generated code hands it ``out=`` a dying operand, plan/liveness.py
`reusable_output`) takes a dying operand's buffer, as generated code does, and runs after
every other step touching it (the threads' priority order would not).

The runner's threads claim steps in another order (priority: the longest path first), which
would run a recomputation as soon as its saved inputs exist. So where two buffers share bytes
and the graph's dependencies do not already order every step touching the first before the
step writing the second, the program adds that ordering (`RunnerArena.edges`: step -> step,
both forward in the graph's order, so no cycle): a recomputation then waits until the memory
it takes is free, where the rematerializer put it. Among gaps that fit, the placement prefers
one whose sharing the dependencies already order.

On one thread the orderings cost nothing (the steps run one after another anyway), and the
arena is the graph order's. On several, an ordering that would make the graph's longest path
(its steps weighted by their ops' FLOPs and bytes, the `cost` rule) longer than it is, or than
the work shared evenly over the threads, is not made: that
sharing is given up, the arena grows, and independent branches (an inception block's) keep
running at once. A recomputation has all the slack between its saved inputs and its backward
reader, so its orderings cost no time and are made.

Graph outputs are new arrays each run, graph inputs the caller's and constants the graph's:
none of them is in the arena.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..plan.arena import ALIGNMENT
from ..plan.layout import nbytes
from ..plan.liveness import reusable_output

__all__ = ["RunnerArena", "plan_arena"]


@dataclass
class RunnerArena:
    """The runner's intermediate values placed: ``memory`` (one aligned block, ``size`` bytes
    used), ``arrays`` (id(value) -> its array over the block) and ``edges`` (pairs of call
    positions in graph order: the first must finish before the second starts)."""

    memory: np.ndarray
    size: int
    arrays: dict
    edges: set = field(default_factory=set)


@dataclass
class _Buffer:
    index: int
    nbytes: int
    start: int  # position (in graph order) of the step writing it first
    end: int  # position of the last step touching it
    values: list = field(default_factory=list)
    touches: set = field(default_factory=set)  # positions of the steps writing or reading it
    offset: int = -1


def plan_arena(graph, calls: list, steps: list, threads: int = 1) -> RunnerArena:
    """The `RunnerArena` of ``graph``'s call nodes ``calls`` (graph order) run as ``steps`` on
    ``threads`` threads."""
    kept_out = {id(v) for v in (*graph.outputs, *graph.inputs)}
    readers: dict = {}  # id(value) -> positions of the steps reading it
    for p, node in enumerate(calls):
        for v in node.inputs:
            readers.setdefault(id(v), set()).add(p)
    buffers: list[_Buffer] = []
    buffer_of: dict = {}
    taken_at: list = []  # (positions touching a buffer before, position of the step taking it)
    for p, (node, step) in enumerate(zip(calls, steps)):
        taken = _dying_operand(node, step, p, buffer_of, readers, kept_out)
        shared = _same_bytes(node, step, buffer_of, kept_out)
        for v in node.outputs:
            if id(v) in kept_out:
                continue
            if shared is not None:  # (a reshape: its input's buffer, which lives on for both)
                b = shared
            elif taken is not None and v.index == taken[0]:
                b = buffer_of[id(taken[1])]
                taken_at.append((set(b.touches) - {p}, p))
            else:
                b = _Buffer(len(buffers), nbytes(v), p, p)
                buffers.append(b)
            b.values.append(v)
            buffer_of[id(v)] = b
            b.touches |= readers.get(id(v), set()) | {p}
            b.end = max(b.touches)
    ancestors = _ancestors(calls)
    slack = _Slack(calls, threads) if threads > 1 else None
    size, edges = _place([b for b in buffers if b.nbytes], ancestors, slack)
    # a step writing over a dying operand runs after every step touching that buffer before
    # it, as in the graph's order: the threads' priority order could otherwise run it before
    # another reader of the operand (a buffer's own tenants, not placed apart, get no ordering
    # from the placement)
    for touched, p in taken_at:
        edges |= {(q, p) for q in touched if not (ancestors[p] >> q) & 1}
    memory = np.empty(size + ALIGNMENT, np.uint8)
    skip = (-memory.ctypes.data) % ALIGNMENT
    arrays = {}
    for b in buffers:
        for v in b.values:
            shape, dtype = tuple(v.type.shape), v.type.dtype.np
            if b.nbytes == 0:
                arrays[id(v)] = np.empty(shape, dtype)
                continue
            start = skip + b.offset
            arrays[id(v)] = memory[start : start + b.nbytes].view(dtype).reshape(shape)
    return RunnerArena(memory, size, arrays, edges)


def _same_bytes(node, step, buffer_of, kept_out):
    """The buffer of the input whose bytes ``node``'s step copies unchanged (a reshape,
    ``CStep.same_bytes``) where its output can be that buffer too, else None: the output and
    the input are then one memory, read by both values' readers, written by no step before
    the last of them (a later step writing over it checks the buffer's every reader), so the
    step copies nothing."""
    if not step.same_bytes or len(node.outputs) != 1 or id(node.outputs[0]) in kept_out:
        return None
    b = buffer_of.get(id(node.inputs[0]))
    if b is None or b.nbytes != nbytes(node.outputs[0]):
        return None
    return b


def _dying_operand(node, step, p, buffer_of, readers, kept_out):
    """(output index, operand) where ``node``'s step writes that output over the operand's
    buffer (see the module docstring), else None.

    The operand's last reader in graph order is this step, but the threads claim steps by
    priority: `plan_arena` orders its other readers before this step (without that, ONNX's
    RotaryEmbedding gave wrong values: a fused loop wrote over an operand that another loop,
    later in priority, still had to read)."""
    if not step.overwrites_operand:
        return None
    index = reusable_output(node, fused=True)
    if index is None or id(node.outputs[index]) in kept_out:
        return None
    out = node.outputs[index]
    for v in node.inputs:
        b = buffer_of.get(id(v))
        if b is None or v.type != out.type or b.nbytes != nbytes(out):
            continue
        if max(b.touches) > p:
            continue  # (a value in the buffer is read after this step)
        return index, v
    return None


def _ancestors(calls: list) -> list:
    """Per call position, the bit set (an int, bit q: call q) of the calls that its inputs'
    dependencies make finish before it."""
    position = {id(n): p for p, n in enumerate(calls)}
    ancestors = []
    for node in calls:
        bits = 0
        for v in node.inputs:
            q = position.get(id(v.node))
            if q is not None:
                bits |= ancestors[q] | (1 << q)
        ancestors.append(bits)
    return ancestors


def _place(buffers: list, ancestors: list, slack=None) -> tuple[int, set]:
    """(arena size, ordering edges) placing ``buffers`` (offsets set on them); the placement
    order of three (as plan/arena.py `place`) that gives the smallest arena, then the fewest
    edges."""
    orders = (
        lambda b: (-b.nbytes, b.start),
        lambda b: (b.start, -b.nbytes),
        lambda b: (-(b.end - b.start + 1) * b.nbytes, b.start),
    )
    best = None
    for key in orders:
        if slack is not None:
            slack.reset()
        size, offsets, edges = _best_fit(sorted(buffers, key=key), ancestors, slack)
        if best is None or (size, len(edges)) < (best[0], len(best[2])):
            best = size, offsets, edges
    size, offsets, edges = best
    for b in buffers:
        b.offset = offsets[b.index]
    return size, edges


def _aligned(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


def _best_fit(todo: list, ancestors: list, slack=None) -> tuple[int, dict, set]:
    """(arena size, offsets, edges) placing ``todo`` in this order, each at the best-fitting
    gap among the buffers alive with it, one whose earlier or later tenants the dependencies
    order before or after it where one fits; with ``slack`` (several threads), a gap whose
    orderings would lengthen the longest path is not taken (see the module docstring)."""
    placed: list = []  # (buffer, offset, size)
    offsets: dict = {}
    edges: set = set()
    size = 0
    for b in todo:
        need = _aligned(b.nbytes)
        busy = sorted((o, o + s) for a, o, s in placed if a.start <= b.end and b.start <= a.end)
        gaps, cursor = [], 0
        for lo, hi in busy:
            if lo - cursor >= need:
                gaps.append((lo - cursor, cursor))
            cursor = max(cursor, hi)
        gaps.append((float("inf"), cursor))  # (above every buffer alive with it)
        gaps.sort()
        choice = None
        for _, offset in gaps:
            needed = _needed_edges(b, offset, need, placed, ancestors) - edges
            if not needed:
                choice = offset, needed
                break
            if choice is None and (slack is None or slack.allows(needed)):
                choice = offset, needed
        if choice is None:  # (every gap's sharing would cost time: above everything placed)
            top = max((o + s for _, o, s in placed), default=0)
            choice = top, set()
        offset, needed = choice
        if needed and slack is not None:
            slack.add(needed)
        edges |= needed
        offsets[b.index] = offset
        placed.append((b, offset, need))
        size = max(size, offset + need)
    return size, offsets, edges


def _needed_edges(b, offset: int, need: int, placed: list, ancestors: list) -> set:
    """The edges that placing ``b`` at ``offset`` needs: for each buffer sharing those bytes at
    another time, from each step touching the earlier one that is not already an ancestor of
    the later one's first step, to that step."""
    needed = set()
    for a, o, s in placed:
        if o >= offset + need or offset >= o + s:
            continue
        if a.start <= b.end and b.start <= a.end:
            continue  # (alive together: never at these bytes)
        early, late = (a, b) if a.end < b.start else (b, a)
        bits = ancestors[late.start]
        needed |= {(t, late.start) for t in early.touches if not bits >> t & 1}
    return needed


class _Slack:
    """The earliest and latest start of each step (graph order, weighted by its op's FLOPs and
    bytes) under the dependencies and the orderings added so far: an ordering t -> s keeps the
    longest path where t can finish before s must start."""

    def __init__(self, calls: list, threads: int):
        position = {id(n): p for p, n in enumerate(calls)}
        self.weight = [_weight(n) for n in calls]
        # (the threads cannot finish sooner than the work shared evenly: a path up to that
        # long costs nothing)
        self.floor = sum(self.weight) / threads
        self.base = [
            sorted({position[id(v.node)] for v in n.inputs if id(v.node) in position})
            for n in calls
        ]
        self.reset()

    def reset(self) -> None:
        self.preds = [list(p) for p in self.base]
        self._times()

    def _times(self) -> None:
        n, w = len(self.weight), self.weight
        earliest = [0.0] * n
        for s in range(n):  # (graph order is topological, the added orderings too)
            earliest[s] = max((earliest[p] + w[p] for p in self.preds[s]), default=0.0)
        end = max((earliest[s] + w[s] for s in range(n)), default=self.floor)
        end = max(end, self.floor)
        latest = [end - w[s] for s in range(n)]
        for s in reversed(range(n)):
            for p in self.preds[s]:
                latest[p] = min(latest[p], latest[s] - w[p])
        self.earliest, self.latest = earliest, latest

    def allows(self, edges: set) -> bool:
        return all(self.earliest[t] + self.weight[t] <= self.latest[s] for t, s in edges)

    def add(self, edges: set) -> None:
        for t, s in edges:
            self.preds[s].append(t)
        self._times()


def _weight(node) -> float:
    """A step's weight for the longest path: its op's FLOPs and bytes (1 without a rule)."""
    rule = node.op.cost
    if rule is None:
        return 1.0
    try:
        cost = rule([v.type for v in node.inputs], [v.type for v in node.outputs], node.attrs)
    except Exception:  # noqa: BLE001 - a cost rule refusing these types: a unit step
        return 1.0
    return float(cost.flops + cost.bytes) or 1.0
