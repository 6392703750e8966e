"""Layer normalization written out (ONNX before opset 17: ReduceMean, Sub, Pow or Mul,
ReduceMean, Add eps, Sqrt, Div, then Mul weight and Add bias) imports as one ``layer_norm``
call (ops/_layer_norm_pattern.py), equal to onnxruntime's; each condition the rule checks,
broken once, leaves the ops as they are (still equal to onnxruntime's)."""

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

SHAPE = (2, 3, 8)


def _model(
    axes=(-1,),
    square="pow",
    affine="both",
    eps=1e-5,
    eps_input=False,
    other_axes=None,
    centered_out=False,
    opset=13,
):
    """x normalized over ``axes`` (the variance's mean over ``other_axes`` where given);
    ``square``: "pow" or "mul"; ``affine``: "both", "bias" (no weight), "none"."""
    trailing = SHAPE[len(SHAPE) - len(axes) :]  # (the weight of the trailing axes)
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(np.asarray(2.0, np.float32), "two"),
        numpy_helper.from_array(rng.standard_normal(trailing).astype(np.float32), "weight"),
        numpy_helper.from_array(rng.standard_normal(trailing).astype(np.float32), "bias"),
    ]
    if not eps_input:
        inits.append(numpy_helper.from_array(np.asarray(eps, np.float32), "eps"))
    var_axes = list(other_axes or axes)
    nodes = [
        h.make_node("ReduceMean", ["x"], ["mean"], axes=list(axes), keepdims=1),
        h.make_node("Sub", ["x", "mean"], ["d"]),
        h.make_node("Pow", ["d", "two"], ["sq"])
        if square == "pow"
        else h.make_node("Mul", ["d", "d"], ["sq"]),
        h.make_node("ReduceMean", ["sq"], ["var"], axes=var_axes, keepdims=1),
        h.make_node("Add", ["var", "eps"], ["ve"]),
        h.make_node("Sqrt", ["ve"], ["std"]),
        h.make_node("Div", ["d", "std"], ["n"]),
    ]
    last = "n"
    if affine == "both":
        nodes.append(h.make_node("Mul", ["n", "weight"], ["scaled"]))
        last = "scaled"
    if affine in ("both", "bias"):
        nodes.append(h.make_node("Add", [last, "bias"], ["y"]))
        last = "y"
    inputs = [h.make_tensor_value_info("x", TP.FLOAT, list(SHAPE))]
    if eps_input:
        inputs.append(h.make_tensor_value_info("eps", TP.FLOAT, []))
    outputs = [h.make_tensor_value_info(last, TP.FLOAT, None)]
    if centered_out:
        outputs.append(h.make_tensor_value_info("d", TP.FLOAT, None))
    graph = h.make_graph(nodes, "ln", inputs, outputs, inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)]).SerializeToString()


CASES = [  # (what is built, whether the rule applies)
    ({}, True),
    ({"square": "mul"}, True),
    ({"affine": "bias"}, True),
    ({"affine": "none"}, True),
    ({"axes": (-2, -1)}, True),  # the two trailing axes
    ({"axes": (1, 2), "eps": 0.0}, True),
    ({"axes": (1,)}, False),  # not the trailing axes
    ({"other_axes": (1, 2)}, False),  # the variance over other axes than the mean
    ({"eps_input": True}, False),  # eps is not a constant
    ({"eps": -1e-3}, False),  # a negative eps
    ({"centered_out": True}, False),  # x - mean is read outside the pattern
]


@pytest.mark.parametrize("kwargs, applies", CASES)
def test_written_out_layer_norm_is_one_op_where_every_condition_holds(kwargs, applies):
    data = _model(**kwargs)
    rng = np.random.default_rng(1)
    feeds = {"x": (rng.standard_normal(SHAPE) * 3 + 1).astype(np.float32)}
    if kwargs.get("eps_input"):
        feeds["eps"] = np.asarray(1e-5, np.float32)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    want = session.run(None, feeds)
    function = ember.onnx.load(data)
    got = function(*feeds.values())
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-5, err_msg=str(kwargs))
    ops = [n.op.name for n in function.graph.nodes if n.kind == "call"]
    assert ("layer_norm" in ops) == applies, (kwargs, str(function.graph))
    if applies:  # (the affine step and the reductions are the op's)
        assert ops == ["layer_norm"], (kwargs, str(function.graph))


def test_trainable_written_out_layer_norm_follows_onnxruntime_and_trains():
    """A trainable import keeps weight and bias as parameters: the graph the optimizer sees
    (captured) has one layer_norm and the gradient reaches both."""
    data = _model()
    module = ember.onnx.load(data, trainable=True)
    x = ember.tensor(np.random.default_rng(2).standard_normal(SHAPE).astype(np.float32))
    step = ember.function(lambda x: module(x).square().sum())
    loss = step(x)
    loss.backward()
    grads = {n: p.grad for n, p in module.named_parameters()}
    assert set(grads) >= {"weight", "bias"} and all(g is not None for g in grads.values())
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x.numpy()})[0]
    np.testing.assert_allclose(float(loss), float(np.square(want).sum()), rtol=1e-5)
