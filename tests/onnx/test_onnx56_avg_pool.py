"""Average pooling's vectors (kernels/cavg_pool.py: the output columns whose windows lie inside
the row, stride 1 or 2, in 64-, 32- or 16-byte vectors) against the NumPy kernel bit for bit
over random wide rows, kernels, strides, padding, ceil_mode and divisors, float32 and float64,
with -0.0, NaN and infinities; imported AveragePool nodes against onnxruntime; without a
compiler NumPy runs them."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ember
from ember.kernels import ccompile
from ember.ops.pool_avg import _avg_fast, _avg_kernel

ROOT = Path(__file__).resolve().parents[2]
needs_c = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _wide_case(rng, nd: int, dtype):
    """A pooling whose rows hold from less than one to several vectors' worth of outputs (the
    kernel's 64-, 32- and 16-byte vectors: 16, 8, 4 float32 lanes), odd widths and channel
    counts included."""
    kernel = tuple(int(v) for v in rng.integers(1, 5, nd))
    stride = tuple(int(v) for v in rng.integers(1, 3, nd - 1)) + (int(rng.integers(1, 3)),)
    padding = tuple(int(rng.integers(0, k // 2 + 1)) for k in kernel)
    width = int(rng.integers(kernel[-1] + 1, 90))
    lead = tuple(int(v) for v in rng.integers(kernel[0] + 1, kernel[0] + 5, nd - 1))
    channels = int(rng.choice([1, 3, 5]))
    x = rng.standard_normal((2, channels, *lead, width)).astype(dtype)
    x.flat[::11] = -0.0
    x.flat[rng.integers(0, x.size, 4)] = np.nan
    x.flat[rng.integers(0, x.size, 3)] = np.inf
    x.flat[rng.integers(0, x.size, 3)] = -np.inf
    return x, kernel, stride, padding


@needs_c
@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_vector_blocks_are_numpys_bits(nd, dtype):
    rng = np.random.default_rng(560 + nd)
    for _ in range(16 if nd < 3 else 6):
        x, kernel, stride, padding = _wide_case(rng, nd, dtype)
        for ceil, cip, override in itertools.product((False, True), (False, True), (None, 3)):
            attrs = dict(kernel=kernel, stride=stride, padding=padding, ceil_mode=ceil)
            attrs.update(count_include_pad=cip, divisor_override=override)
            got = _avg_fast(x, **attrs)
            assert got is not None and got.dtype == x.dtype
            with np.errstate(invalid="ignore"):  # (inf + -inf)
                want = _avg_kernel(x, **attrs)
            assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (x.shape, attrs)


@needs_c
def test_a_row_ending_at_its_buffers_end():
    """A stride-2 block loads a vector pair from its first window offset: the last row of the
    last plane must not read past the input (a buffer ending at a page's end would fault)."""
    rng = np.random.default_rng(5)
    for width in (32, 33, 34, 47, 64):
        x = rng.standard_normal((1, 1, 2, width)).astype(np.float32)
        attrs = dict(kernel=(2, 2), stride=(2, 2), padding=(0, 0), ceil_mode=True)
        attrs.update(count_include_pad=True, divisor_override=None)
        got = _avg_fast(x, **attrs)
        assert np.array_equal(got.view(np.uint8), _avg_kernel(x, **attrs).view(np.uint8))


def _pool_model(shape, kernel, stride, pads, ceil, cip):
    onnx = pytest.importorskip("onnx")
    h = onnx.helper
    node = h.make_node(
        "AveragePool",
        ["x"],
        ["y"],
        kernel_shape=list(kernel),
        strides=list(stride),
        pads=list(pads),
        ceil_mode=int(ceil),
        count_include_pad=int(cip),
    )
    graph = h.make_graph(
        [node],
        "pool",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(shape))],
        [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
    )
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 19)])


@needs_c
def test_imported_average_pools_match_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(56)
    for _ in range(4):
        kernel = tuple(int(v) for v in rng.integers(1, 4, 2))
        stride = tuple(int(v) for v in rng.integers(1, 3, 2))
        begin = [int(rng.integers(0, k // 2 + 1)) for k in kernel]
        end = [int(rng.integers(0, k // 2 + 1)) for k in kernel]
        shape = (int(rng.integers(1, 3)), int(rng.choice([3, 7, 16])), 9, int(rng.integers(33, 70)))
        ceil, cip = bool(rng.integers(0, 2)), bool(rng.integers(0, 2))
        model = _pool_model(shape, kernel, stride, begin + end, ceil, cip)
        x = rng.standard_normal(shape).astype(np.float32)
        x.flat[rng.integers(0, x.size, 3)] = np.nan
        x.flat[rng.integers(0, x.size, 2)] = np.inf
        data = model.SerializeToString()
        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        want = session.run(None, {"x": x})[0]
        f = ember.onnx.load(data)
        got = f(ember.tensor(x)).numpy()
        assert f.eager_reason is None
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_without_a_compiler_numpy_runs(tmp_path):
    code = (
        "import numpy as np\n"
        "from ember.ops.pool_avg import _avg_fast, _avg_kernel\n"
        "x = np.random.default_rng(0).standard_normal((2, 3, 5, 70)).astype(np.float32)\n"
        "a = dict(kernel=(2, 3), stride=(2, 1), padding=(1, 1), ceil_mode=True,\n"
        "         count_include_pad=False, divisor_override=None)\n"
        "assert _avg_fast(x, **a) is None\n"
        "import ember\n"
        "y = ember.nn.functional.avg_pool2d(ember.tensor(x), (2, 3), (2, 1), 1, True, False)\n"
        "assert np.array_equal(y.numpy(), _avg_kernel(x, **a))\n"
    )
    env = dict(
        os.environ, CC="/bin/false", EMBER_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT / "src")
    )
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
