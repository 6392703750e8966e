"""The cost of one recorded call: FLOPs and bytes moved, from the ops' own cost rules.

A plain op's cost is its ``OpDef.cost`` on the call's concrete input and output types. A fused
group (an op with a `FusedRule`: ``fused_elementwise``, ``fused_reduce``, ``fused_epilogue``)
did the work of its program's ops, so its FLOPs are the sum of those ops' cost rules, each on
the types that op has inside the group (found by the ops' shape rules, without data), plus the
producer's for an epilogue; its bytes are the group's own rule: one pass over its inputs and
outputs, the point of fusing.
"""

from __future__ import annotations

from ..ops._registry import Cost, OpDef
from ..ops.program import program_types

__all__ = ["op_cost", "program_flops"]


def op_cost(op: OpDef, in_types: tuple, out_types: tuple, attrs: dict) -> Cost:
    """(FLOPs, bytes) of one call of ``op`` on ``in_types`` giving ``out_types``."""
    own = op.cost(in_types, out_types, attrs)
    if op.fused is None:
        return own
    program_inputs, flops = list(in_types), 0
    producer = op.fused.producer(attrs)
    if producer is not None:  # an epilogue: the producer's work, then the program on its result
        own_inputs = tuple(in_types[: producer.n_inputs])
        result = producer.op.infer(*own_inputs, **producer.attrs)
        program_inputs = producer.program_inputs(in_types, result)
        flops += producer.op.cost(own_inputs, (result,), producer.attrs).flops
    return Cost(flops + program_flops(op.fused.members(attrs), program_inputs), own.bytes)


def program_flops(program, input_types: list) -> int:
    """The sum of the cost rules of a fused ``program``'s ops on their abstract types."""
    flops = 0

    def count(op, args, attrs, result):
        nonlocal flops
        flops += op.cost(tuple(args), (result,), attrs).flops

    program_types(program, input_types, count)
    return flops
