"""`GraphBuilder`: the dispatch mode that records ops into a `Graph` instead of running them.

While a builder is the current mode (``with builder:``), every ``ops._registry.apply`` call adds a
call node whose output types come from the op's rule (so shape and dtype errors surface at the
user's line, as in eager) and returns `SymbolicTensor`s. An eager `Tensor` met as an operand is
*captured*: it becomes a graph input, fed with the tensor's current data at every run (so a
traced model sees its parameters' later values). ``builder.captured`` lists them in input order.
Python scalars and arrays that ops turn into constants become constant nodes.
"""

from __future__ import annotations

from ..errors import TraceError
from ..graph.ir import Graph
from ..ops import _registry as _reg
from ..ops._registry import TensorType
from ..tensor import Tensor
from .symbolic import SymbolicTensor


class GraphBuilder(_reg.Mode):
    def __init__(self, graph: Graph | None = None):
        self.graph = graph if graph is not None else Graph()
        self.captured: list[Tensor] = []
        self._captured_values: dict[int, object] = {}  # id(tensor) -> Value
        self.capture_names: dict[int, str] = {}  # id(tensor) -> input name (module parameters)

    # -------- entering and leaving
    def __enter__(self) -> GraphBuilder:
        _reg.push_mode(self)
        return self

    def __exit__(self, *exc) -> bool:
        popped = _reg.pop_mode()
        assert popped is self, "graph builders must be exited in the order they were entered"
        return False

    # -------- operands
    def input(self, type: TensorType, name: str | None = None) -> SymbolicTensor:
        """A new graph input of ``type``, as a symbolic tensor."""
        return SymbolicTensor(self.graph.add_input(type, name), self)

    def capture(self, tensor: Tensor, name: str | None = None):
        """The graph value standing for eager ``tensor`` (a new input the first time)."""
        value = self._captured_values.get(id(tensor))
        if value is None:
            name = name or self.capture_names.get(id(tensor), "captured")
            value = self.graph.add_input(TensorType(tensor.shape, tensor.dtype), name)
            self._captured_values[id(tensor)] = value
            self.captured.append(tensor)
        return value

    def value_of(self, t):
        if isinstance(t, SymbolicTensor):
            if t.builder is not self:
                raise TraceError(
                    f"%{t.value.name} belongs to another graph being built; pass it in as an "
                    "input instead of closing over it"
                )
            return t.value
        if isinstance(t, Tensor):
            return self.capture(t)
        raise TypeError(f"expected an ember tensor, got {type(t).__name__}")

    # -------- the Mode protocol
    def apply(self, op: _reg.OpDef, inputs: tuple, attrs: dict):
        values = [self.value_of(t) for t in inputs]
        node = self.graph.add_call(op, values, attrs)
        outs = [SymbolicTensor(v, self) for v in node.outputs]
        return outs[0] if op.num_outputs == 1 else tuple(outs)

    def constant(self, array) -> SymbolicTensor:
        return SymbolicTensor(self.graph.add_constant(array), self)
