"""The reference executor: run a graph's nodes in order with the ops' NumPy kernels.

`run(graph, arrays)` binds the graph inputs to ``arrays`` (in ``graph.inputs`` order), runs each
call node's kernel, and frees every value right after its last use, so peak memory follows the
graph's liveness rather than its size. It is the specification that faster executors (code
generation, fused kernels) are tested against.
"""

from __future__ import annotations

import numpy as np

from ..errors import EmberError
from ..symbolic import has_symbols, resolve, symbol_sources
from .printer import format_node


def last_uses(graph) -> dict:
    """For each node position, the ids of the values whose last reader is that node (graph
    outputs are kept to the end)."""
    last: dict[int, int] = {}
    for position, node in enumerate(graph.nodes):
        for v in node.inputs:
            last[id(v)] = position
    keep = {id(v) for v in graph.outputs}
    frees: dict[int, list] = {}
    for key, position in last.items():
        if key not in keep:
            frees.setdefault(position, []).append(key)
    return frees


def run(graph, arrays, *, frees: dict | None = None) -> list[np.ndarray]:
    """Execute ``graph`` on NumPy ``arrays`` (one per graph input); returns the output arrays."""
    env = _execute(graph, arrays, last_uses(graph) if frees is None else frees)
    return [env[id(v)] for v in graph.outputs]


def all_values(graph, arrays) -> dict[str, np.ndarray]:
    """Execute ``graph`` keeping every value: value name -> array (for differential checks)."""
    env = _execute(graph, arrays, {})
    return {v.name: env[id(v)] for node in graph.nodes for v in node.outputs}


def _execute(graph, arrays, frees: dict) -> dict:
    if len(arrays) != len(graph.inputs):
        raise EmberError(
            f"graph {graph.name} takes {len(graph.inputs)} inputs, got {len(arrays)}", op="run"
        )
    env: dict[int, np.ndarray] = {id(v): a for v, a in zip(graph.inputs, arrays)}
    # symbolic sizes (a batch N) in attributes take the sizes of this run's inputs
    bindings = {
        name: np.shape(arrays[position])[axis]
        for name, (position, axis) in symbol_sources(graph).items()
    }
    for position, node in enumerate(graph.nodes):
        if node.kind == "call":
            attrs = node.attrs
            if bindings and has_symbols(attrs):
                attrs = resolve(attrs, bindings)
            try:
                result = node.op.kernel(*[env[id(v)] for v in node.inputs], **attrs)
            except EmberError:
                raise
            except Exception as exc:
                raise EmberError(
                    f"kernel failed at {format_node(node)}: {exc}", op=node.op.name
                ) from exc
            results = (result,) if node.op.num_outputs == 1 else tuple(result)
            for v, r in zip(node.outputs, results):
                env[id(v)] = r if type(r) is np.ndarray else np.asarray(r)
        elif node.kind == "constant":
            env[id(node.outputs[0])] = node.graph.constants[node.name]
        for key in frees.get(position, ()):
            del env[key]
    return env
