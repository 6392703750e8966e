"""Fused programs: the instructions a fused node runs (ops/fused.py), made by transforms/fuse.py
and transforms/epilogue.py, compiled by kernels/cfuse.py.

An instruction is ``Instr(op, operands, attrs)``: ``op`` the `OpDef` it runs, ``attrs`` its
attributes as (key, value) pairs sorted by key, and each operand one of

* ``Input(i)``: the program's i-th input (an input of the node);
* ``Temp(j)``: the result of the program's j-th instruction (an earlier one);
* ``Const(value, dtype)``: a 0-d constant, written into the compiled kernel.

A `Program` is a tuple of instructions that prints as ``t0 = mul(in0, in1); t1 = relu(t0)``.
All of these are hashable and compare by value (a constant by its bits: -0.0 is not 0.0, and
NaN equals NaN), so CSE and the printer treat a fused node like any other; graph/serialize.py
stores instructions by op name and reads them back through the registry.

Code that must not import this module (the C generators in kernels/ sit below ops/) reads an
operand with ``operand.pick(inputs, temps, constant)``: the input, the temporary or
``constant(value, dtype)``, whichever the operand is.
"""

from __future__ import annotations

import functools
import math
import string
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError
from ..types import TensorType
from ._registry import OpDef

__all__ = [
    "Const",
    "Input",
    "Instr",
    "Program",
    "Temp",
    "check_program",
    "evaluate_program",
    "program_types",
    "walk_program",
]


@dataclass(frozen=True, slots=True)
class Input:
    """The program's ``index``-th input."""

    index: int

    def pick(self, inputs, temps, constant):
        return inputs[self.index]

    def __str__(self) -> str:
        return f"in{self.index}"

    __repr__ = __str__


@dataclass(frozen=True, slots=True)
class Temp:
    """The result of the program's ``index``-th instruction."""

    index: int

    def pick(self, inputs, temps, constant):
        return temps[self.index]

    def __str__(self) -> str:
        return f"t{self.index}"

    __repr__ = __str__


class Const:
    """A 0-d constant ``value`` (a Python float or bool) of ``dtype``. Equal constants have the
    same dtype and the same bits, so CSE never merges ``x * -0.0`` into ``x * 0.0``."""

    __slots__ = ("value", "dtype")

    def __init__(self, value, dtype: dt.DType):
        self.value = value
        self.dtype = dtype

    def pick(self, inputs, temps, constant):
        return constant(self.value, self.dtype)

    def _key(self) -> tuple:
        value = self.value
        bits = value.hex() if isinstance(value, float) and not math.isnan(value) else repr(value)
        return (self.dtype.name, type(value).__name__, bits)

    def __eq__(self, other) -> bool:
        return isinstance(other, Const) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return str(self.dtype.np.type(self.value))  # shortest form in its dtype: 1.702, -inf

    @staticmethod
    def holds(value, dtype: dt.DType) -> bool:
        """Whether ``value`` (a float, or a bool for bool) is a value of ``dtype``: an integer
        dtype's constant is a whole number within its range (a file's ``inf`` or ``2**70``
        for an int64 constant would reach NumPy's casts and generated C as no int64 at all);
        a floating one's any float (it rounds, to infinity past its range, as a cast does)."""
        if dtype is dt.bool_:
            return isinstance(value, bool)
        if isinstance(value, bool) or not isinstance(value, float):
            return False
        if dtype.is_floating_point:
            return True
        if not (math.isfinite(value) and value.is_integer()):
            return False
        info = np.iinfo(dtype.np)
        return info.min <= value <= info.max

    def __repr__(self) -> str:
        return f"Const({self.value!r}, {self.dtype.name})"


def _text(value) -> str:
    """An attribute value as the program prints it."""
    if isinstance(value, dt.DType):
        return value.name
    if isinstance(value, tuple):
        inner = ", ".join(_text(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


class Instr(NamedTuple):
    """One instruction: ``op`` on ``operands`` with ``attrs`` (sorted (key, value) pairs)."""

    op: OpDef
    operands: tuple
    attrs: tuple = ()

    @property
    def kwargs(self) -> dict:
        return dict(self.attrs)

    def __str__(self) -> str:
        args = [str(ref) for ref in self.operands]
        args += [f"{k}={_text(v)}" for k, v in self.attrs]
        return f"{self.op.name}({', '.join(args)})"


class Program(tuple):
    """A fused program: its instructions in order (see the module docstring)."""

    __slots__ = ()

    def __new__(cls, instructions=()):
        return super().__new__(cls, instructions)

    def __str__(self) -> str:
        return "; ".join(f"t{j} = {instr}" for j, instr in enumerate(self))

    def __repr__(self) -> str:
        return f"Program({str(self)!r})"


def walk_program(program, inputs, step, constant) -> list:
    """Each instruction's result, in order: ``step(op, args, attrs)`` runs one instruction on
    its operands (a program input, an earlier result, or ``constant(value, dtype)``)."""
    results: list = []
    for instr in program:
        args = [ref.pick(inputs, results, constant) for ref in instr.operands]
        results.append(step(instr.op, args, dict(instr.attrs)))
    return results


def evaluate_program(program, outputs, arrays) -> tuple:
    """Run ``program`` on ``arrays`` with the ops' reference kernels."""
    results = walk_program(
        program,
        arrays,
        lambda op, args, attrs: np.asarray(op.kernel(*args, **attrs)),
        lambda value, dtype: np.asarray(value, dtype=dtype.np),
    )
    return tuple(results[j] for j in outputs)


def program_types(program, in_types, step=None) -> list:
    """Each instruction's abstract type (`TensorType`), from the ops' shape rules (no data).
    ``step(op, arg_types, attrs, result_type)``, when given, sees every instruction."""

    def infer(op, args, attrs):
        result = op.infer(*args, **attrs)
        if step is not None:
            step(op, args, attrs, result)
        return result

    return walk_program(program, in_types, infer, lambda value, dtype: TensorType((), dtype))


def check_program(program, n_inputs: int, outputs, op_name: str) -> None:
    """Raise `EmberError` (naming ``op_name``) unless ``program`` is a well-formed `Program`
    over ``n_inputs`` inputs whose ``outputs`` name its instructions: each operand an input
    that exists, an earlier instruction's result or a constant (a graph file is hostile)."""

    def bad(message: str) -> EmberError:
        return EmberError(f"malformed program: {message}", op=op_name)

    if not isinstance(program, Program):
        raise bad(f"expected a Program, got {type(program).__name__}")
    for j, instr in enumerate(program):
        if not isinstance(instr, Instr) or not isinstance(instr.op, OpDef):
            raise bad(f"instruction {j} is not an Instr of a registered op: {instr!r}")
        if not isinstance(instr.operands, tuple) or not isinstance(instr.attrs, tuple):
            raise bad(f"instruction {j} ({instr.op.name}): operands and attrs must be tuples")
        for ref in instr.operands:
            ok = (
                (isinstance(ref, Input) and 0 <= ref.index < n_inputs)
                or (isinstance(ref, Temp) and 0 <= ref.index < j)
                or (
                    isinstance(ref, Const)
                    and isinstance(ref.dtype, dt.DType)
                    and Const.holds(ref.value, ref.dtype)
                )
            )
            if not ok:
                raise bad(f"instruction {j} ({instr.op.name}) reads {ref!r}, which is not there")
        if not all(
            isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], str) for a in instr.attrs
        ):
            raise bad(f"instruction {j} ({instr.op.name}): attrs must be (name, value) pairs")
        # the reference kernel would take its defaults, but a C loop spells only what is given
        missing = c_attributes(instr.op) - {key for key, _ in instr.attrs}
        if missing:
            raise bad(
                f"instruction {j} ({instr.op.name}) lacks the attribute(s) {sorted(missing)} "
                "its C expression reads"
            )
    if not all(isinstance(j, int) and 0 <= j < len(program) for j in outputs):
        raise bad(f"outputs {outputs!r} name instructions the program (of {len(program)}) lacks")


_C_FIELDS_OF_EVERY_LOOP = frozenset({"T", "f", "nan"})  # (cfuse_source fills these itself)


@functools.cache
def c_attributes(op: OpDef) -> frozenset:
    """The attribute names ``op``'s C expression reads (``{delta}`` in huber's)."""
    if not op.c:
        return frozenset()
    names = {field for _, field, _, _ in string.Formatter().parse(op.c) if field}
    return frozenset(n for n in names if not n.isdigit()) - _C_FIELDS_OF_EVERY_LOOP
