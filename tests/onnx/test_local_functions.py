"""Models with local functions (``ModelProto.functions``, ONNX IR 8): a node whose domain and
op type name one of the model's FunctionProtos runs the function's body, its attributes bound
(a reference ``ref_attr_name``, or the function's default), nested calls too. PyTorch's
``export_modules_as_functions`` writes such files. Each against onnxruntime; a function that
calls itself is refused."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as h  # noqa: E402

import ember  # noqa: E402
from ember.errors import OnnxError  # noqa: E402

RNG = np.random.default_rng(0)
ALPHA = {"alpha": 0.5}


def _model(recursive: bool = False):
    # scaled_act(x; alpha) = LeakyRelu(x, alpha) * 2, alpha a reference with a default
    leaky = h.make_node("LeakyRelu", ["x"], ["l"])
    leaky.attribute.append(h.make_attribute_ref("alpha", TP.FLOAT and onnx.AttributeProto.FLOAT))
    inner = h.make_function(
        "local", "ScaledAct", ["x"], ["y"],
        [leaky, h.make_node("Add", ["l", "l"], ["y"])],
        [h.make_opsetid("", 17)], attributes=[],
    )  # fmt: skip
    inner.attribute_proto.append(h.make_attribute("alpha", 0.1))
    callee = "Block" if recursive else "ScaledAct"
    outer = h.make_function(
        "local", "Block", ["a", "b"], ["out"],
        [
            h.make_node("MatMul", ["a", "b"], ["m"]),
            h.make_node(callee, ["m"], ["out"], domain="local", **({} if recursive else ALPHA)),
        ],
        [h.make_opsetid("", 17), h.make_opsetid("local", 1)],
    )  # fmt: skip
    graph = h.make_graph(
        [
            h.make_node("Block", ["x", "w"], ["h"], domain="local"),
            h.make_node("ScaledAct", ["h"], ["out"], domain="local"),  # alpha's default
        ],
        "functions",
        [h.make_tensor_value_info("x", TP.FLOAT, ["n", 4]),
         h.make_tensor_value_info("w", TP.FLOAT, [4, 3])],
        [h.make_tensor_value_info("out", TP.FLOAT, ["n", 3])],
    )  # fmt: skip
    return h.make_model(
        graph,
        opset_imports=[h.make_opsetid("", 17), h.make_opsetid("local", 1)],
        functions=[inner, outer],
    )


def test_local_functions_with_attribute_references_and_defaults():
    model = _model()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    f = ember.onnx.load(model)
    for n in (2, 5):
        feeds = {
            "x": RNG.standard_normal((n, 4)).astype(np.float32),
            "w": RNG.standard_normal((4, 3)).astype(np.float32),
        }
        (want,) = session.run(None, feeds)
        np.testing.assert_allclose(f(*feeds.values()).numpy(), want, rtol=1e-6, atol=1e-6)
    assert f.eager_reason is None


def test_a_function_that_calls_itself_is_refused():
    with pytest.raises(OnnxError, match="calls itself"):
        ember.onnx.load(_model(recursive=True))


def test_pytorch_export_modules_as_functions():
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.norm = nn.Linear(6, 6), nn.LayerNorm(6)

        def forward(self, x):
            return x + torch.relu(self.fc(self.norm(x)))

    model = nn.Sequential(Block(), Block(), nn.Linear(6, 2)).eval()
    x = torch.randn(3, 6)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, (x,), buf, opset_version=17, dynamo=False, input_names=["x"],
            dynamic_axes={"x": {0: "n"}}, export_modules_as_functions=True,
        )  # fmt: skip
    assert onnx.load_from_string(buf.getvalue()).functions  # (what this test is about)
    f = ember.onnx.load(buf.getvalue())
    for n in (3, 7):
        xb = torch.randn(n, 6)
        with torch.no_grad():
            want = model(xb).numpy()
        np.testing.assert_allclose(f(xb.numpy()).numpy(), want, rtol=1e-5, atol=1e-6)
