"""Graphs the viz tests draw: built-in training steps (cached per process), a loop with a
branch inside, and a synthetic graph of any size."""

from __future__ import annotations

import functools

import numpy as np

import ember
from ember import dtypes as dt
from ember.graph import Graph
from ember.ops._registry import REGISTRY
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
