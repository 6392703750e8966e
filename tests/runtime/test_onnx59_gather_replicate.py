"""The C gather step's replicating loop (kernels/cgather.py): indices 0, .., 0, 1, .., 1, ...
(each source unit ``rep`` times in a row: a nearest upsampling by a whole factor along the last
axis) are written by a loop over the sources, 4- and 8-byte units, int32 and int64 indices.
It gives np.take's values (the NumPy specification, and generated code); indices that break
the pattern anywhere, a negative one, or another unit size take the general loop with the same
results; an imported nearest Resize agrees with onnxruntime exactly. Without a compiler the C
tests are skipped (there is no step) and the Resize test runs the NumPy kernels."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.kernels import ccompile
from ember.runtime import cgraph
from ember.runtime.codegen import compile_graph

needs_c = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _run_step(x, idx, axis):
    graph = ember.trace(lambda t, i: ember.index_select(t, axis, i), *map(ember.tensor, (x, idx)))
    graph = graph.graph
    steps = cgraph.c_steps(graph)
    assert steps is not None, str(graph)
    got = cgraph.CGraphProgram(graph, steps, None, 1)(x, idx)[0]
    generated = np.asarray(compile_graph(graph)(x, idx)[0])
    assert np.array_equal(got.view(np.uint8), generated.view(np.uint8))
    return got


def _replicating(n, rep):
    return np.arange(n * rep) // rep


@needs_c
@pytest.mark.parametrize("rep", [2, 3, 4])
@pytest.mark.parametrize("idx_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("x_dtype", [np.float32, np.float64, np.int32, np.float16])
def test_a_replicating_gather_is_np_take(rep, idx_dtype, x_dtype):
    rng = np.random.default_rng(rep)
    x = rng.standard_normal((3, 5, 7)).astype(x_dtype)
    x.reshape(-1)[:3] = [np.nan, np.inf, -0.0] if x.dtype.kind == "f" else 0
    for axis in (2, 1):  # (the last axis: units; the middle one: runs of a row)
        idx = _replicating(x.shape[axis], rep).astype(idx_dtype)
        got = _run_step(x, idx, axis)
        want = np.take(x, idx, axis=axis)
        assert got.dtype == want.dtype and np.array_equal(got.view(np.uint8), want.view(np.uint8))


@needs_c
@pytest.mark.parametrize(
    "idx",
    [
        np.array([0, 0, 1, 1, 2, 3, 3, 3]),  # broken in the middle
        np.array([0, 0, 1, 1, 2, 2, 3, 2]),  # broken at the end
        np.array([0, 0, 1, 1, 2, 2, 3, -1]),  # the last one negative (the general loop's)
        np.array([1, 1, 0, 0, 3, 3, 2, 2]),  # a permutation of the pattern's pairs
    ],
)
def test_indices_off_the_pattern_take_the_general_loop(idx):
    x = np.arange(12, dtype=np.float32).reshape(3, 4) * 1.5
    got = _run_step(x, idx.astype(np.int64), 1)
    assert np.array_equal(got, np.take(x, idx, axis=1))


@pytest.mark.parametrize("scales", [(1, 1, 2, 2), (1, 1, 3, 2), (1, 2, 4, 4)])
@pytest.mark.parametrize("batch", [1, 3])
def test_an_imported_nearest_resize_is_onnxruntimes(scales, batch):
    ort = pytest.importorskip("onnxruntime")
    onnx = pytest.importorskip("onnx")
    helper, TensorProto = onnx.helper, onnx.TensorProto
    shape = [batch, 4, 6, 5]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    init = helper.make_tensor("scales", TensorProto.FLOAT, [4], [float(s) for s in scales])
    node = helper.make_node(
        "Resize",
        ["x", "", "scales"],
        ["y"],
        mode="nearest",
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    )
    graph = helper.make_graph([node], "resize", [x], [y], initializer=[init])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    data = model.SerializeToString()
    a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    a.reshape(-1)[:2] = [np.nan, -np.inf]
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": a})[0]
    f = ember.onnx.load(data)
    for _ in range(2):  # (the first call captures; the second runs the chosen executor)
        got = f(ember.tensor(a))
        got = (got[0] if isinstance(got, tuple) else got).numpy()
        assert got.shape == want.shape
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
