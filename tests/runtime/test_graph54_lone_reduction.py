"""A reduction no fused group took (an imported model's global average pooling: ``sum`` then a
division) runs in the C graph runner as a loop of one (ops/fused.py `lone_c_step`), with the
NumPy kernel's bits: trailing, leading and both blocks of axes, keepdims or not, float32 and
float64, NaN and infinities in the data; an imported CNN with global average pooling runs
whole in the runner, as onnxruntime computes it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
from ember.graph import interpreter
from ember.kernels import ccompile
from ember.runtime import cgraph
from ember.runtime.codegen import compile_graph

needs_c = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")
CASES = [
    ((1, 128, 9, 9), (2, 3)),
    ((2, 16, 33, 17), (2, 3)),
    ((8, 5000), (1,)),
    ((4, 7, 300), (2,)),
    ((300, 7, 5), (0,)),
    ((6, 40, 3), (0, 2)),
    ((2, 3, 4, 5), (1, 2, 3)),
]


@needs_c
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lone_sum_steps_are_the_kernels_bits(dtype):
    rng = np.random.default_rng(0)
    for shape, axes in CASES:
        x = rng.standard_normal(shape).astype(dtype)
        x.flat[3] = np.inf
        x.flat[-5] = np.nan
        for keepdim in (False, True):
            graph = ember.trace(lambda t: ember.sum(t, axes, keepdim), ember.tensor(x)).graph  # noqa: B023
            calls = [n for n in graph.nodes if n.kind == "call"]
            steps = cgraph.c_steps(graph)
            assert steps is not None, str(graph)
            got = cgraph.CGraphProgram(graph, steps, None, 1)(x)[0]
            with np.errstate(invalid="ignore", over="ignore"):
                want = interpreter.run(graph, [x])[0]
                assert np.array_equal(compile_graph(graph)(x)[0], want, equal_nan=True)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (shape, axes, calls)


@needs_c
def test_float_maxima_whose_loops_pick_zeros_otherwise_stay_off_the_runner():
    # (NumPy's SIMD maximum picks among equal zeros by its lanes; a product takes its own
    # step, tests/runtime/test_runner55_reductions.py)
    x = ember.tensor(np.random.default_rng(1).standard_normal((4, 300)).astype(np.float32))
    for fn in (lambda t: ember.amax(t, 1), lambda t: ember.amin(t, 1)):
        assert cgraph.c_steps(ember.trace(fn, x).graph) is None


@needs_c
def test_imported_global_average_pooling_runs_in_the_runner(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1),
        torch.nn.AvgPool2d(2),  # (its result summed alone: no fused group takes the sum)
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
    ).eval()
    x = torch.randn(2, 3, 12, 10)
    path = tmp_path / "gap.onnx"
    torch.onnx.export(model, (x,), str(path), dynamo=False, opset_version=17)
    function = ember.onnx.load(str(path))
    function(ember.tensor(x.numpy()))
    graph = function.graph
    assert any(n.kind == "call" and n.op.reduction is not None for n in graph.nodes)
    steps = cgraph.c_steps(graph)
    assert steps is not None, str(graph)
    got = cgraph.CGraphProgram(graph, steps, None, 2)(x.numpy())[0]
    assert np.array_equal(got, compile_graph(graph)(x.numpy())[0])
    with torch.no_grad():
        np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-5, atol=1e-6)
