"""``ember.trace(fn, *example_inputs)``: capture a function or module into a graph function.

The function runs once with symbolic tensors in place of its tensor arguments (a `GraphBuilder`
records every op); Python values and Python control flow on them are baked in, while a use of a
tensor's value in Python raises `TraceError` at the user's line. Eager tensors the function
reads (a module's parameters, closed-over tensors) are captured as extra graph inputs and fed
with their current data at each call, so the graph follows later updates of those tensors.

The result, a `GraphFunction`, is callable with tensors of the traced shapes and dtypes, shows
its ``.graph`` and its generated Python ``.code``, and runs on the interpreter or on generated
code (``executor="codegen"``, the default).
"""

from __future__ import annotations

import inspect

import numpy as np

from ..errors import EmberError, ShapeError
from ..graph.ir import Graph
from ..graph.printer import format_type
from ..graph.symbolic import SymDim
from ..ops._registry import TensorBase, TensorType
from ..runtime import interpreter
from ..runtime.codegen import compile_graph
from ..tensor import Tensor
from .builder import GraphBuilder
from .symbolic import SymbolicTensor

EXECUTORS = ("codegen", "interpreter")


def _flatten(obj, leaves: list):
    """The structure of a nest of tuples/lists/dicts with tensors as leaves (leaves appended)."""
    if isinstance(obj, TensorBase):
        leaves.append(obj)
        return ("leaf",)
    if isinstance(obj, (tuple, list)):
        return (type(obj), [_flatten(o, leaves) for o in obj])
    if isinstance(obj, dict):
        return (dict, {k: _flatten(v, leaves) for k, v in obj.items()})
    raise EmberError(
        f"a traced function must return tensors (or tuples, lists, dicts of them), "
        f"got {type(obj).__name__}",
        op="trace",
    )


def _unflatten(spec, leaves):
    if spec[0] == "leaf":
        return next(leaves)
    kind, inner = spec
    if kind is dict:
        return {k: _unflatten(v, leaves) for k, v in inner.items()}
    return kind(_unflatten(s, leaves) for s in inner)


def _parameter_names(fn, count: int) -> list[str]:
    try:
        target = fn.forward if hasattr(fn, "forward") else fn
        params = [p.name for p in inspect.signature(target).parameters.values()]
    except (TypeError, ValueError):
        params = []
    return [params[i] if i < len(params) else f"arg{i}" for i in range(count)]


class GraphFunction:
    """A captured graph with the eager tensors it reads; call it like the traced function."""

    def __init__(self, graph: Graph, captured: list, out_spec, executor: str = "codegen"):
        if executor not in EXECUTORS:
            raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")
        self.graph = graph
        self.captured = captured
        self.executor = executor
        self._out_spec = out_spec
        self._n_args = len(graph.inputs) - len(captured)
        self._compiled = compile_graph(graph) if executor == "codegen" else None
        self._frees = interpreter.last_uses(graph)

    @property
    def code(self) -> str:
        """The generated Python of this graph."""
        return (self._compiled or compile_graph(self.graph)).source

    def _check(self, args) -> list[np.ndarray]:
        if len(args) != self._n_args:
            raise EmberError(
                f"{self.graph.name} was traced with {self._n_args} tensor arguments, got "
                f"{len(args)}",
                op="call",
            )
        arrays = []
        bound: dict = {}
        for value, arg in zip(self.graph.inputs, args):
            data = arg.numpy() if isinstance(arg, Tensor) else np.asarray(arg)
            expected = value.type
            if data.dtype != expected.dtype.np:
                raise EmberError(
                    f"argument %{value.name} expects {format_type(expected)}, got dtype "
                    f"{data.dtype}",
                    op=self.graph.name,
                )
            ok = len(data.shape) == len(expected.shape)
            for want, got in zip(expected.shape, data.shape):
                if isinstance(want, SymDim):
                    ok = ok and bound.setdefault(want, got) == got
                else:
                    ok = ok and want == got
            if not ok:
                raise ShapeError(
                    f"argument %{value.name} expects {format_type(expected)}, got shape "
                    f"{tuple(data.shape)}",
                    op=self.graph.name,
                )
            arrays.append(data)
        return arrays

    def __call__(self, *args):
        arrays = self._check(args) + [t.numpy() for t in self.captured]
        if self._compiled is not None:
            results = self._compiled(*arrays)
        else:
            results = interpreter.run(self.graph, arrays, frees=self._frees)
        return _unflatten(self._out_spec, iter(Tensor._wrap(r) for r in results))

    def __repr__(self) -> str:
        return f"<GraphFunction {self.graph.name} ({self.executor})>"


def trace(fn, *example_inputs, name: str | None = None, executor: str = "codegen"):
    """Capture ``fn(*example_inputs)`` (a function or an nn.Module) into a `GraphFunction`.

    Tensor arguments become graph inputs with their exact shapes and dtypes; other arguments are
    baked in as the Python values they are.
    """
    graph_name = name or getattr(fn, "__name__", None) or type(fn).__name__
    graph = Graph(graph_name if graph_name.isidentifier() else "graph")
    builder = GraphBuilder(graph)
    if hasattr(fn, "named_parameters"):  # a module: its tensors keep their state_dict names
        tensors = list(fn.named_parameters()) + list(fn.named_buffers())
        builder.capture_names = {id(t): name for name, t in tensors}
    names = _parameter_names(fn, len(example_inputs))
    args = []
    for arg_name, arg in zip(names, example_inputs):
        if isinstance(arg, Tensor):
            args.append(builder.input(TensorType(arg.shape, arg.dtype), arg_name))
        else:
            args.append(arg)
    with builder:
        out = fn(*args)
    leaves: list = []
    spec = _flatten(out, leaves)
    graph.set_outputs([builder.value_of(t) for t in leaves])
    return GraphFunction(graph, builder.captured, spec, executor)


__all__ = ["GraphFunction", "SymbolicTensor", "trace"]
