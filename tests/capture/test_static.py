"""Define-then-run graphs: placeholder, Variable, minimize and Session.run, checked against
eager ember (itself checked against PyTorch): three training steps of an MLP, a CNN and a
transformer encoder layer with SGD (momentum) and Adam give the same losses, gradients and
parameters; then pruning, in-place updates, optimizer state, and the errors."""

import copy

import numpy as np
import pytest

import ember
from ember import models, nn
from ember.nn import functional as F


def _encoder():
    return nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, dropout=0.0, batch_first=True)


def _classify(out, y):
    return F.cross_entropy(out, y)


def _squares(out, y):
    return ((out - y) ** 2).mean()


# name -> (build, x shape (None: any batch), x shape fed, y placeholder (shape, dtype), loss)
CASES = {
    "mlp": (
        lambda: models.mlp(20, 16, 5),
        (None, 20),
        (8, 20),
        ((None,), ember.int64),
        _classify,
    ),
    "cnn": (
        lambda: models.cnn(1, 8, 4),
        (None, 1, 8, 8),
        (4, 1, 8, 8),
        ((None,), ember.int64),
        _classify,
    ),
    "encoder": (_encoder, (2, 5, 16), (2, 5, 16), ((2, 5, 16), ember.float32), _squares),
}
OPTIMIZERS = {
    "momentum": lambda ps: ember.optim.SGD(ps, lr=0.05, momentum=0.9),
    "adam": lambda ps: ember.optim.Adam(ps, lr=1e-2),
}
# Adam's step m / (sqrt(v) + eps) is about lr whatever the gradient's size, so a gradient that is
# rounding noise (an attention key bias's is zero in exact arithmetic: softmax ignores a shift
# common to all keys) takes lr-sized steps in directions its last bits decide, which the graph
# (NumPy's kernels) and eager execution (ember's C kernels) decide differently. In float64 that
# noise is far below eps and the step vanishes: Adam's cases run in float64.
FLOAT64_OPTIMIZERS = ("adam",)


def _assert_close(a, b, what):
    a, b = np.asarray(a), np.asarray(b)
    scale = max(float(np.abs(b).max()), 1e-12)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6 * scale, err_msg=what)


def _data(case, steps=3, dtype=np.float32):
    _, _, shape, (y_shape, y_dtype), _ = CASES[case]
    rng = np.random.default_rng(1)
    batches = []
    for _ in range(steps):
        x = rng.standard_normal(shape).astype(dtype)
        if y_dtype == ember.int64:
            y = rng.integers(0, 4, shape[0])
        else:
            y = rng.standard_normal(y_shape).astype(dtype)
        batches.append((x, y))
    return batches


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_session_training_steps_equal_eager(case, optimizer):
    build, x_shape, _, (y_shape, y_dtype), loss_fn = CASES[case]
    ember.manual_seed(0)
    eager_model = build()
    model = build()
    model.load_state_dict(eager_model.state_dict())
    dtype = ember.float64 if optimizer in FLOAT64_OPTIMIZERS else ember.float32
    if dtype == ember.float64:
        eager_model.double(), model.double()
        y_dtype = ember.float64 if y_dtype == ember.float32 else y_dtype
    eager_opt = OPTIMIZERS[optimizer](eager_model.parameters())
    opt = OPTIMIZERS[optimizer](model.parameters())
    params = list(model.parameters())

    with ember.Graph() as g:
        x = ember.placeholder(x_shape, dtype, name="x")
        y = ember.placeholder(y_shape, y_dtype, name="y")
        loss = loss_fn(model(x), y)
        train = opt.minimize(loss)
    grads = dict((id(p), gr) for p, gr in train.gradients)
    assert set(grads) == {id(p) for p in params}
    fetch_grads = [grads[id(p)] for p in params]

    with ember.Session(g) as sess:
        for xb, yb in _data(case, dtype=dtype.np):
            got_loss, got_grads, none = sess.run([loss, fetch_grads, train], {x: xb, y: yb})
            eager_opt.zero_grad()
            expected = loss_fn(eager_model(ember.tensor(xb)), ember.tensor(yb))
            expected.backward()
            eager_opt.step()
            assert none is None and isinstance(got_loss, np.ndarray)
            _assert_close(got_loss, expected.detach().numpy(), "loss")
            named = list(eager_model.named_parameters())
            for (name, p), q, gr in zip(named, params, got_grads):
                _assert_close(gr, p.grad.detach().numpy(), f"gradient of {name}")
                _assert_close(q.detach().numpy(), p.detach().numpy(), f"parameter {name}")
    for p, q in zip(params, eager_model.parameters()):
        assert p.grad is None  # the Session's gradients live in the graph, not in .grad
        assert sorted(opt.state[p]) == sorted(eager_opt.state[q])
        for key, value in eager_opt.state[q].items():
            _assert_close(opt.state[p][key].numpy(), value.numpy(), f"optimizer state {key}")


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: ember.optim.SGD(ps, lr=0.1, momentum=0.8, dampening=0.3, weight_decay=0.01),
        lambda ps: ember.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
        lambda ps: ember.optim.Adam(ps, lr=0.05, amsgrad=True, weight_decay=0.01),
        lambda ps: ember.optim.AdamW(ps, lr=0.05),
    ],
    ids=["sgd-dampening", "nesterov", "adam-amsgrad", "adamw"],
)
def test_running_a_train_op_n_times_equals_n_eager_steps(make):
    rng = np.random.default_rng(0)
    w0, xs = rng.standard_normal((3, 2)).astype(np.float32), rng.standard_normal((4, 3))
    xs = xs.astype(np.float32)
    with ember.Graph() as g:
        x = ember.placeholder((None, 3), name="x")
        W = ember.Variable(w0, name="W")
        b = ember.Variable(ember.zeros(2), name="b")
        loss = ((x @ W + b).tanh() ** 2).sum()
        opt = make([W, b])
        train = opt.minimize(loss)
    eager_W, eager_b = ember.Variable(w0), ember.Variable(np.zeros(2, np.float32))
    eager_opt = make([eager_W, eager_b])
    sess = ember.Session(g)
    for _ in range(4):  # the first run creates the buffers; later runs update them
        got = sess.run([loss, train], {x: xs})[0]
        eager_opt.zero_grad()
        expected = ((ember.tensor(xs) @ eager_W + eager_b).tanh() ** 2).sum()
        expected.backward()
        eager_opt.step()
        _assert_close(got, expected.detach().numpy(), "loss")
        _assert_close(W.detach().numpy(), eager_W.detach().numpy(), "W")
        _assert_close(b.detach().numpy(), eager_b.detach().numpy(), "b")
    for key, value in eager_opt.state[eager_W].items():
        _assert_close(opt.state[W][key].detach().numpy(), value.detach().numpy(), key)


def _linear_graph():
    g = ember.Graph("linear")
    with g:
        x = ember.placeholder((None, 3), name="x")
        y = ember.placeholder((None,), ember.int64, name="y")
        W = ember.Variable(np.arange(6, dtype=np.float32).reshape(3, 2) / 10, name="W")
        logits = x @ W
        loss = F.cross_entropy(logits, y)
        train = ember.optim.SGD([W], lr=0.5).minimize(loss)
    return g, x, y, W, logits, loss, train


def test_placeholders_take_any_batch_and_the_results_are_numpy_arrays():
    g, x, y, W, logits, loss, train = _linear_graph()
    assert str(x.shape[0]) == "N" and x.shape[1] == 3 and y.shape[0] == x.shape[0]
    sess = ember.Session(g)
    for n in (2, 5):
        xs = np.ones((n, 3), np.float32)
        out = sess.run({"logits": logits, "pair": (loss, [W])}, {x: xs, "y": np.zeros(n, np.int64)})
        assert out["logits"].shape == (n, 2) and isinstance(out["pair"], tuple)
        np.testing.assert_allclose(out["logits"], xs @ W.detach().numpy(), rtol=1e-6)
        assert isinstance(out["pair"][0], np.ndarray) and out["pair"][0].shape == ()
    assert ember.get_default_graph() is None
    with g:
        assert ember.get_default_graph() is g
        doubled = logits * 2  # entering again continues building the same graph
    out = sess.run(doubled, {x: np.ones((1, 3), np.float32)})
    np.testing.assert_allclose(out, [[1.2, 1.8]], rtol=1e-6)


def test_session_computes_only_the_subgraph_the_fetches_need():
    g, x, y, W, logits, loss, train = _linear_graph()
    sess = ember.Session(g)
    pruned = sess.pruned(logits)
    assert [v.name for v in pruned.inputs] == ["x", "W"]  # y is not needed, so not fed
    assert len(pruned.nodes) < len(g.nodes)
    assert sess.run(logits, {x: np.ones((2, 3), np.float32)}).shape == (2, 2)
    # (the training op also reads its learning rate, fed from the param group at each run)
    assert {v.name for v in sess.pruned([loss, train]).inputs} == {"x", "y", "W", "lr"}
    with g:
        unused = ember.placeholder((7,), name="unused")
        unused.exp()
    assert "unused" not in [v.name for v in sess.pruned(loss).inputs]


def test_train_op_updates_variables_in_place_after_the_fetched_values():
    g, x, y, W, logits, loss, train = _linear_graph()
    memory, version = W.detach().numpy(), W._version
    before = W.detach().numpy().copy()
    feed = {x: np.ones((2, 3), np.float32), y: np.array([0, 1])}
    sess = ember.Session(g)
    value, old_W, _ = sess.run([logits, W, train], feed)
    np.testing.assert_allclose(value, np.ones((2, 3)) @ before, rtol=1e-6)  # before the step
    np.testing.assert_array_equal(old_W, before)
    assert W.detach().numpy() is memory and W._version > version  # written in place
    assert not np.allclose(W.detach().numpy(), before)
    current = sess.run(W)
    np.testing.assert_array_equal(current, W.detach().numpy())
    current[:] = 0  # a fetched value is a copy
    assert W.detach().numpy().any()


def test_module_state_updated_in_the_forward_pass_is_written_back_by_the_train_op():
    ember.manual_seed(0)
    eager = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    model.load_state_dict(eager.state_dict())
    with ember.Graph() as g:
        x = ember.placeholder((6, 3), name="x")
        loss = (model(x) ** 2).sum()
        train = ember.optim.SGD(model.parameters(), lr=0.01).minimize(loss)
    eager_opt = ember.optim.SGD(eager.parameters(), lr=0.01)
    sess = ember.Session(g)
    rng = np.random.default_rng(0)
    for _ in range(2):
        xs = rng.standard_normal((6, 3)).astype(np.float32)
        sess.run(train, {x: xs})
        eager_opt.zero_grad()
        (eager(ember.tensor(xs)) ** 2).sum().backward()
        eager_opt.step()
    for (name, a), b in zip(eager.state_dict().items(), model.state_dict().values()):
        _assert_close(b.numpy(), a.numpy(), name)


def test_var_list_restricts_the_update():
    with ember.Graph() as g:
        x = ember.placeholder((2,), name="x")
        a, b = ember.Variable([1.0, 2.0], name="a"), ember.Variable([3.0, 4.0], name="b")
        loss = (x * a * b).sum()
    # minimize may also be called after the block: it records into the loss's graph
    train = ember.optim.SGD([a, b], lr=0.1).minimize(loss, var_list=[b])
    assert [t.shape for t in train.variables] == [(2,)]
    ember.Session(g).run(train, {x: [1.0, 1.0]})
    np.testing.assert_allclose(a.detach().numpy(), [1.0, 2.0])
    np.testing.assert_allclose(b.detach().numpy(), [2.9, 3.8], rtol=1e-6)


def test_variables_are_eager_tensors_outside_graphs():
    v = ember.Variable([1.0, 2.0], name="v")
    assert v.requires_grad and v.graph is None and "Variable 'v'" in repr(v)
    (v * v).sum().backward()
    np.testing.assert_allclose(v.grad.numpy(), [2.0, 4.0])
    source = np.ones(2, np.float32)
    assert ember.Variable(source).detach().numpy() is not source  # a Variable owns its memory
    assert not ember.Variable([1, 2]).requires_grad  # integers are not trainable
    assert not ember.Variable([1.0], trainable=False).requires_grad
    with ember.Graph() as g:
        w = ember.Variable([3.0], name="w")
    clone = copy.deepcopy(w)
    assert isinstance(clone, ember.Variable) and clone.graph is None and clone.name == "w"
    assert (
        clone.detach().numpy() is not w.detach().numpy()
        and clone.tolist() == [3.0]
        and w.graph is g
    )


def test_a_variable_initialized_by_graph_ops_is_evaluated_once():
    ember.manual_seed(0)
    with ember.Graph() as g:
        W = ember.Variable(ember.randn(2, 3) * 0 + 3, name="W")
        r = ember.Variable(ember.randn(4), name="r")
        total = W.sum()
    assert isinstance(W, ember.Tensor) and W.shape == (2, 3) and W.graph is g
    np.testing.assert_array_equal(W.detach().numpy(), np.full((2, 3), 3, np.float32))
    sess = ember.Session(g)
    assert float(sess.run(total)) == 18.0
    first = sess.run(r)
    np.testing.assert_array_equal(sess.run(r), first)  # not redrawn at each run


def test_eager_minimize_steps_now():
    w = ember.Variable([1.0, -2.0])
    opt = ember.optim.SGD([w], lr=0.5)
    assert opt.minimize((w**2).sum()) is None
    np.testing.assert_allclose(w.detach().numpy(), [0.0, 0.0])


def test_modules_are_built_before_the_graph_or_under_init_scope():
    with ember.Graph() as g:
        x = ember.placeholder((1, 2), name="x")
        inside = nn.Linear(2, 1)  # its initialization is recorded, not run
        with pytest.raises(ember.EmberError, match="init_scope"):
            ember.optim.SGD(inside.parameters(), lr=0.1).minimize(inside(x).sum())
    with g:
        with ember.init_scope():
            layer = nn.Linear(2, 1)
        train = ember.optim.SGD(layer.parameters(), lr=0.1).minimize(layer(x).sum())
    before = layer.weight.detach().numpy().copy()
    ember.Session(g).run(train, {x: [[1.0, 1.0]]})
    np.testing.assert_allclose(layer.weight.detach().numpy(), before - 0.1, rtol=1e-6)


# ------------------------------------------------------------------------------------------ errors
def test_a_missing_feed_names_the_placeholder():
    g, x, y, W, logits, loss, train = _linear_graph()
    with pytest.raises(ember.SessionError, match="placeholder 'y' \\(i64\\[N\\]\\)"):
        ember.Session(g).run(loss, {x: np.ones((2, 3), np.float32)})


def test_a_wrong_shape_names_the_placeholder_and_both_shapes():
    g, x, y, W, logits, loss, train = _linear_graph()
    sess = ember.Session(g)
    with pytest.raises(ember.ShapeError, match=r"'x' expects f32\[N, 3\], got shape \(2, 4\)"):
        sess.run(logits, {x: np.ones((2, 4), np.float32)})
    with pytest.raises(ember.ShapeError, match=r"'x' expects f32\[N, 3\], got shape \(3,\)"):
        sess.run(logits, {x: np.ones(3, np.float32)})
    with pytest.raises(ember.ShapeError, match="N is 2 in placeholder 'x'"):
        sess.run(loss, {x: np.ones((2, 3), np.float32), y: np.zeros(3, np.int64)})


def test_a_wrong_dtype_names_the_placeholder_and_lists_are_converted():
    g, x, y, W, logits, loss, train = _linear_graph()
    sess = ember.Session(g)
    with pytest.raises(
        ember.DTypeError, match="'x' expects ember.float32, got an array of dtype float64"
    ):
        sess.run(logits, {x: np.ones((2, 3))})
    with pytest.raises(ember.DTypeError, match="'y' expects ember.int64"):
        sess.run(loss, {x: [[1.0, 2.0, 3.0]], y: [0.5]})
    assert sess.run(loss, {x: [[1, 2, 3]], y: [1]}).dtype == np.float32  # lists are converted
    before = W.detach().numpy().copy()
    with pytest.raises(ember.DTypeError):
        sess.run([loss, train], {x: [[1.0, 2.0, 3.0]], y: np.zeros(1, np.int32)})
    np.testing.assert_array_equal(W.detach().numpy(), before)  # a failed run changed nothing


def test_fetches_and_feeds_from_another_graph_are_refused():
    g, x, y, W, logits, loss, train = _linear_graph()
    other, ox, _, oW, ologits, _, otrain = _linear_graph()
    sess = ember.Session(g)
    for fetch, what in [(ologits, "fetch %"), (otrain, "training op"), (oW, "Variable 'W'")]:
        with pytest.raises(ember.SessionError, match=f"{what}.*belongs to another graph"):
            sess.run(fetch, {x: np.ones((1, 3), np.float32)})
    with pytest.raises(ember.SessionError, match="fed placeholder %x belongs to another graph"):
        sess.run(logits, {ox: np.ones((1, 3), np.float32)})


def test_other_misuses_get_clear_errors():
    g, x, y, W, logits, loss, train = _linear_graph()
    sess = ember.Session(g)
    with pytest.raises(ember.SessionError, match="only placeholders can be fed"):
        sess.run(loss, {logits: np.ones((1, 2), np.float32)})
    with pytest.raises(ember.SessionError, match="does not have \\(it has: x, y\\)"):
        sess.run(logits, {"z": 1})
    with pytest.raises(ember.SessionError, match="cannot fetch a str"):
        sess.run("logits")
    with pytest.raises(ember.SessionError, match="inside `with ember.Graph"):
        ember.placeholder((2,))
    with g, pytest.raises(ember.SessionError, match="cannot depend on placeholder 'x'"):
        ember.Variable(x * 2)
    with ember.Session(g) as closed:
        pass
    with pytest.raises(ember.SessionError, match="closed"):
        closed.run(W)
