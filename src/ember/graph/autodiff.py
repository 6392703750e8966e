"""Graph autodiff: `backward_graph_values` records a backward pass into a graph being built.

This module owns reverse-mode differentiation of a *graph*. It has no gradient rules of its own:
for each call node on a path from the differentiated inputs to the outputs it calls the op's
registered ``vjp`` (the one eager autograd uses) with a context whose saved inputs and outputs
are symbolic tensors, while the `GraphBuilder` is the current mode. The VJP's ember ops are
therefore recorded as new nodes of the same graph, which makes the backward pass plain graph
data (printable, optimizable, compilable) and differentiable again: ``grad(grad(f))`` works
because the inner grad's backward nodes are ordinary ops that have VJPs too.

Its callers: ``tensor.backward()`` and ``ember.autograd.grad`` while a graph is built
(graph/builder.py), the VJP of a subgraph (graph/subgraph.py), the AOT backward of a compiled
function (capture/aot.py) and the function transforms ``ember.grad`` / ``ember.value_and_grad``
(capture/grad.py).

Invariants:

* only floating-point values carry gradients; integer and bool values are cut off;
* a value reached along several paths gets the sum of the gradients (added before its producer's
  VJP runs, since nodes are visited in reverse topological order);
* a missing cotangent of a multi-output node is zeros of that output's type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import dtypes as dt
from ..autograd_node import vjp_results
from ..autograd_node_hooks import check_hook_value
from ..errors import AutogradError, ShapeError
from ..ops import _autocast
from ..ops.checks import check
from ..ops.creation import full
from ..tensor import Tensor
from ..types import TensorType
from . import scope as _scope
from .symbolic_tensor import SymbolicTensor

if TYPE_CHECKING:  # the builder imports this module to record backward passes
    from .builder import GraphBuilder

__all__ = ["backward_graph_values"]


def _differentiable(value) -> bool:
    return dt.differentiable(value.type.dtype)


def _zeros(builder: GraphBuilder, type: TensorType) -> SymbolicTensor:
    with builder:
        return full(tuple(type.shape), fill_value=0, dtype=type.dtype)


def _grad_or_zeros(builder: GraphBuilder, grads: dict, value) -> SymbolicTensor:
    g = grads.get(id(value))
    return _zeros(builder, value.type) if g is None else g


class _GraphVJPContext:
    """What an op's VJP sees for one graph node: the eager tape `Node`'s interface, with the
    saved inputs/outputs as symbolic tensors of the builder (unsaved ones are None)."""

    __slots__ = ("op", "attrs", "inputs", "outputs", "in_types", "out_types", "needs_input_grad")

    def __init__(self, node, builder: GraphBuilder, needs: tuple):
        op = node.op
        saved_in = range(len(node.inputs)) if op.save_inputs is None else op.save_inputs
        saved_out = op.save_outputs or ()
        self.op = op
        self.attrs = node.attrs
        self.in_types = tuple(v.type for v in node.inputs)
        self.out_types = tuple(v.type for v in node.outputs)
        self.inputs = tuple(
            SymbolicTensor(v, builder) if i in saved_in else None for i, v in enumerate(node.inputs)
        )
        self.outputs = tuple(
            SymbolicTensor(v, builder) if i in saved_out else None
            for i, v in enumerate(node.outputs)
        )
        self.needs_input_grad = needs


def _depends_on(order, wrt_ids: set, stop: set) -> set:
    """ids of the floating values computed from a wrt value (the wrt values included), not
    counting the values in ``stop``."""
    depends = set(wrt_ids)
    for node in order:
        if node.kind == "call" and node.op.stops_gradient:
            continue  # (a detach: what it makes depends on nothing differentiated)
        if node.kind == "call" and any(id(v) in depends for v in node.inputs):
            depends.update(id(v) for v in node.outputs if _differentiable(v) and id(v) not in stop)
    return depends


def depends_on(builder: GraphBuilder, outputs, wrt, stop: set | None = None) -> list[bool]:
    """Per value of ``outputs`` (the builder's graph values), whether a gradient can flow to it
    from a value of ``wrt``: computed from it by differentiable ops, not through a detach
    (``stops_gradient``) or a value in ``stop`` (recorded under no_grad). PyTorch's rule for
    whether a result requires grad."""
    order = builder.graph.topological_order()
    wrt_ids = {id(v) for v in wrt if _differentiable(v)}
    found = _depends_on(order, wrt_ids, stop or set())
    return [id(v) in found for v in outputs]


def _feeds(order, out_ids: set) -> set:
    """ids of the nodes whose outputs lead to an output value."""
    live, needed = set(out_ids), set()
    for node in reversed(order):
        if any(id(v) in live for v in node.outputs):
            needed.add(id(node))
            live.update(id(v) for v in node.inputs)
    return needed


def _as_symbolic(builder: GraphBuilder, g) -> SymbolicTensor:
    if isinstance(g, SymbolicTensor):
        return g
    with builder:  # an eager tensor or a Python number a VJP produced: a graph operand
        if isinstance(g, Tensor):
            return SymbolicTensor(builder.value_of(g), builder)
        return full((), fill_value=g)


def _accumulate(builder: GraphBuilder, grads: dict, value, g) -> None:
    g = _as_symbolic(builder, g)
    with builder:
        if tuple(g.shape) != tuple(value.type.shape):
            raise ShapeError(
                f"the VJP returned a gradient of shape {tuple(g.shape)} for %{value.name} of "
                f"shape {tuple(value.type.shape)}",
                op=value.node.target,
            )
        if g.dtype != value.type.dtype:
            g = g.to(value.type.dtype)
        previous = grads.get(id(value))
        grads[id(value)] = g if previous is None else previous + g


def backward_graph_values(
    builder: GraphBuilder, outputs, wrt, cotangents, stop: set | None = None, unreached=None
) -> list:
    """Record the backward pass of ``outputs`` with respect to ``wrt`` into ``builder``'s graph.

    ``outputs``, ``wrt`` and ``cotangents`` are symbolic tensors of ``builder`` (a cotangent per
    output, of its shape); no gradient flows through the values whose ids are in ``stop``.
    Returns one symbolic gradient per ``wrt`` tensor: zeros where no output depends on it.
    Autocast is off meanwhile: each VJP computes in the dtypes its forward recorded.
    ``unreached``: a list that receives the positions of the ``wrt`` tensors no gradient reached
    (PyTorch leaves their ``.grad`` None; their zeros are returned all the same).
    """
    with _autocast.suspended():
        return _backward_graph_values(builder, outputs, wrt, cotangents, stop, unreached)


def _backward_graph_values(builder, outputs, wrt, cotangents, stop, unreached=None) -> list:
    out_values = [builder.value_of(o) for o in outputs]
    wrt_values = [builder.value_of(w) for w in wrt]
    order = builder.graph.topological_order()  # a snapshot: backward nodes are added below

    grads: dict = {}  # id(Value) -> SymbolicTensor
    for value, cotangent in zip(out_values, cotangents, strict=True):
        if _differentiable(value):
            _accumulate(builder, grads, value, cotangent)

    wrt_ids = {id(v) for v in wrt_values if _differentiable(v)}
    depends = _depends_on(order, wrt_ids, stop or set())
    needed = _feeds(order, {id(v) for v in out_values})
    hooked: set = set()
    for node in reversed(order):
        if node.kind != "call" or id(node) not in needed:
            continue
        needs = tuple(id(v) in depends for v in node.inputs)
        if not any(needs) or not any(id(v) in grads for v in node.outputs):
            continue
        if node.op.vjp is None:
            raise AutogradError(
                f"the op {node.op.name} (node %{node.name}) has no gradient (no VJP is defined)",
                op="grad",
            )
        # the backward nodes of ``node`` (and their accumulations) inherit its scope
        with _scope.entered(node.scope):
            for value in node.outputs:  # (their gradients are whole here)
                _run_hooks(builder, grads, value, hooked)
                _refuse(builder, grads, value)
            _vjp_into(builder, grads, node, needs)
    for value in wrt_values:
        _run_hooks(builder, grads, value, hooked)
    if unreached is not None:
        unreached.extend(i for i, v in enumerate(wrt_values) if id(v) not in grads)
    return [_grad_or_zeros(builder, grads, v) for v in wrt_values]


def _run_hooks(builder, grads: dict, value, hooked: set) -> None:
    """The hooks registered on ``value`` (``register_hook`` of a graph value), once, on its
    whole gradient: a returned tensor replaces it, as the eager engine's tensor hooks do."""
    hooks = builder.value_hooks.get(id(value))
    if not hooks or id(value) not in grads or id(value) in hooked:
        return
    hooked.add(id(value))
    with builder:
        for hook in list(hooks.values()):
            result = hook(grads[id(value)])
            if result is not None:
                check_hook_value(hook, grads[id(value)], result)
                grads[id(value)] = result


def _refuse(builder, grads: dict, value) -> None:
    """A gradient through a value whose call PyTorch refuses to differentiate (the builder's
    `refuse_gradient`) passes a failing check, which raises the refusal when the backward
    graph runs, as PyTorch's backward does, rather than now, when the function is captured.
    A gradient of zeros passes: the backward graph of a captured function computes every
    output's gradient, zeros for those backward() does not reach, which PyTorch's backward
    never visits (a nonzero gradient can only come from a use of the value)."""
    message = getattr(builder, "gradient_refusals", {}).get(id(value))
    if message is None or id(value) not in grads:
        return
    g = grads[id(value)]
    with builder:
        grads[id(value)] = check(g, (g == 0).all(), message)


def _vjp_into(builder: GraphBuilder, grads: dict, node, needs: tuple) -> None:
    """Record ``node``'s VJP and accumulate the gradients of its inputs into ``grads``."""
    filled = [_grad_or_zeros(builder, grads, v) for v in node.outputs]
    with builder:
        result = node.op.vjp(_GraphVJPContext(node, builder, needs), *filled)
    result = vjp_results(node.op, result, len(node.inputs), "grad")
    for value, need, g in zip(node.inputs, needs, result):
        if need and g is not None:
            _accumulate(builder, grads, value, g)
