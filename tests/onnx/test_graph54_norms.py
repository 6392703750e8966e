"""InstanceNormalization and GroupNormalization import as ``batch_norm_train`` (statistics per
sample and channel or group); its C graph-runner step (kernels/cbatchnorm.py `train_step`)
lets such models run whole in the runner. Checked: the step's results are generated code's bits
(the same kernel), close to the NumPy interpreter and to PyTorch 2.13, float32 and float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.graph import interpreter
from ember.kernels import cbatchnorm
from ember.runtime import cgraph
from ember.runtime.codegen import compile_graph

needs_c = pytest.mark.skipif(not cbatchnorm.available(np.float32), reason="no C compiler")


def _instance(dtype):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv1d(3, 8, 3, padding=1), torch.nn.InstanceNorm1d(8, affine=True)
    )
    return net.to(dtype).eval(), (torch.randn(2, 3, 17, dtype=dtype),)


def _group(dtype):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.GroupNorm(4, 8))
    with torch.no_grad():
        net[1].weight.uniform_(0.5, 1.5)
        net[1].bias.uniform_(-0.5, 0.5)
    return net.to(dtype).eval(), (torch.randn(2, 3, 6, 5, dtype=dtype),)


@needs_c
@pytest.mark.parametrize("build", [_instance, _group])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_imported_norm_runs_whole_in_the_c_runner(tmp_path, build, dtype):
    model, example = build(dtype)
    path = tmp_path / "norm.onnx"
    torch.onnx.export(model, example, str(path), dynamo=False, opset_version=17)
    function = ember.onnx.load(str(path))
    arrays = [t.numpy() for t in example]
    function(*[ember.tensor(a) for a in arrays])
    graph = function.graph
    assert any(n.kind == "call" and n.op.name == "batch_norm_train" for n in graph.nodes)
    steps = cgraph.c_steps(graph)
    assert steps is not None, str(graph)
    want = compile_graph(graph)(*arrays)
    for threads in (1, 2):
        got = cgraph.CGraphProgram(graph, cgraph.c_steps(graph), None, threads)(*arrays)
        for g, w in zip(got, want):
            assert np.array_equal(g, w)
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    np.testing.assert_allclose(got[0], interpreter.run(graph, arrays)[0], rtol=tol, atol=tol)
    with torch.no_grad():
        np.testing.assert_allclose(got[0], model(*example).numpy(), rtol=tol * 10, atol=tol * 10)
