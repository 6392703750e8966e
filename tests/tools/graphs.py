"""Graphs the viz tests draw: built-in training steps (cached per process), a loop with a
branch inside, a synthetic graph of any size, and a hostile one (markup in every name)."""

from __future__ import annotations

import functools

import numpy as np

import ember
from ember import dtypes as dt
from ember.graph import Graph
from ember.ops._registry import REGISTRY
from ember.symbolic import SymDim
from ember.tools import viz
from ember.types import TensorType


@functools.cache
def step(name: str, forward_only: bool = False):
    """(graph, phases) of a built-in model's captured training step."""
    return viz.example_graph(name, forward_only=forward_only)


def nested_control_flow() -> Graph:
    """A traced while_loop whose body holds a cond: clusters must nest three deep."""

    def loop(x):
        def body(v):
            return ember.cond(v.sum() > 0, lambda a: a * 2.0, lambda a: a - 1.0, v)

        return ember.while_loop(lambda v: v.abs().sum() < 100.0, body, x)  # data-dependent

    return ember.trace(loop, ember.randn(4), opt_level=0).graph


def synthetic(n: int, seed: int = 0) -> Graph:
    """``n`` nodes: inputs, then unary and binary elementwise ops each reading one or two of the
    recent values (a wide, deep DAG like a large model's)."""
    rng = np.random.default_rng(seed)
    g = Graph(f"synthetic{n}")
    values = [g.add_input(TensorType((32, 32), dt.float32), f"x{k}") for k in range(4)]
    unary, binary = ("relu", "neg", "exp", "tanh"), ("add", "mul", "sub", "maximum")
    while len(g.nodes) < n:
        window = values[-60:]
        if rng.random() < 0.5:
            op = REGISTRY[unary[rng.integers(len(unary))]]
            inputs = [window[rng.integers(len(window))]]
        else:
            op = REGISTRY[binary[rng.integers(len(binary))]]
            inputs = [window[rng.integers(len(window))] for _ in range(2)]
        values.append(g.add_call(op, inputs).outputs[0])
    g.set_outputs(values[-4:])
    return g


def hostile() -> tuple[Graph, str]:
    """(graph, payload): every text the drawings show (the graph's name, a symbolic size and
    so the FLOPs and bytes, a scope, an attribute, a value name) holds markup that runs script
    where it is parsed as HTML."""
    payload = '<img src=x onerror="window.__pwned=(window.__pwned||0)+1">'
    n = SymDim(1, ((payload, 1),))
    g = Graph(payload + "</title><script>window.__pwned=1</script>")
    x = g.add_input(TensorType((n, 4), dt.float32), "x")
    y = g.add_call(REGISTRY["relu"], [x]).outputs[0]
    z = g.add_call(REGISTRY["sum"], [y], {"axes": (1,), "keepdims": False}).outputs[0]
    g.set_outputs([z])
    y.node.scope = payload + "<!--<script>"
    z.node.attrs["note"] = payload  # (not the op's: the drawings show it all the same)
    y.name = "y" + payload  # the Graph API never makes such a name; an edit might
    return g, payload
