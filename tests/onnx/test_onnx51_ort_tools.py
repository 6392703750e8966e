"""Files onnxruntime's tools write from models PyTorch's dynamo exporter wrote, against
onnxruntime: its transformers optimizer (SkipLayerNormalization, BiasGelu) and quantize_dynamic
and quantize_static (QDQ and QOperator) of the BERT-like encoder of tests/onnx/_torch_zoo51.py.

QOperator's QLinearAdd and QLinearMul were computed as their definition says (dequantize,
compute in float32, quantize), which lands one step of the output type from onnxruntime's
kernels now and then; after a LayerNormalization of the residual sum that was 2e-2 on the
quantized BERT. They now round as onnxruntime's x86 kernels do (onnx/ops/contrib_qlinear_arith.py):
every pair of 8-bit values, at random scales and zero points, in each broadcast form, equal to
onnxruntime's bit for bit."""

from __future__ import annotations

import contextlib
import io
import zlib

import numpy as np
import pytest

import ember

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

MS = "com.microsoft"


def _qlinear(op, elem, a_shape, b_shape, numbers) -> bytes:
    node = helper.make_node(op, ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["c"], domain=MS)
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("a", elem, a_shape),
            helper.make_tensor_value_info("b", elem, b_shape),
        ],
        [helper.make_tensor_value_info("c", elem, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in numbers.items()],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
    return helper.make_model(graph, opset_imports=opsets).SerializeToString()


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize(
    "a_shape, b_shape",
    [((256, 256), (256, 256)), ((256, 256), (256,)), ((256, 256), (1,)), ((1,), (256, 256)),
     ((256, 1), (256, 256)), ((2, 1, 256), (1, 3, 256))],
)  # fmt: skip
def test_qlinear_add_and_mul_round_as_onnxruntime(op, dtype, a_shape, b_shape):
    rng = np.random.default_rng(zlib.crc32(repr((op, dtype, a_shape, b_shape)).encode()))
    info = np.iinfo(dtype)
    elem = TensorProto.INT8 if dtype == np.int8 else TensorProto.UINT8
    every = np.arange(info.min, info.max + 1).astype(dtype)
    a = np.resize(every, a_shape).astype(dtype)
    b = np.resize(np.roll(every, 77), b_shape).astype(dtype)
    if a.shape == b.shape:  # (each value against each other one)
        a, b = np.repeat(every[:, None], 256, 1), np.repeat(every[None, :], 256, 0)
    for _ in range(2):
        output_scale = rng.uniform(0.001, 0.05) if op == "QLinearAdd" else rng.uniform(5e-4, 2e-3)
        numbers = {
            "sa": np.float32(rng.uniform(0.001, 0.05)),
            "sb": np.float32(rng.uniform(0.001, 0.05)),
            "sc": np.float32(output_scale),
            **{k: dtype(rng.integers(info.min, info.max + 1)) for k in ("za", "zb", "zc")},
        }
        model = _qlinear(op, elem, list(a.shape), list(b.shape), numbers)
        session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        (want,) = session.run(None, {"a": a, "b": b})
        np.testing.assert_array_equal(ember.onnx.load(model)(a, b).numpy(), want)


# values whose sum or product lies by a rounding midpoint, where the definition's arithmetic
# gives the other integer: (op, a, b, scales a, b, c, zero points a, b, c)
MIDPOINTS = [
    ("QLinearAdd", -43, 25, (0.007158881, 0.0019347088, 0.0078731235), (-6, 0, 4)),
    ("QLinearAdd", -55, -91, (0.047151435, 0.008369244, 0.010997121), (-109, 93, -59)),
    ("QLinearMul", -123, -41, (0.023511602, 0.009485301, 0.001752067), (41, -37, -22)),
]


@pytest.mark.parametrize("op, a, b, scales, zero_points", MIDPOINTS)
def test_qlinear_midpoints(op, a, b, scales, zero_points):
    numbers = {
        **{k: np.float32(v) for k, v in zip(("sa", "sb", "sc"), scales)},
        **{k: np.int8(v) for k, v in zip(("za", "zb", "zc"), zero_points)},
    }
    a = np.full((2, 40), a, np.int8)
    b = np.full((1,), b, np.int8) if a[0, 0] == -55 else np.full((40,), b, np.int8)
    model = _qlinear(op, TensorProto.INT8, list(a.shape), list(b.shape), numbers)
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {"a": a, "b": b})
    sa, sb, sc = (np.float32(v) for v in scales)
    za, zb, zc = zero_points
    x, y = np.float32(int(a[0, 0]) - za) * sa, np.float32(int(b[0]) - zb) * sb
    definition = (x + y if op == "QLinearAdd" else x * y) / sc
    assert np.rint(definition) + zc != want[0, 0]  # (the case is one)
    np.testing.assert_array_equal(ember.onnx.load(model)(a, b).numpy(), want)


torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript", reason="torch.onnx.export(dynamo=True) needs onnxscript")

from . import _torch_zoo51 as zoo  # noqa: E402


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ort_tools")
    path = folder / "bert.onnx"
    zoo.export("bert", 18, True, path)
    return folder, path


class _Feeds:
    """quantize_static's calibration reader over the zoo's inputs."""

    def __init__(self, names):
        self.batches = iter([dict(zip(names, zoo.inputs("bert", 2, 5 + i))) for i in range(4)])

    def get_next(self):
        return next(self.batches, None)


def _check(path, contrib=()):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    model = ember.onnx.load(str(path))
    ops = {(n.domain, n.op_type) for n in onnx.load(str(path)).graph.node}
    assert set(contrib) <= ops, sorted(ops)
    for batch, length in ((1, 5), (3, 8)):
        feed = zoo.inputs("bert", batch, length)
        want = session.run(None, {i.name: a for i, a in zip(session.get_inputs(), feed)})
        for got, w in zip(model(*feed), want):
            np.testing.assert_allclose(got.numpy(), w, rtol=1e-5, atol=2e-5)


def test_transformers_optimizer_on_a_dynamo_bert(bert):
    from onnxruntime.transformers import optimizer

    folder, path = bert
    with contextlib.redirect_stdout(io.StringIO()):
        optimized = optimizer.optimize_model(
            str(path), model_type="bert", num_heads=2, hidden_size=16
        )
    target = folder / "bert_optimized.onnx"
    optimized.save_model_to_file(str(target))
    _check(target, [(MS, "SkipLayerNormalization"), (MS, "BiasGelu")])


@pytest.mark.parametrize("how", ["dynamic", "QDQ", "QOperator"])
def test_quantized_dynamo_bert(bert, how):
    from onnxruntime import quantization as q

    folder, path = bert
    target = folder / f"bert_{how}.onnx"
    if how == "dynamic":
        q.quantize_dynamic(str(path), str(target), weight_type=q.QuantType.QInt8)
        _check(target)
        return
    quant_format = q.QuantFormat.QDQ if how == "QDQ" else q.QuantFormat.QOperator
    q.quantize_static(str(path), str(target), _Feeds(["ids", "mask"]), quant_format=quant_format)
    _check(target, [(MS, "QLinearAdd"), (MS, "QLinearMul")] if how == "QOperator" else ())
