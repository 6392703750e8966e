"""Attention as exporters write it (MatMul, Div or Mul by a constant, Add of a mask, Softmax,
MatMul, with the head split's Reshape/Transpose around) imports as one ``attention`` call
(transforms/patterns.py, ops/_attention_pattern.py), equal to onnxruntime's; each condition
the rule checks, broken once, leaves the ops as they are (still equal to onnxruntime's)."""

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

B, L, H, D = 2, 5, 2, 4


def _model(scale="div", mask="add", mask_shape=(B, 1, 1, L), axis=-1, scores_out=False, **more):
    """x (B, L, H*D) split into heads for q, k (S keys: from y) and v; scores scaled and
    masked as asked; softmax over ``axis``; the heads merged back."""
    c, S, fill, tri = (
        more.get(k, d) for k, d in (("c", 2.0), ("S", L), ("fill", -np.inf), ("tri", 0))
    )
    inits = [
        numpy_helper.from_array(np.array([B, L, H, D], np.int64), "split_q"),
        numpy_helper.from_array(np.array([B, S, H, D], np.int64), "split_k"),
        numpy_helper.from_array(np.array([-1, L, H * D], np.int64), "merge"),
        numpy_helper.from_array(np.asarray(c, np.float32), "c"),
        numpy_helper.from_array(np.asarray(fill, np.float32), "fill"),
        numpy_helper.from_array(np.tri(L, S, k=tri, dtype=bool), "tri"),
    ]
    nodes = [
        h.make_node("Reshape", ["x", "split_q"], ["q4"]),
        h.make_node("Transpose", ["q4"], ["q"], perm=[0, 2, 1, 3]),
        h.make_node("Reshape", ["y", "split_k"], ["k4"]),
        h.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),  # (B, H, D, S)
        h.make_node("Transpose", ["k4"], ["v"], perm=[0, 2, 1, 3]),
    ]
    rank = max(4, len(mask_shape))  # (a mask may broadcast the scores up)
    q = "q"
    if scale == "q":  # the scale on q, before the product
        nodes.append(h.make_node("Mul", ["q", "c"], ["qs"]))
        q = "qs"
    nodes.append(h.make_node("MatMul", [q, "kt"], ["scores"]))
    last = "scores"
    if scale in ("div", "mul"):
        nodes.append(h.make_node(scale.capitalize(), [last, "c"], ["scaled"]))
        last = "scaled"
    if mask == "add":
        nodes.append(h.make_node("Add", [last, "mask"], ["masked"]))
        last = "masked"
    elif mask in ("where", "tri"):  # a bool input, or the constant lower triangle
        nodes.append(
            h.make_node("Where", ["mask" if mask == "where" else "tri", last, "fill"], ["masked"])
        )
        last = "masked"
    nodes += [
        h.make_node("Softmax", [last], ["weights"], axis=axis),
        h.make_node("MatMul", ["weights", "v"], ["ctx"]),
        h.make_node(
            "Transpose", ["ctx"], ["ctx2"], perm=[*range(rank - 3), rank - 2, rank - 3, rank - 1]
        ),
        h.make_node("Reshape", ["ctx2", "merge"], ["out"]),
    ]
    inputs = [
        h.make_tensor_value_info("x", TP.FLOAT, [B, L, H * D]),
        h.make_tensor_value_info("y", TP.FLOAT, [B, S, H * D]),
    ]
    if mask in ("add", "where"):
        kind = TP.FLOAT if mask == "add" else TP.BOOL
        inputs.append(h.make_tensor_value_info("mask", kind, list(mask_shape)))
    outputs = [h.make_tensor_value_info("out", TP.FLOAT, None)]
    if scores_out:
        outputs.append(h.make_tensor_value_info("scores", TP.FLOAT, None))
    graph = h.make_graph(nodes, "attn", inputs, outputs, inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


def test_attention_subgraphs_import_as_one_op_where_every_condition_holds():
    rng = np.random.default_rng(0)
    cases = [  # (what is built, whether the rule applies)
        ({}, True),
        ({"scale": "mul", "c": 0.3}, True),
        ({"scale": "q", "mask": None}, True),
        ({"scale": None, "mask_shape": (1, H, L, L)}, True),
        ({"S": 3, "mask_shape": (B, 1, 1, 3)}, True),  # fewer keys than queries
        ({"mask_shape": (H, L, 1)}, True),  # fewer dimensions; one value per query row
        ({"mask_shape": (3, B, 1, 1, L)}, False),  # the add broadcasts the scores up
        ({"c": 0.0}, False),  # a division by zero: no finite scale
        ({"axis": 2}, False),  # the softmax is not over the keys
        ({"scores_out": True}, False),  # the scores are read outside the pattern
        ({"mask": "where"}, True),  # a bool mask of the kept positions
        ({"mask": "where", "fill": -1e4}, False),  # not -inf: not what the op's mask means
        ({"mask": "tri", "scale": "q"}, True),  # causal
        ({"mask": "tri", "S": 7}, True),  # causal, more keys than queries
        ({"mask": "tri", "tri": 1}, True),  # one diagonal further: a constant bool mask
    ]
    for kwargs, applies in cases:
        data = _model(**kwargs)
        S = kwargs.get("S", L)
        feeds = {
            "x": rng.standard_normal((B, L, H * D)).astype(np.float32),
            "y": rng.standard_normal((B, S, H * D)).astype(np.float32),
        }
        shape = kwargs.get("mask_shape", (B, 1, 1, S))
        if kwargs.get("mask", "add") == "add":
            feeds["mask"] = np.where(rng.random(shape) < 0.3, -1e4, 0.0).astype(np.float32)
        elif kwargs["mask"] == "where":
            feeds["mask"] = rng.random(shape) < 0.7
        session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        want = session.run(None, feeds)
        function = ember.onnx.load(data)
        got = function(*feeds.values())
        got = got if isinstance(got, tuple) else (got,)
        for g, w in zip(got, want, strict=True):
            # float32 sums of D products, the scale applied to q instead: a few ulps of 1
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-5, atol=1e-5, err_msg=str(kwargs))
        calls = [n for n in function.graph.nodes if n.kind == "call"]
        ops = {n.op.name for n in calls}
        assert ("attention" in ops) == applies, (kwargs, str(function.graph))
        assert ("softmax" in ops) != applies, (kwargs, str(function.graph))
        causal = [n.attrs["causal"] for n in calls if n.op.name == "attention"]
        assert causal == ([kwargs.get("tri", 0) == 0] if kwargs.get("mask") == "tri" else causal)
        assert not any(causal) or kwargs.get("mask") == "tri", kwargs
