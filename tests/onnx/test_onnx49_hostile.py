"""Malformed nodes are refused naming the node and the field, as onnxruntime refuses them."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

import ember  # noqa: E402
from ember.errors import OnnxError  # noqa: E402


def _leaky_relu(*alphas):
    node = helper.make_node("LeakyRelu", ["x"], ["y"], name="leaky", alpha=alphas[0])
    for alpha in alphas[1:]:
        node.attribute.add().CopyFrom(helper.make_attribute("alpha", alpha))
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_an_attribute_given_twice_is_refused_naming_node_and_attribute():
    x = np.array([-2.0, 0.0, 3.0], np.float32)
    np.testing.assert_allclose(ember.onnx.load(_leaky_relu(0.5))(x).numpy(), [-1.0, 0.0, 3.0])
    with pytest.raises(OnnxError, match=r"leaky.*attribute 'alpha' appears twice"):
        ember.onnx.load(_leaky_relu(0.1, 0.5))
    ort = pytest.importorskip("onnxruntime")
    with pytest.raises(Exception, match="appeared multiple times"):
        ort.InferenceSession(_leaky_relu(0.1, 0.5).SerializeToString())
