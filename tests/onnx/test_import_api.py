"""``ember.onnx.load``: what the returned callables do (captured graphs, eager fallback, named
inputs, several outputs), and ``trainable=True`` modules fine-tuned with ember.optim against
PyTorch doing the same steps from the same weights."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import ember  # noqa: E402
from ember.errors import OnnxError  # noqa: E402

F32 = TensorProto.FLOAT


def _mlp(rng, batch="N"):
    """x (N, 4) -> MatMul W1 (4, 8) + b1 -> Relu -> MatMul W2 (8, 3) + b2, plus x's row sums."""
    weights = {
        "W1": rng.standard_normal((4, 8)).astype(np.float32) * 0.5,
        "b1": rng.standard_normal(8).astype(np.float32) * 0.1,
        "W2": rng.standard_normal((8, 3)).astype(np.float32) * 0.5,
        "b2": rng.standard_normal(3).astype(np.float32) * 0.1,
    }
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h"]),
        helper.make_node("MatMul", ["h", "W2"], ["o0"]),
        helper.make_node("Add", ["o0", "b2"], ["logits"]),
        helper.make_node("ReduceSum", ["x", "axes"], ["rows"], keepdims=0),
    ]
    inits = [numpy_helper.from_array(v, k) for k, v in weights.items()]
    inits.append(numpy_helper.from_array(np.array([1], np.int64), "axes"))
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", F32, [batch, 4])],
        [
            helper.make_tensor_value_info("logits", F32, [batch, 3]),
            helper.make_tensor_value_info("rows", F32, [batch]),
        ],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model, full_check=True)
    return model, weights


def test_loads_paths_bytes_and_protos_and_captures_a_graph(tmp_path):
    model, w = _mlp(np.random.default_rng(0))
    path = tmp_path / "mlp.onnx"
    onnx.save(model, path)
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    expected = np.maximum(x @ w["W1"] + w["b1"], 0) @ w["W2"] + w["b2"]
    for source in (str(path), path.read_bytes(), model):
        f = ember.onnx.load(source)
        logits, rows = f(x)
        np.testing.assert_allclose(logits.numpy(), expected, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(rows.numpy(), x.sum(1), rtol=1e-6)
        assert f.eager_reason is None
    assert f.input_names == ["x"] and f.output_names == ["logits", "rows"]
    text = str(f.graph)
    assert "matmul" in text or "linear" in text or "addmm" in text
    # named inputs, ember tensors, and the eager walk agree with the captured graph
    by_name = f(x=ember.tensor(x))[0].numpy()
    eager = f.run_eager(x)[0].numpy()
    np.testing.assert_allclose(by_name, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(eager, expected, rtol=1e-5, atol=1e-5)


def test_graph_before_any_call_uses_the_declared_shapes():
    model, _ = _mlp(np.random.default_rng(0), batch=2)
    f = ember.onnx.load(model)
    graph = f.graph
    assert any(tuple(v.type.shape) == (2, 4) for v in graph.inputs)


def test_repeated_calls_still_check_each_input_against_the_model():
    # a call like the last checked one skips the binding checks; any other is checked again
    model, w = _mlp(np.random.default_rng(0), batch=2)
    f = ember.onnx.load(model)
    x = np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)
    expected = np.maximum(x @ w["W1"] + w["b1"], 0) @ w["W2"] + w["b2"]
    for _ in range(3):
        logits, _rows = f(ember.tensor(x))
        np.testing.assert_allclose(logits.numpy(), expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(OnnxError, match="shape"):
        f(ember.tensor(np.zeros((3, 4), np.float32)))
    with pytest.raises(OnnxError, match="float64"):
        f(ember.tensor(np.zeros((2, 4), np.float64)))
    with pytest.raises(OnnxError, match="2 inputs given"):
        f(ember.tensor(x), ember.tensor(x))
    logits, _rows = f(ember.tensor(x))  # (and the fast path again after the errors)
    np.testing.assert_allclose(logits.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_the_fast_path_still_sees_new_shapes_arrays_overrides_and_parameters(monkeypatch):
    # after calls like the last engaged the fast path (no binding checks, ember.function's
    # guard, the program's outputs as they are), every change still reaches the result
    model, w = _mlp(np.random.default_rng(0))
    # W2 also a graph input: an initializer a call may give by name
    model.graph.input.append(helper.make_tensor_value_info("W2", F32, [8, 3]))
    f = ember.onnx.load(model)

    def expected(x, W2=w["W2"], b2=w["b2"]):
        return np.maximum(x.astype(np.float64) @ w["W1"] + w["b1"], 0) @ W2 + b2

    rng = np.random.default_rng(1)
    wide = rng.standard_normal((2, 8)).astype(np.float32)
    inputs = [rng.standard_normal((n, 4)).astype(np.float32) for n in (2, 2, 2, 5, 5, 2)]
    inputs += [wide[:, ::2], wide[:, 1::2]]  # (not contiguous: fed as C-ordered copies)
    results = []
    for k, x in enumerate(inputs):
        given = ember.tensor(x) if k % 2 else x  # tensors and NumPy arrays, alternating
        logits, rows = f(given)
        np.testing.assert_allclose(logits.numpy(), expected(x), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(rows.numpy(), x.sum(1), rtol=1e-5, atol=1e-6)
        results.append((x, logits))
    assert f._checked and f._function.stats.hits >= 4  # (it was engaged)
    for x, logits in results:  # each call's outputs are its own, never a later call's
        np.testing.assert_allclose(logits.numpy(), expected(x), rtol=1e-5, atol=1e-5)
    # calls alternating between signatures seen before bind and build no key again
    from ember.capture import function as function_module
    from ember.onnx import importer

    counts = {"bind": 0, "discover": 0}

    def counted(name, real):
        def call(*args, **kwargs):
            counts[name] += 1
            return real(*args, **kwargs)

        return call

    monkeypatch.setattr(importer, "_bind", counted("bind", importer._bind))
    monkeypatch.setattr(function_module, "discover", counted("discover", function_module.discover))
    traces = f._function.stats.traces
    for x in inputs[2:6] * 2:
        np.testing.assert_allclose(f(x)[0].numpy(), expected(x), rtol=1e-5, atol=1e-5)
    assert counts == {"bind": 0, "discover": 0} and f._function.stats.traces == traces
    x = inputs[0]
    with pytest.raises(OnnxError, match="float64"):
        f(x.astype(np.float64))
    with pytest.raises(OnnxError, match="shape"):
        f(np.zeros((2, 5), np.float32))
    W2 = rng.standard_normal((8, 3)).astype(np.float32)
    logits, _ = f(x, W2=W2)  # an initializer given by name
    np.testing.assert_allclose(logits.numpy(), expected(x, W2=W2), rtol=1e-5, atol=1e-5)
    for _ in range(2):  # and the model's own again
        np.testing.assert_allclose(f(x)[0].numpy(), expected(x), rtol=1e-5, atol=1e-5)

    # a trainable module under ember.function: parameters updated in place or replaced
    module = ember.onnx.load(model, trainable=True)
    fn = ember.function(lambda x: module(x)[0])
    t = ember.tensor(x)
    with ember.no_grad():
        for _ in range(3):
            np.testing.assert_allclose(fn(t).numpy(), expected(x), rtol=1e-5, atol=1e-5)
        assert fn.stats.hits >= 2
        module.W2.mul_(2.0)
        got = fn(t).numpy()
        np.testing.assert_allclose(got, expected(x, W2=2 * w["W2"]), rtol=1e-5, atol=1e-5)
        b2 = rng.standard_normal(3).astype(np.float32)
        module.b2.data = ember.tensor(b2)
        got = fn(t).numpy()
        np.testing.assert_allclose(got, expected(x, 2 * w["W2"], b2), rtol=1e-5, atol=1e-5)


def test_a_data_dependent_shape_runs_eagerly_and_says_why():
    # NonZero's count decides a Reshape's shape: no graph can hold that
    x = helper.make_tensor_value_info("x", F32, [6])
    out = helper.make_tensor_value_info("out", F32, None)
    nodes = [
        helper.make_node("NonZero", ["x"], ["nz"]),
        helper.make_node("Shape", ["nz"], ["s"]),
        helper.make_node(
            "ConstantOfShape", ["s"], ["out"], value=helper.make_tensor("v", F32, [1], [2.0])
        ),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "nz", [x], [out]), opset_imports=[helper.make_opsetid("", 17)]
    )
    f = ember.onnx.load(model)
    a = np.array([0, 1, 0, 2, 3, 0], np.float32)
    np.testing.assert_array_equal(f(a).numpy(), np.full((1, 3), 2.0, np.float32))
    assert f.eager_reason
    b = np.array([1, 1, 1, 1, 1, 0], np.float32)
    np.testing.assert_array_equal(f(b).numpy(), np.full((1, 5), 2.0, np.float32))


def test_trainable_module_fine_tunes_like_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    model, w = _mlp(rng)
    module = ember.onnx.load(model, trainable=True)
    names = dict(module.named_parameters())
    assert sorted(names) == ["W1", "W2", "b1", "b2"]
    x = rng.standard_normal((16, 4)).astype(np.float32)
    y = rng.integers(0, 3, 16)

    opt = ember.optim.SGD(module.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        logits, _ = module(x)
        loss = ember.nn.functional.cross_entropy(logits, ember.tensor(y))
        loss.backward()
        opt.step()
        losses.append(loss.item())

    tw = {k: torch.tensor(v, requires_grad=True) for k, v in w.items()}
    topt = torch.optim.SGD(tw.values(), lr=0.1, momentum=0.9)
    tlosses = []
    for _ in range(3):
        topt.zero_grad()
        logits = torch.relu(torch.tensor(x) @ tw["W1"] + tw["b1"]) @ tw["W2"] + tw["b2"]
        loss = torch.nn.functional.cross_entropy(logits, torch.tensor(y))
        loss.backward()
        topt.step()
        tlosses.append(loss.item())
    np.testing.assert_allclose(losses, tlosses, rtol=1e-5)
    for name, p in names.items():
        np.testing.assert_allclose(
            p.detach().numpy(), tw[name].detach().numpy(), rtol=1e-5, atol=1e-6
        )


def test_trainable_module_steps_capture_with_ember_function():
    rng = np.random.default_rng(0)
    model, _ = _mlp(rng)
    eager_module = ember.onnx.load(model, trainable=True)
    captured_module = ember.onnx.load(model, trainable=True)
    x = ember.tensor(rng.standard_normal((8, 4)).astype(np.float32))
    y = ember.tensor(rng.integers(0, 3, 8))

    def make_step(module):
        opt = ember.optim.Adam(module.parameters(), lr=0.01)

        def step(x, y):
            opt.zero_grad()
            loss = ember.nn.functional.cross_entropy(module(x)[0], y)
            loss.backward()
            opt.step()
            return loss

        return step

    eager_step = make_step(eager_module)
    captured_step = ember.function(make_step(captured_module))
    for _ in range(3):
        a, b = eager_step(x, y).item(), captured_step(x, y).item()
        assert abs(a - b) <= 1e-5 * max(1.0, abs(a))
    for (name, p), (_, q) in zip(
        eager_module.named_parameters(), captured_module.named_parameters()
    ):
        np.testing.assert_allclose(
            p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=name
        )


def test_an_empty_model_input_list_is_a_clear_error():
    model, _ = _mlp(np.random.default_rng(0))
    f = ember.onnx.load(model)
    with pytest.raises(OnnxError, match="'x' is missing"):
        f()


def test_the_gradient_operator_matches_pytorch_captured_and_eager():
    torch = pytest.importorskip("torch")
    a = helper.make_tensor_value_info("a", F32, [3, 4])
    b = helper.make_tensor_value_info("b", F32, [4])
    outs = [
        helper.make_tensor_value_info(n, F32, s)
        for n, s in (("y", []), ("da", [3, 4]), ("db", [4]))
    ]
    nodes = [
        helper.make_node("Mul", ["a", "b"], ["m"]),
        helper.make_node("Tanh", ["m"], ["t"]),
        helper.make_node("ReduceSum", ["t"], ["y"], keepdims=0),
        helper.make_node(
            "Gradient", ["a", "b"], ["da", "db"], xs=["a", "b"], y="y",
            domain="ai.onnx.preview.training",
        ),
    ]  # fmt: skip
    model = helper.make_model(
        helper.make_graph(nodes, "grad", [a, b], outs),
        opset_imports=[
            helper.make_opsetid("", 17),
            helper.make_opsetid("ai.onnx.preview.training", 1),
        ],
    )
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    ta, tb = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    torch.tanh(ta * tb).sum().backward()
    for capture in (True, False):
        y, da, db = ember.onnx.load(model, capture=capture)(x, w)
        np.testing.assert_allclose(da.numpy(), ta.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(db.numpy(), tb.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_batch_norm_statistics_are_buffers_of_a_trainable_module(tmp_path):
    from ember import zoo

    ember.manual_seed(0)
    net = zoo.build("resnet18", ember, **zoo.SPECS["resnet18"].test_sizes).eval()
    x = ember.randn(2, 3, 8, 8)
    path = tmp_path / "r.onnx"
    ember.onnx.export(net, path, x)
    module = ember.onnx.load(str(path), trainable=True)
    buffers = dict(module.named_buffers())
    params = dict(module.named_parameters())
    assert buffers and all("running" in name for name in buffers)
    assert not any("running" in name for name in params)
    before = {k: v.numpy().copy() for k, v in buffers.items()}
    opt = ember.optim.SGD(module.parameters(), lr=0.1)
    loss = module(x).square().mean()
    loss.backward()
    opt.step()
    for name, value in module.named_buffers():
        np.testing.assert_array_equal(value.numpy(), before[name])


@pytest.mark.parametrize("position", [-1, 2])
def test_gather_at_a_constant_position_is_basic_indexing(position):
    # (PyTorch's exports of x[:, -1] and of MHA's q/k/v split): a getitem, no gather copy
    nodes = [helper.make_node("Gather", ["x", "i"], ["y"], axis=1)]
    inits = [numpy_helper.from_array(np.array(position, np.int64), "i")]
    graph = helper.make_graph(
        nodes,
        "pick",
        [helper.make_tensor_value_info("x", F32, ["N", 4, 3])],
        [helper.make_tensor_value_info("y", F32, ["N", 3])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    f = ember.onnx.load(model)
    x = np.random.default_rng(0).standard_normal((2, 4, 3)).astype(np.float32)
    np.testing.assert_array_equal(f(x).numpy(), x[:, position])
    ops = {n.op.name for n in f.graph.nodes if n.kind == "call"}
    assert "index" not in ops and "gather" not in ops, ops
