"""Imported ConvTranspose nodes whose windows tile the output (strides equal to the kernel, no
padding, dilation or groups: onnx/ops/nn.py `_unshuffled_product`, one product and one copy)
against onnxruntime and PyTorch over random 1-d to 3-d sizes, odd channel counts, batches,
with and without a bias, the weight an initializer or an input, NaN and infinities in the
data; the graph runs in the C graph runner (the product's step and the strided copy's), and
without a compiler on NumPy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.kernels import ccompile
from ember.runtime import cgraph

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
F32 = onnx.TensorProto.FLOAT
TORCH_TRANSPOSED = {
    1: torch.nn.functional.conv_transpose1d,
    2: torch.nn.functional.conv_transpose2d,
    3: torch.nn.functional.conv_transpose3d,
}


def _model(x_shape, w, bias, weight_input: bool, kernel, dtype=F32):
    h = onnx.helper
    inputs = [h.make_tensor_value_info("x", dtype, list(x_shape))]
    inits = []
    if weight_input:
        inputs.append(h.make_tensor_value_info("w", dtype, list(w.shape)))
    else:
        inits.append(onnx.numpy_helper.from_array(w, "w"))
    names = ["x", "w"]
    if bias is not None:
        inits.append(onnx.numpy_helper.from_array(bias, "b"))
        names.append("b")
    node = h.make_node("ConvTranspose", names, ["y"], kernel_shape=list(kernel), strides=kernel)
    graph = h.make_graph(
        [node], "tiled", inputs, [h.make_tensor_value_info("y", dtype, None)], initializer=inits
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def _case(rng, nd: int):
    kernel = [int(k) for k in rng.integers(1, 4, nd)]
    cin, cout = int(rng.choice([1, 3, 5, 8])), int(rng.choice([1, 2, 7]))
    size = [int(s) for s in rng.integers(2, 7 if nd < 3 else 4, nd)]
    x = rng.standard_normal([int(rng.integers(1, 4)), cin, *size]).astype(np.float32)
    x.flat[rng.integers(0, x.size, 2)] = np.nan
    x.flat[rng.integers(0, x.size, 1)] = np.inf
    w = rng.standard_normal([cin, cout, *kernel]).astype(np.float32)
    bias = rng.standard_normal(cout).astype(np.float32) if rng.integers(0, 2) else None
    return x, w, bias, kernel


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_tiled_transposed_convolutions_match_onnxruntime_and_torch(nd):
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(5600 + nd)
    for trial in range(4):
        x, w, bias, kernel = _case(rng, nd)
        weight_input = trial % 2 == 1
        data = _model(x.shape, w, bias, weight_input, kernel).SerializeToString()
        feeds = {"x": x, "w": w} if weight_input else {"x": x}
        options = ort.SessionOptions()
        options.log_severity_level = 3
        want = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"]).run(
            None, feeds
        )[0]
        f = ember.onnx.load(data)
        got = f(*[ember.tensor(a) for a in feeds.values()]).numpy()
        assert f.eager_reason is None
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, equal_nan=True)
        t = [torch.from_numpy(a) for a in (x, w)]
        b = None if bias is None else torch.from_numpy(bias)
        b = None if b is None else b.double()
        reference = TORCH_TRANSPOSED[nd](t[0].double(), t[1].double(), b, kernel)
        np.testing.assert_allclose(got, reference.numpy(), rtol=1e-5, atol=1e-5, equal_nan=True)


@pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")
def test_a_u_net_upsampling_runs_in_the_c_graph_runner():
    rng = np.random.default_rng(56)
    x = rng.standard_normal((2, 6, 5, 7)).astype(np.float32)
    w = rng.standard_normal((6, 3, 2, 2)).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    f = ember.onnx.load(_model(x.shape, w, bias, False, [2, 2]).SerializeToString())
    got = f(ember.tensor(x)).numpy()
    assert cgraph.c_steps(f.graph) is not None, str(f.graph)
    assert "conv_input_grad" not in str(f.graph)
    want = torch.nn.functional.conv_transpose2d(
        *(torch.from_numpy(a).double() for a in (x, w, bias)), stride=2
    )
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)


def test_without_a_compiler_numpy_runs(tmp_path):
    code = (
        "import numpy as np, onnx, torch, ember\n"
        "from onnx import helper as h\n"
        "rng = np.random.default_rng(1)\n"
        "x = rng.standard_normal((1, 3, 4, 5)).astype(np.float32)\n"
        "w = rng.standard_normal((3, 2, 2, 3)).astype(np.float32)\n"
        "n = h.make_node('ConvTranspose', ['x', 'w'], ['y'], kernel_shape=[2, 3], strides=[2, 3])\n"
        "g = h.make_graph([n], 'g', [h.make_tensor_value_info('x', 1, [1, 3, 4, 5])],\n"
        "    [h.make_tensor_value_info('y', 1, None)], [onnx.numpy_helper.from_array(w, 'w')])\n"
        "m = h.make_model(g, opset_imports=[h.make_opsetid('', 17)])\n"
        "got = ember.onnx.load(m.SerializeToString())(ember.tensor(x)).numpy()\n"
        "want = torch.nn.functional.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w),\n"
        "    stride=(2, 3)).numpy()\n"
        "np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)\n"
    )
    env = dict(
        os.environ, CC="/bin/false", EMBER_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT / "src")
    )
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
