"""Memory-aware scheduling: a topological order that lowers the peak where the order is free.

`memory_aware_order(graph)` is greedy list scheduling: among the nodes whose inputs are ready,
run the one that adds the fewest bytes (its new outputs minus the inputs it is the last reader
of), so a branch that frees memory runs to completion before one that allocates more; ties keep
the stored order. Nodes drawing random numbers keep their relative order (the generators'
sequence), and so do the calls of each ordered effect channel (collectives: every rank must
start them in one order; graph/rewrite.py `ordered_predecessors`). `schedule(graph)` is the
pass (``graph -> (graph, changed)``, `SCHEDULE` for a pipeline, run at O3 after fusion): it
keeps the new order only when plan/memory.py plans a lower peak for it than for the stored
order, so it never raises the peak. On the reference steps (MLP, CNN, GPT block, ResNet block)
the traced order is already the better one and the pass changes nothing; graphs with
independent branches of unequal size are where it pays.
"""

from __future__ import annotations

import heapq

from ..graph.rewrite import Pass, ordered_predecessors
from .arena import concrete
from .layout import nbytes
from .memory import plan_memory

__all__ = ["SCHEDULE", "memory_aware_order", "schedule"]


def memory_aware_order(graph) -> list:
    """The nodes of ``graph`` in a memory-aware topological order (see the module docstring)."""
    position = {id(n): p for p, n in enumerate(graph.nodes)}
    producers = {id(n): {id(v.node) for v in n.inputs} for n in graph.nodes}
    randoms = [n for n in graph.nodes if n.kind == "call" and n.op.kind == "random"]
    for before, after in zip(randoms, randoms[1:]):
        producers[id(after)].add(id(before))
    for after, before in ordered_predecessors(graph.nodes).items():
        producers[after].add(id(before))
    users: dict[int, list] = {id(n): [] for n in graph.nodes}
    for n in graph.nodes:
        for p in producers[id(n)]:
            users[p].append(n)
    readers_left: dict[int, int] = {}
    for n in graph.nodes:
        for v in n.inputs:
            readers_left[id(v)] = readers_left.get(id(v), 0) + 1
    kept = {id(v) for v in graph.outputs}
    waiting = {id(n): len(producers[id(n)]) for n in graph.nodes}

    # what running a node adds: its new outputs (views and aliases add nothing), less each
    # operand it would free, an array of its own (not a view, not returned, made by a call)
    # that dies there once no other reader is left: (id, bytes, how often the node reads it)
    grows: dict[int, int] = {}
    frees: dict[int, list] = {}
    for node in graph.nodes:
        call = node.kind == "call"
        grows[id(node)] = (
            sum(nbytes(v) for v in node.outputs)
            if call and not (node.op.view or node.op.aliases)
            else 0
        )
        reads: dict[int, list] = {}
        for v in node.inputs:
            if id(v) in reads:
                reads[id(v)][2] += 1
            elif (
                id(v) not in kept
                and v.node.kind == "call"
                and not (v.node.op.view or v.node.op.aliases)
            ):
                reads[id(v)] = [id(v), nbytes(v), 1]
        frees[id(node)] = list(reads.values())

    def delta(node) -> int:
        return grows[id(node)] - sum(b for i, b, k in frees[id(node)] if readers_left[i] == k)

    # a lazy heap: a node's priority changes only when another reader of one of its operands
    # runs; it is pushed again then, and entries of an older version are skipped
    version: dict[int, int] = {}
    ready_ids: set = set()
    ready: list = []

    def push(node) -> None:
        version[id(node)] = version.get(id(node), 0) + 1
        ready_ids.add(id(node))
        heapq.heappush(ready, (delta(node), position[id(node)], version[id(node)], node))

    readers: dict[int, list] = {}  # id(value) -> its readers, each once

    for n in graph.nodes:
        if waiting[id(n)] == 0:
            push(n)
    order = []
    while ready:
        _, _, seen, node = heapq.heappop(ready)
        if id(node) not in ready_ids or seen != version[id(node)]:
            continue
        ready_ids.discard(id(node))
        order.append(node)
        operands = {id(v): v for v in node.inputs}.values()
        for v in node.inputs:
            readers_left[id(v)] -= 1
        for user in users[id(node)]:
            waiting[id(user)] -= 1
            if waiting[id(user)] == 0:
                push(user)
        # the other readers of this node's operands may now free them: their priority changed
        for v in operands:
            unique = readers.get(id(v))
            if unique is None:
                unique = readers[id(v)] = list({id(u): u for u in v.users}.values())
            for reader in unique:
                if id(reader) in ready_ids:
                    push(reader)
    return order


def schedule(graph):
    """The scheduling pass: ``graph`` in the memory-aware order when that lowers the planned
    peak, else unchanged. Returns (graph, changed)."""
    if not concrete(graph):
        return graph, False  # a symbolic size: bytes are known only at the call
    order = memory_aware_order(graph)
    if [id(n) for n in order] == [id(n) for n in graph.nodes]:
        return graph, False
    before = plan_memory(graph)
    saved = graph.nodes
    graph.nodes = order
    if plan_memory(graph, reorders=before).peak_bytes < before.peak_bytes:
        return graph, True
    graph.nodes = saved
    return graph, False


SCHEDULE = Pass("schedule", schedule, level=3, doc="memory-aware topological order")
