"""The C graph runner's steps of whole-layer LSTM, GRU and Elman RNN nodes (kernels/crnn_step.py)
against generated code (the ops' fast rules: the same loop, so the same bits), the NumPy
kernels and PyTorch 2.13: forward and reverse directions, one and two threads, W_hh a graph
input (packed at every run) and a frozen constant (an imported model's: packed once)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.graph import interpreter
from ember.kernels import ccompile, cpool, crnn
from ember.runtime import cgraph
from ember.runtime.codegen import compile_graph

needs_packed = pytest.mark.skipif(
    not ccompile.compiler_available() or crnn._packed_functions(np.dtype(np.float32)) is None,
    reason="the recurrent step needs a C compiler and ember's own GEMM micro-kernel",
)
LAYERS = {"lstm": ember.nn.LSTM, "gru": ember.nn.GRU, "rnn": ember.nn.RNN}
TORCH = {"lstm": torch.nn.LSTM, "gru": torch.nn.GRU, "rnn": torch.nn.RNN}


def _pair(kind: str, dtype, **kw):
    torch.manual_seed(0)
    theirs = TORCH[kind](6, 8, **kw).to(dtype).eval()
    ours = LAYERS[kind](6, 8, **kw).to(getattr(ember, str(dtype)[6:]))
    ours.load_state_dict(
        {k: ember.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()}
    )
    return ours.eval(), theirs


def _recurrent_nodes(graph) -> list:
    return [n for n in graph.nodes if n.kind == "call" and n.op.name.endswith("_layer")]


@needs_packed
@pytest.mark.parametrize(
    "kind,kw",
    [
        ("lstm", dict(bidirectional=True)),
        ("gru", dict(num_layers=2)),
        ("rnn", dict(bidirectional=True)),
        ("rnn", dict(nonlinearity="relu")),
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_steps_match_generated_code_numpy_and_torch(kind, kw, dtype):
    ours, theirs = _pair(kind, dtype, **kw)
    x = np.random.default_rng(1).standard_normal((5, 3, 6)).astype(str(dtype)[6:])
    with ember.no_grad():
        graph = ember.trace(lambda t: ours(t)[0], ember.tensor(x)).graph
    assert _recurrent_nodes(graph)
    steps = cgraph.c_steps(graph)
    assert steps is not None, str(graph)
    # (the graph's inputs: x, then the parameters it read, named after them)
    params = {f"ours_{k}": v.numpy() for k, v in ours.state_dict().items()}
    arrays = [x if v.name == "t" else params[v.name] for v in graph.inputs]
    want = compile_graph(graph)(*arrays)[0]
    before = cpool.get_num_threads()
    try:
        for threads in (1, 2):
            cpool.set_num_threads(threads)
            for _ in range(2):  # (a second run reuses the step's packs and pointer block)
                got = cgraph.CGraphProgram(graph, cgraph.c_steps(graph), None, threads)(*arrays)[0]
                assert np.array_equal(got, want)
    finally:
        cpool.set_num_threads(before)
    reference = interpreter.run(graph, arrays)[0]  # (the NumPy kernels: products summed otherwise)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    np.testing.assert_allclose(got, reference, rtol=tol, atol=tol)
    with torch.no_grad():
        np.testing.assert_allclose(got, theirs(torch.from_numpy(x))[0].numpy(), rtol=tol, atol=tol)


@needs_packed
def test_frozen_weight_of_an_imported_model(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.LSTM(6, 8, bidirectional=True).eval()
    x = torch.randn(5, 2, 6)
    path = tmp_path / "lstm.onnx"
    torch.onnx.export(model, (x,), str(path), dynamo=False, opset_version=17)
    function = ember.onnx.load(str(path))
    function(ember.tensor(x.numpy()))
    graph = function.graph
    nodes = _recurrent_nodes(graph)
    assert nodes and all(n.inputs[3].node.kind == "constant" for n in nodes)
    steps = cgraph.c_steps(graph)
    assert steps is not None
    program = cgraph.CGraphProgram(graph, steps, None, 1)
    arrays = [x.numpy()]
    want = compile_graph(graph)(*arrays)
    for _ in range(2):
        for g, w in zip(program(*arrays), want):
            assert np.array_equal(g, w)
    with torch.no_grad():
        np.testing.assert_allclose(program(*arrays)[0], model(x)[0].numpy(), rtol=1e-5, atol=1e-6)


@needs_packed
def test_one_time_step_declines_rather_than_failing():
    # (crnn multiplies a single step's W_hh unpacked, from Python: no step, generated code runs)
    ours, _ = _pair("lstm", torch.float32)
    x = np.random.default_rng(2).standard_normal((1, 3, 6)).astype(np.float32)
    with ember.no_grad():
        graph = ember.trace(lambda t: ours(t)[0], ember.tensor(x)).graph
    assert _recurrent_nodes(graph) and cgraph.c_steps(graph) is None
