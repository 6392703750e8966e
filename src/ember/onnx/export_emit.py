"""The emitter an op's ``onnx`` rule writes its ONNX nodes through (ops/_rules.py).

The exporter (onnx/exporter.py) walks an ember graph and, for each call node, hands the op's
``onnx`` rule an `Emitter` bound to that call. The rule never imports ``onnx`` (the ops sit
below this layer): it reads the call through the emitter and emits nodes with it.

Reading the call: ``e.inputs`` (the ONNX names of its operands), ``e.in_types`` /
``e.out_types`` (ember `TensorType`s; a dimension may be a `SymDim`), ``e.attrs``, ``e.op``,
``e.opset`` (the default domain's version being written).

Emitting: ``e.node(op_type, inputs, outputs=1, **attributes)`` adds one node and returns its
output name (a tuple of names for ``outputs > 1``; ``""`` in ``inputs`` is an omitted optional
input); ``e.constant(array)`` an initializer; ``e.ints(values)`` a 1-D int64 one;
``e.scalar(value, dtype)`` a 0-d one of an ember dtype; ``e.shape(dims)`` a 1-D int64 tensor of
sizes, symbolic ones computed from the graph inputs at run time; ``e.dtype(dtype)`` ONNX's
element type code of an ember dtype; ``e.call(op, inputs, attrs)`` another op's rule on these
names (fused nodes emit their members this way); ``e.inline(graph, names)`` an ember graph's
nodes with its inputs bound to ``names`` (control-flow branches and bodies);
``e.body(in_types, build, name, out_types=None)`` an ONNX subgraph (``If``/``Loop``/``Scan``
attribute) whose formal inputs have ``in_types`` and whose outputs ``build(*input_names)``
emits (of ``out_types``, needed where they are not ember values), referring to outer names
freely; ``e.unsupported(reason)`` refuses the call with an `OnnxError` naming the op and
the user's line.

A rule returns its output names, one per output of the call (a name or a sequence of names).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import OnnxError
from ..symbolic import SymDim
from ..types import TensorType

__all__ = ["Emitter", "ONNX_DTYPES", "onnx_dtype"]

# ember dtype name -> onnx.TensorProto element type (the codes are ONNX's, fixed by its spec)
ONNX_DTYPES = {
    "float32": 1,
    "uint8": 2,
    "int8": 3,
    "uint16": 4,
    "int16": 5,
    "int32": 6,
    "int64": 7,
    "bool": 9,
    "float16": 10,
    "float64": 11,
    "uint32": 12,
    "uint64": 13,
    "complex64": 14,
    "complex128": 15,
    "bfloat16": 16,
}


def onnx_dtype(dtype) -> int:
    dtype = dt.as_dtype(dtype)
    code = ONNX_DTYPES.get(dtype.name)
    if code is None:
        raise OnnxError(f"ember's {dtype.name} has no ONNX element type", op="export")
    return code


class Emitter:
    """One call node's view of the model being written (see the module docstring)."""

    def __init__(self, writer, op, inputs, attrs, in_types, out_types, where: str):
        self._w = writer
        self.op = op
        self.inputs = tuple(inputs)
        self.attrs = dict(attrs)
        self.in_types = tuple(in_types)
        self.out_types = tuple(out_types)
        self._where = where  # the user's file:line (or module scope) for errors

    @property
    def opset(self) -> int:
        return self._w.opset

    # -------- emitting
    def node(self, op_type: str, inputs, outputs: int = 1, **attributes):
        return self._w.node(op_type, inputs, outputs, attributes)

    def constant(self, array) -> str:
        return self._w.constant(np.asarray(array))

    def ints(self, values) -> str:
        return self._w.constant(np.asarray([int(v) for v in values], dtype=np.int64))

    def scalar(self, value, dtype) -> str:
        return self._w.constant(np.asarray(value, dtype=dt.as_dtype(dtype).np))

    def shape(self, dims) -> str:
        return self._w.shape(dims)

    def dim(self, d) -> str:
        """One size as a 1-D int64 tensor of one element."""
        return self._w.shape((d,))

    def dtype(self, dtype) -> int:
        return onnx_dtype(dtype)

    def cast(self, name: str, dtype) -> str:
        return self.node("Cast", [name], to=onnx_dtype(dtype))

    def call(self, op, inputs, attrs: dict, in_types=None) -> tuple:
        """``op``'s rule on ``inputs`` (their types: ``in_types``, else those known)."""
        return self._w.call(op, inputs, attrs, self._where, in_types)

    def inline(self, graph, names) -> tuple:
        return self._w.inline(graph, names, self._where)

    def body(self, in_types, build, name: str = "body", out_types=None):
        return self._w.body(in_types, build, name, out_types)

    def type_of(self, name: str) -> TensorType | None:
        return self._w.types.get(name)

    # -------- refusing
    def unsupported(self, reason: str):
        raise OnnxError(
            f"has no ONNX form {reason}; it cannot be exported",
            op=self.op.name,
            location=self._where,
        )


def static_dims(dims) -> bool:
    return not any(isinstance(d, SymDim) for d in dims)
