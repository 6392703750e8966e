"""Recording the kernels of compiled graphs: what the instrumented generated code calls.

``compile_graph(graph, instrument=...)`` (runtime/codegen.py) writes ``_t = _now()`` before
each kernel call and ``_event(position, _t, outputs, inputs)`` after it; `kernel_recorder`
makes that ``_event`` for one graph, with each node's facts (name, op, attributes, dtypes)
computed once, and hands each call to the recording profiler (recorder.py passes both hooks).
"""

from __future__ import annotations

__all__ = ["kernel_recorder", "kernel_name"]


class _NodeInfo:
    """What the kernel recorder needs of a graph node, computed once per node."""

    __slots__ = ("name", "node", "op", "attrs", "in_dtypes", "out_dtypes", "symbolic", "_shapes")

    def __init__(self, node):
        from ..symbolic import has_symbols

        self.name = kernel_name(node)
        self.node = node.name
        self.op = node.op
        self.attrs = node.attrs
        self.in_dtypes = [v.type.dtype for v in node.inputs]
        self.out_dtypes = [v.type.dtype for v in node.outputs]
        self.symbolic = has_symbols(node.attrs)
        self._shapes = [v.type.shape for v in node.inputs]

    def resolve(self, in_types) -> dict:
        """The attributes with symbolic sizes bound from this call's input shapes."""
        from ..symbolic import SymDim, resolve

        bindings = {}
        for shape, t in zip(self._shapes, in_types):
            for d, size in zip(shape, t.shape):
                if isinstance(d, SymDim) and d.symbol() is not None:
                    bindings[d.symbol()] = size
        return resolve(self.attrs, bindings)


def kernel_recorder(graph, recording):
    """The ``_event(position, start, outputs, inputs)`` function that the instrumented code of
    ``graph`` calls after each kernel (runtime/codegen.py). ``recording()`` gives the profiler
    recording at that moment, or None (the code is built once and may outlive a profiler)."""
    infos = {i: _NodeInfo(n) for i, n in enumerate(graph.nodes) if n.kind == "call"}

    def record(position: int, start: int, outputs: tuple, inputs: tuple) -> None:
        prof = recording()
        if prof is not None:
            prof.kernel(infos[position], start, outputs, inputs)

    return record


def kernel_name(node) -> str:
    """A kernel event's name: the op, and for a fused group its ops (``fused_elementwise(mul+
    add+tanh)``; an epilogue starts with its producer, ``fused_epilogue(matmul+add+relu)``)."""
    rule = node.op.fused
    if rule is None:
        return node.op.name
    ops = [instr.op.name for instr in rule.members(node.attrs)]
    producer = rule.producer(node.attrs)
    if producer is not None:
        ops.insert(0, producer.op.name)
    return f"{node.op.name}({'+'.join(ops)})"
