"""`ModelWriter`: the ONNX graph being written while the exporter walks ember graphs.

It owns the names (unique across the model and every subgraph in it, as ONNX requires of
nested scopes), the initializers, the node lists (one per open subgraph scope), the ember type
of every name an ember value or a member op produced (``types``), and how symbolic sizes are
computed at run time (``symbols``: symbol -> (input name, axis)). Each call node's ``onnx``
rule runs through an `Emitter` (export_emit.py) bound to it; `emit_call` checks what the rule
returns.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import OnnxError, ShapeError, user_location
from ..symbolic import SymDim
from ..types import TensorType
from .export_emit import Emitter, onnx_dtype

__all__ = ["ModelWriter", "pair_type", "value_info"]

_SMALL = 64  # constants up to this many elements are shared between equal uses


def pair_type(t) -> TensorType:
    """The type a value has in the file: a complex one as a real tensor with a last axis of 2
    (its real and imaginary parts, as ONNX's DFT gives them: ops/_onnx_complex.py)."""
    if t.dtype.is_complex:
        return TensorType(tuple(t.shape) + (2,), dt.to_real(t.dtype))
    return TensorType(tuple(t.shape), t.dtype)


def value_info(onnx, name: str, type: TensorType):
    dims = [str(d) if isinstance(d, SymDim) else int(d) for d in type.shape]
    return onnx.helper.make_tensor_value_info(name, onnx_dtype(type.dtype), dims)


class ModelWriter:
    def __init__(self, onnx, opset: int):
        self.onnx = onnx
        self.opset = opset
        self.taken: set[str] = set()
        self.initializers: list[tuple[str, np.ndarray]] = []
        self.types: dict[str, TensorType] = {}
        # symbol -> (input name, axis, k): the symbol is that dimension's size over k
        self.symbols: dict[str, tuple[str, int, int]] = {}
        self._scopes: list[dict] = [self._scope()]
        self._small: dict[tuple, str] = {}
        # the op and user line being written, for errors raised while emitting its sizes
        self.current_op = "export"
        self.current_where = None

    @staticmethod
    def _scope() -> dict:
        # "sizes": the shapes and sizes computed in this scope (visible in the ones it opens)
        return {"nodes": [], "made": set(), "sizes": {}}

    @property
    def nodes(self) -> list:
        return self._scopes[0]["nodes"]

    def fresh(self, hint: str) -> str:
        base = "".join(c if c.isalnum() or c in "_." else "_" for c in hint) or "v"
        name, k = base, 1
        while name in self.taken:
            name, k = f"{base}_{k}", k + 1
        self.taken.add(name)
        return name

    # -------- what rules emit through
    def node(self, op_type: str, inputs, outputs: int, attributes: dict):
        names = [self.fresh(op_type.lower()) for _ in range(outputs)]
        attrs = {k: _attribute(self.onnx, v) for k, v in attributes.items() if v is not None}
        self._scopes[-1]["nodes"].append(
            self.onnx.helper.make_node(
                op_type, list(inputs), names, name=self.fresh(f"n_{op_type}"), **attrs
            )
        )
        self._scopes[-1]["made"].update(names)
        return names[0] if outputs == 1 else tuple(names)

    def constant(self, array: np.ndarray, hint: str = "const") -> str:
        if np.iscomplexobj(array):  # (written as its pairs)
            array = np.stack([array.real, array.imag], axis=-1)
        key = None
        if array.size <= _SMALL:
            key = (array.dtype.str, array.shape, array.tobytes())
            if key in self._small:
                return self._small[key]
        name = self.fresh(hint)
        self.initializers.append((name, array))
        if key is not None:
            self._small[key] = name
        return name

    def shape(self, dims) -> str:
        dims = tuple(dims)
        if not any(isinstance(d, SymDim) for d in dims):
            return self.constant(np.asarray([int(d) for d in dims], dtype=np.int64))
        key = tuple(str(d) for d in dims)
        name = self._computed(key)
        if name is None:
            parts = [self._size(d) for d in dims]
            name = self.node("Concat", parts, 1, {"axis": 0}) if len(parts) > 1 else parts[0]
            self._scopes[-1]["sizes"][key] = name
        return name

    def _computed(self, key) -> str | None:
        """The name a shape or size was computed as in this scope or an enclosing one."""
        for scope in reversed(self._scopes):
            if key in scope["sizes"]:
                return scope["sizes"][key]
        return None

    def _size(self, d) -> str:
        """One size as a 1-D int64 tensor of one element: a symbolic one computed from the
        graph inputs' shapes (Shape, then the expression's Add/Mul and floor divisions)."""
        if not isinstance(d, SymDim):
            return self.constant(np.asarray([int(d)], dtype=np.int64))
        key = ("size", str(d))
        name = self._computed(key)
        if name is None:
            name = self._scopes[-1]["sizes"][key] = d.fold(
                self._symbol_size,
                lambda c: self.constant(np.asarray([c], dtype=np.int64)),
                lambda a, b: self.node("Add", [a, b], 1, {}),
                lambda a, b: self.node("Mul", [a, b], 1, {}),
                self._floor_div,
            )
        return name

    def _symbol_size(self, symbol: str) -> str:
        if symbol not in self.symbols:
            raise OnnxError(
                f"the symbolic size {symbol} is not the size of any graph input dimension, so "
                "the model could not compute it when it runs",
                op=self.current_op,
                location=self.current_where,
            )
        key = ("symbol", symbol)
        size = self._computed(key)
        if size is None:
            source, axis, *multiple = self.symbols[symbol]
            if self.opset >= 15:  # Shape's start and end
                size = self.node("Shape", [source], 1, {"start": axis, "end": axis + 1})
            else:
                shape = self.node("Shape", [source], 1, {})
                size = self.node("Gather", [shape, self.constant(np.asarray([axis]))], 1, {})
            if multiple and multiple[0] != 1:  # (a dimension k * symbol: the symbol is a k-th)
                k = self.constant(np.asarray([multiple[0]], dtype=np.int64))
                size = self.node("Div", [size, k], 1, {})
            self._scopes[-1]["sizes"][key] = size
        return size

    def _floor_div(self, a: str, k: int) -> str:
        """floor(a / k) for k >= 2: ONNX's integer Div truncates toward zero, so the remainder
        (Mod's, with the divisor's sign, as Python's %) is taken off first."""
        divisor = self.constant(np.asarray([k], dtype=np.int64))
        rest = self.node("Mod", [a, divisor], 1, {"fmod": 0})
        exact = self.node("Sub", [a, rest], 1, {})
        return self.node("Div", [exact, divisor], 1, {})

    # -------- ember ops and graphs
    def call(self, op, inputs, attrs: dict, where, in_types=None) -> tuple:
        if in_types is None:
            unknown = [n for n in inputs if n not in self.types]
            if unknown:
                raise OnnxError(f"no type known for {unknown}", op=op.name, location=where)
            in_types = [self.types[n] for n in inputs]
        for n, t in zip(inputs, in_types):
            self.types.setdefault(n, pair_type(t))
        inferred = op.infer(*in_types, **attrs)
        out_types = (inferred,) if op.num_outputs == 1 else tuple(inferred)
        return self.emit_call(op, inputs, attrs, in_types, out_types, where)

    def emit_call(self, op, inputs, attrs, in_types, out_types, where) -> tuple:
        """``op``'s rule on one call; ``where``: the user's line that recorded it (None: not
        known, as in a Graph built elsewhere: the line calling export is named)."""
        if where is None:
            where = user_location()
        if op.onnx is None:
            raise OnnxError(
                "has no ONNX form (the op declares no onnx rule); it cannot be exported",
                op=op.name,
                location=where,
            )
        complex_types = [t for t in (*in_types, *out_types) if t.dtype.is_complex]
        if complex_types and not getattr(op.onnx, "complex_pairs", False):
            raise OnnxError(
                f"computes with {complex_types[0].dtype.name} values, which ONNX's operators "
                "do not take; the exporter writes them as real and imaginary parts along a "
                "last axis of 2 (as ONNX's DFT does), which this op's rule does not read; it "
                "cannot be exported",
                op=op.name,
                location=where,
            )
        e = Emitter(self, op, inputs, attrs, in_types, out_types, where)
        outer = self.current_op, self.current_where
        self.current_op, self.current_where = op.name, where
        try:
            result = op.onnx(e)
        except OnnxError:
            raise
        except ShapeError as error:  # (a size the writer could not express)
            raise OnnxError(error.detail, op=op.name, location=where) from error
        except (TypeError, ValueError, KeyError) as error:  # a rule's own bug or an odd call
            raise OnnxError(f"its onnx rule failed: {error}", op=op.name, location=where) from error
        finally:
            self.current_op, self.current_where = outer
        names = (result,) if isinstance(result, str) else tuple(result)
        if len(names) != len(out_types):
            raise OnnxError(
                f"its onnx rule returned {len(names)} values for {len(out_types)} outputs",
                op=op.name,
                location=where,
            )
        for name, t in zip(names, out_types):
            self.types.setdefault(name, pair_type(t))
        return names

    def inline(self, graph, names, where=None, outputs=None) -> tuple:
        """Emit ``graph``'s nodes with its inputs bound to ``names``; the names of its outputs
        (of ``outputs``, some of its values, when given)."""
        outputs = list(graph.outputs if outputs is None else outputs)
        if len(names) != len(graph.inputs):
            raise OnnxError(
                f"graph {graph.name} takes {len(graph.inputs)} inputs, given {len(names)}",
                op="export",
            )
        env = {id(v): n for v, n in zip(graph.inputs, names)}
        for v, n in zip(graph.inputs, names):
            self.types.setdefault(n, pair_type(v.type))
        needed = needed_nodes(outputs)
        for node in graph.nodes:
            if id(node) not in needed:
                continue
            if node.kind == "constant":
                array = np.asarray(graph.constants[node.name])
                env[id(node.outputs[0])] = name = self.constant(array, node.name)
                self.types.setdefault(name, pair_type(node.outputs[0].type))
            elif node.kind == "call":
                inputs = [env[id(v)] for v in node.inputs]
                here = node.location or where
                outs = self.emit_call(
                    node.op,
                    inputs,
                    node.attrs,
                    [v.type for v in node.inputs],
                    [v.type for v in node.outputs],
                    here,
                )
                for v, n in zip(node.outputs, outs):
                    env[id(v)] = n
            elif id(node.outputs[0]) not in env:
                raise OnnxError(f"graph input {node.name} is not bound", op="export")
        return tuple(env[id(v)] for v in outputs)

    def body(self, in_types, build, name: str, out_types=None):
        """A GraphProto: formal inputs of ``in_types``, outputs as ``build`` emits them (of
        ``out_types``; None: the types their ember values have)."""
        self._scopes.append(self._scope())
        try:
            inputs = [self.fresh(f"{name}_in") for _ in in_types]
            for n, t in zip(inputs, in_types):
                self.types[n] = pair_type(t)
            outputs = list(build(*inputs))
            for out, t in zip(outputs, out_types or ()):
                self.types[out] = pair_type(t)
            made = self._scopes[-1]["made"]
            for i, out in enumerate(outputs):  # an output must be made by a node of the body
                if out not in made or out in outputs[:i]:
                    new = self.node("Identity", [out], 1, {})
                    self.types[new] = self.types[out]
                    outputs[i] = new
        finally:
            scope = self._scopes.pop()
        onnx = self.onnx
        return onnx.helper.make_graph(
            scope["nodes"],
            self.fresh(name),
            [value_info(onnx, n, self.types[n]) for n in inputs],
            [value_info(onnx, n, self.types[n]) for n in outputs],
        )


def needed_nodes(outputs) -> set:
    """Ids of the nodes ``outputs`` depend on (the rest is not written)."""
    needed, stack = set(), [v.node for v in outputs]
    while stack:
        node = stack.pop()
        if id(node) in needed:
            continue
        needed.add(id(node))
        stack.extend(v.node for v in node.inputs)
    return needed


def _attribute(onnx, value):
    """A Python attribute value as onnx.helper.make_node takes it (arrays as tensors)."""
    if isinstance(value, np.ndarray):
        return onnx.numpy_helper.from_array(value)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (tuple, list)):
        return [int(v) if isinstance(v, bool) else v for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value
