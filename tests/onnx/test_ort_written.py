"""Files onnxruntime writes that the other tests do not reach: its ORT_ENABLE_ALL optimizer's
blocked-layout ``com.microsoft.nchwc`` nodes, the QOperator nodes quantize_static writes around
concatenation, softmax, pooling, where and mean (QLinearConcat, QLinearSoftmax,
QLinearAveragePool, QLinearGlobalAveragePool, QLinearWhere, QLinearReduceMean), quantize_dynamic's
DynamicQuantizeLSTM, and QuantizeLinear with the infinite scale a calibration over -inf gives.
Each against onnxruntime on the same inputs."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper  # noqa: E402

import ember  # noqa: E402
import ember.onnx  # noqa: E402
from ember.errors import OnnxError  # noqa: E402

MS = "com.microsoft"
NCHWC = "com.microsoft.nchwc"
RNG = np.random.default_rng(0)


def _run_ort(model_bytes, feeds, optimize=True):
    options = ort.SessionOptions()
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _ours(model_bytes, feeds):
    out = ember.onnx.load(model_bytes)(*feeds.values())
    return [o.numpy() for o in (out if isinstance(out, tuple) else (out,))]


def _optimized_all(model_bytes, tmp_path):
    """The file onnxruntime saves at ORT_ENABLE_ALL (nchwc nodes on x86 with AVX2 or better)."""
    path = str(tmp_path / "all.onnx")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = path
    ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
    with open(path, "rb") as f:
        return f.read()


# --------------------------------------------------------------------------------- nchwc


def _nchwc_cnn():
    torch = pytest.importorskip("torch")
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):  # every nchwc node kind, blocked values read by plain Add/Reshape
        def __init__(self):
            super().__init__()
            self.a = nn.Conv2d(3, 32, 3, padding=1)
            self.b = nn.Conv2d(32, 48, 3, padding=1, stride=2)
            self.g = nn.Conv2d(48, 48, 3, padding=1, groups=3)
            self.d = nn.Conv2d(48, 48, 3, padding=2, dilation=2, groups=48)
            self.e = nn.Conv2d(48, 20, 1)
            self.f = nn.Conv2d(20, 32, 3, padding=1)
            self.h = nn.Conv2d(32, 32, 1)
            self.bn = nn.BatchNorm2d(48)

        def forward(self, x):
            y = F.max_pool2d(F.relu(self.a(x)), 3, 1, 1)
            y = torch.sigmoid(self.b(y))
            z = F.leaky_relu(self.bn(self.g(y)), 0.1) + y
            z = F.avg_pool2d(torch.tanh(self.d(z)), 2, ceil_mode=True)
            w = F.relu(self.f(F.interpolate(self.e(z), scale_factor=2, mode="nearest")))
            up = F.interpolate(self.h(w), scale_factor=2, mode="bilinear", align_corners=False)
            corners = F.interpolate(self.h(w), scale_factor=2, mode="bilinear", align_corners=True)
            return up + corners + F.adaptive_max_pool2d(w, 1) + F.hardswish(w).mean((2, 3), True)

    torch.manual_seed(0)
    model = Net().eval()
    import io
    import warnings

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, (torch.randn(1, 3, 16, 16),), buf, opset_version=17, dynamo=False,
            input_names=["x"], dynamic_axes={"x": {0: "n", 2: "h", 3: "w"}},
        )  # fmt: skip
    return buf.getvalue()


def test_onnxruntime_all_level_nchwc_model(tmp_path):
    optimized = _optimized_all(_nchwc_cnn(), tmp_path)
    kinds = {n.op_type for n in onnx.load_from_string(optimized).graph.node if n.domain == NCHWC}
    if "Conv" not in kinds:
        pytest.skip("onnxruntime wrote no nchwc nodes on this CPU (no AVX2)")
    f = ember.onnx.load(optimized)
    for shape in [(1, 3, 16, 16), (3, 3, 12, 20)]:
        feeds = {"x": RNG.standard_normal(shape).astype(np.float32)}
        (want,) = _run_ort(optimized, feeds)
        got = f(feeds["x"]).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert f.eager_reason is None


def test_onnxruntime_all_level_channels_last_nchwc_model(tmp_path):
    """An NHWC input and output (ReorderInput / ReorderOutput with channels_last), plain Relu
    and Add on blocked values, 24 output channels padded to a block multiple."""
    torch = pytest.importorskip("torch")
    import io

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c = torch.nn.Conv2d(32, 32, 3, padding=1)
            self.d = torch.nn.Conv2d(32, 24, 1)

        def forward(self, x):
            y = self.c(x.permute(0, 3, 1, 2))
            return self.d(torch.relu(y) + y).permute(0, 2, 3, 1)

    torch.manual_seed(0)
    buf = io.BytesIO()
    torch.onnx.export(
        Net().eval(), (torch.randn(1, 8, 8, 32),), buf, opset_version=17, dynamo=False,
        input_names=["x"], dynamic_axes={"x": {0: "n"}},
    )  # fmt: skip
    optimized = _optimized_all(buf.getvalue(), tmp_path)
    graph = onnx.load_from_string(optimized).graph
    if not any(n.domain == NCHWC for n in graph.node):
        pytest.skip("onnxruntime wrote no nchwc nodes on this CPU (no AVX2)")
    feeds = {"x": RNG.standard_normal((2, 8, 8, 32)).astype(np.float32)}
    (want,) = _run_ort(optimized, feeds)
    (got,) = _ours(optimized, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def _blocked(a, b):
    """NCHW (N, C, H, W) -> blocked memory (N, C/b, H, W, b), kept at the declared shape."""
    n, c, *spatial = a.shape
    return a.reshape(n, c // b, b, *spatial).transpose(0, 1, 3, 4, 2).reshape(a.shape)


def test_nchwc_block_size_read_from_the_file():
    """A file written with blocks of 8 (an AVX2 machine's): 8 output channels in a filter of 8
    rows fit no block of 16, so the block is 8 whatever this machine's is. Checked against the
    plain convolution in onnxruntime."""
    b = 8
    w1 = RNG.standard_normal((8, 3, 3, 3)).astype(np.float32)  # NCHW input (3 < 8): OIHWBo
    w2 = RNG.standard_normal((8, 8, 1, 1)).astype(np.float32)  # blocked input: OIHWBiBo
    bias = RNG.standard_normal(8).astype(np.float32)
    w1_bo = w1.reshape(1, b, 3, 3, 3).transpose(0, 2, 3, 4, 1).reshape(w1.shape)
    w2_bibo = w2.reshape(1, b, 1, b, 1, 1).transpose(0, 3, 4, 5, 2, 1).reshape(w2.shape)
    inits = [
        numpy_helper.from_array(w1_bo, "w1"),
        numpy_helper.from_array(w2_bibo, "w2"),
        numpy_helper.from_array(bias, "bias"),
    ]
    nodes = [
        h.make_node("Conv", ["x", "w1", "bias"], ["c1"], domain=NCHWC, kernel_shape=[3, 3],
                    pads=[1, 1, 1, 1], activation="Relu"),
        h.make_node("Conv", ["c1", "w2", "", "c1"], ["c2"], domain=NCHWC, kernel_shape=[1, 1]),
        h.make_node("MaxPool", ["c2"], ["p"], domain=NCHWC, kernel_shape=[2, 2], strides=[2, 2]),
        h.make_node("ReorderOutput", ["p"], ["y"], domain=NCHWC, channels=8),
    ]  # fmt: skip
    graph = h.make_graph(
        nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, [1, 3, 6, 6])],
        [h.make_tensor_value_info("y", TP.FLOAT, None)], inits,
    )  # fmt: skip
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid(NCHWC, 1)])
    x = RNG.standard_normal((1, 3, 6, 6)).astype(np.float32)
    got = ember.onnx.load(model.SerializeToString())(x).numpy()
    plain = h.make_graph(
        [h.make_node("Conv", ["x", "w1", "bias"], ["a"], pads=[1, 1, 1, 1]),
         h.make_node("Relu", ["a"], ["r"]),
         h.make_node("Conv", ["r", "w2"], ["c"]),
         h.make_node("Add", ["c", "r"], ["s"]),
         h.make_node("MaxPool", ["s"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
        "g", [h.make_tensor_value_info("x", TP.FLOAT, [1, 3, 6, 6])],
        [h.make_tensor_value_info("y", TP.FLOAT, None)],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
         numpy_helper.from_array(bias, "bias")],
    )  # fmt: skip
    (want,) = _run_ort(h.make_model(plain).SerializeToString(), {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    blocked = _blocked(np.ones((1, 16, 2, 2), np.float32) * np.arange(16)[None, :, None, None], b)
    assert blocked[0, 0, 0, 1] == 1.0  # the helper's layout: channels innermost per block


def test_nchwc_filters_that_fit_no_block_are_refused():
    w = numpy_helper.from_array(np.zeros((12, 3, 1, 1), np.float32), "w")
    graph = h.make_graph(
        [h.make_node("Conv", ["x", "w"], ["y"], domain=NCHWC, kernel_shape=[1, 1])], "g",
        [h.make_tensor_value_info("x", TP.FLOAT, [1, 3, 2, 2])],
        [h.make_tensor_value_info("y", TP.FLOAT, None)], [w],
    )  # fmt: skip
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid(NCHWC, 1)])
    with pytest.raises(OnnxError, match="block size"):
        ember.onnx.load(model.SerializeToString())(np.zeros((1, 3, 2, 2), np.float32))


# ----------------------------------------------------------------- QOperator contrib nodes


def _qnode(node, inputs: dict, inits: dict, out_type=TP.UINT8):
    def info(name, a):
        return h.make_tensor_value_info(name, h.np_dtype_to_tensor_dtype(a.dtype), a.shape)

    graph = h.make_graph(
        [node], "g", [info(n, a) for n, a in inputs.items()],
        [h.make_tensor_value_info("y", out_type, None)],
        [numpy_helper.from_array(a, n) for n, a in inits.items()],
    )  # fmt: skip
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid(MS, 1)])
    data = model.SerializeToString()
    (want,) = _run_ort(data, inputs)
    (got,) = _ours(data, inputs)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def _u8(*shape):
    return RNG.integers(0, 256, shape).astype(np.uint8)


_SCALES = {
    "xs": np.array(0.02, np.float32),
    "xz": np.array(128, np.uint8),
    "ys": np.array(0.015, np.float32),
    "yz": np.array(120, np.uint8),
}


@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("size", [7, 8])
def test_qlinear_average_pools(include_pad, size):
    """count_include_pad: onnxruntime divides a ceil_mode window hanging past the padding by
    the whole kernel (its float AveragePool does not)."""
    node = h.make_node(
        "QLinearAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS,
        kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1,
        count_include_pad=include_pad,
    )  # fmt: skip
    _qnode(node, {"x": _u8(2, 3, size, size)}, _SCALES)
    nhwc = h.make_node(
        "QLinearAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS,
        kernel_shape=[2, 2], strides=[2, 2], channels_last=1, count_include_pad=include_pad,
    )  # fmt: skip
    _qnode(nhwc, {"x": _u8(2, size, size, 3)}, _SCALES)


@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_global_average_pool(channels_last):
    node = h.make_node(
        "QLinearGlobalAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS,
        channels_last=channels_last,
    )  # fmt: skip
    _qnode(node, {"x": _u8(2, 3, 5, 4)}, _SCALES)


@pytest.mark.parametrize("axis, opset", [(-1, 13), (1, 12), (-1, 12), (1, 13)])
@pytest.mark.parametrize("signed", [False, True])
def test_qlinear_softmax(axis, opset, signed):
    """onnxruntime's arithmetic: float32 exponentials from a table, floor(1 / y_scale) (254,
    not 255, for the usual 1 / 255)."""
    dtype = np.int8 if signed else np.uint8
    for y_scale, x_scale in [(1 / 256, 0.1), (np.float32(0.00392157), 0.009)]:
        scales = {
            "xs": np.array(x_scale, np.float32),
            "xz": np.array(-3 if signed else 105, dtype),
            "ys": np.array(y_scale, np.float32),
            "yz": np.array(-128 if signed else 0, dtype),
        }
        node = h.make_node(
            "QLinearSoftmax", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS, axis=axis,
            opset=opset,
        )  # fmt: skip
        x = RNG.integers(-128 if signed else 0, 128 if signed else 256, (2, 3, 4, 5))
        _qnode(node, {"x": x.astype(dtype)}, scales, out_type=TP.INT8 if signed else TP.UINT8)


@pytest.mark.parametrize("signed", [False, True])
def test_qlinear_softmax_with_an_infinite_scale(signed):
    """A calibration over an additive -inf mask gives the scale inf: onnxruntime's sums are
    NaN and it writes zeros, whatever the zero point."""
    dtype = np.int8 if signed else np.uint8
    for zero_point in (0, 7):
        scales = {
            "xs": np.array(np.inf, np.float32),
            "xz": np.array(0, dtype),
            "ys": np.array(1 / 255, np.float32),
            "yz": np.array(zero_point, dtype),
        }
        x = np.array([[0, 0, 0, 0], [3, 5, 5, 1]], dtype)
        node = h.make_node(
            "QLinearSoftmax", ["x", "xs", "xz", "ys", "yz"], ["y"], domain=MS, opset=13
        )
        _qnode(node, {"x": x}, scales, out_type=TP.INT8 if signed else TP.UINT8)


def test_qlinear_concat_where_and_reduce_mean():
    a, b = _u8(2, 3, 4), _u8(2, 5, 4)
    concat = h.make_node(
        "QLinearConcat", ["ys", "yz", "a", "xs", "xz", "b", "ys", "yz"], ["y"], domain=MS, axis=1
    )
    _qnode(concat, {"a": a, "b": b}, _SCALES)
    cond = RNG.integers(0, 2, (2, 3, 4)).astype(bool)
    where = h.make_node(
        "QLinearWhere", ["c", "a", "xs", "xz", "a2", "ys", "yz", "zs", "zz"], ["y"], domain=MS
    )
    extra = {"zs": np.array(0.03, np.float32), "zz": np.array(100, np.uint8)}
    _qnode(where, {"c": cond, "a": a, "a2": _u8(2, 3, 4)}, {**_SCALES, **extra})
    for keepdims in (0, 1):  # onnxruntime has no CPU kernel for it: NumPy's reference
        mean = h.make_node(
            "QLinearReduceMean", ["a", "xs", "xz", "ys", "yz"], ["y"], domain=MS, axes=[1, -1],
            keepdims=keepdims,
        )  # fmt: skip
        graph = h.make_graph(
            [mean], "g", [h.make_tensor_value_info("a", TP.UINT8, a.shape)],
            [h.make_tensor_value_info("y", TP.UINT8, None)],
            [numpy_helper.from_array(v, n) for n, v in _SCALES.items()],
        )  # fmt: skip
        opsets = [h.make_opsetid("", 17), h.make_opsetid(MS, 1)]
        (got,) = _ours(h.make_model(graph, opset_imports=opsets).SerializeToString(), {"a": a})
        real = (a.astype(np.float32) - 128) * np.float32(0.02)
        want = np.rint(real.mean((1, 2), keepdims=bool(keepdims)) / np.float32(0.015)) + 120
        np.testing.assert_array_equal(got, np.clip(want, 0, 255).astype(np.uint8))


def test_quantize_linear_with_an_infinite_scale():
    """x / inf is 0 for finite x and NaN for +-inf: onnxruntime's MLAS clamps before it
    converts, so a NaN becomes the type's lowest value."""
    x = np.array([-np.inf, -0.0, 1.0, -3.4e38, np.inf, np.nan], np.float32)
    for zero_point in (np.array(-128, np.int8), np.array(3, np.int8), np.array(7, np.uint8)):
        node = h.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])
        inits = {"s": np.array(np.inf, np.float32), "z": zero_point}
        _qnode(node, {"x": x}, inits, out_type=h.np_dtype_to_tensor_dtype(zero_point.dtype))


def test_dynamic_quantize_lstm():
    """quantize_dynamic's LSTM: the input and each step's hidden state quantized to uint8 for
    integer products, as onnxruntime does when it has a thread per batch row (with fewer it
    quantizes blocks of rows together)."""
    quantization = pytest.importorskip("onnxruntime.quantization")
    torch = pytest.importorskip("torch")
    import io
    import tempfile
    import warnings

    torch.manual_seed(0)
    model = torch.nn.LSTM(5, 7, num_layers=1, bidirectional=True, batch_first=True).eval()
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model, (torch.randn(3, 4, 5),), buf, opset_version=14, dynamo=False,
            input_names=["x"], dynamic_axes={"x": {0: "b", 1: "t"}},
        )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        plain, quantized = f"{tmp}/plain.onnx", f"{tmp}/q.onnx"
        with open(plain, "wb") as f:
            f.write(buf.getvalue())
        quantization.quantize_dynamic(plain, quantized, weight_type=quantization.QuantType.QInt8)
        with open(quantized, "rb") as f:
            data = f.read()
    assert "DynamicQuantizeLSTM" in {n.op_type for n in onnx.load_from_string(data).graph.node}
    options = ort.SessionOptions()
    options.intra_op_num_threads = 8
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    for shape in [(3, 4, 5), (2, 6, 5), (1, 3, 5)]:
        feeds = {"x": RNG.standard_normal(shape).astype(np.float32)}
        for got, want in zip(_ours(data, feeds), session.run(None, feeds)):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_qdq_model_with_an_additive_minus_inf_mask():
    """quantize_static over a BERT-style mask ((1 - mask) * finfo.min, which overflows to -inf
    once scaled) writes QuantizeLinear nodes with the scale inf; ember's results are
    onnxruntime's."""
    inf_scale = numpy_helper.from_array(np.array(np.inf, np.float32), "s")
    zero = numpy_helper.from_array(np.array(-128, np.int8), "z")
    big = numpy_helper.from_array(np.array(-3.4e38, np.float32), "big")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    nodes = [
        h.make_node("Mul", ["m", "big"], ["a"]),
        h.make_node("Mul", ["a", "two"], ["b"]),  # -inf where masked
        h.make_node("QuantizeLinear", ["b", "s", "z"], ["q"]),
        h.make_node("DequantizeLinear", ["q", "s", "z"], ["d"]),
        h.make_node("Add", ["x", "d"], ["y0"]),
        h.make_node("Softmax", ["y0"], ["y"]),
    ]
    graph = h.make_graph(
        nodes, "g",
        [h.make_tensor_value_info("x", TP.FLOAT, [2, 4]),
         h.make_tensor_value_info("m", TP.FLOAT, [2, 4])],
        [h.make_tensor_value_info("y", TP.FLOAT, [2, 4])], [inf_scale, zero, big, two],
    )  # fmt: skip
    data = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()
    feeds = {
        "x": RNG.standard_normal((2, 4)).astype(np.float32),
        "m": np.array([[0, 0, 1, 1], [0, 1, 1, 1]], np.float32),
    }
    (want,) = _run_ort(data, feeds, optimize=False)
    (got,) = _ours(data, feeds)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("how", ["half_pixel", "asymmetric", "pytorch_half_pixel", "align_corners"])
@pytest.mark.parametrize("scales", [(1, 1, 2, 2), (1, 1, 1.5, 3)])
def test_linear_resize_of_integers_truncates(dtype, how, scales):
    """quantize_static leaves Resize on the 8-bit values: onnxruntime and ONNX's reference
    compute in float and cast, toward zero (ember rounded: one quantum off on about half the
    values); onnxruntime's float32 bilinear formula for images, so no value near an integer
    lands on the other side of it."""
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max + 1, (2, 3, 4, 5)).astype(dtype)
    node = h.make_node("Resize", ["x", "", "s"], ["y"], mode="linear",
                       coordinate_transformation_mode=how)  # fmt: skip
    code = h.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = h.make_graph(
        [node], "g", [h.make_tensor_value_info("x", code, x.shape)],
        [h.make_tensor_value_info("y", code, None)],
        [numpy_helper.from_array(np.array(scales, np.float32), "s")],
    )  # fmt: skip
    data = h.make_model(graph, opset_imports=[h.make_opsetid("", 19)]).SerializeToString()
    (want,) = _run_ort(data, {"x": x})
    (got,) = _ours(data, {"x": x})
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------------------------
# nodes out of order (onnxruntime runs them; its float16 converter writes them)


def _unordered_model():
    """Nodes listed before those whose outputs they read, an If among them whose branches read
    a value a later node computes: ``out = (x > 0 ? relu(c) : -c) + c`` with ``c = cast(x)``
    and ``x`` float16."""
    f16, f32 = TP.FLOAT16, TP.FLOAT
    then_g = h.make_graph(
        [h.make_node("Relu", ["c"], ["t"])], "then", [], [h.make_tensor_value_info("t", f32, None)]
    )
    else_g = h.make_graph(
        [h.make_node("Neg", ["c"], ["e"])], "else", [], [h.make_tensor_value_info("e", f32, None)]
    )
    nodes = [
        h.make_node("Add", ["branch", "c"], ["out"]),
        h.make_node("If", ["positive"], ["branch"], then_branch=then_g, else_branch=else_g),
        h.make_node("ReduceSum", ["c"], ["total"], keepdims=0),
        h.make_node("Greater", ["total", "zero"], ["positive"]),
        h.make_node("Cast", ["x"], ["c"], to=f32),
    ]  # fmt: skip
    graph = h.make_graph(
        nodes, "unordered", [h.make_tensor_value_info("x", f16, ["n", 3])],
        [h.make_tensor_value_info("out", f32, ["n", 3])],
        [numpy_helper.from_array(np.float32(0), "zero")],
    )  # fmt: skip
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def test_nodes_out_of_order_run_in_the_order_their_reads_need():
    model = _unordered_model()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    f = ember.onnx.load(model)
    assert f.eager_reason is None
    for x in (RNG.standard_normal((2, 3)), -np.abs(RNG.standard_normal((4, 3)))):
        x = x.astype(np.float16)
        (want,) = session.run(None, {"x": x})
        np.testing.assert_array_equal(f(x).numpy(), want)
    # a cycle is still refused, naming the node
    looped = _unordered_model()
    looped.graph.node[4].input[0] = "out"
    with pytest.raises(OnnxError, match="no earlier node"):
        ember.onnx.load(looped)


def test_onnxruntime_float16_converter_with_float32_inputs():
    """onnxruntime.transformers.float16 (keep_io_types: float32 inputs and outputs) appends the
    inputs' casts after the nodes that read them."""
    float16 = pytest.importorskip("onnxruntime.transformers.float16")
    w = numpy_helper.from_array(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(RNG.standard_normal(4).astype(np.float32), "b")
    graph = h.make_graph(
        [
            h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
            h.make_node("Relu", ["c"], ["r"]),
            h.make_node("GlobalAveragePool", ["r"], ["out"]),
        ],
        "cnn", [h.make_tensor_value_info("x", TP.FLOAT, ["n", 3, 6, 6])],
        [h.make_tensor_value_info("out", TP.FLOAT, ["n", 4, 1, 1])], [w, b],
    )  # fmt: skip
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    half = float16.convert_float_to_float16(model, keep_io_types=True)
    assert half.graph.node[-1].op_type == "Cast"  # (what this test is about)
    session = ort.InferenceSession(half.SerializeToString(), providers=["CPUExecutionProvider"])
    f = ember.onnx.load(half)
    for n in (1, 3):
        x = RNG.standard_normal((n, 3, 6, 6)).astype(np.float32)
        (want,) = session.run(None, {"x": x})
        got = f(x).numpy()
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3 * np.abs(want).max())
