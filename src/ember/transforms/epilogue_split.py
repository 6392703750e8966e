"""A fused elementwise group split so two producers each take a part as their epilogue.

Fusion (transforms/fuse.py) makes one loop of everything elementwise after two producers whose
results meet: a ResNet downsampling block, as ONNX files write it with the batch norms folded
into the biases, is ``relu((conv(x) + b1) + (conv(x', w') + b2))``, one loop reading both
convolutions' results. Neither convolution can store that loop: to the first, the shortcut's
``conv(x', w') + b2`` is a computed value, not an operand of the result's shape it could add.

The instructions that do not depend on one producer's result (the *side*: the shortcut's bias
add) can run before it, as a group of their own whose stored result the other part (the *main*:
the first bias, the sum, the clamp) reads as an operand. Each part computes what the whole did,
instruction by instruction with the same operands, so the values are the same bits. The split
is made only where both parts become epilogues: the main part of this producer, and the side
part of another producer whose result the group reads (the shortcut's convolution), so no
loop of its own is added; the side's result then lives where the other producer's did.
"""

from __future__ import annotations

from typing import NamedTuple

from ..ops.program import Input, Instr, Program, Temp, program_types
from ..types import TensorType

__all__ = ["SideResult", "Split", "independent_split"]


class SideResult:
    """What the main part reads in place of a side result until the side node exists."""

    def __init__(self, type_: TensorType):
        self.type = type_


class Split(NamedTuple):
    """The two programs of a group split around one of its inputs, each as fused_elementwise
    attributes and the inputs it reads: (program, outputs, out_types, inputs)."""

    side: tuple
    main: tuple  # its inputs may hold `SideResult`s: the side's outputs, in `side_results`
    side_results: list  # per side output, the `SideResult` the main part reads (or none)
    results: list  # per output of the group: ("side" or "main", position in that part's)


def _depends(program, slot: int) -> list[bool]:
    """Per instruction, whether it reads input ``slot``, directly or through earlier ones."""
    reads: list[bool] = []
    for instr in program:
        reads.append(
            any(
                (isinstance(o, Input) and o.index == slot)
                or (isinstance(o, Temp) and reads[o.index])
                for o in instr.operands
            )
        )
    return reads


def _part(program, picked: list[int], inputs: list, outer: dict) -> tuple:
    """(instructions, inputs) of the instructions ``picked`` renumbered: their inputs the used
    ones of ``inputs`` (in order) and ``outer`` (temp index -> a value standing for an
    instruction outside the part, read as an input)."""
    used: list = []
    slot_of: dict = {}

    def slot(key, value) -> Input:
        if key not in slot_of:
            slot_of[key] = len(used)
            used.append(value)
        return Input(slot_of[key])

    position = {j: n for n, j in enumerate(picked)}
    instrs = []
    for j in picked:
        operands = []
        for o in program[j].operands:
            if isinstance(o, Input):
                operands.append(slot(("in", o.index), inputs[o.index]))
            elif isinstance(o, Temp) and o.index in position:
                operands.append(Temp(position[o.index]))
            elif isinstance(o, Temp):
                operands.append(slot(("temp", o.index), outer[o.index]))
            else:
                operands.append(o)
        instrs.append(Instr(program[j].op, tuple(operands), program[j].attrs))
    return Program(tuple(instrs)), used


def independent_split(attrs: dict, inputs: list, slot: int) -> Split | None:
    """The split of a ``fused_elementwise`` group (``attrs``, reading ``inputs``) into the
    instructions independent of input ``slot`` and the rest, or None when either is empty."""
    program, outputs = attrs["program"], attrs["outputs"]
    depends = _depends(program, slot)
    side = [j for j, d in enumerate(depends) if not d]
    main = [j for j, d in enumerate(depends) if d]
    if not side or not main:
        return None
    types = program_types(program, [v.type for v in inputs])
    # side results: those the main part reads, and those the group returns
    wanted = {o.index for j in main for o in program[j].operands if isinstance(o, Temp)}
    wanted |= set(outputs)
    side_out = [j for j in side if j in wanted]
    stand_ins = {j: SideResult(types[j]) for j in side_out}
    side_program, side_inputs = _part(program, side, inputs, {})
    main_program, main_inputs = _part(program, main, inputs, stand_ins)
    local = {j: n for n, j in enumerate(side)}
    main_local = {j: n for n, j in enumerate(main)}
    main_out = [j for j in outputs if depends[j]]
    results = []
    for j in outputs:
        if depends[j]:
            results.append(("main", main_out.index(j)))
        else:
            results.append(("side", side_out.index(j)))

    def typed(js):
        return tuple(TensorType(types[j].shape, types[j].dtype) for j in js)

    side_part = (side_program, tuple(local[j] for j in side_out), typed(side_out), side_inputs)
    main_part = (
        main_program,
        tuple(main_local[j] for j in main_out),
        typed(main_out),
        main_inputs,
    )
    return Split(side_part, main_part, [stand_ins[j] for j in side_out], results)
