"""Ops that read a 16-bit value themselves instead of its float32 copy.

Under autocast a float32-only op (the loss's log_softmax) reads a bfloat16 value through a
cast to float32: a float32 copy of the logits, twice their 16-bit size, held beside the op's
result while it runs (the GPT block's 1000-class loss: 3.9 MiB more at the step's peak). An op
whose ``reads_widened`` rule accepts the cast's source (ops/_rules.py) computes from the 16-bit
value, widening each element as its kernel reads it, so the copy is never made. The rewrite
needs a cast whose ``widening`` rule says it is exact (bfloat16 or float16 to float32), and
the rule's promise that the op then computes the same values bit for bit; the cast stays for
its other readers, and dead-code elimination removes it where the op was its only one.

`WIDENED_READS` is the O2 pass; it runs before fusion, which would otherwise make the cast a
loop of its own.
"""

from __future__ import annotations

from ..graph.rewrite import Pass

__all__ = ["WIDENED_READS", "read_widened"]


def read_widened(graph) -> tuple[object, bool]:
    """``graph`` with every op that can read its operand 0 before its widening cast doing so
    (see the module docstring); (graph, changed)."""
    changed = False
    for node in list(graph.nodes):
        if node.kind != "call" or node.op.reads_widened is None or not node.inputs:
            continue
        operand = node.inputs[0]
        cast = operand.node
        if cast.kind != "call" or cast.op.widening is None or len(cast.inputs) != 1:
            continue
        source = cast.inputs[0]
        if cast.op.widening(source.type, **cast.attrs) is not operand.dtype:
            continue
        attrs = node.op.reads_widened(node.attrs, source.type, operand.dtype)
        if attrs is None:
            continue
        with graph.inserting_before(node):
            new = graph.add_call(
                node.op,
                [source, *node.inputs[1:]],
                attrs,
                [v.type for v in node.outputs],
                [v.name for v in node.outputs],
            )
        for old, value in zip(node.outputs, new.outputs):
            graph.replace_all_uses(old, value)
        graph.erase_node(node)
        changed = True
    return graph, changed


WIDENED_READS = Pass(
    "widened_reads", read_widened, level=2, doc="16-bit operands read without a float32 copy"
)
