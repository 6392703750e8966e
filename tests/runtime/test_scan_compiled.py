"""control/scan_run.py: the scan node's compiled form (what generated code runs) equals the
reference kernel (the interpreter's, control/scan.py) and plans its body once: nodes that read
only the lifted operands run once per call, not once per step."""

import numpy as np
import pytest

import ember
from ember.control import scan_run
from ember.graph import interpreter
from ember.ops._registry import REGISTRY


def _scan_node(fn, *args):
    traced = ember.trace(fn, *args, opt_level=2)  # (O3 unrolls short loops)
    nodes = [n for n in traced.graph.nodes if n.kind == "call" and n.op is REGISTRY["scan"]]
    assert len(nodes) == 1
    return traced, nodes[0]


def _rnn(w, b):
    def fn(h0, xs):
        def step(h, x):
            h = (x + h @ w.t() + b).relu()  # w.t() reads only a lifted operand
            return h, h * 2.0

        return ember.scan(step, h0, xs)

    return fn


def _cases():
    rng = np.random.default_rng(0)
    w = ember.tensor(rng.standard_normal((5, 5)) * 0.3)
    b = ember.tensor(rng.standard_normal(5))
    h0 = ember.tensor(rng.standard_normal((2, 5)))
    xs = ember.tensor(rng.standard_normal((7, 2, 5)))
    empty = ember.tensor(np.zeros((0, 2, 5)))
    pair = ember.tensor(rng.standard_normal((4, 3)))

    def two_carries(x):
        return ember.scan(lambda c, r: ((c[0] + r, c[1] * r), c[0] - c[1]), (x[0], x[1]), x)

    return [
        ("rnn", _rnn(w, b), [h0, xs]),
        ("empty", _rnn(w, b), [h0, empty]),
        ("two_carries", two_carries, [pair]),
    ]


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c[0])
def test_compiled_scan_equals_the_reference_kernel(case, monkeypatch):
    _, fn, args = case
    traced, node = _scan_node(fn, *args)
    run = scan_run.compile_scan(node)
    assert run is not None
    fed = dict(zip((v.name for v in traced.graph.inputs), traced.fed_arrays(*args)))
    env = interpreter.all_values(traced.graph, list(fed.values()))
    operands = [env.get(v.name, fed.get(v.name)) for v in node.inputs]
    want = node.op.kernel(*operands, **node.attrs)
    got = run(*[o.copy() for o in operands])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        # float64 products of 5 terms, 7 steps: C and NumPy order sums differently
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    # the program generated code runs (which calls it) equals the interpreter
    fed = traced.fed_arrays(*args)
    steps = []
    real_call = scan_run._call
    monkeypatch.setattr(
        scan_run, "_call", lambda env, step: steps.append(1) or real_call(env, step)
    )
    got = traced.program(*[a.copy() for a in fed])
    assert steps  # (generated code ran the compiled form)
    want = interpreter.run(traced.graph, [a.copy() for a in fed])
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_invariant_body_nodes_run_once_per_call(monkeypatch):
    rng = np.random.default_rng(1)
    w = ember.tensor(rng.standard_normal((4, 4)))
    b = ember.tensor(rng.standard_normal(4))
    h0 = ember.tensor(rng.standard_normal((1, 4)))
    xs = ember.tensor(rng.standard_normal((6, 1, 4)))
    traced, node = _scan_node(_rnn(w, b), h0, xs)
    calls = []
    body = node.attrs["body"]
    run = scan_run.compile_scan(node)
    real_call = scan_run._call

    def counting(env, step):
        calls.append(step[0])
        return real_call(env, step)

    monkeypatch.setattr(scan_run, "_call", counting)
    fed = dict(zip((v.name for v in traced.graph.inputs), traced.fed_arrays(h0, xs)))
    env = interpreter.all_values(traced.graph, list(fed.values()))
    operands = [env.get(v.name, fed.get(v.name)) for v in node.inputs]
    run(*operands)
    n_calls = sum(1 for n in body.nodes if n.kind == "call")
    # the transpose of w runs once; the other body nodes once per step
    assert len(calls) == 1 + (n_calls - 1) * xs.shape[0]
