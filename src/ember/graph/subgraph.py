"""Subgraphs: tracing a Python function into a `Graph` that a control-flow node holds, and back.

This module owns the machinery the control-flow ops (control/flow.py) share:

* `SubgraphBuilder`: the builder a branch or loop body is traced with. Its explicit inputs are
  the operands' types. A value it did not create (a symbolic tensor of an enclosing graph, an
  eager tensor closed over) is *lifted*: it becomes an extra subgraph input, and the outer object
  is remembered so the control-flow node can take it as an extra operand. Lifting is transitive
  (a cond in a loop body lifts into the body, which lifts into the outer graph), and a value
  lifted twice is one input.
* `trace_subgraph`: run a function on fresh inputs of given types and return the graph, the
  structure (pytree) of its result and its lifted operands.
* `unify_lifted`: give several subgraphs of one node (both branches of a cond) the same
  signature, the union of their lifted operands, so one node feeds them all.
* `inline_graph`: replay a graph's nodes through the dispatcher on given tensors, in whatever
  mode is current (recording into a builder, or running eagerly). Differentiating a subgraph is
  inlining it, then running the ordinary graph or eager autodiff on the inlined values.
* `run_subgraph`: execute a subgraph on arrays with the reference interpreter.

Operands and results are trees of tensors (graph/tree.py).

Invariant: a subgraph is never changed after the node holding it is made; nodes may share one.
"""

from __future__ import annotations

import weakref

import numpy as np

from ..errors import TraceError
from ..ops import _registry as _reg
from ..tensor import Tensor
from ..types import TensorType
from .autodiff import backward_graph_values
from .builder import GraphBuilder
from .ir import Graph
from .symbolic_tensor import SymbolicTensor
from .tree import flatten


def type_of(t) -> TensorType:
    return TensorType(tuple(t.shape), t.dtype)


# ------------------------------------------------------------------------------ tracing


def _lift_key(t):
    # a symbolic tensor is rebound by in-place ops, so its current Value is the identity
    return ("value", id(t.value)) if isinstance(t, SymbolicTensor) else ("tensor", id(t))


class SubgraphBuilder(GraphBuilder):
    """The builder of one branch or body (see the module docstring). ``parent`` is the
    enclosing builder, or None when the control-flow node is made eagerly."""

    def __init__(self, name: str, parent: GraphBuilder | None):
        super().__init__(Graph(name))
        self.parent = parent
        self.lifted: list = []  # the outer objects, one per lifted input, in input order
        self._lifted_values: dict = {}  # _lift_key -> the subgraph input

    def value_of(self, t):
        if isinstance(t, SymbolicTensor) and t.builder is self:
            return t.value
        if not isinstance(t, (SymbolicTensor, Tensor)):
            raise TypeError(f"expected an ember tensor, got {type(t).__name__}")
        key = _lift_key(t)
        value = self._lifted_values.get(key)
        if value is None:
            name = t.value.name if isinstance(t, SymbolicTensor) else "captured"
            value = self.graph.add_input(type_of(t), name)
            self._lifted_values[key] = value
            # a snapshot of the symbolic tensor: a later in-place op must not change what we lift
            outer = SymbolicTensor(t.value, t.builder) if isinstance(t, SymbolicTensor) else t
            self.lifted.append((key, outer))
        return value

    def inplace(self, tensor, name, fn, args, kwargs):
        raise TraceError(
            f"an in-place update ({name}) of a tensor from outside a control-flow branch or loop "
            "body cannot be recorded inside it; return the new value from the branch or make it "
            "a loop carry instead",
            op=self.graph.name,
        )


def trace_subgraph(fn, in_types, in_names, name: str, what: str):
    """Trace ``fn(*inputs)`` (inputs: fresh symbolic tensors of ``in_types``) into a subgraph.
    Returns (graph, paths of the result's leaves, result structure, lifted [(key, outer)])."""
    mode = _reg.current_mode()
    parent = mode if isinstance(mode, GraphBuilder) else None
    builder = SubgraphBuilder(name, parent)
    inputs = [builder.input(t, n) for t, n in zip(in_types, in_names)]
    with builder:
        out = fn(*inputs)
        leaves, paths, spec = flatten(out, what, numbers=True)
    builder.graph.set_outputs([builder.value_of(t) for t in leaves])
    return builder.graph, paths, spec, builder.lifted


def unify_lifted(graphs_lifted, n_explicit: int) -> list:
    """Give every (graph, lifted) pair the same inputs: the ``n_explicit`` own inputs, then one
    per lifted operand of any of them (unused where a graph does not read it). Returns the outer
    objects, the extra operands of the node, in that order."""
    union: dict = {}
    for _, lifted in graphs_lifted:
        for key, outer in lifted:
            union.setdefault(key, outer)
    for graph, lifted in graphs_lifted:
        own = dict(zip([key for key, _ in lifted], graph.inputs[n_explicit:]))
        extra = []
        for key, outer in union.items():
            value = own.get(key)
            if value is None:
                name = outer.value.name if isinstance(outer, SymbolicTensor) else "captured"
                value = graph.add_input(type_of(outer), name)
            extra.append(value)
        graph.inputs = graph.inputs[:n_explicit] + extra
    return list(union.values())


# ------------------------------------------------------------------------------ replaying


def inline_graph(graph: Graph, inputs) -> list:
    """Replay ``graph`` on ``inputs`` (one tensor per graph input) in the current mode; returns
    one tensor per graph output."""
    env = {id(v): t for v, t in zip(graph.inputs, inputs, strict=True)}
    for node in graph.nodes:
        if node.kind == "constant":
            env[id(node.outputs[0])] = _reg.constant(graph.constants[node.name])
        elif node.kind == "call":
            result = _reg.apply(node.op, *[env[id(v)] for v in node.inputs], **node.attrs)
            results = (result,) if node.op.num_outputs == 1 else tuple(result)
            for v, r in zip(node.outputs, results):
                env[id(v)] = r
    return [env[id(v)] for v in graph.outputs]


_FREES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def run_subgraph(graph: Graph, arrays) -> list[np.ndarray]:
    """Run ``graph`` on ``arrays`` with the reference interpreter (its liveness cached)."""
    from . import interpreter

    frees = _FREES.get(graph)
    if frees is None:
        frees = _FREES[graph] = interpreter.last_uses(graph)
    return interpreter.run(graph, list(arrays), frees=frees)


def fresh_results(results, arrays) -> tuple:
    """``results`` with any array that may share memory with an operand copied: a node's output
    must not alias its inputs (a branch returning an operand, a loop running zero times)."""
    out = []
    for r in results:
        if any(np.may_share_memory(r, a) for a in arrays):
            r = r.copy()
        out.append(r)
    return tuple(out)


# ------------------------------------------------------------------------------ differentiating


def graph_vjp(graph: Graph, wrt: tuple[int, ...]):
    """A function ``(*primals, *cotangents) -> gradients`` of ``graph``'s outputs with respect
    to its inputs at positions ``wrt``. Traced (inside a builder) it records the backward pass
    with graph autodiff; eager, it inlines the graph on the tape and runs eager autograd."""
    n = len(graph.inputs)

    def vjp(*args):
        primals, cotangents = list(args[:n]), list(args[n:])
        mode = _reg.current_mode()
        if isinstance(mode, GraphBuilder):
            outs = inline_graph(graph, primals)
            wrt_tensors = [primals[i] for i in wrt]
            return tuple(backward_graph_values(mode, outs, wrt_tensors, cotangents))
        return _eager_vjp(graph, primals, cotangents, wrt)

    return vjp


def _eager_vjp(graph, primals, cotangents, wrt) -> tuple:
    from ..autograd import enable_grad
    from ..autograd_grad import grad as autograd_grad
    from ..ops.creation import zeros_like

    with enable_grad():
        leaves = [p.detach().requires_grad_() if i in wrt else p for i, p in enumerate(primals)]
        outs = inline_graph(graph, leaves)
        pairs = [(o, c) for o, c in zip(outs, cotangents) if o.requires_grad]
        wanted = [leaves[i] for i in wrt]
        if not pairs:
            return tuple(zeros_like(t) for t in wanted)
        grads = autograd_grad(
            [o for o, _ in pairs], wanted, [c for _, c in pairs], allow_unused=True
        )
    return tuple(zeros_like(t) if g is None else g for t, g in zip(wanted, grads))
