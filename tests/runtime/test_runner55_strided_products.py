"""A product whose left operand has batch dimensions and is a strided view in generated code (a
batch_first LSTM's or GRU's input projection reads the batch-first input seen time-first, its
head reads the layer's output seen batch-first) runs in the C graph runner: every kernel folds
such an operand into rows of a C-contiguous copy (ops/_matmul_kernels.py), which is what the
runner's own copy of the view gives, so the runner computes generated code's bits. A strided
matrix (a transposed 2-d view) is read by its layout, and stays off the runner."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.kernels import ccompile
from ember.runtime import cgraph
from ember.runtime.codegen import compile_graph

needs_c = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _twins(kind: str, hidden: int, layers: int):
    """The same recurrent classifier in PyTorch and in ember (PyTorch's weights)."""
    torch.manual_seed(0)

    def build(lib):
        class Model(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = getattr(lib.nn, kind)(8, hidden, layers, batch_first=True)
                self.head = lib.nn.Linear(hidden, 5)

            def forward(self, x):
                return self.head(self.rnn(x)[0])

        return Model().eval()

    theirs, ours = build(torch), build(ember)
    ours.load_state_dict({k: ember.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    return theirs, ours


def _on_the_runner(graph, arrays) -> list:
    steps = cgraph.c_steps(graph)
    assert steps is not None, str(graph)
    want = compile_graph(graph)(*arrays)
    for threads in (1, 2):
        got = cgraph.CGraphProgram(graph, cgraph.c_steps(graph), None, threads)(*arrays)
        assert all(np.array_equal(g, w) for g, w in zip(got, want))
    return want


@needs_c
@pytest.mark.parametrize(
    ("kind", "batch", "hidden", "layers"),
    [("LSTM", 3, 16, 1), ("GRU", 4, 24, 2), ("LSTM", 16, 96, 1), ("GRU", 1, 32, 1)],
)
def test_captured_batch_first_recurrent_models_run_in_the_runner(kind, batch, hidden, layers):
    theirs, ours = _twins(kind, hidden, layers)
    x = np.random.default_rng(batch).standard_normal((batch, 7, 8)).astype(np.float32)
    fn = ember.function(ours)
    with ember.no_grad():
        fn(ember.tensor(x))
        compiled = fn.compile(ember.tensor(x))
    assert any(n.kind == "call" and n.op.view for n in compiled.graph.nodes)  # (the permutes)
    (got,) = _on_the_runner(compiled.graph, compiled.fed_arrays(ember.tensor(x)))
    with torch.no_grad():
        np.testing.assert_allclose(got, theirs(torch.tensor(x)).numpy(), rtol=1e-4, atol=1e-5)


@needs_c
@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_imported_batch_first_recurrent_models_run_in_the_runner(kind, tmp_path):
    theirs, _ = _twins(kind, 16, 1)
    x = torch.randn(2, 6, 8)
    path = tmp_path / f"{kind}.onnx"
    torch.onnx.export(theirs, (x,), str(path), dynamo=False, opset_version=17)
    function = ember.onnx.load(str(path))
    function(ember.tensor(x.numpy()))
    (got,) = _on_the_runner(function.graph, [x.numpy()])
    with torch.no_grad():
        np.testing.assert_allclose(got, theirs(x).numpy(), rtol=1e-4, atol=1e-5)


@needs_c
def test_a_transposed_matrix_operand_keeps_its_layout_check():
    rng = np.random.default_rng(0)
    a, w = (rng.standard_normal(s).astype(np.float32) for s in ((8, 6), (8, 5)))
    graph = ember.trace(lambda p, q: ember.matmul(p.T, q), ember.tensor(a), ember.tensor(w)).graph
    # (a product this small is NumPy's, which reads p.T with a transposing flag)
    assert cgraph.c_steps(graph) is None
    # (the same view with a batch dimension: copied before the product, in every executor)
    batched = ember.trace(
        lambda p, q: ember.matmul(ember.unsqueeze(p.T, 0), q), ember.tensor(a), ember.tensor(w)
    ).graph
    _on_the_runner(batched, [a, w])
