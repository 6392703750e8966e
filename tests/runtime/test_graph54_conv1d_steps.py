"""1-d convolutions in the C graph runner, as the 2-d ones of height 1 (ops/conv_lift.py):
plain, with a fused bias and ReLU or clamp, depthwise; random channels, lengths, kernels,
strides, dilations and padding, float32 and float64. The runner's results are generated code's
bits, close to the NumPy interpreter and to PyTorch 2.13."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
import ember.nn.functional as F
from ember.graph import interpreter
from ember.kernels import ccompile
from ember.runtime import cgraph
from ember.runtime.codegen import compile_graph

needs_c = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _programs(stride, padding, dilation, groups):
    def plain(x, w, b):
        return F.conv1d(x, w, None, stride, padding, dilation, groups)

    def bias_relu(x, w, b):
        return F.relu(F.conv1d(x, w, b, stride, padding, dilation, groups))

    def bias_clamp(x, w, b):
        return ember.clamp(F.conv1d(x, w, b, stride, padding, dilation, groups), -0.5, 0.5)

    return plain, bias_relu, bias_clamp


@needs_c
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("depthwise", [False, True])
def test_conv1d_steps_match_generated_code_numpy_and_torch(dtype, depthwise):
    rng = np.random.default_rng(int(depthwise))
    for _ in range(3):
        c, o, length = (int(v) for v in rng.integers(1, 17, 3))
        k, stride, dilation = (
            int(rng.integers(1, 6)),
            int(rng.integers(1, 4)),
            int(rng.integers(1, 3)),
        )
        padding = int(rng.integers(0, 3))
        length = max(length, (k - 1) * dilation + 1)
        groups, o = (c, c) if depthwise else (1, o)
        x = rng.standard_normal((2, c, length)).astype(dtype)
        w = rng.standard_normal((o, c // groups, k)).astype(dtype)
        b = rng.standard_normal(o).astype(dtype)
        arrays = [x, w, b]
        for fn in _programs(stride, padding, dilation, groups):
            graph = ember.trace(fn, *map(ember.tensor, arrays)).graph
            steps = cgraph.c_steps(graph)
            assert steps is not None, str(graph)
            want = compile_graph(graph)(*arrays)[0]
            got = cgraph.CGraphProgram(graph, steps, None, 1)(*arrays)[0]
            assert np.array_equal(got, want)
            tol = 1e-4 if dtype == np.float32 else 1e-11
            reference = interpreter.run(graph, arrays)[0]
            np.testing.assert_allclose(got, reference, rtol=tol, atol=tol)
            tx, tw, tb = map(torch.from_numpy, arrays)
            conv = torch.nn.functional.conv1d
            theirs = {
                "plain": lambda: conv(tx, tw, None, stride, padding, dilation, groups),
                "bias_relu": lambda: torch.relu(
                    conv(tx, tw, tb, stride, padding, dilation, groups)
                ),
                "bias_clamp": lambda: torch.clamp(
                    conv(tx, tw, tb, stride, padding, dilation, groups), -0.5, 0.5
                ),
            }[fn.__name__]()  # noqa: B023
            np.testing.assert_allclose(got, theirs.numpy(), rtol=tol, atol=tol)
