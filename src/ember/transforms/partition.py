"""AOT forward/backward partition of a joint training graph.

A captured training step is one *joint* graph: the forward pass, then (from position
``backward_start``) the backward pass and the updates that use its gradients. `partition`
splits it where the backward begins, as AOT autograd does: the forward graph computes the
user's outputs and additionally returns every forward value the backward reads (the *saved
activations*); the backward graph takes those saved values, plus the original inputs it reads,
and returns the rest of the joint graph's outputs. Running the forward and then the backward
on its saved values gives exactly the joint graph's outputs (tests check it on the interpreter).

Outputs: the forward graph returns the joint outputs that forward nodes produce (in joint
order: the user's outputs first), then the saved values; the backward graph returns the other
joint outputs, in joint order. `joint_output_order` says how to put them back together.
A backward computing with a symbolic size none of its inputs has (a reduction's gradient
broadcast back to the input's symbolic shape) is also given a saved value of no bytes whose
shape holds those sizes (`_size_carrier`).
"""

from __future__ import annotations

from .. import dtypes as dt
from ..graph.ir import Graph
from ..ops.creation import _FULL as FULL
from ..symbolic import SymDim, sym

__all__ = ["partition", "joint_output_order"]


def _copy_into(target: Graph, nodes, mapping: dict, source: Graph) -> None:
    for node in nodes:
        if node.kind == "constant":
            value = node.outputs[0]
            mapping[id(value)] = target.add_constant(source.constants[node.name], value.name)
        elif node.kind == "call":
            inputs = [mapping[id(v)] for v in node.inputs]
            copy = target.add_call(
                node.op, inputs, dict(node.attrs), out_types=[v.type for v in node.outputs]
            )
            copy.scope = node.scope
            copy.region = node.region
            mapping.update((id(v), c) for v, c in zip(node.outputs, copy.outputs))


def _input_for(target: Graph, value, mapping: dict) -> None:
    if id(value) not in mapping:
        mapping[id(value)] = target.add_input(value.type, value.name)


def partition(graph: Graph, backward_start: int) -> tuple[Graph, Graph]:
    """(forward, backward) graphs of ``graph`` split at node position ``backward_start``."""
    forward_nodes = [n for n in graph.nodes[:backward_start] if n.kind != "input"]
    backward_nodes = [n for n in graph.nodes[backward_start:] if n.kind != "input"]
    produced_forward = {id(v) for n in forward_nodes for v in n.outputs}
    produced_backward = {id(v) for n in backward_nodes for v in n.outputs}

    forward = Graph(f"{graph.name}_forward")
    f_map: dict = {}
    # forward inputs: those its nodes read, and those returned as they are
    used_by_forward = {id(v) for n in forward_nodes for v in n.inputs}
    used_by_forward.update(id(v) for v in graph.outputs if id(v) not in produced_backward)
    for value in graph.inputs:
        if id(value) in used_by_forward:
            _input_for(forward, value, f_map)
    _copy_into(forward, forward_nodes, f_map, graph)

    saved, seen = [], set()
    for node in backward_nodes:
        for v in node.inputs:
            if id(v) in produced_forward and id(v) not in seen:
                seen.add(id(v))
                saved.append(v)
    forward_outputs = [v for v in graph.outputs if id(v) not in produced_backward]
    used_by_backward = {id(v) for n in backward_nodes for v in n.inputs}
    read = [v.type for v in saved] + [v.type for v in graph.inputs if id(v) in used_by_backward]
    carrier = _size_carrier(forward, backward_nodes, read)
    forward.set_outputs(
        [f_map[id(v)] for v in forward_outputs]
        + [f_map[id(v)] for v in saved]
        + ([carrier] if carrier is not None else [])
    )

    backward = Graph(f"{graph.name}_backward")
    b_map: dict = {}
    for v in saved:
        b_map[id(v)] = backward.add_input(v.type, f"saved_{v.name}")
    if carrier is not None:
        backward.add_input(carrier.type, "saved_sizes")
    for value in graph.inputs:
        if id(value) in used_by_backward:
            _input_for(backward, value, b_map)
    _copy_into(backward, backward_nodes, b_map, graph)
    backward.set_outputs([b_map[id(v)] for v in graph.outputs if id(v) in produced_backward])
    return forward, backward


def _plain_symbols(types) -> set:
    """The symbols that are a whole dimension of one of ``types`` (where a graph reads them)."""
    return {d.symbol() for t in types for d in t.shape if isinstance(d, SymDim)} - {None}


def _size_carrier(forward: Graph, backward_nodes, read_types):
    """A value of no bytes whose shape holds the symbolic sizes the backward computes with
    but reads from none of its inputs (the gradient of ``x.sum()`` over ``x``'s symbolic
    shape: the backward holds only a 0-d cotangent), made in the forward (which reads them
    from its own inputs) and saved; None where the backward lacks no size."""
    have = _plain_symbols(read_types)
    needed = set()
    for node in backward_nodes:
        for v in node.outputs:
            needed.update(*(d.symbols() for d in v.type.shape if isinstance(d, SymDim)))
    missing = sorted(needed - have)
    if not missing or not set(missing) <= _plain_symbols(v.type for v in forward.inputs):
        return None  # (nothing lacking, or nothing the forward could give either)
    shape = (*(sym(name) for name in missing), 0)
    return forward.add_call(FULL, [], {"shape": shape, "value": 0, "dtype": dt.uint8}).outputs[0]


def joint_output_order(graph: Graph, backward_start: int) -> list[tuple[str, int]]:
    """For each joint output, where the partition returns it: ("forward", i) or
    ("backward", i)."""
    produced_backward = {
        id(v) for n in graph.nodes[backward_start:] if n.kind != "input" for v in n.outputs
    }
    order, f, b = [], 0, 0
    for v in graph.outputs:
        if id(v) in produced_backward:
            order.append(("backward", b))
            b += 1
        else:
            order.append(("forward", f))
            f += 1
    return order
