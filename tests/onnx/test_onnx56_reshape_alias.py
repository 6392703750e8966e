"""A reshape in the C graph runner copies nothing (runtime/cgraph_memory.py `_same_bytes`,
``CStep.same_bytes``): its output shares its input's arena bytes, which live on for both
values' readers, so a later loop writing over a dying operand never takes them while either is
still read. Random branching graphs with reshapes, on one and two threads under any claiming
order, give generated code's bits; imported Flatten/Reshape patterns match onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.kernels import ccompile
from ember.runtime import cgraph
from ember.runtime.codegen import compile_graph

needs_c = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


@needs_c
def test_a_reshape_shares_its_inputs_bytes():
    def program(x):
        y = ember.relu(x * 2.0)
        z = ember.reshape(y, (6, 20))  # (y is read again below: both must stay)
        return ember.tanh(z + 1.0), ember.sum(y * 3.0)

    x = np.random.default_rng(0).standard_normal((4, 30)).astype(np.float32)
    graph = ember.trace(program, ember.tensor(x)).graph
    steps = cgraph.c_steps(graph)
    assert steps is not None, str(graph)
    run = cgraph.CGraphProgram(graph, steps, None, 1)
    calls = [n for n in graph.nodes if n.kind == "call"]
    reshape = next(i for i, n in enumerate(calls) if n.op.name == "reshape")
    node = calls[reshape]
    arrays = run._arena.arrays
    assert arrays[id(node.outputs[0])].ctypes.data == arrays[id(node.inputs[0])].ctypes.data
    for got, want in zip(run(x), compile_graph(graph)(x)):
        assert np.array_equal(got, want)


@needs_c
def test_a_loop_never_writes_over_a_reshape_still_read():
    """y's last reader in the graph is a loop that may write over a dying operand, but y's
    bytes are also the reshape z's, read after it: the loop must take other memory."""

    def program(x, w1, w2):
        y = ember.matmul(x, w1)  # (a product: no loop to fuse the readers into)
        z = ember.reshape(y, (6, 20))
        w = ember.tanh(y + 1.0)  # (y's last reader: a loop that may write over it)
        w = ember.matmul(w, w2)
        return ember.matmul(ember.reshape(z * 3.0, (4, 30)), w2) + w

    rng = np.random.default_rng(1)
    shapes = ((4, 30), (30, 30), (30, 5))
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    graph = ember.trace(program, *map(ember.tensor, arrays)).graph
    steps = cgraph.c_steps(graph)
    assert steps is not None, str(graph)
    want = compile_graph(graph)(*arrays)
    for threads in (1, 2):
        run = cgraph.CGraphProgram(graph, cgraph.c_steps(graph), None, threads)
        for got, w in zip(run(*arrays), want):
            assert np.array_equal(got, w)


@needs_c
@pytest.mark.parametrize("seed", range(6))
def test_random_graphs_with_reshapes_give_generated_codes_bits(seed):
    rng = np.random.default_rng(560 + seed)
    shapes = [(24,), (4, 6), (2, 3, 4), (6, 4)]
    ops = [ember.add, ember.mul, ember.sub, ember.maximum]

    def program(*xs):
        values = list(xs)
        for _ in range(int(rng.integers(8, 24))):
            a, b = (values[int(i)] for i in rng.choice(len(values), 2))
            if rng.integers(0, 3) == 0:  # a reshape of one value, read beside it later
                values.append(ember.reshape(a, shapes[int(rng.integers(len(shapes)))]))
                continue
            b = ember.reshape(b, a.shape)
            values.append(ember.reshape(ops[int(rng.integers(len(ops)))](a, b) * 0.5, (24,)))
        picks = rng.choice(len(values) - 3, 2, replace=False) + 3
        return [values[int(i)] for i in picks]

    arrays = [rng.standard_normal((24,)).astype(np.float32) for _ in range(3)]
    graph = ember.trace(program, *[ember.tensor(a) for a in arrays]).graph
    steps = cgraph.c_steps(graph)
    assert steps is not None, str(graph)
    want = compile_graph(graph)(*arrays)
    calls = [i for i, n in enumerate(graph.nodes) if n.kind == "call"]
    for threads in (1, 2):
        for priority in (None, calls[::-1]):
            run = cgraph.CGraphProgram(graph, cgraph.c_steps(graph), priority, threads)
            for _ in range(3):
                assert all(np.array_equal(g, w) for g, w in zip(run(*arrays), want))


def test_imported_flatten_and_reshape_match_onnxruntime():
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    h = onnx.helper
    shape = onnx.numpy_helper.from_array(np.array([2, -1], np.int64), "shape")
    nodes = [
        h.make_node("Relu", ["x"], ["r"]),
        h.make_node("Flatten", ["r"], ["f"], axis=1),
        h.make_node("Reshape", ["r", "shape"], ["s"]),
        h.make_node("Sigmoid", ["f"], ["a"]),
        h.make_node("Tanh", ["s"], ["b"]),
        h.make_node("Add", ["a", "b"], ["y"]),
    ]
    graph = h.make_graph(
        nodes,
        "reshapes",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3, 5, 7])],
        [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        initializer=[shape],
    )
    data = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
    x = np.random.default_rng(3).standard_normal((2, 3, 5, 7)).astype(np.float32)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    want = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )[0]
    got = ember.onnx.load(data)(ember.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
