"""Average pooling a block of planes at a time (kernels/cavg_pool.py `channel_block`: one plane
per lane of a 64-byte vector, taken where the planes' rows hold too few outputs for the rows'
own vectors: small planes with overlapping windows, strides of 3 and more) against the NumPy
kernel bit for bit, over random 1-d to 3-d geometries with plane counts that leave a remainder
of single planes, float32 (16 lanes) and float64 (8), -0.0, NaN and infinities; the graph
runner's step through an imported AveragePool against onnxruntime. (Without a compiler NumPy
runs them: tests/onnx/test_onnx56_avg_pool.py.)"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import ember
from ember.kernels import cavg_pool, ccompile
from ember.ops.pool_avg import _avg_fast, _avg_kernel

needs_c = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")


def _small_case(rng, nd: int, dtype):
    """Small planes (late in a CNN), kernels up to 4 and strides up to 4, more planes than a
    block's lanes with some left over."""
    kernel = tuple(int(v) for v in rng.integers(1, 5, nd))
    stride = tuple(int(v) for v in rng.integers(1, 5, nd))
    padding = tuple(int(rng.integers(0, k // 2 + 1)) for k in kernel)
    size = tuple(int(rng.integers(k + 1, 12 if nd < 3 else 7)) for k in kernel)
    planes = int(rng.integers(17, 40))
    x = rng.standard_normal((1, planes, *size)).astype(dtype)
    x.flat[::7] = -0.0
    x.flat[rng.integers(0, x.size, 4)] = np.nan
    x.flat[rng.integers(0, x.size, 3)] = np.inf
    x.flat[rng.integers(0, x.size, 3)] = -np.inf
    return x, kernel, stride, padding


@needs_c
@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_plane_blocks_are_numpys_bits(nd, dtype):
    rng = np.random.default_rng(570 + nd)
    blocked = 0
    for _ in range(12 if nd < 3 else 5):
        x, kernel, stride, padding = _small_case(rng, nd, dtype)
        for ceil, cip, override in itertools.product((False, True), (False, True), (None, 3)):
            attrs = dict(kernel=kernel, stride=stride, padding=padding, ceil_mode=ceil)
            attrs.update(count_include_pad=cip, divisor_override=override)
            got = _avg_fast(x, **attrs)
            assert got is not None and got.dtype == x.dtype
            with np.errstate(invalid="ignore"):  # (inf + -inf)
                want = _avg_kernel(x, **attrs)
            assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (x.shape, attrs)
            out = got.shape[2:]
            blocked += bool(cavg_pool._blocked(x.shape[2:], out, kernel, stride, padding))
    assert blocked  # (the cases reach the blocked path)


def test_which_poolings_go_in_blocks():
    # a late CNN stage's overlapping 3x3 stride-2 windows on 16x16 planes, and stride 3
    assert cavg_pool._blocked((16, 16), (9, 9), (3, 3), (2, 2), (1, 1))
    assert cavg_pool._blocked((16, 16), (5, 5), (3, 3), (3, 3), (0, 0))
    # rows wide enough for 64-byte vectors, and 2x2 stride-2 windows (each element read once)
    assert not cavg_pool._blocked((64, 64), (32, 32), (3, 3), (2, 2), (1, 1))
    assert not cavg_pool._blocked((16, 16), (8, 8), (2, 2), (2, 2), (0, 0))
    # planes whose copies would not fit in half of L2
    assert not cavg_pool._blocked((2048, 2048), (682, 682), (3, 3), (3, 3), (0, 0))


@needs_c
def test_imported_small_plane_pools_match_onnxruntime():
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    h = onnx.helper
    rng = np.random.default_rng(57)
    for kernel, stride, pads, ceil, cip in [
        ((3, 3), (2, 2), (1, 1, 1, 1), 1, 0),
        ((3, 3), (3, 3), (0, 0, 1, 1), 0, 1),
        ((4, 2), (3, 4), (1, 0, 2, 1), 1, 1),
    ]:
        node = h.make_node(
            "AveragePool", ["x"], ["y"], kernel_shape=list(kernel), strides=list(stride),
            pads=list(pads), ceil_mode=ceil, count_include_pad=cip,
        )  # fmt: skip
        shape = (2, 21, 13, 11)
        graph = h.make_graph(
            [node],
            "pool",
            [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(shape))],
            [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        )
        data = h.make_model(graph, opset_imports=[h.make_opsetid("", 19)]).SerializeToString()
        x = rng.standard_normal(shape).astype(np.float32)
        x.flat[rng.integers(0, x.size, 3)] = np.nan
        session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        want = session.run(None, {"x": x})[0]
        f = ember.onnx.load(data)
        got = f(ember.tensor(x)).numpy()
        assert f.eager_reason is None
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)
