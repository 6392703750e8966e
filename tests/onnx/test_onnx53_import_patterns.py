"""Import-path patterns of realistic exports, against onnxruntime: HuggingFace GPT-2's causal
attention (``where(tri, scores, finfo.min) + mask``) imports as one causal ``attention`` call;
an LSTM's initializers are reordered into PyTorch's gate order once, at import (no ``cat`` in
the captured graph); a Gather with dynamic negative indices counts them from the end without
a normalizing ``where``."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper  # noqa: E402

import ember  # noqa: E402
import ember.onnx  # noqa: E402

from ..on_demand import OnDemand  # noqa: E402

B, L, H, D = 2, 6, 2, 4
LOWEST = np.finfo(np.float32).min


def _ops(function) -> list[str]:
    return [n.op.name for n in function.graph.nodes if n.kind == "call"]


def _run_both(data: bytes, feeds: dict):
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    function = ember.onnx.load(data)
    got = function(*feeds.values())
    got = got if isinstance(got, tuple) else (got,)
    return function, [g.numpy() for g in got], want


def _gpt2_attention(keep: str, fill: float, add_mask: bool) -> bytes:
    """Heads of x attending to themselves: MatMul, Div, Where(keep, scores, fill), optionally
    Add(mask), Softmax, MatMul. ``keep``: "tri" (a constant lower triangle), "upper" (a
    constant that is not causal) or "input" (a bool graph input)."""
    kept = {"tri": np.tri(L, L, dtype=bool), "upper": np.tri(L, L, dtype=bool).T}
    inits = [
        numpy_helper.from_array(np.array([B, L, H, D], np.int64), "split"),
        numpy_helper.from_array(np.array([B, L, H * D], np.int64), "merge"),
        numpy_helper.from_array(np.asarray(np.sqrt(D), np.float32), "c"),
        numpy_helper.from_array(np.asarray(fill, np.float32), "fill"),
    ]
    if keep in kept:
        inits.append(numpy_helper.from_array(kept[keep], "keep"))
    nodes = [
        h.make_node("Reshape", ["x", "split"], ["x4"]),
        h.make_node("Transpose", ["x4"], ["q"], perm=[0, 2, 1, 3]),
        h.make_node("Transpose", ["x4"], ["kt"], perm=[0, 2, 3, 1]),
        h.make_node("MatMul", ["q", "kt"], ["scores"]),
        h.make_node("Div", ["scores", "c"], ["scaled"]),
        h.make_node("Where", ["keep", "scaled", "fill"], ["selected"]),
    ]
    last = "selected"
    if add_mask:
        nodes.append(h.make_node("Add", ["selected", "mask"], ["masked"]))
        last = "masked"
    nodes += [
        h.make_node("Softmax", [last], ["weights"], axis=-1),
        h.make_node("MatMul", ["weights", "q"], ["ctx"]),
        h.make_node("Transpose", ["ctx"], ["ctx2"], perm=[0, 2, 1, 3]),
        h.make_node("Reshape", ["ctx2", "merge"], ["out"]),
    ]
    inputs = [h.make_tensor_value_info("x", TP.FLOAT, [B, L, H * D])]
    if add_mask:
        inputs.append(h.make_tensor_value_info("mask", TP.FLOAT, [B, 1, 1, L]))
    if keep == "input":
        inputs.append(h.make_tensor_value_info("keep", TP.BOOL, [B, 1, L, L]))
    graph = h.make_graph(
        nodes, "gpt2", inputs, [h.make_tensor_value_info("out", TP.FLOAT, None)], inits
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize(
    "keep, fill, add_mask, causal",
    [
        ("tri", LOWEST, True, True),  # HuggingFace GPT-2's
        ("tri", LOWEST, False, True),
        ("tri", -np.inf, True, True),
        ("upper", LOWEST, False, None),  # a finite fill needs every row to keep a key
        ("upper", -np.inf, True, None),  # two masks: the op takes one
        ("input", LOWEST, False, None),
        ("input", -np.inf, False, False),  # a bool mask of the kept positions
        ("tri", -1e4, True, None),  # not far enough below: the masked keys still weigh
    ],
)
def test_causal_where_then_mask_is_one_attention_call(keep, fill, add_mask, causal):
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((B, L, H * D)).astype(np.float32)}
    if add_mask:  # HuggingFace's padding mask: finfo.min where a key is padding
        feeds["mask"] = np.zeros((B, 1, 1, L), np.float32)
        feeds["mask"][1, ..., -2:] = LOWEST
    if keep == "input":
        feeds["keep"] = rng.random((B, 1, L, L)) < 0.7
        feeds["keep"][..., 0] = True
    function, got, want = _run_both(_gpt2_attention(keep, fill, add_mask), feeds)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    calls = [n for n in function.graph.nodes if n.kind == "call" and n.op.name == "attention"]
    if causal is None:
        assert not calls and "softmax" in _ops(function), str(function.graph)
    else:
        assert [n.attrs["causal"] for n in calls] == [causal], str(function.graph)


def _lstm_model(direction: str, with_bias: bool) -> tuple[bytes, dict]:
    rng = np.random.default_rng(1)
    # R (4 * hidden, hidden) larger than what constant folding folds (1 << 16 elements)
    dirs, hidden, size, steps = (2 if direction == "bidirectional" else 1), 130, 3, 4
    w = rng.standard_normal((dirs, 4 * hidden, size)).astype(np.float32)
    r = (rng.standard_normal((dirs, 4 * hidden, hidden)) * 0.1).astype(np.float32)
    b = rng.standard_normal((dirs, 8 * hidden)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(r, "R")]
    names = ["X", "W", "R"]
    if with_bias:
        inits.append(numpy_helper.from_array(b, "B"))
        names.append("B")
    node = h.make_node("LSTM", names, ["Y", "Y_h", "Y_c"], hidden_size=hidden, direction=direction)
    graph = h.make_graph(
        [node],
        "lstm",
        [h.make_tensor_value_info("X", TP.FLOAT, [steps, 2, size])],
        [h.make_tensor_value_info(n, TP.FLOAT, None) for n in ("Y", "Y_h", "Y_c")],
        inits,
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 14)])
    return model.SerializeToString(), {
        "X": rng.standard_normal((steps, 2, size)).astype(np.float32)
    }


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("with_bias", [True, False])
def test_lstm_initializers_are_reordered_at_import(direction, with_bias):
    data, feeds = _lstm_model(direction, with_bias)
    function, got, want = _run_both(data, feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert _ops(function).count("lstm_layer") == (2 if direction == "bidirectional" else 1)
    # (a bidirectional layer's outputs are concatenated; its weights are not, on every call)
    weights = [
        n
        for n in function.graph.nodes
        if n.kind == "call" and n.op.name == "concat" and n.outputs[0].shape[0] == 4 * 130
    ]
    assert not weights, str(function.graph)
    # trainable: the initializers are parameters, reordered in the graph (and differentiable)
    module = ember.onnx.load(data, trainable=True)
    out = module(ember.tensor(feeds["X"]))[0]
    np.testing.assert_allclose(out.detach().numpy(), want[0], rtol=1e-5, atol=1e-6)
    out.sum().backward()
    assert all(p.grad is not None for p in module.parameters())


def test_gather_with_dynamic_negative_indices():
    data = np.arange(20, dtype=np.float32).reshape(4, 5)
    graph = h.make_graph(
        [h.make_node("Gather", ["data", "i"], ["out"], axis=1)],
        "gather",
        [
            h.make_tensor_value_info("data", TP.FLOAT, [4, 5]),
            h.make_tensor_value_info("i", TP.INT32, [2, 3]),
        ],
        [h.make_tensor_value_info("out", TP.FLOAT, None)],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]).SerializeToString()
    i = np.array([[-1, 0, 4], [-5, 2, -3]], np.int32)
    function, got, want = _run_both(model, {"data": data, "i": i})
    np.testing.assert_array_equal(got[0], want[0])
    assert "where" not in _ops(function)
    with pytest.raises(ember.EmberError, match="out of bounds"):
        function(data, np.array([[5, 0, 0], [0, 0, 0]], np.int32))


@pytest.fixture(scope="module")
def sdpa_files(tmp_path_factory):
    """scaled_dot_product_attention with a bool mask that masks one query row from every key,
    exported both ways (PyTorch writes where(isnan(w), 0, w) after the softmax)."""
    torch = pytest.importorskip("torch")
    import warnings

    class Sdpa(torch.nn.Module):
        def forward(self, q, k, v, keep):
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)

    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((2, 3, 6, 4)).astype(np.float32) for _ in range(3)]
    keep = rng.random((2, 1, 6, 6)) < 0.6
    keep[0, 0, 2] = False  # (a row every key is masked from: where(isnan)'s zeros)
    keep[1, 0, :, 0] = True
    arrays.append(keep)
    folder = tmp_path_factory.mktemp("sdpa53")

    def made(dynamo: bool) -> bytes:  # (each export at its first test: tests/on_demand.py)
        path = folder / f"sdpa_{int(dynamo)}.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            example = tuple(torch.tensor(a) for a in arrays)
            opset = 18 if dynamo else 17
            torch.onnx.export(Sdpa(), example, str(path), dynamo=dynamo, opset_version=opset)
        return path.read_bytes()

    return OnDemand(made), arrays


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


@pytest.mark.parametrize("dynamo", [True, False])
def test_bool_masked_sdpa_is_one_safe_attention_call(sdpa_files, dynamo):
    files, arrays = sdpa_files
    if dynamo and not _has("onnxscript"):
        pytest.skip("torch.onnx.export(dynamo=True) needs onnxscript")
    session = ort.InferenceSession(files[dynamo], providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    want = session.run(None, dict(zip(names, arrays)))[0]
    function = ember.onnx.load(files[dynamo])
    got = function(*arrays).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    calls = [n for n in function.graph.nodes if n.kind == "call" and n.op.name == "attention"]
    assert [n.attrs["safe"] for n in calls] == [True], str(function.graph)
    assert "isnan" not in _ops(function)


def _ember_rnn_file(bidirectional: bool, kind: str = "LSTM") -> tuple[bytes, np.ndarray]:
    """An ember LSTM, GRU or Elman RNN ("RNN-relu": with ReLU) of two layers exported by ember:
    each layer and direction a Scan whose body is one step (ops/recurrent.py's and
    ops/recurrent_elman.py's ONNX rules)."""
    import tempfile
    from pathlib import Path

    ember.manual_seed(0)
    options = {"nonlinearity": "relu"} if kind == "RNN-relu" else {}
    layer = getattr(ember.nn, kind.split("-")[0])
    model = layer(3, 5, num_layers=2, bidirectional=bidirectional, **options).eval()
    x = np.random.default_rng(3).standard_normal((7, 2, 3)).astype(np.float32)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "lstm.onnx"
        ember.onnx.export(lambda t: model(t)[0], str(path), ember.tensor(x))
        return path.read_bytes(), x


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN", "RNN-relu"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_ember_exported_rnn_scan_imports_as_the_whole_layer_op(bidirectional, kind):
    data, x = _ember_rnn_file(bidirectional, kind)
    assert b"Scan" in data
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    want = session.run(None, {session.get_inputs()[0].name: x})[0]
    function = ember.onnx.load(data)
    np.testing.assert_allclose(function(x).numpy(), want, rtol=1e-5, atol=1e-6)
    ops = _ops(function)
    layer = f"{kind.split('-')[0].lower()}_layer"
    assert ops.count(layer) == (4 if bidirectional else 2) and "scan" not in ops, ops
    module = ember.onnx.load(data, trainable=True)  # (the op's gradient reaches the weights)
    out = module(ember.tensor(x))
    np.testing.assert_allclose(out.detach().numpy(), want, rtol=1e-5, atol=1e-6)
    out.square().sum().backward()
    assert all(p.grad is not None for p in module.parameters())


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_a_scan_body_that_is_not_the_step_stays_a_scan(kind):
    data, x = _ember_rnn_file(False, kind)
    model = onnx.load_from_string(data)
    scan = next(n for n in model.graph.node if n.op_type == "Scan")
    body = next(a.g for a in scan.attribute if a.name == "body")
    tanh = next(n for n in body.node if n.op_type == "Tanh")
    tanh.op_type = "Relu"  # (the candidate's activation)
    data = model.SerializeToString()
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    want = session.run(None, {session.get_inputs()[0].name: x})[0]
    function = ember.onnx.load(data)
    np.testing.assert_allclose(function(x).numpy(), want, rtol=1e-5, atol=1e-6)
    # (the other layer's body is the step; this one runs as a scan, which may be unrolled)
    assert _ops(function).count(f"{kind.lower()}_layer") == 1
