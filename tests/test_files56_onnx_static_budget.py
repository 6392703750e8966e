"""ONNX models whose constant-only nodes, folded while importing, keep more than a model can
need (onnx/_static_budget.py): each value within the machine's memory, as `check_size` holds
it, but forty of them kept at once by one run. A 900-byte model of eight ``ConstantOfShape``
nodes of a gigabyte kept eight gigabytes before; it is now refused naming the node. Values a
Loop body folds are counted per iteration (its values are dropped after each), and folded
copies of a model's own weights (a dequantized int8 weight) stay within the allowance.

The floor is lowered to 1 MB here so the cases stay small.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import ember
from ember.errors import OnnxError
from ember.onnx import _static_budget

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

FLOOR = 1 << 20


@pytest.fixture(autouse=True)
def small_floor(monkeypatch):
    monkeypatch.setattr(_static_budget, "FLOOR", FLOOR)


def _model(nodes, outputs, initializers=(), opset=17):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    nodes = [*nodes, helper.make_node("Sum", ["x", *outputs], ["out"])]
    y = helper.make_tensor_value_info("out", TensorProto.FLOAT, [1])
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _constants_of_shape(count: int, elements: int) -> bytes:
    shape = numpy_helper.from_array(np.array([elements], np.int64))
    nodes = [helper.make_node("Constant", [], ["shape"], value=shape)]
    for i in range(count):
        one = numpy_helper.from_array(np.array([i + 1.0], np.float32))
        nodes.append(helper.make_node("ConstantOfShape", ["shape"], [f"c{i}"], value=one))
        nodes.append(helper.make_node("ReduceSum", [f"c{i}"], [f"s{i}"], keepdims=0))
    return _model(nodes, [f"s{i}" for i in range(count)])


def _run(data: bytes):
    return ember.onnx.load(data)(ember.zeros(1)).numpy()


def test_many_large_folded_constants_are_refused_naming_the_node():
    elements = 1 << 16  # 256 kB each
    assert _run(_constants_of_shape(2, elements))[0] == 3 * elements  # within the floor
    with pytest.raises(OnnxError, match=r"ConstantOfShape.*damaged or hostile"):
        _run(_constants_of_shape(8, elements))  # 2 MB kept at once


def test_expand_and_tile_of_one_scalar_are_counted_too():
    one = numpy_helper.from_array(np.ones(1, np.float32), "one")
    size = numpy_helper.from_array(np.array([1 << 16], np.int64), "size")
    nodes, outputs = [], []
    for i in range(6):
        kind = "Expand" if i % 2 else "Tile"
        nodes.append(helper.make_node(kind, ["one", "size"], [f"e{i}"]))
        nodes.append(helper.make_node("ReduceSum", [f"e{i}"], [f"s{i}"], keepdims=0))
        outputs.append(f"s{i}")
    with pytest.raises(OnnxError, match="damaged or hostile"):
        _run(_model(nodes, outputs, [one, size]))


def test_a_loop_body_folds_within_the_allowance_each_iteration():
    """Each iteration folds 512 kB in its body and drops it: forty iterations are fine."""
    shape = numpy_helper.from_array(np.array([1 << 17], np.int64))
    body = helper.make_graph(
        [
            helper.make_node("Constant", [], ["shape"], value=shape),
            helper.make_node("ConstantOfShape", ["shape"], ["big"]),
            helper.make_node("ReduceSum", ["big"], ["part"], keepdims=0),
            helper.make_node("Add", ["acc", "part"], ["acc_out"]),
            helper.make_node("Identity", ["cond"], ["cond_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc", TensorProto.FLOAT, []),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, []),
        ],
    )
    trips = numpy_helper.from_array(np.array(40, np.int64), "trips")
    start = numpy_helper.from_array(np.array(0.0, np.float32), "start")
    loop = helper.make_node("Loop", ["trips", "", "start"], ["total"], body=body)
    assert _run(_model([loop], ["total"], [trips, start]))[0] == 0.0


def test_folded_copies_of_the_weights_stay_within_the_allowance():
    """An int8 weight of 1 MB dequantized (4 MB) and transposed (4 MB) while importing: within
    eight times the weights' bytes above the floor."""
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.integers(-8, 8, (1024, 1024), dtype=np.int8), "w")
    scale = numpy_helper.from_array(np.array(0.5, np.float32), "scale")
    nodes = [
        helper.make_node("DequantizeLinear", ["w", "scale"], ["wf"]),
        helper.make_node("Transpose", ["wf"], ["wt"]),
        helper.make_node("ReduceSum", ["wt"], ["s"], keepdims=0),
    ]
    expected = 0.5 * numpy_helper.to_array(weight).astype(np.float32).sum()
    assert _run(_model(nodes, ["s"], [weight, scale]))[0] == pytest.approx(expected)


def test_seeded_counts_are_refused_past_the_floor_only():
    rng = random.Random(56)
    for _ in range(6):
        count, elements = rng.choice([1, 2, 3, 6]), rng.choice([1 << 12, 1 << 15, 1 << 16])
        kept = count * elements * 4
        data = _constants_of_shape(count, elements)
        if kept > FLOOR + 1024:
            with pytest.raises(OnnxError, match="damaged or hostile"):
                _run(data)
        elif kept < FLOOR - 1024:
            total = sum(range(1, count + 1)) * elements
            assert _run(data)[0] == total
