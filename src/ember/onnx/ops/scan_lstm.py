"""A Scan whose body is one LSTM step, as ember's exporter writes ``lstm_layer`` (ops/recurrent.py
``_onnx_lstm_layer``), imported as that op: the time loop in C (kernels/crnn.py) instead of a
``scan`` running the step's thirteen ops at every step.

The body must be exactly that step, read by its wiring (any node order, either operand order
of the commutative ops): states (h, c), one scan input xg (the input projection with both
biases), ``pre = xg + h @ W`` with W from the enclosing graph, ``Split(pre)`` into four equal
quarters along the last axis (i, f, g, o), ``c' = sigmoid(f) * c + sigmoid(i) * tanh(g)``,
``h' = sigmoid(o) * tanh(c')``, outputs ``(h', c', h', c', concat(i, f, g, o))`` (the stacked
ones possibly through Identity); the scan input and outputs along axis 0, all in one
direction. Anything else is refused (None) and runs as a Scan.
"""

from __future__ import annotations

import numpy as np

__all__ = ["lstm_body"]


def lstm_body(body, env) -> str | None:
    """The enclosing graph's name of W (H, 4H) when ``body`` (a GraphRunner) is the LSTM step,
    else None. ``env``: the enclosing graph's values (for Split's sizes)."""
    if len(body.input_names) != 3 or len(body.output_names) != 5:
        return None
    h_in, c_in, x_in = body.input_names
    made = {}
    for node, *_ in body.steps:
        if node.domain not in ("", "ai.onnx") or any(a.name != "axis" for a in node.attribute):
            return None
        for out in node.output:
            made[out] = node
    used = set()

    def call(name, op_type, arity):
        node = made.get(name)
        if node is None or node.op_type != op_type or len(node.input) != arity:
            return None
        used.add(id(node))
        return node

    def through_identity(name):
        node = made.get(name)
        if node is not None and node.op_type == "Identity":
            used.add(id(node))
            return node.input[0]
        return name

    h_out, c_out, y_out, cs_out, acts = body.output_names
    if through_identity(y_out) != h_out or through_identity(cs_out) != c_out:
        return None
    h_mul = call(h_out, "Mul", 2)
    c_add = call(c_out, "Add", 2)
    concat = call(acts, "Concat", 4)
    if h_mul is None or c_add is None or concat is None or _axis(concat) not in (1, -1):
        return None
    gates = [made.get(n) for n in concat.input]  # i, f, g, o
    kinds = ["Sigmoid", "Sigmoid", "Tanh", "Sigmoid"]
    if any(g is None or g.op_type != k for g, k in zip(gates, kinds)):
        return None
    i, f, g, o = (g.output[0] for g in gates)
    used.update(id(g) for g in gates)
    tanh_c = next((n for n in h_mul.input if n != o), None)
    if sorted(h_mul.input) != sorted([o, tanh_c]) or call(tanh_c, "Tanh", 1) is None:
        return None
    if made[tanh_c].input[0] != c_out:
        return None
    products = [call(n, "Mul", 2) for n in c_add.input]
    if any(p is None for p in products):
        return None
    pairs = sorted(sorted(p.input) for p in products)
    if pairs != sorted([sorted([f, c_in]), sorted([i, g])]):
        return None
    split = made.get(gates[0].input[0])
    if split is None or split.op_type != "Split" or len(split.output) != 4:
        return None
    used.add(id(split))
    if [gt.input[0] for gt in gates] != list(split.output):  # (i, f, g, o: quarters 0..3)
        return None
    if _axis(split) not in (1, -1) or not _equal_sizes(split, env):
        return None
    pre = call(split.input[0], "Add", 2)
    if pre is None or list(pre.input).count(x_in) != 1:
        return None
    product = call(next(n for n in pre.input if n != x_in), "MatMul", 2)
    if product is None or product.input[0] != h_in:
        return None
    weight = product.input[1]
    if weight in made or weight in body.input_names:
        return None
    if len(used) != len(body.steps):
        return None  # (a node the step does not have)
    return weight


def _axis(node) -> int:
    for a in node.attribute:
        if a.name == "axis":
            return int(a.i)
    return 0


def _equal_sizes(split, env) -> bool:
    """Whether the split cuts four equal quarters (its sizes static and equal, or absent)."""
    if len(split.input) < 2 or not split.input[1]:
        return True
    sizes = env.get(split.input[1]) if hasattr(env, "get") else None
    if not isinstance(sizes, np.ndarray):
        return False
    sizes = sizes.reshape(-1)
    return sizes.size == 4 and bool(np.all(sizes == sizes[0]))
