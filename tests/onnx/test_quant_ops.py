"""ember.onnx's quantization, spectral, bitwise and random converters against onnxruntime on
models built with onnx.helper (random shapes and attributes), beyond the thin conformance
cases; and the NumPy path for element types ember lacks."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import ember.onnx as eo  # noqa: E402


def _model(op, inputs, attrs=None, opset=21, outputs=1, domain=""):
    """A one-node model over ``inputs`` ({name: array}, None for an omitted input)."""
    names = [name if value is not None else "" for name, value in inputs.items()]
    node = helper.make_node(
        op, names, [f"y{i}" for i in range(outputs)], domain=domain, **(attrs or {})
    )
    graph_inputs = [
        helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(value.dtype), list(value.shape)
        )
        for name, value in inputs.items()
        if value is not None
    ]
    graph_outputs = [helper.make_empty_tensor_value_info(f"y{i}") for i in range(outputs)]
    graph = helper.make_graph([node], "g", graph_inputs, graph_outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def _run_both(model, inputs):
    feeds = {k: v for k, v in inputs.items() if v is not None}
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    expected = session.run(None, feeds)
    f = eo.load(model.SerializeToString())
    got = f(**feeds)
    got = got if isinstance(got, tuple) else (got,)
    got = [g.numpy() if hasattr(g, "numpy") else np.asarray(g) for g in got]
    return expected, got, f


@pytest.mark.parametrize("seed", range(6))
def test_quantize_dequantize_per_axis_and_blocked(seed):
    r = np.random.default_rng(seed)
    shape = tuple(int(d) for d in r.integers(2, 6, size=3))
    axis = int(r.integers(-3, 3))
    x = (r.standard_normal(shape) * 4).astype(np.float32)
    target = [np.int8, np.uint8, np.int16][seed % 3]
    mode = ["tensor", "axis", "block"][seed % 3 if seed < 3 else (seed + 1) % 3]
    a = axis % 3
    if mode == "tensor":
        pshape, attrs = (), {}
    elif mode == "axis":
        pshape, attrs = (shape[a],), {"axis": axis}
    else:
        block = int(r.integers(1, 4))
        pshape = tuple(-(-d // block) if i == a else d for i, d in enumerate(shape))
        attrs = {"axis": axis, "block_size": block}
    scale = r.uniform(0.02, 0.3, pshape).astype(np.float32)
    info = np.iinfo(target)
    zp = r.integers(info.min // 4, info.max // 4 + 1, pshape).astype(target)
    inputs = {"x": x, "s": scale, "zp": zp}
    expected, got, f = _run_both(_model("QuantizeLinear", inputs, attrs), inputs)
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[0].dtype == target
    assert f.eager_reason is None  # int8/uint8/int16 capture

    q = expected[0]
    inputs = {"q": q, "s": scale, "zp": zp}
    expected, got, _ = _run_both(_model("DequantizeLinear", inputs, attrs), inputs)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-6, atol=1e-6)


def test_quantize_to_types_ember_lacks():
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)
    for zp in (np.array(7, np.uint16), None):
        inputs = {"x": x, "s": np.array(0.01, np.float32), "zp": zp}
        attrs = {} if zp is not None else {"output_dtype": TensorProto.UINT16}
        expected, got, f = _run_both(_model("QuantizeLinear", inputs, attrs), inputs)
        np.testing.assert_array_equal(got[0], expected[0])
        assert got[0].dtype == np.uint16


@pytest.mark.parametrize("seed", range(4))
def test_qlinear_matmul_and_matmul_integer(seed):
    r = np.random.default_rng(seed)
    m, k, n = (int(v) for v in r.integers(1, 7, 3))
    dt = [np.uint8, np.int8][seed % 2]
    info = np.iinfo(dt)
    a = r.integers(info.min, info.max + 1, (m, k)).astype(dt)
    b = r.integers(info.min, info.max + 1, (k, n)).astype(dt)
    a_zp = np.array(r.integers(info.min, info.max + 1), dt)
    b_zp = r.integers(info.min, info.max + 1, (n,)).astype(dt) if seed >= 2 else np.array(3, dt)
    inputs = {
        "a": a,
        "a_s": np.array(0.05, np.float32),
        "a_zp": a_zp,
        "b": b,
        "b_s": r.uniform(0.01, 0.1, b_zp.shape).astype(np.float32),
        "b_zp": b_zp,
        "y_s": np.array(0.7, np.float32),
        "y_zp": np.array(r.integers(info.min, info.max + 1), dt),
    }
    expected, got, f = _run_both(_model("QLinearMatMul", inputs), inputs)
    np.testing.assert_array_equal(got[0], expected[0])
    assert f.eager_reason is None

    inputs = {"a": a, "b": b, "a_zp": a_zp, "b_zp": b_zp}
    expected, got, _ = _run_both(_model("MatMulInteger", inputs, opset=10), inputs)
    np.testing.assert_array_equal(got[0], expected[0])
    assert got[0].dtype == np.int32


@pytest.mark.parametrize("seed", range(4))
def test_qlinear_conv_and_conv_integer(seed):
    r = np.random.default_rng(seed)
    group = [1, 2][seed % 2]
    cin, cout = 2 * group, 2 * group
    x = r.integers(0, 256, (1, cin, 7, 6)).astype(np.uint8)
    w = r.integers(-128, 128, (cout, cin // group, 3, 2)).astype(np.int8)
    attrs = {"group": group, "strides": [1 + seed % 2, 1]}
    if seed >= 2:
        attrs["auto_pad"] = "SAME_UPPER"
    else:
        attrs["pads"] = [1, 0, 0, 1]
    w_scale = r.uniform(0.001, 0.01, (cout,)).astype(np.float32)
    inputs = {
        "x": x,
        "x_s": np.array(0.02, np.float32),
        "x_zp": np.array(128, np.uint8),
        "w": w,
        "w_s": w_scale,
        "w_zp": np.zeros((cout,), np.int8),
        "y_s": np.array(0.05, np.float32),
        "y_zp": np.array(120, np.uint8),
        "bias": r.integers(-500, 500, (cout,)).astype(np.int32),
    }
    expected, got, _ = _run_both(_model("QLinearConv", inputs, attrs, opset=10), inputs)
    # onnxruntime requantizes in float32: a value on a rounding tie may land one step off
    assert np.abs(got[0].astype(int) - expected[0].astype(int)).max() <= 1
    assert np.mean(got[0] == expected[0]) > 0.97

    xu = r.integers(0, 256, (1, cin, 5, 5)).astype(np.uint8)
    wu = r.integers(0, 256, (cout, cin // group, 2, 2)).astype(np.uint8)
    inputs = {"x": xu, "w": wu, "x_zp": np.array(7, np.uint8), "w_zp": np.array(9, np.uint8)}
    attrs = {"group": group, "pads": [0, 1, 1, 0]}
    expected, got, _ = _run_both(_model("ConvInteger", inputs, attrs, opset=10), inputs)
    np.testing.assert_array_equal(got[0], expected[0])


def test_dynamic_quantize_linear():
    x = np.random.default_rng(3).standard_normal((4, 5)).astype(np.float32) * 3
    inputs = {"x": x}
    expected, got, _ = _run_both(_model("DynamicQuantizeLinear", inputs, outputs=3), inputs)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), atol=1)


@pytest.mark.parametrize(
    "inverse,onesided,length,complex_in",
    [(0, 0, None, False), (0, 1, 7, False), (1, 0, None, True), (0, 0, 5, True), (1, 1, 8, True)],
)
def test_dft_against_numpy(inverse, onesided, length, complex_in):
    r = np.random.default_rng(4)
    x = r.standard_normal((2, 6, 3, 2 if complex_in else 1)).astype(np.float32)
    signal = x[..., 0] + 1j * x[..., 1] if complex_in else x[..., 0]
    inputs = {
        "x": x,
        "n": None if length is None else np.array(length, np.int64),
        "axis": np.array(1, np.int64),
    }
    attrs = {"inverse": inverse, "onesided": onesided}
    f = eo.load(_model("DFT", inputs, attrs, opset=20).SerializeToString())
    got = f(**{k: v for k, v in inputs.items() if v is not None}).numpy()
    if inverse and onesided:
        want = np.fft.irfft(signal, n=length, axis=1)[..., None]
    else:
        fn = np.fft.ifft if inverse else np.fft.fft
        want = fn(signal, n=length, axis=1)
        if onesided:
            want = want[:, : (length or 6) // 2 + 1]
        want = np.stack([want.real, want.imag], -1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_stft_against_onnxruntime():
    r = np.random.default_rng(5)
    inputs = {
        "signal": r.standard_normal((2, 40, 1)).astype(np.float32),
        "step": np.array(6, np.int64),
        "window": np.hanning(10).astype(np.float32),
        "length": np.array(10, np.int64),
    }
    expected, got, _ = _run_both(_model("STFT", inputs, opset=17), inputs)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-4, atol=1e-4)


def test_bitshift_and_uint_elementwise_against_onnxruntime():
    r = np.random.default_rng(6)
    for dt in (np.uint8, np.uint16, np.uint32, np.uint64):
        x = r.integers(0, 200, (3, 4)).astype(dt)
        y = r.integers(0, 5, (4,)).astype(dt)
        for direction in ("LEFT", "RIGHT"):
            inputs = {"x": x, "y": y}
            expected, got, _ = _run_both(
                _model("BitShift", inputs, {"direction": direction}, opset=11), inputs
            )
            np.testing.assert_array_equal(got[0], expected[0])
        for op in ("Add", "Mul", "Div", "Equal", "BitwiseXor"):
            inputs = {"x": x, "y": y + 1}
            expected, got, _ = _run_both(_model(op, inputs, opset=18), inputs)
            np.testing.assert_array_equal(got[0], expected[0])


def test_seeded_random_ops_are_reproducible_across_loads():
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("RandomNormal", [], ["y"], shape=[3, 4], seed=2.5)],
            "g",
            [],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    first, second = (eo.load(model.SerializeToString()) for _ in range(2))
    a1, a2 = first().numpy(), first().numpy()
    b1, b2 = second().numpy(), second().numpy()
    np.testing.assert_array_equal(a1, b1)
    np.testing.assert_array_equal(a2, b2)
    assert not np.array_equal(a1, a2)  # each call draws anew
    assert a1.shape == (3, 4) and a1.dtype == np.float32


def _tree_model(aggregate):
    """Two trees over 3 features: LEQ / LT / set-membership splits, a NaN that tracks true, a
    tree that is one leaf."""
    node = helper.make_node(
        "TreeEnsemble",
        ["X"],
        ["Y"],
        domain="ai.onnx.ml",
        n_targets=2,
        nodes_featureids=[0, 1, 2, 0],
        nodes_splits=helper.make_tensor("s", TensorProto.FLOAT, [4], [0.5, 0.2, 0.0, 0.0]),
        nodes_modes=helper.make_tensor("m", TensorProto.UINT8, [4], [0, 1, 6, 0]),
        nodes_truenodeids=[1, 0, 1, 2],
        nodes_trueleafs=[0, 1, 1, 1],
        nodes_falsenodeids=[2, 1, 2, 2],
        nodes_falseleafs=[0, 1, 1, 1],
        nodes_missing_value_tracks_true=[1, 0, 0, 0],
        membership_values=helper.make_tensor(
            "mv", TensorProto.FLOAT, [4], [1.0, 3.0, 4.0, float("nan")]
        ),
        leaf_targetids=[0, 1, 0],
        leaf_weights=helper.make_tensor("w", TensorProto.FLOAT, [3], [1.5, -2.0, 3.25]),
        tree_roots=[0, 3],
        aggregate_function=aggregate,
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [5, 3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [5, 2])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)]
    )
    model.ir_version = 10
    return model


@pytest.mark.parametrize("aggregate", range(4))
def test_tree_ensemble_against_onnxruntime(aggregate):
    x = np.array(
        [[0.1, 0.1, 3], [0.1, 0.9, 1], [0.9, 0, 4], [np.nan, 0.5, 2], [2, 2, 2]], np.float32
    )
    expected, got, f = _run_both(_tree_model(aggregate), {"X": x})
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-6)
    assert f.eager_reason is None  # the walk is ember ops: it captures


@pytest.mark.parametrize("saturate", [0, 1])
def test_quantize_to_float8_against_onnxruntime(saturate):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = (np.random.default_rng(7).standard_normal((4, 6)) * 300).astype(np.float32)
    x[0, :3] = [np.inf, -np.inf, 1e6]
    inputs = {"x": x, "s": np.array(0.5, np.float32)}
    attrs = {"output_dtype": TensorProto.FLOAT8E4M3FN, "saturate": saturate}
    expected, got, _ = _run_both(_model("QuantizeLinear", inputs, attrs), inputs)
    # onnxruntime hands float8 back as its bytes
    want = np.asarray(expected[0]).view(ml_dtypes.float8_e4m3fn)
    assert got[0].dtype == ml_dtypes.float8_e4m3fn
    np.testing.assert_array_equal(got[0].view(np.uint8), want.view(np.uint8))
