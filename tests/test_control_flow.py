"""Control-flow ops (control/flow.py, graph/subgraph.py): cond, while_loop, fori_loop.

Eager, traced (both executors) and autodiff results agree; gradients match central finite
differences in float64 (loop gradients in more depth: test_control_grad.py); branch and carry
mismatches are errors naming the output or carry; graphs with subgraphs print, verify and
survive a save/load round trip.
"""

import numpy as np
import pytest

import ember
from ember.graph import Graph, GraphError
from ember.ops import REGISTRY
from ember.types import TensorType

from .gradcheck import fd

EXECUTORS = ("codegen", "interpreter")
rng = np.random.default_rng(0)
W = ember.tensor(rng.standard_normal(3))


def branchy(x):
    """A data-dependent branch closing over an eager tensor (W)."""
    return ember.cond(x.sum() > 0, lambda a: (a * W).sin(), lambda a: a * a - W, x)


POS = np.abs(rng.standard_normal(3)) + 0.5
INPUTS = {"true": POS, "false": -POS}


# ------------------------------------------------------------------------------ cond


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("side", ["true", "false"])
def test_traced_cond_takes_either_branch(executor, side):
    traced = ember.trace(branchy, ember.tensor(POS), executor=executor)
    x = ember.tensor(INPUTS[side])
    np.testing.assert_allclose(traced(x).numpy(), branchy(x).numpy())
    expected = np.sin(POS * W.numpy()) if side == "true" else POS * POS - W.numpy()
    np.testing.assert_allclose(branchy(x).numpy(), expected)


def test_trace_prints_the_cond_with_its_branches():
    text = str(ember.trace(branchy, ember.tensor(POS)).graph)
    assert "= cond(" in text and "true_branch=<graph true_branch>" in text
    assert "    true_branch(%operand0: f64[3], %captured: f64[3]) {" in text
    assert "sin(" in text and "sub(" in text


def test_cond_with_nested_operands_and_outputs():
    def fn(x, y):
        return ember.cond(
            x.sum() > y.sum(),
            lambda p, d: {"a": p[0] + d["k"], "b": (p[1] * 2,)},
            lambda p, d: {"a": p[0] - d["k"], "b": (p[1] * 3,)},
            (x, y),
            {"k": x * y},
        )

    x, y = ember.tensor(rng.standard_normal(4)), ember.tensor(rng.standard_normal(4))
    for args in [(x, y), (y, x)]:
        eager = fn(*args)
        traced = ember.trace(fn, *args)(*args)
        np.testing.assert_allclose(traced["a"].numpy(), eager["a"].numpy())
        np.testing.assert_allclose(traced["b"][0].numpy(), eager["b"][0].numpy())


def test_closed_over_parameter_follows_later_updates():
    w = ember.tensor(np.ones(3))
    traced = ember.trace(lambda x: ember.cond(x.sum() > 0, lambda a: a * w, lambda a: a, x), w)
    w.numpy()[:] = 5.0  # the graph reads the captured tensor's data at each call
    np.testing.assert_allclose(traced(ember.tensor(np.ones(3))).numpy(), 5.0 * np.ones(3))


def test_branches_must_agree():
    x = ember.tensor(np.ones(3))
    with pytest.raises(ember.ShapeError, match="output 0 differs.*f64\\[3\\].*f64\\[1\\]"):
        ember.trace(lambda x: ember.cond(x.sum() > 0, lambda a: a, lambda a: a.sum(0, True), x), x)
    with pytest.raises(ember.DTypeError, match="output 1 differs"):
        ember.trace(
            lambda x: ember.cond(
                x.sum() > 0, lambda a: (a, a), lambda a: (a, a.to(ember.float32)), x
            ),
            x,
        )
    with pytest.raises(ember.EmberError, match="different structures"):
        ember.trace(lambda x: ember.cond(x.sum() > 0, lambda a: (a, a), lambda a: a, x), x)
    with pytest.raises(ember.ShapeError, match="0-d tensor"):
        ember.trace(lambda x: ember.cond(x > 0, lambda a: a, lambda a: a, x), x)


def test_in_place_update_inside_a_branch_is_refused():
    state = ember.tensor(np.zeros(3))

    def fn(x):
        def bump(a):
            state.add_(a)
            return a

        return ember.cond(x.sum() > 0, bump, lambda a: a, x)

    with pytest.raises(ember.TraceError, match="in-place update"):
        ember.trace(fn, ember.tensor(np.ones(3)))


def test_cond_works_in_ember_function():
    fn = ember.function(branchy)
    for side in INPUTS.values():
        x = ember.tensor(side)
        np.testing.assert_allclose(fn(x).numpy(), branchy(x).numpy())


# ------------------------------------------------------------------------------ cond gradients


def loss(x):
    y = branchy(x)
    return (y * y).sum()


@pytest.mark.parametrize("side", ["true", "false"])
def test_cond_gradients_match_finite_differences(side):
    x = INPUTS[side]
    expected = fd(loss, x)
    traced = ember.grad(loss)(ember.tensor(x)).numpy()  # graph autodiff through the node
    np.testing.assert_allclose(traced, expected, rtol=1e-6, atol=1e-7)
    leaf = ember.tensor(x, requires_grad=True)  # eager: the tape of the branch taken
    loss(leaf).backward()
    np.testing.assert_allclose(leaf.grad.numpy(), expected, rtol=1e-6, atol=1e-7)
    inside = ember.trace(ember.grad(loss), ember.tensor(POS))(ember.tensor(x)).numpy()
    np.testing.assert_allclose(inside, expected, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("side", ["true", "false"])
def test_cond_gradient_wrt_a_closed_over_tensor_and_second_order(side):
    x = ember.tensor(INPUTS[side])

    def of_w(w):
        return ember.cond(x.sum() > 0, lambda a: (a * w).sin(), lambda a: a * a - w, x).sum()

    w = rng.standard_normal(3)
    np.testing.assert_allclose(
        ember.grad(of_w)(ember.tensor(w)).numpy(), fd(of_w, w), rtol=1e-6, atol=1e-7
    )

    def grad_sum(x):
        return ember.grad(loss)(x).sum()

    np.testing.assert_allclose(
        ember.grad(grad_sum)(x).numpy(), fd(grad_sum, x.numpy()), rtol=1e-5, atol=1e-6
    )


# ------------------------------------------------------------------------------ loops


def halve_until_small(x):
    return ember.while_loop(lambda v: v.abs().sum() > 1.0, lambda v: v * 0.5 + W * 0.01, x)


@pytest.mark.parametrize("executor", EXECUTORS)
@pytest.mark.parametrize("scale", [0.1, 1.0, 100.0])  # 0, a few and many trips
def test_while_loop_data_dependent_trip_count(executor, scale):
    x = ember.tensor(POS * scale)
    traced = ember.trace(halve_until_small, ember.tensor(POS), executor=executor)
    np.testing.assert_allclose(traced(x).numpy(), halve_until_small(x).numpy())
    if scale == 0.1:
        np.testing.assert_array_equal(traced(x).numpy(), POS * 0.1)  # zero trips


def test_while_loop_dict_carries():
    def fn(x):
        out = ember.while_loop(
            lambda s: s["n"] < 4,
            lambda s: {"n": s["n"] + 1, "acc": s["acc"] * x},
            {"n": ember.tensor(0), "acc": ember.ones_like(x)},
        )
        return out["acc"]

    x = ember.tensor(POS)
    np.testing.assert_allclose(ember.trace(fn, x)(x).numpy(), POS**4)
    np.testing.assert_allclose(fn(x).numpy(), POS**4)


def test_body_must_keep_its_carries_types():
    def fn(x):
        return ember.while_loop(
            lambda v: v[0] < 3, lambda v: (v[0] + 1, v[1].sum()), (ember.tensor(0), x)
        )

    x = ember.tensor(POS)
    with pytest.raises(ember.ShapeError, match="carry 1 .*f64\\[3\\] to f64\\[\\]"):
        ember.trace(fn, x)
    with pytest.raises(ember.ShapeError, match="carry 1"):
        fn(x)  # eager loops check every step with the same error
    with pytest.raises(ember.DTypeError, match="carry 0"):
        ember.trace(
            lambda x: ember.while_loop(lambda v: v.sum() < 3, lambda v: v.to(ember.float32), x),
            x,
        )


@pytest.mark.parametrize("executor", EXECUTORS)
def test_fori_loop_with_python_and_tensor_bounds(executor):
    def static(x):
        return ember.fori_loop(0, 5, lambda i, v: v + i.to(v.dtype) * x, x)

    def dynamic(x, n):
        return ember.fori_loop(1, n, lambda i, v: v * 2.0, x)

    x = ember.tensor(POS)
    np.testing.assert_allclose(static(x).numpy(), POS * 11)
    np.testing.assert_allclose(ember.trace(static, x, executor=executor)(x).numpy(), POS * 11)
    traced = ember.trace(dynamic, x, ember.tensor(3), executor=executor)
    for n in (0, 1, 4):
        np.testing.assert_allclose(traced(x, ember.tensor(n)).numpy(), POS * 2 ** max(n - 1, 0))


def test_cond_inside_a_loop_inside_a_cond():
    def fn(x):
        def body(i, v):
            return ember.cond(i % 2 == 0, lambda a: a + x, lambda a: a * 0.5, v)

        return ember.cond(x.sum() > 0, lambda a: ember.fori_loop(0, 4, body, a), lambda a: -a, x)

    for side in INPUTS.values():
        x = ember.tensor(side)
        for executor in EXECUTORS:
            traced = ember.trace(fn, ember.tensor(POS), executor=executor)
            np.testing.assert_allclose(traced(x).numpy(), fn(x).numpy())
    leaf = ember.tensor(POS, requires_grad=True)  # eager: the tape of the path taken
    fn(leaf).sum().backward()
    np.testing.assert_allclose(leaf.grad.numpy(), fd(lambda x: fn(x).sum(), POS), rtol=1e-6)


def test_eager_while_loop_gradient_through_the_tape():
    x = POS * 3

    def f(x):
        return halve_until_small(x).pow(2).sum()

    leaf = ember.tensor(x, requires_grad=True)
    f(leaf).backward()
    np.testing.assert_allclose(leaf.grad.numpy(), fd(f, x), rtol=1e-6)


@pytest.mark.parametrize("scale", [0.1, 3.0, 100.0])  # 0, a few and many trips
def test_graph_autodiff_through_while_loop(scale):
    # more cases (closed-over tensors, checkpointing, nesting) in test_control_grad.py
    def f(x):
        return halve_until_small(x).pow(2).sum()

    got = ember.grad(f)(ember.tensor(POS * scale)).numpy()
    np.testing.assert_allclose(got, fd(f, POS * scale), rtol=1e-6, atol=1e-9)


# ------------------------------------------------------------------------------ the graph


def test_verify_checks_subgraphs_against_the_node():
    t = TensorType((3,), ember.float64)
    body = Graph("body")  # the identity: keeps its carry
    body.set_outputs([body.add_input(t, "c")])
    cond_graph = Graph("cond")
    v = cond_graph.add_input(t, "c")
    cond_graph.set_outputs(
        [cond_graph.add_call(REGISTRY["sum"], [v], {"axes": (0,), "keepdims": False}).outputs[0]]
    )
    g = Graph("outer")
    x = g.add_input(t, "x")
    node = g.add_call(REGISTRY["while_loop"], [x], {"cond": cond_graph, "body": body})
    g.set_outputs(node.outputs)
    g.verify()
    # a body whose carry changes type: built with an explicit (wrong) type, caught by verify
    bad = Graph("body")
    c = bad.add_input(t, "c")
    bad.set_outputs(
        [bad.add_call(REGISTRY["sum"], [c], {"axes": (0,), "keepdims": False}).outputs[0]]
    )
    g2 = Graph("outer")
    x2 = g2.add_input(t, "x")
    node2 = g2.add_call(
        REGISTRY["while_loop"], [x2], {"cond": cond_graph, "body": bad}, out_types=[t]
    )
    g2.set_outputs(node2.outputs)
    with pytest.raises(GraphError, match="carry 0 \\(%c\\)"):
        g2.verify()


def test_graphs_with_subgraphs_round_trip(tmp_path):
    def fn(x):
        return ember.fori_loop(
            0, 3, lambda i, v: ember.cond(v.sum() > 1.0, lambda a: a * 0.5, lambda a: a + 1.0, v), x
        )

    x = ember.tensor(POS)
    graph = ember.trace(fn, x).graph
    graph.save(tmp_path / "loop.ember")
    loaded = ember.load_graph(tmp_path / "loop.ember")
    assert str(loaded) == str(graph)
    from ember.graph import interpreter

    np.testing.assert_array_equal(interpreter.run(loaded, [POS])[0], fn(x).numpy())


# ------------------------------------------------------------------------------ scan

RW = ember.tensor(rng.standard_normal((3, 3)) * 0.5)


def elman(h, xs):
    return ember.scan(lambda h, x: ((h @ RW + x).tanh(),) * 2, h, xs)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_scan_traced_equals_eager(executor):
    h, xs = ember.tensor(rng.standard_normal(3)), ember.tensor(rng.standard_normal((5, 3)))
    carry, ys = elman(h, xs)
    traced_carry, traced_ys = ember.trace(elman, h, xs, executor=executor)(h, xs)
    np.testing.assert_allclose(traced_carry.numpy(), carry.numpy())
    np.testing.assert_allclose(traced_ys.numpy(), ys.numpy())
    assert ys.shape == (5, 3)
    np.testing.assert_allclose(ys.numpy()[-1], carry.numpy())
    assert "= scan(" in str(ember.trace(elman, h, xs, opt_level=2).graph)  # O3 unrolls it


def test_scan_body_must_keep_the_carry():
    h, xs = ember.tensor(np.ones(3)), ember.tensor(np.ones((2, 3)))
    with pytest.raises(ember.ShapeError, match="carry 0"):
        ember.trace(lambda h, xs: ember.scan(lambda c, x: (c.sum(), x), h, xs), h, xs)
    with pytest.raises(ember.ShapeError, match="carry 0"):
        ember.scan(lambda c, x: (c.sum(), x), h, xs)


def test_scan_eager_gradient_through_the_tape():
    xs = rng.standard_normal((4, 3))

    def f(xs):
        return elman(ember.tensor(np.zeros(3)), xs)[1].pow(2).sum()

    leaf = ember.tensor(xs, requires_grad=True)
    f(leaf).backward()
    np.testing.assert_allclose(leaf.grad.numpy(), fd(f, xs), rtol=1e-6, atol=1e-8)
