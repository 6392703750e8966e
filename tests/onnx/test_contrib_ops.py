"""onnxruntime's contrib operators (onnx/ops/contrib.py) against onnxruntime itself, node by
node with their attribute variants, and whole models that onnxruntime's graph optimizer saved
(``optimized_model_filepath``): a CNN with FusedConv/QuickGelu and a transformer encoder with
FusedMatMul/Gelu/SkipLayerNormalization/LayerNormalization at opset 14, exported by PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import helper as h  # noqa: E402

import ember  # noqa: E402
import ember.onnx  # noqa: E402

RNG = np.random.default_rng(77)
MS = "com.microsoft"


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _check(op, inputs: dict, n_out=1, attrs=None, domain=MS, opset=14, constants=(), atol=1e-5):
    graph_inputs = [
        h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(a.dtype), a.shape)
        for n, a in inputs.items()
        if a is not None and n not in constants
    ]
    inits = [onnx.numpy_helper.from_array(inputs[n], n) for n in constants]
    outs = [f"y{i}" for i in range(n_out)]
    names = ["" if a is None else n for n, a in inputs.items()]
    node = h.make_node(op, names, outs, domain=domain, **(attrs or {}))
    graph = h.make_graph(
        [node], "g", graph_inputs, [h.make_empty_tensor_value_info(o) for o in outs], inits
    )
    imports = [h.make_opsetid("", opset), h.make_opsetid(MS, 1)]
    model = h.make_model(graph, opset_imports=imports, ir_version=8)
    feeds = {n: a for n, a in inputs.items() if a is not None and n not in constants}
    want = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    got = ember.onnx.load(model)(*[ember.tensor(a) for a in feeds.values()])
    got = got if isinstance(got, (tuple, list)) else (got,)
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"{op} output {k}"
        assert g.numpy().dtype == w.dtype, f"{op} output {k}"
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-4, atol=atol, err_msg=f"{op} {k}")


@pytest.mark.parametrize(
    "attrs, a_shape, b_shape",
    [
        ({}, (3, 4), (4, 5)),
        ({"alpha": 0.125, "transB": 1}, (2, 3, 4), (2, 5, 4)),
        ({"transA": 1, "alpha": -2.0}, (2, 4, 3), (4, 5)),
        ({"transA": 1, "transB": 1}, (4, 3), (5, 4)),
        ({"transBatchA": 1}, (3, 2, 4), (2, 4, 5)),
        ({"transBatchB": 1, "transB": 1}, (2, 3, 4), (5, 2, 4)),
    ],
)
def test_fused_matmul(attrs, a_shape, b_shape):
    _check("FusedMatMul", {"a": _f32(*a_shape), "b": _f32(*b_shape)}, attrs=attrs)


@pytest.mark.parametrize(
    "activation, params",
    [
        ("Relu", []),
        ("Tanh", []),
        ("Sigmoid", []),
        ("LeakyRelu", [0.3]),
        ("Clip", [-0.5, 0.7]),
        ("HardSigmoid", [0.3, 0.4]),
    ],
)
def test_fused_conv_activations(activation, params):
    attrs = {"activation": activation, "pads": [1, 1, 1, 1], "strides": [1, 2]}
    if params:
        attrs["activation_params"] = params
    inputs = {"x": _f32(2, 3, 6, 6), "w": _f32(4, 3, 3, 3), "b": _f32(4)}
    _check("FusedConv", inputs, attrs=attrs, constants=("w", "b"))


def test_fused_conv_with_a_sum_and_fused_gemm():
    inputs = {"x": _f32(1, 2, 5, 5), "w": _f32(3, 2, 3, 3), "b": None, "z": _f32(1, 3, 3, 3)}
    _check("FusedConv", inputs, attrs={"activation": "Relu"}, constants=("w",))
    gemm = {"a": _f32(3, 4), "b": _f32(5, 4), "c": _f32(5)}
    _check(
        "FusedGemm",
        gemm,
        attrs={"transB": 1, "alpha": 0.5, "activation": "LeakyRelu", "activation_alpha": 0.2},
    )


def test_gelus():
    x, bias = _f32(2, 3, 8), _f32(8)
    _check("Gelu", {"x": x})
    _check("BiasGelu", {"x": x, "bias": bias})
    _check("FastGelu", {"x": x})
    _check("FastGelu", {"x": x, "bias": bias})
    _check("QuickGelu", {"x": x})
    _check("QuickGelu", {"x": x}, attrs={"alpha": 1.5})


def test_skip_layer_normalizations():
    x, skip, gamma, beta, bias = _f32(2, 3, 8), _f32(2, 3, 8), _f32(8), _f32(8), _f32(8)
    _check("SkipLayerNormalization", {"x": x, "skip": skip, "gamma": gamma})
    full = {"x": x, "skip": skip, "gamma": gamma, "beta": beta, "bias": bias}
    _check("SkipLayerNormalization", full, n_out=4, attrs={"epsilon": 1e-5})
    _check("SkipSimplifiedLayerNormalization", {"x": x, "skip": skip, "gamma": gamma})
    simplified = {"x": x, "skip": skip, "gamma": gamma, "bias": bias}
    _check("SkipSimplifiedLayerNormalization", simplified, attrs={"epsilon": 1e-6})


def test_default_domain_normalizations_below_opset_17():
    x, scale, bias = _f32(2, 3, 8), _f32(8), _f32(8)
    ln = {"x": x, "scale": scale, "bias": bias}
    _check("LayerNormalization", ln, domain="", opset=13, attrs={"epsilon": 1e-3})
    rms = {"x": x, "scale": scale}
    _check("SimplifiedLayerNormalization", rms, domain="", opset=13, attrs={"epsilon": 1e-6})


def _q(dtype, *shape):
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype)


def _s(*shape):
    return np.asarray(RNG.random(shape) * 0.05 + 0.01, dtype=np.float32).reshape(shape)


@pytest.mark.parametrize("b_type", [np.int8, np.uint8])
@pytest.mark.parametrize(
    "attrs, per_column, with_c, quantized_out",
    [
        ({}, False, False, False),
        ({"transB": 1}, True, True, False),
        ({"transA": 1, "alpha": 0.5}, False, True, True),
        ({"transB": 1}, True, False, True),
    ],
)
def test_qgemm(b_type, attrs, per_column, with_c, quantized_out):
    m, k, n = 3, 6, 4
    a = _q(np.uint8, *((k, m) if attrs.get("transA") else (m, k)))
    b = _q(b_type, *((n, k) if attrs.get("transB") else (k, n)))
    cols = (n,) if per_column else ()
    inputs = {
        "a": a,
        "a_scale": _s(),
        "a_zp": np.array(128, np.uint8),
        "b": b,
        "b_scale": _s(*cols),
        "b_zp": np.zeros(cols, b_type) if per_column else np.array(3, b_type),
        "c": RNG.integers(-500, 500, (n,)).astype(np.int32) if with_c else None,
        "y_scale": np.array(0.5, np.float32) if quantized_out else None,
        "y_zp": np.array(120, np.uint8) if quantized_out else None,
    }
    if not quantized_out:
        del inputs["y_scale"], inputs["y_zp"]
    const = tuple(n for n in ("b", "b_scale", "b_zp") if inputs.get(n) is not None)
    _check("QGemm", inputs, attrs=attrs, constants=const, atol=1e-4 if not quantized_out else 1)


@pytest.mark.parametrize("b_type", [np.int8, np.uint8])
def test_dynamic_quantize_matmul_and_matmul_integer_to_float(b_type):
    a, b = _f32(2, 3, 5), _q(b_type, 5, 4)
    zp = np.zeros(4, b_type)
    _check("DynamicQuantizeMatMul", {"a": a, "b": b, "b_scale": _s(4), "b_zp": zp, "bias": _f32(4)})
    _check("DynamicQuantizeMatMul", {"a": a, "b": b, "b_scale": _s()})
    qa = _q(np.uint8, 2, 3, 5)
    inputs = {
        "a": qa,
        "b": b,
        "a_scale": _s(),
        "b_scale": _s(4),
        "a_zp": np.array(100, np.uint8),
        "b_zp": zp,
        "bias": _f32(4),
    }
    _check("MatMulIntegerToFloat", inputs, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_elementwise(dtype):
    zp = np.array(5, dtype)
    a, b = _q(dtype, 2, 3, 4), _q(dtype, 3, 4)
    binary = {"a": a, "sa": _s(), "za": zp, "b": b, "sb": _s(), "zb": zp, "sc": _s(), "zc": zp}
    # (onnxruntime rounds through its own fixed-point paths: one step of the output type)
    _check("QLinearAdd", binary, atol=1)
    _check("QLinearMul", binary, atol=1)
    unary = {"x": a, "sx": _s(), "zx": zp, "sy": np.array(1 / 256, np.float32), "zy": zp}
    _check("QLinearSigmoid", unary, atol=1)
    _check("QLinearLeakyRelu", unary, attrs={"alpha": 0.1}, atol=1)


torch = pytest.importorskip("torch")


def _cnn():
    nn, F = torch.nn, torch.nn.functional

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 8, 3, padding=1)
            self.b1 = nn.BatchNorm2d(8)
            self.c2 = nn.Conv2d(8, 8, 3, padding=1)
            self.fc = nn.Linear(8, 4)

        def forward(self, x):
            x = F.relu(self.b1(self.c1(x)))
            x = F.silu(self.c2(x))
            return F.gelu(self.fc(x.mean((2, 3))), approximate="tanh")

    return CNN().eval(), (torch.randn(2, 3, 8, 8),)


def _encoder():
    nn = torch.nn

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(30, 32)
            layer = nn.TransformerEncoderLayer(32, 4, 64, 0.0, activation="gelu", batch_first=True)
            self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.ln = nn.LayerNorm(32)

        def forward(self, ids, pad):
            return self.enc(self.ln(self.emb(ids)), src_key_padding_mask=pad)

    pad = torch.zeros(2, 6, dtype=torch.bool)
    pad[1, 4:] = True
    return Encoder().eval(), (torch.randint(0, 30, (2, 6)), pad)


@pytest.mark.parametrize("build", [_cnn, _encoder], ids=["cnn", "encoder"])
def test_models_onnxruntime_optimized(build, tmp_path):
    torch.manual_seed(0)
    model, args = build()
    plain, optimized = tmp_path / "plain.onnx", tmp_path / "optimized.onnx"
    names = [f"i{k}" for k in range(len(args))]
    torch.onnx.export(model, args, str(plain), opset_version=14, dynamo=False, input_names=names)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(optimized)
    feeds = {n: a.numpy() for n, a in zip(names, args)}
    (want,) = ort.InferenceSession(str(plain), options).run(None, feeds)
    domains = {n.domain for n in onnx.load(str(optimized)).graph.node}
    assert MS in domains  # the optimizer did fuse
    got = ember.onnx.load(str(optimized))(*[ember.tensor(a) for a in feeds.values()])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("how", ["static-qoperator", "dynamic-optimized"])
def test_models_onnxruntime_quantized(how, tmp_path):
    """Files onnxruntime.quantization writes: QGemm (QOperator format) and, once optimized,
    DynamicQuantizeMatMul; ember's results are onnxruntime's, bit for bit."""
    quantization = pytest.importorskip("onnxruntime.quantization")
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * 6 * 6, 8),
        torch.nn.ReLU(),
        torch.nn.Linear(8, 3),
    ).eval()
    x = torch.randn(2, 3, 6, 6)
    plain, quantized = str(tmp_path / "plain.onnx"), str(tmp_path / "quantized.onnx")
    torch.onnx.export(model, (x,), plain, opset_version=14, dynamo=False, input_names=["x"])
    if how == "static-qoperator":

        class Reader(quantization.CalibrationDataReader):
            def __init__(self):
                self.batches = iter([{"x": torch.randn(2, 3, 6, 6).numpy()} for _ in range(3)])

            def get_next(self):
                return next(self.batches, None)

        fmt = quantization.QuantFormat.QOperator
        quantization.quantize_static(plain, quantized, Reader(), quant_format=fmt)
    else:
        raw = str(tmp_path / "raw.onnx")
        quantization.quantize_dynamic(plain, raw, weight_type=quantization.QuantType.QInt8)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = quantized
        ort.InferenceSession(raw, options)
    assert MS in {n.domain for n in onnx.load(quantized).graph.node}
    (want,) = ort.InferenceSession(quantized).run(None, {"x": x.numpy()})
    got = ember.onnx.load(quantized)(ember.tensor(x.numpy()))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)


# ----------------------------------------------------------- attention (contrib_attention.py)
B, S, D, N = 2, 5, 8, 2


def _int32(*values):
    return np.array(values, np.int32)


ATTENTION_CASES = {
    "plain": ({}, {}),
    "lengths mask": ({"mask": _int32(3, 5)}, {}),
    "ends and starts": ({"mask": _int32(4, 5, 1, 0)}, {}),
    "0/1 mask": ({"mask": (RNG.random((B, S)) > 0.3).astype(np.int32)}, {}),
    "3-D mask": ({"mask": (RNG.random((B, S, S)) > 0.3).astype(np.int32)}, {}),
    "causal": ({}, {"unidirectional": 1}),
    "causal, padded, scaled": (
        {"mask": _int32(4, 2)},
        {"unidirectional": 1, "scale": 0.3, "mask_filter_value": -1e4},
    ),
    # (rows whose every key the padding masks: the causal frontier still decides them)
    "0/1 mask, causal": (
        {"mask": np.array([[0, 1, 1, 0, 1], [0, 0, 1, 1, 1]], np.int32)},
        {"unidirectional": 1},
    ),
    "uneven heads": ({}, {"qkv_hidden_sizes": [8, 8, 4]}),
    "attention bias": ({"attention_bias": _f32(1, N, S, S)}, {}),
    "past": ({"past": _f32(2, B, N, 3, D // N)}, {}),
}


@pytest.mark.parametrize("case", list(ATTENTION_CASES))
def test_attention(case):
    extra, attrs = ATTENTION_CASES[case]
    hidden = sum(attrs.get("qkv_hidden_sizes", [D] * 3))
    inputs = {
        "x": _f32(B, S, D),
        "w": _f32(D, hidden),
        "b": _f32(hidden),
        "mask": extra.get("mask"),
        "past": extra.get("past"),
        "attention_bias": extra.get("attention_bias"),
    }
    while inputs and list(inputs.values())[-1] is None:  # (trailing optional inputs left out)
        inputs.popitem()
    n_out = 2 if "past" in extra else 1
    _check("Attention", inputs, n_out=n_out, attrs={"num_heads": N, **attrs})


MHA_CASES = {
    "BSD, bias": lambda: {
        "q": _f32(B, S, D), "k": _f32(B, 3, D), "v": _f32(B, 3, D), "bias": _f32(3 * D)
    },
    "BNSH key and value": lambda: {
        "q": _f32(B, S, D), "k": _f32(B, N, 3, D // N), "v": _f32(B, N, 3, D // N)
    },
    "padding mask": lambda: {
        "q": _f32(B, S, D), "k": _f32(B, 4, D), "v": _f32(B, 4, D), "bias": None,
        "mask": (RNG.random((B, 4)) > 0.3).astype(np.int32),
    },
    "lengths": lambda: {
        "q": _f32(B, S, D), "k": _f32(B, 4, D), "v": _f32(B, 4, D), "bias": None,
        "mask": _int32(2, 4),
    },
}  # fmt: skip


@pytest.mark.parametrize("case", list(MHA_CASES))
@pytest.mark.parametrize("causal", [0, 1])
def test_multi_head_attention(case, causal):
    inputs = MHA_CASES[case]()
    _check("MultiHeadAttention", inputs, attrs={"num_heads": N, "unidirectional": causal})


@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("with_segments", [False, True])
def test_embed_layer_normalization(with_mask, with_segments):
    vocab, positions, hidden = 11, 7, 8
    inputs = {
        "ids": RNG.integers(0, vocab, (B, S)).astype(np.int32),
        "segments": RNG.integers(0, 2, (B, S)).astype(np.int32) if with_segments else None,
        "word": _f32(vocab, hidden),
        "position": _f32(positions, hidden),
        "segment": _f32(2, hidden) if with_segments else None,
        "gamma": _f32(hidden),
        "beta": _f32(hidden),
        "mask": (RNG.random((B, S)) > 0.3).astype(np.int32) if with_mask else None,
    }
    if not with_mask:
        inputs.pop("mask")
    _check("EmbedLayerNormalization", inputs, n_out=2, attrs={"epsilon": 1e-5})


def _mha_model(names):
    outs = ["y"]
    node = h.make_node("MultiHeadAttention", names, outs, domain=MS, num_heads=N)
    graph = h.make_graph(
        [node],
        "g",
        [h.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in names if n],
        [h.make_empty_tensor_value_info("y")],
    )
    imports = [h.make_opsetid("", 14), h.make_opsetid(MS, 1)]
    return h.make_model(graph, opset_imports=imports, ir_version=8)


@pytest.mark.parametrize("packing", ["QKV", "KV"])
def test_packed_multi_head_attention_equals_the_unpacked(packing):
    # onnxruntime's CPU kernel runs no packed layout: its unpacked run is the reference
    q, k, v = _f32(B, S, D), _f32(B, S, D), _f32(B, S, D)
    want = ort.InferenceSession(_mha_model(["q", "k", "v"]).SerializeToString()).run(
        None, {"q": q, "k": k, "v": v}
    )[0]
    split = [t.reshape(B, S, N, 1, D // N) for t in (q, k, v)]
    if packing == "QKV":
        model, feeds = _mha_model(["q"]), [np.concatenate(split, 3)]
    else:
        model, feeds = _mha_model(["q", "k"]), [q, np.concatenate(split[1:], 3)]
    got = ember.onnx.load(model)(*[ember.tensor(a) for a in feeds])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)


def _u8(*shape):
    return RNG.integers(0, 256, shape).astype(np.uint8)


QATTENTION_CASES = {
    "per tensor": lambda: {},
    "per column weight": lambda: {
        "w_scale": (RNG.random(3 * D) * 0.02 + 0.005).astype(np.float32),
        "w_zero_point": np.zeros(3 * D, np.int8),
    },
    "lengths mask": lambda: {"mask": _int32(3, 5)},
    "0/1 mask, causal": lambda: {"mask": (RNG.random((B, S)) > 0.3).astype(np.int32)},
}


@pytest.mark.parametrize("case", list(QATTENTION_CASES))
def test_q_attention(case):
    """QAttention (8-bit input and weight) against onnxruntime's integer kernel: the
    dequantized computation differs by float32 rounding of the sums only."""
    extra = QATTENTION_CASES[case]()
    inputs = {
        "x": _u8(B, S, D),
        "w": RNG.integers(-127, 128, (D, 3 * D)).astype(np.int8),
        "b": _f32(3 * D),
        "x_scale": np.array(0.02, np.float32),
        "w_scale": extra.get("w_scale", np.array(0.01, np.float32)),
        "mask": extra.get("mask"),
        "x_zero_point": np.array(128, np.uint8),
        "w_zero_point": extra.get("w_zero_point", np.array(0, np.int8)),
    }
    attrs = {"num_heads": N, "unidirectional": int("causal" in case)}
    _check("QAttention", inputs, attrs=attrs, atol=1e-4)


@pytest.mark.parametrize("with_segments", [False, True])
def test_q_embed_layer_normalization(with_segments):
    vocab, positions, hidden = 11, 7, 8

    def scale(v):
        return np.array(v, np.float32)

    inputs = {
        "ids": RNG.integers(0, vocab, (B, S)).astype(np.int32),
        "segments": RNG.integers(0, 2, (B, S)).astype(np.int32) if with_segments else None,
        "word": _u8(vocab, hidden),
        "position": _u8(positions, hidden),
        "segment": _u8(2, hidden) if with_segments else None,
        "gamma": _u8(hidden),
        "beta": _u8(hidden),
        "mask": (RNG.random((B, S)) > 0.3).astype(np.int32),
        "word_scale": scale(0.01),
        "position_scale": scale(0.02),
        "segment_scale": scale(0.03) if with_segments else None,
        "gamma_scale": scale(0.01),
        "beta_scale": scale(0.02),
        "word_zp": np.array(128, np.uint8),
        "position_zp": np.array(100, np.uint8),
        "segment_zp": np.array(120, np.uint8) if with_segments else None,
        "gamma_zp": np.array(10, np.uint8),
        "beta_zp": np.array(128, np.uint8),
    }
    _check("QEmbedLayerNormalization", inputs, n_out=2, attrs={"epsilon": 1e-5}, atol=1e-4)


def test_q_attention_refuses_a_scale_of_the_wrong_shape():
    from ember.errors import EmberError

    inputs = {
        "x": _u8(B, S, D),
        "w": RNG.integers(-127, 128, (D, 3 * D)).astype(np.int8),
        "b": _f32(3 * D),
        "x_scale": np.array([0.02, 0.03], np.float32),
        "w_scale": np.array(0.01, np.float32),
    }
    names = list(inputs)
    node = h.make_node("QAttention", names, ["y"], domain=MS, num_heads=N)
    graph = h.make_graph(
        [node],
        "g",
        [h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in inputs.items()],
        [h.make_empty_tensor_value_info("y")],
    )  # fmt: skip
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 14), h.make_opsetid(MS, 1)])
    with pytest.raises(EmberError, match=r"QAttention.*scale of shape \(2,\)"):
        ember.onnx.load(model)(*[ember.tensor(a) for a in inputs.values()])
