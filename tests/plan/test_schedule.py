"""Memory-aware scheduling never raises the planned peak, and lowers it where the order is free."""

import numpy as np
import pytest

import ember
from ember.graph import interpreter
from ember.models import example_step
from ember.plan import plan_memory
from ember.plan.schedule import memory_aware_order, schedule


def _two_branches():
    """Branch a keeps a 4 MiB value alive until the end, branch b shrinks at once; stored
    order runs a's big allocation first, so b's temporaries pile on top of it."""
    with ember.Graph() as g:
        x = ember.placeholder((512, 512), name="x")
        big = (x * 2.0).exp()  # 1 MiB, read again at the end
        small = ((x + 1.0) * 3.0).sum(1)  # temporaries freed at once
        out = (big * 2.0).sum() + small.sum()
    g.set_outputs([g.nodes[-1].outputs[0]])
    assert out is not None
    return g


def test_a_constructed_graph_gets_a_strictly_lower_peak():
    g = _two_branches()
    before = plan_memory(g).peak_bytes
    x = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)
    want = interpreter.run(g, [x])[0]
    g, changed = schedule(g)
    assert changed and plan_memory(g).peak_bytes < before
    g.verify()
    np.testing.assert_allclose(interpreter.run(g, [x])[0], want, rtol=1e-6)


@pytest.mark.parametrize("name", ["mlp", "cnn", "gpt", "resnet"])
def test_the_order_is_topological_and_never_raises_the_peak(name):
    example = example_step(name)
    example.step()
    graph = ember.function(example.step).compile().graph.copy()
    order = memory_aware_order(graph)
    seen = set()
    for node in order:
        assert all(id(v.node) in seen for v in node.inputs)
        seen.add(id(node))
    before = plan_memory(graph).peak_bytes
    graph, _ = schedule(graph)
    assert plan_memory(graph).peak_bytes <= before
