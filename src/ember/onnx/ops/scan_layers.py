"""A Scan whose body is one LSTM or GRU step, as ember's exporter writes ``lstm_layer`` and
``gru_layer`` (ops/recurrent.py ``_onnx_lstm_layer``, ``_onnx_gru_layer``), imported as that
op: the time loop in C (kernels/crnn.py) instead of a ``scan`` running the step's thirteen or
seventeen ops at every step (an Elman RNN's ``rnn_layer``: three).

Elman RNN: state h, one scan input xg, ``h' = tanh(xg + h @ W)`` (or relu), outputs
``(h', h')``.

GRU: state h, one scan input xg, ``q = h @ W + b`` with W and b from the enclosing graph, xg
and q split into equal thirds (r, z, n), ``r = sigmoid(xr + qr)``, ``z = sigmoid(xz + qz)``,
``n = tanh(xn + r * qn)``, ``h' = (1 - z) * n + z * h``, outputs ``(h', h', concat(r, z, n,
qn))``.

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

__all__ = ["elman_body", "gru_body", "lstm_body"]


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
    return sizes.size == len(split.output) and bool(np.all(sizes == sizes[0]))


class _Body:
    """A body's nodes by the values they make, and the nodes a match has read."""

    def __init__(self, body):
        self.made = {}
        self.used = set()
        self.ok = True
        for node, *_ in body.steps:
            if node.domain not in ("", "ai.onnx") or any(a.name != "axis" for a in node.attribute):
                self.ok = False
            for out in node.output:
                self.made[out] = node

    def call(self, name, op_type, arity):
        node = self.made.get(name)
        if node is None or node.op_type != op_type or len(node.input) != arity:
            return None
        self.used.add(id(node))
        return node

    def through_identity(self, name):
        node = self.made.get(name)
        if node is not None and node.op_type == "Identity":
            self.used.add(id(node))
            return node.input[0]
        return name

    def split(self, name, parts: int, env):
        """The Split node making ``name`` (into ``parts`` equal pieces along the last axis)."""
        node = self.made.get(name)
        if node is None or node.op_type != "Split" or len(node.output) != parts:
            return None
        if _axis(node) not in (1, -1) or not _equal_sizes(node, env):
            return None
        self.used.add(id(node))
        return node


def _pair(node, a, b) -> bool:
    """Whether a two-operand ``node`` reads ``a`` and ``b`` (either order)."""
    return node is not None and sorted(node.input) == sorted([a, b])


def gru_body(body, env) -> tuple[str, str] | None:
    """The enclosing graph's names of (W (H, 3H), b (3H,)) when ``body`` is the GRU step, else
    None."""
    if len(body.input_names) != 2 or len(body.output_names) != 3:
        return None
    h_in, x_in = body.input_names
    b = _Body(body)
    if not b.ok:
        return None
    h_out, y_out, acts = body.output_names
    if b.through_identity(y_out) != h_out:
        return None
    concat = b.call(acts, "Concat", 4)
    if concat is None or _axis(concat) not in (1, -1):
        return None
    r, z, n, qn = concat.input
    mix = b.call(h_out, "Add", 2)
    if mix is None:
        return None
    products = [b.call(v, "Mul", 2) for v in mix.input]
    keep = next((p for p in products if _pair(p, z, h_in)), None)
    take = next((p for p in products if p is not None and p is not keep), None)
    if keep is None or take is None or n not in take.input:
        return None
    rest = b.call(next(v for v in take.input if v != n), "Sub", 2)
    if rest is None or rest.input[1] != z or _scalar(env, rest.input[0]) != 1.0:
        return None
    tanh = b.call(n, "Tanh", 1)
    n_sum = None if tanh is None else b.call(tanh.input[0], "Add", 2)
    gated = (
        None
        if n_sum is None
        else next(
            (
                b.call(v, "Mul", 2)
                for v in n_sum.input
                if v in b.made and b.made[v].op_type == "Mul"
            ),
            None,
        )
    )
    if gated is None or not _pair(gated, r, qn):
        return None
    xn = next(v for v in n_sum.input if v != gated.output[0])
    sums = []
    for gate in (r, z):
        sig = b.call(gate, "Sigmoid", 1)
        total = None if sig is None else b.call(sig.input[0], "Add", 2)
        if total is None:
            return None
        sums.append(total)
    xs = b.split(made_input(b, xn), 3, env)
    if xs is None or xs.input[0] != x_in or list(xs.output)[2] != xn:
        return None
    qs = b.split(made_input(b, qn), 3, env)
    if qs is None or list(qs.output)[2] != qn:
        return None
    for total, k in zip(sums, (0, 1)):
        if not _pair(total, xs.output[k], qs.output[k]):
            return None
    q = b.call(qs.input[0], "Add", 2)
    product = (
        None if q is None else next((b.call(v, "MatMul", 2) for v in q.input if v in b.made), None)
    )
    if product is None or product.input[0] != h_in:
        return None
    weight, bias = product.input[1], next(v for v in q.input if v != product.output[0])
    if any(v in b.made or v in body.input_names for v in (weight, bias)):
        return None
    if len(b.used) != len(body.steps):
        return None
    return weight, bias


def made_input(b: _Body, value: str) -> str:
    """The name of the Split that makes ``value`` (its first input's producer is the split)."""
    node = b.made.get(value)
    return node.output[0] if node is not None else ""


def _scalar(env, name) -> float | None:
    """The one value a static ``name`` of the enclosing graph holds, else None."""
    value = env.get(name) if hasattr(env, "get") else None
    if not isinstance(value, np.ndarray) or value.size != 1:
        return None
    return float(value.reshape(-1)[0])


def elman_body(body) -> tuple[str, bool] | None:
    """(the enclosing graph's name of W (H, H), whether the activation is relu) when ``body``
    is the Elman RNN step, else None."""
    if len(body.input_names) != 2 or len(body.output_names) != 2:
        return None
    h_in, x_in = body.input_names
    b = _Body(body)
    if not b.ok:
        return None
    h_out, y_out = body.output_names
    if b.through_identity(y_out) != h_out:
        return None
    made = b.made.get(h_out)
    if made is None or made.op_type not in ("Tanh", "Relu"):
        return None
    act = b.call(h_out, made.op_type, 1)
    total = b.call(act.input[0], "Add", 2)
    if total is None or list(total.input).count(x_in) != 1:
        return None
    product = b.call(next(v for v in total.input if v != x_in), "MatMul", 2)
    if product is None or product.input[0] != h_in:
        return None
    weight = product.input[1]
    if weight in b.made or weight in body.input_names or len(b.used) != len(body.steps):
        return None
    return weight, made.op_type == "Relu"
