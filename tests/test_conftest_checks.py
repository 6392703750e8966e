"""The suite-wide executor checks of tests/conftest.py: an integer output that a graph rounded
from floats it computed may differ by one unit between executors (fused C loops compute floats
within rounding of NumPy's), while integers computed from integers stay bit-exact."""

import numpy as np
import pytest

from ember import dtypes as dt
from ember.graph import Graph
from ember.ops._registry import REGISTRY
from ember.types import TensorType

from .conftest import _assert_same, _rounded_from_float


def _graph(in_dtype, *steps):
    g = Graph()
    v = g.add_input(TensorType((4,), in_dtype))
    for name, attrs in steps:
        v = g.add_call(REGISTRY[name], [v], attrs).outputs[0]
    g.set_outputs([v])
    return g


def test_an_integer_rounded_from_a_computed_float_is_within_one_unit():
    g = _graph(dt.float32, ("exp", {}), ("round", {}), ("cast", {"dtype": dt.uint8}))
    rounded = lambda: _rounded_from_float(g.outputs[0])  # noqa: E731
    assert rounded()
    want = np.array([3, 7, 0, 255], np.uint8)
    _assert_same(want + np.array([1, 0, 0, 0], np.uint8), want, True, "m", rounded=rounded)
    with pytest.raises(AssertionError):  # two units
        _assert_same(want + np.array([2, 0, 0, 0], np.uint8), want, True, "m", rounded=rounded)
    with pytest.raises(AssertionError):  # without fused C code, the executors agree exactly
        _assert_same(want + np.array([1, 0, 0, 0], np.uint8), want, False, "m", rounded=rounded)


def test_integers_from_integers_or_from_given_floats_stay_exact():
    ints = _graph(dt.int32, ("neg", {}), ("abs", {}))
    given = _graph(dt.float32, ("cast", {"dtype": dt.int32}), ("neg", {}))
    for g in (ints, given):
        rounded = lambda g=g: _rounded_from_float(g.outputs[0])  # noqa: E731
        assert not rounded()
        want = np.array([3, 7, 0, 9], np.int32)
        with pytest.raises(AssertionError):
            _assert_same(want + np.array([1, 0, 0, 0], np.int32), want, True, "m", rounded=rounded)


def test_quantized_softmax_of_a_pool_without_output_zero_point():
    """The long ONNX fuzz's case (tests/onnx/fuzzing.py): QLinearAveragePool with its output
    zero point left out feeds QLinearSoftmax, whose fused float sum (C, another order than
    NumPy's) puts one quotient at .5 on the other side: generated code and the interpreter
    give 132 and 133."""
    onnx = pytest.importorskip("onnx")
    from tests.onnx import fuzzing

    model = onnx.load_from_string(fuzzing.seeds()[-1])
    pool = next(n for n in model.graph.node if n.op_type == "QLinearAveragePool")
    pool.input[4] = ""
    assert fuzzing.check(model.SerializeToString()) is None
