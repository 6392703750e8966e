"""Loop unrolling (transforms/unroll.py): a loop with a static trip count within the threshold
becomes straight-line nodes named by iteration, computing exactly what the loop computes (both
executors, float64, bit for bit); loops that are too long or data-dependent stay; nested loops
and conds, lifted operands and symbolic sizes work; the unrolled graph differentiates."""

import re

import numpy as np
import pytest

import ember
from ember.graph import Graph, interpreter
from ember.graph.builder import GraphBuilder
from ember.graph.subgraph import inline_graph
from ember.runtime.codegen import compile_graph
from ember.transforms import unroll_loops
from ember.types import TensorType

from ..gradcheck import fd

rng = np.random.default_rng(0)
W = ember.tensor(rng.standard_normal(3))
RW = ember.tensor(rng.standard_normal((3, 3)) * 0.5)
RU = ember.tensor(rng.standard_normal((2, 3)))
LOOPS = ("while_loop", "scan")


def _graph(fn, *examples) -> Graph:
    return ember.trace(fn, *examples, opt_level=0).graph


def _ops(graph: Graph) -> list[str]:
    """Every op name in ``graph`` and, recursively, in its subgraphs."""
    names = []
    for node in graph.call_nodes():
        names.append(node.op.name)
        for sub in node.attrs.values():
            if isinstance(sub, Graph):
                names += _ops(sub)
    return names


def _iterations(graph: Graph, op: str) -> list[int]:
    """The iteration numbers in the names of the top-level nodes computing ``op``."""
    found = []
    for node in graph.call_nodes():
        m = re.search(r"_it(\d+)_", node.name)
        if node.op.name == op and m:
            found.append(int(m.group(1)))
    return sorted(found)


def _random_feeds(graph: Graph, given: dict | None = None) -> list[np.ndarray]:
    """Random float64 arrays for the graph's inputs (``given``: input name -> array)."""
    given = given or {}
    feeds = []
    for v in graph.inputs:
        if v.name in given:
            feeds.append(given[v.name])
        else:
            feeds.append(rng.standard_normal(tuple(v.shape)))
    return feeds


def _assert_same(loop: Graph, unrolled: Graph, feeds) -> None:
    want = interpreter.run(loop, [a.copy() for a in feeds])
    # the compiled run is also checked against the interpreter by tests/conftest.py
    for got in (
        interpreter.run(unrolled, [a.copy() for a in feeds]),
        compile_graph(unrolled)(*[a.copy() for a in feeds]),
    ):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


def _unrolls(fn, *examples, max_trips=16, trials=3, given=None) -> Graph:
    """Unroll ``fn``'s graph, check it against the loop graph, return the unrolled graph."""
    loop = _graph(fn, *examples)
    unrolled, changed = unroll_loops(_graph(fn, *examples), max_trips)
    assert changed
    unrolled.verify()
    assert not set(_ops(unrolled)) & set(LOOPS), str(unrolled)
    assert [v.type for v in unrolled.inputs] == [v.type for v in loop.inputs]
    assert [v.type for v in unrolled.outputs] == [v.type for v in loop.outputs]
    for _ in range(trials):
        _assert_same(loop, unrolled, _random_feeds(loop, given))
    return unrolled


def _stays(fn, *examples, max_trips=16) -> None:
    graph = _graph(fn, *examples)
    before = str(graph)
    same, changed = unroll_loops(graph, max_trips)
    assert same is graph and not changed
    assert str(graph) == before


X = ember.tensor(rng.standard_normal(3))


# ------------------------------------------------------------------------------ while loops


def wavy(x):
    return ember.fori_loop(0, 5, lambda i, v: (v * 0.9 + i.to(v.dtype) * W).sin(), x)


def test_fori_loop_with_constant_bounds():
    unrolled = _unrolls(wavy, X)
    assert _iterations(unrolled, "sin") == [0, 1, 2, 3, 4]
    text = str(unrolled)
    assert re.search(r"%loop\w*_it4_sin: f64\[3\] = sin\(", text), text
    # each iteration reads its counter as a constant; the counter's own chain is gone
    counters = {name: int(array) for name, array in unrolled.constants.items() if "carry0" in name}
    assert sorted(counters.values()) == [0, 1, 2, 3, 4]
    assert "add" not in [n.op.name for n in unrolled.call_nodes() if n.outputs[0].dtype.is_integer]


def test_while_loop_counting_with_a_constant_step():
    def fn(x):
        out = ember.while_loop(
            lambda s: s["t"] < 10.0,
            lambda s: {"t": s["t"] + 2.5, "v": s["v"] * s["t"] + x},
            {"t": ember.tensor(0.0), "v": x},
        )
        return out["v"], out["t"]

    unrolled = _unrolls(fn, X)
    assert _iterations(unrolled, "mul") == [0, 1, 2, 3]  # t = 0, 2.5, 5, 7.5
    np.testing.assert_array_equal(interpreter.run(unrolled, [X.numpy()])[1], 10.0)


def test_zero_trips_return_a_copy_not_the_input():
    unrolled = _unrolls(lambda x: ember.fori_loop(3, 3, lambda i, v: v * 2.0, x), X)
    assert unrolled.outputs[0] is not unrolled.inputs[0]
    assert unrolled.outputs[0].node.op.name == "copy"


def test_a_loop_above_the_threshold_is_left_alone():
    def fn(x):
        return ember.fori_loop(0, 20, lambda i, v: v * 0.5 + x, x)

    _stays(fn, X)
    unrolled = _unrolls(fn, X, max_trips=20)
    assert _iterations(unrolled, "mul") == list(range(20))


def halve_until_small(x):
    return ember.while_loop(lambda v: v.abs().sum() > 1.0, lambda v: v * 0.5, x)


def test_a_data_dependent_trip_count_is_left_alone():
    _stays(halve_until_small, X)
    _stays(lambda x, n: ember.fori_loop(0, n, lambda i, v: v * 2.0, x), X, ember.tensor(3))

    def infinite(x):  # never stops: simulated past the threshold, then left alone
        return ember.while_loop(lambda s: s[0] >= 0, lambda s: (s[0] + 1, s[1] * 2.0), (0, x))

    _stays(infinite, X)


# ------------------------------------------------------------------------------ scan


def elman(h, xs):
    def cell(h, x):
        h = (h @ RW + x @ RU).tanh()
        return h, h * 2.0

    return ember.scan(cell, h, xs)


def test_scan_over_a_static_sequence_an_elman_rnn():
    h, xs = ember.tensor(rng.standard_normal(3)), ember.tensor(rng.standard_normal((5, 2)))
    unrolled = _unrolls(elman, h, xs)
    assert _iterations(unrolled, "tanh") == [0, 1, 2, 3, 4]
    assert _iterations(unrolled, "getitem") == [0, 1, 2, 3, 4]  # x[t] for each step
    assert [n.op.name for n in unrolled.call_nodes()].count("concat") == 1  # ys stacked once
    carry, ys = interpreter.run(unrolled, [h.numpy(), xs.numpy(), RW.numpy(), RU.numpy()])
    assert ys.shape == (5, 3)
    np.testing.assert_array_equal(ys[-1], carry * 2.0)


def test_scan_of_length_zero_and_one():
    h = ember.tensor(rng.standard_normal(3))
    for length in (0, 1):
        xs = ember.tensor(rng.standard_normal((length, 2)))
        unrolled = _unrolls(elman, h, xs)
        carry, ys = interpreter.run(unrolled, _random_feeds(unrolled))
        assert carry.shape == (3,) and ys.shape == (length, 3)
        assert unrolled.outputs[0] is not unrolled.inputs[0]


def test_a_long_scan_is_left_alone():
    _stays(elman, ember.tensor(np.zeros(3)), ember.tensor(np.zeros((17, 2))))


# ------------------------------------------------------------------------------ nesting


def test_nested_loops_unroll_including_bounds_from_the_outer_counter():
    def fn(x):
        def outer(i, v):
            square = ember.fori_loop(0, 2, lambda j, w: w * x + j.to(w.dtype), v)
            # a triangular loop: its bound is the outer counter, a constant once unrolled
            return ember.fori_loop(0, i + 1, lambda j, w: (w + W).cos(), square)

        return ember.fori_loop(0, 3, outer, x)

    unrolled = _unrolls(fn, X)
    assert len(_iterations(unrolled, "cos")) == 1 + 2 + 3
    names = [n.name for n in unrolled.call_nodes() if n.op.name == "cos"]
    assert all(re.search(r"_it\d+_.*_it\d+_cos", name) for name in names), names


def test_a_nested_loop_first_in_the_body_unrolls_when_the_init_chain_is_erased():
    def fn(x):
        def body(s):
            v = ember.fori_loop(0, 2, lambda j, w: w * x, s[1])  # the body's first nodes
            return s[0] + 1, v

        start = (ember.tensor(7) - 7) * 1  # an init computed by nodes the unrolling removes
        return ember.while_loop(lambda s: s[0] < 2, body, (start, x))[1]

    unrolled = _unrolls(fn, X)
    assert _iterations(unrolled, "mul") == [0, 0, 1, 1]


def test_a_cond_inside_the_body_stays_a_cond():
    def fn(x):
        def body(i, v):
            return ember.cond(v.sum() > 0.5, lambda a: a * 0.5 - W, lambda a: a + x, v)

        return ember.fori_loop(0, 4, body, x)

    unrolled = _unrolls(fn, X, trials=6)
    assert [n.op.name for n in unrolled.call_nodes()].count("cond") == 4
    assert _iterations(unrolled, "cond") == [0, 1, 2, 3]


def test_a_loop_inside_a_cond_branch_unrolls_in_a_copy_of_the_branch():
    def fn(x):
        return ember.cond(
            x.sum() > 0,
            lambda a: ember.fori_loop(0, 3, lambda i, v: v.sin() + a, a),
            lambda a: -a,
            x,
        )

    graph = _graph(fn, X)
    cond_node = next(n for n in graph.call_nodes() if n.op.name == "cond")
    branch = cond_node.attrs["true_branch"]
    unrolled = _unrolls(fn, X, trials=6)
    assert "cond" in _ops(unrolled)
    # the traced branch is shared data: the pass put a new graph in the attribute instead
    unroll_loops(graph)
    assert cond_node.attrs["true_branch"] is not branch
    assert "while_loop" in _ops(branch) and "while_loop" not in _ops(graph)


def test_a_static_loop_inside_a_data_dependent_loop_unrolls_there():
    def fn(x):
        def body(v):
            return ember.fori_loop(0, 2, lambda i, w: w * 0.75, v)

        return ember.while_loop(lambda v: v.abs().sum() > 1.0, body, x)

    loop = _graph(fn, X)
    unrolled, changed = unroll_loops(_graph(fn, X))
    assert changed
    unrolled.verify()
    assert _ops(unrolled).count("while_loop") == 1  # only the data-dependent one
    for scale in (0.1, 1.0, 50.0):
        _assert_same(loop, unrolled, [X.numpy() * scale])


# ------------------------------------------------------------------------------ operands


def test_lifted_operands_and_carries_the_body_passes_through():
    def fn(x):
        y = x * 2.0  # a value of the outer graph, lifted into the body

        def body(s):
            i, v, w = s
            return i + 1, v * y + W, y  # the third carry becomes the lifted value itself

        _, v, w = ember.while_loop(lambda s: s[0] < 3, body, (ember.tensor(0), x, x))
        return v, w, y

    unrolled = _unrolls(fn, X)
    outs = unrolled.outputs
    assert len({id(v) for v in outs}) == 3 and not set(map(id, outs)) & set(
        map(id, unrolled.inputs)
    )


def test_symbolic_sizes_keep_working():
    n = ember.sym("N")
    graph = Graph("sym")
    builder = GraphBuilder(graph)
    x = builder.input(TensorType((n, 3), ember.float64), "x")
    xs = builder.input(TensorType((4, n, 2), ember.float64), "xs")
    with builder:
        v = ember.fori_loop(0, 3, lambda i, v: (v @ RW).reshape(v.shape[0], 3) + x, x)
        h, ys = elman(v, xs)
    graph.set_outputs([builder.value_of(t) for t in (v, h, ys)])
    before = str(graph)
    feeds_for = {
        batch: [rng.standard_normal((batch, 3)), rng.standard_normal((4, batch, 2)), RW.numpy()]
        + [RU.numpy()]
        for batch in (2, 5)
    }
    expected = {b: interpreter.run(graph, [a.copy() for a in f]) for b, f in feeds_for.items()}
    unrolled, changed = unroll_loops(graph)  # in place: the expected values come first
    assert changed and before != str(unrolled)
    unrolled.verify()
    assert not set(_ops(unrolled)) & set(LOOPS)
    assert unrolled.outputs[2].shape == (4, n, 3)
    for batch, feeds in feeds_for.items():
        for got in (
            interpreter.run(unrolled, [a.copy() for a in feeds]),
            compile_graph(unrolled)(*[a.copy() for a in feeds]),
        ):
            for g, w in zip(got, expected[batch]):
                np.testing.assert_array_equal(g, w)


def test_the_pass_has_a_name_rewrites_in_place_and_is_idempotent():
    graph = _graph(wavy, X)
    assert unroll_loops(graph) == (graph, True)
    assert unroll_loops(graph) == (graph, False)
    assert unroll_loops.name == "unroll"
    nested = _graph(lambda x: halve_until_small(ember.fori_loop(0, 2, lambda i, v: v + x, x)), X)
    assert unroll_loops(nested)[1] and not unroll_loops(nested)[1]


def test_random_draws_keep_their_order_and_dead_draws_stay():
    def fn(x):
        def body(i, v):
            ember.rand(2, dtype=ember.float64)  # unused, but it advances the generator
            return v * 0.5 + ember.randn(3, dtype=ember.float64)

        return ember.fori_loop(0, 3, body, x)

    loop = _graph(fn, X)
    unrolled, changed = unroll_loops(_graph(fn, X))
    assert changed and "while_loop" not in _ops(unrolled)
    assert sum(n.op.kind == "random" for n in unrolled.call_nodes()) == 6
    results = []
    for graph in (loop, unrolled):
        ember.manual_seed(7)
        results.append(interpreter.run(graph, [X.numpy()])[0])
    np.testing.assert_array_equal(results[0], results[1])


# ------------------------------------------------------------------------------ gradients


@pytest.mark.parametrize("case", ["fori_loop", "scan"])
def test_gradient_of_the_unrolled_graph_matches_finite_differences(case):
    h = ember.tensor(rng.standard_normal(3))
    if case == "fori_loop":
        unrolled = _unrolls(wavy, X)
        point, rest = X.numpy(), [W]
    else:
        xs = ember.tensor(rng.standard_normal((4, 2)))
        unrolled = _unrolls(elman, h, xs)
        point, rest = xs.numpy(), [RW, RU]

    def loss(t):
        args = [t, *rest] if case == "fori_loop" else [h, t, *rest]
        return sum((out * out).sum() for out in inline_graph(unrolled, args))

    got = ember.grad(loss)(ember.tensor(point)).numpy()
    np.testing.assert_allclose(got, fd(loss, point), rtol=1e-6, atol=1e-8)
