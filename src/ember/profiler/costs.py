"""The cost of one recorded call: FLOPs and bytes moved, from the ops' own cost rules.

A plain op's cost is its ``OpDef.cost`` on the call's concrete input and output types. A fused
group (``fused_elementwise``, ``fused_reduce``, ``fused_epilogue``) did the work of its program's
ops, so its FLOPs are the sum of those ops' cost rules, each on the types that op has inside
the group (found by the ops' shape rules, without data), plus the producer's for an epilogue;
its bytes are the group's own rule: one pass over its inputs and outputs, the point of fusing.
"""

from __future__ import annotations

from .. import dtypes as dt
from ..ops._registry import REGISTRY, Cost, OpDef, TensorType

__all__ = ["op_cost", "program_flops"]


def op_cost(op: OpDef, in_types: tuple, out_types: tuple, attrs: dict) -> Cost:
    """(FLOPs, bytes) of one call of ``op`` on ``in_types`` giving ``out_types``."""
    own = op.cost(in_types, out_types, attrs)
    program = attrs.get("program") if op.name.startswith("fused_") else None
    if not program:
        return own
    program_inputs = list(in_types)
    flops = 0
    if "producer" in attrs:  # an epilogue: the producer's result is the program's input `slot`
        producer = REGISTRY[attrs["producer"]]
        n, producer_attrs = attrs["n_producer"], dict(attrs["producer_attrs"])
        result = producer.infer(*in_types[:n], **producer_attrs)
        flops += producer.cost(tuple(in_types[:n]), (result,), producer_attrs).flops
        program_inputs = list(in_types[n:])
        program_inputs.insert(attrs["slot"], result)
    return Cost(flops + program_flops(program, program_inputs), own.bytes)


def program_flops(program, input_types: list) -> int:
    """The sum of the cost rules of a fused ``program``'s ops on their abstract types."""
    types: list = []
    flops = 0
    for name, operands, op_attrs in program:
        op, op_attrs = REGISTRY[name], dict(op_attrs)
        args = []
        for ref in operands:
            if ref[0] == "in":
                args.append(input_types[ref[1]])
            elif ref[0] == "t":
                args.append(types[ref[1]])
            else:  # ("k", value, dtype name): a 0-d constant
                args.append(TensorType((), dt.as_dtype(ref[2])))
        result = op.infer(*args, **op_attrs)
        flops += op.cost(tuple(args), (result,), op_attrs).flops
        types.append(result)
    return flops
