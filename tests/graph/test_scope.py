"""Node scopes (graph/scope.py): module paths named as torch's ModuleTracker names them,
composites, backward nodes inheriting their forward node's scope, the optimizer's scope, and
scopes kept by copy, partition and serialization."""

from __future__ import annotations

from collections import Counter

import ember
import ember.nn as nn
from ember.graph import scope
from ember.graph.load import load_graph


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x).relu()


class Outer(nn.Module):
    def __init__(self, shared):
        super().__init__()
        self.blocks = nn.ModuleList([Inner(), Inner()])
        self.shared = shared

    def forward(self, x, stranger):
        for block in self.blocks:
            x = block(x)
        x = stranger(x)  # a module that is not a child of this one
        return nn.functional.scaled_dot_product_attention(x[None], x[None], x[None])[0]


def _scopes(graph, op: str) -> list:
    return [n.scope for n in graph.call_nodes() if n.op.name == op]


def test_module_paths_composites_and_backward():
    model = Outer(shared=None)
    stranger = nn.Linear(4, 4)
    x = ember.randn(3, 4)
    traced = ember.trace(model, x, stranger, opt_level=0, executor="interpreter")
    joint = traced.graphs["joint"]
    linears = _scopes(traced.graphs["forward"], "linear")
    assert linears == ["Outer.blocks.0.fc", "Outer.blocks.1.fc", "Outer.Linear"]
    assert _scopes(traced.graphs["forward"], "relu") == ["Outer.blocks.0", "Outer.blocks.1"]
    attention = set(_scopes(traced.graphs["forward"], "matmul"))
    assert attention == {"Outer:scaled_dot_product_attention"}
    assert scope.split("Outer:scaled_dot_product_attention") == (
        "Outer",
        "scaled_dot_product_attention",
    )
    # backward nodes (here from AOT autograd) carry their forward node's scope
    backward = Counter(n.scope for n in traced.graphs["backward"].call_nodes())
    assert backward["Outer.blocks.0.fc"] > 0 and backward["Outer:scaled_dot_product_attention"] > 0
    # copies and files keep the scopes
    assert [n.scope for n in joint.copy().nodes] == [n.scope for n in joint.nodes]


def test_optimizer_scope_and_serialization(tmp_path):
    model = nn.Linear(4, 2)
    opt = ember.optim.SGD(model.parameters(), lr=0.1)
    x = ember.randn(5, 4)

    def step(x):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    graph = ember.trace(step, x, opt_level=0).graphs["joint"]
    scopes = Counter(n.scope for n in graph.call_nodes())
    # p - lr * g for the weight and the bias, lr (a float64 input: optim/optimizer.py
    # `_hyper`) cast to each one's dtype (O0: no CSE merges the two casts)
    assert scopes[scope.OPTIMIZER] == 6
    assert scopes["Linear"] >= 3  # forward linear, its two gradients and the bias sum
    assert scopes[None] > 0  # the loss is in no module
    graph.save(tmp_path / "step.json")
    loaded = load_graph(tmp_path / "step.json")
    assert [n.scope for n in loaded.nodes] == [n.scope for n in graph.nodes]


def test_eager_calls_push_no_scope():
    seen = []

    class Probe(nn.Module):
        def forward(self, x):
            seen.append(scope.current())
            return x

    probe = Probe()
    probe(ember.ones(2))
    assert seen == [None] and not scope.recording()
    ember.trace(probe, ember.ones(2))
    assert seen == [None, "Probe"]
