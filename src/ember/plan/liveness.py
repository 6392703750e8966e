"""Liveness of a scheduled graph as the code generator runs it: which buffers exist, from which
node to which.

A *buffer* is one allocation. A value is stored in a new buffer, or in the buffer of another
value when the executor makes it share memory:

* views and identities (plan/layout.py: ``reshape`` of a contiguous array, ``permute``,
  ``split``, ``stop_gradient``, ...);
* in-place updates: a parameter update the generated code writes into the parameter
  (``in_place``, as codegen's ``_in_place_nodes`` chose);
* operand reuse: a one-ufunc node or a fused loop (elementwise, or ending in reductions: its
  first elementwise result) whose operand of the same type dies there and whose buffer nothing
  else alive refers to takes that buffer (codegen's ``_sole`` test at run time).

A buffer lives from the node that allocates it (position -1: it exists before the call, a graph
input or constant) to the last node that reads any value stored in it; graph outputs live to
the end (position n), and so do graph inputs; a value nothing reads is deleted right after the
node that makes it (the generated code's ``del``). Constants belong to the compiled program,
not to a call: they count 0. Control-flow nodes (cond, loops) run their subgraphs inside the
node: their own peak is planned recursively and counted as the node's workspace
(plan/memory.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .layout import Layouts, nbytes

__all__ = ["Buffer", "Liveness", "liveness", "reusable_output", "reuses_operand"]


@dataclass
class Buffer:
    """One allocation: ``nbytes``, the value that made it, every value stored in it, and the
    positions it lives between (inclusive; -1 before the first node, n after the last)."""

    index: int
    nbytes: int
    owner: object
    values: list = field(default_factory=list)
    start: int = -1
    end: int = -1

    @property
    def name(self) -> str:
        return self.owner.name


@dataclass
class Liveness:
    buffers: list
    buffer_of: dict  # id(value) -> Buffer
    order: list  # the nodes in execution order
    layouts: Layouts


def reusable_output(node, fused: bool) -> int | None:
    """Which result of ``node`` may take a dying operand's buffer: a one-ufunc node's, or
    (``fused``: compiled loops) the first result of a loop that `overwrites_operand` of its
    iteration shape (a fused reduction's elementwise result; its reduced ones are smaller);
    None where none may. The generated code (runtime/codegen.py) asks the same."""
    if isinstance(node.op.kernel, np.ufunc) and not node.attrs:
        return 0 if len(node.outputs) == 1 and node.outputs[0].type.shape else None
    if not (fused and node.op.overwrites_operand):
        return None
    shapes = [tuple(v.type.shape) for v in node.outputs]
    full = max(shapes, key=len)
    # (0-d results are NumPy scalars)
    return next((i for i, s in enumerate(shapes) if s and s == full), None)


def reuses_operand(node, dying: set, buffer_of: dict, live_values: dict, fused: bool = False):
    """(the result of ``node``, the operand whose buffer it takes) (see the module
    docstring), or None. ``dying``: ids of the values whose last reader is ``node``;
    ``live_values``: buffer index -> ids of the values alive in it. ``fused``: compiled fused
    loops qualify too."""
    index = reusable_output(node, fused)
    if index is None:
        return None
    out = node.outputs[index]
    for v in node.inputs:
        if id(v) not in dying or v.type != out.type or v.node.kind != "call":
            continue
        buffer = buffer_of[id(v)]
        others = live_values.get(buffer.index, set()) - {id(v)}
        if buffer.start >= 0 and buffer.nbytes == nbytes(v) and not others:
            return index, v
    return None


def liveness(
    graph, *, in_place: dict | None = None, reuse: str = "codegen", layouts: Layouts | None = None
) -> Liveness:
    """The buffers of ``graph`` run in its node order. ``in_place``: {id(node): {output index:
    input value}} written into inputs; ``reuse``: ``'codegen'`` (one-ufunc nodes and fused
    elementwise loops take a dying operand's buffer, as the generated code does; ``'planned'``
    is the same, planned execution's name) or ``'none'``; ``layouts``: the graph's `Layouts`
    when known (they do not depend on the order: each value's strides follow from its
    operands')."""
    from ..kernels.ccompile import compiler_available

    in_place = in_place or {}
    # fused loops take a dying operand's buffer only when compiled: without a C compiler the
    # generated code runs their NumPy reference kernels, which allocate their results
    compiled = compiler_available()
    order = list(graph.nodes)
    n = len(order)
    layouts = layouts if layouts is not None else Layouts(graph, order)
    last: dict[int, int] = {}
    for p, node in enumerate(order):
        for v in node.inputs:
            last[id(v)] = p
    for v in graph.outputs:
        last[id(v)] = n
    buffers: list[Buffer] = []
    buffer_of: dict[int, Buffer] = {}
    live_values: dict[int, set] = {}  # buffer index -> ids of its values still alive

    def new_buffer(value, start):
        b = Buffer(len(buffers), nbytes(value), value, start=start)
        buffers.append(b)
        return b

    def store(value, buffer, p):
        buffer_of[id(value)] = buffer
        buffer.values.append(value)
        # a value nothing reads is deleted right after its node (codegen)
        end = last.get(id(value), p)
        buffer.end = max(buffer.end, end)
        if end > p:
            live_values.setdefault(buffer.index, set()).add(id(value))

    dying_at: dict[int, set] = {}
    for key, p in last.items():
        dying_at.setdefault(p, set()).add(key)
    for p, node in enumerate(order):
        if node.kind != "call":
            # held by the caller (inputs) or by the compiled program (constants, not counted)
            buffer = new_buffer(node.outputs[0], -1)
            buffer.nbytes = 0 if node.kind == "constant" else buffer.nbytes
            store(node.outputs[0], buffer, p)
            buffer.end = n
            continue
        dying = dying_at.get(p, set())
        targets = in_place.get(id(node), {})
        reused = None
        if not targets and reuse != "none":
            reused = reuses_operand(node, dying, buffer_of, live_values, fused=compiled)
        for v in node.outputs:
            source = layouts.alias.get(id(v))
            if source is not None:
                buffer = buffer_of[id(source)]
            elif v.index in targets:
                buffer = buffer_of[id(targets[v.index])]
            elif reused is not None and v.index == reused[0]:
                buffer = buffer_of[id(reused[1])]
            else:
                buffer = new_buffer(v, p)
            store(v, buffer, p)
        for key in dying:
            b = buffer_of.get(key)
            if b is not None:
                live_values.get(b.index, set()).discard(key)
    return Liveness(buffers, buffer_of, order, layouts)
