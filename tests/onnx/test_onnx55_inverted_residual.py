"""The fused inverted-residual kernel (kernels/cinverted_residual.py) and the pattern that makes
its op (ops/pointwise_depthwise.py): the kernel against the op's NumPy kernel and PyTorch over
random shapes, strides, padding, dilation, odd channel counts, both float dtypes and non-finite
values; MobileNet blocks exported by PyTorch (both exporters) imported with the fusion forced on
and off, against onnxruntime, on generated code and on the C graph runner; the measured choice's
cache. Without a compiler the kernel declines and the import runs unfused."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import ember
from ember.kernels import ccompile, cinverted_residual
from ember.kernels.conv_plan import conv_geometry
from ember.ops.pointwise_depthwise import POINTWISE_DEPTHWISE

torch = pytest.importorskip("torch")

needs_cc = pytest.mark.skipif(
    not ccompile.compiler_available(), reason="no C compiler: the fused kernel declines"
)
RELU6 = (0.0, 6.0, True, True)
RELU = (0.0, float("inf"), True, False)
HARDTANH = (-1.0, 0.5, True, True)


def _operands(rng, n, cin, cmid, size, kernel, dtype):
    x = rng.standard_normal((n, cin, *size)).astype(dtype)
    w1 = (rng.standard_normal((cmid, cin, 1, 1)) / np.sqrt(cin)).astype(dtype)
    b1 = rng.standard_normal((1, cmid, 1, 1)).astype(dtype)
    w2 = rng.standard_normal((cmid, 1, *kernel)).astype(dtype)
    b2 = rng.standard_normal(cmid).astype(dtype)
    return x, w1, b1, w2, b2


def _attrs(stride, padding, dilation, clamps):
    return dict(
        stride=stride, padding=padding, dilation=dilation, clamp1=clamps[0], clamp2=clamps[1]
    )


def _torch_reference(x, w1, b1, w2, b2, stride, padding, dilation, clamps):
    """PyTorch in float64, the asymmetric padding applied by F.pad."""
    F = torch.nn.functional
    t = [torch.tensor(a, dtype=torch.float64) for a in (x, w1, b1, w2, b2)]
    e = F.conv2d(t[0], t[1]) + t[2].reshape(1, -1, 1, 1)
    if clamps[0] is not None:
        e = e.clamp(clamps[0][0], clamps[0][1])
    (top, bottom), (left, right) = padding
    e = F.pad(e, (left, right, top, bottom))
    y = F.conv2d(e, t[3], stride=stride, dilation=dilation, groups=w1.shape[0])
    y = y + t[4].reshape(1, -1, 1, 1)
    if clamps[1] is not None:
        y = y.clamp(clamps[1][0], clamps[1][1])
    return y.numpy()


# (n, cin, cmid, size, kernel, stride, padding, dilation, clamps)
GEOMETRIES = [
    (2, 3, 5, (9, 11), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), (RELU6, RELU6)),
    (1, 8, 32, (40, 37), (3, 3), (2, 2), ((1, 1), (1, 1)), (1, 1), (RELU6, RELU6)),
    (3, 7, 17, (13, 6), (5, 5), (2, 2), ((2, 2), (2, 2)), (1, 1), (RELU, None)),
    (2, 4, 9, (10, 10), (3, 3), (1, 1), ((2, 2), (2, 2)), (2, 2), (None, HARDTANH)),
    (1, 5, 8, (7, 7), (3, 3), (3, 3), ((0, 0), (0, 0)), (1, 1), (RELU6, RELU)),
    (2, 16, 33, (29, 31), (3, 3), (2, 2), ((0, 1), (0, 1)), (1, 1), (RELU6, RELU6)),
    (1, 1, 3, (5, 40), (1, 7), (1, 2), ((0, 0), (3, 3)), (1, 1), (HARDTANH, None)),
    (2, 6, 12, (16, 15), (3, 5), (2, 1), ((1, 0), (2, 1)), (1, 2), (None, None)),
]


@needs_cc
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: f"{g[0]}x{g[1]}->{g[2]}@{g[3]}")
def test_kernel_against_the_specification_and_torch(geometry, dtype):
    n, cin, cmid, size, kernel, stride, padding, dilation, clamps = geometry
    rng = np.random.default_rng(sum(size) + cmid)
    operands = _operands(rng, n, cin, cmid, size, kernel, dtype)
    depthwise = dict(stride=stride, padding=padding, dilation=dilation, groups=cmid)
    p = conv_geometry(depthwise, size, operands[3].shape)
    got = cinverted_residual.forward(*operands, p, clamps)
    assert got is not None and got.dtype == dtype
    spec = POINTWISE_DEPTHWISE.kernel(*operands, **_attrs(stride, padding, dilation, clamps))
    theirs = _torch_reference(*operands, stride, padding, dilation, clamps)
    assert got.shape == spec.shape == theirs.shape
    tol = 2e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, spec, rtol=tol, atol=tol)
    np.testing.assert_allclose(got, theirs, rtol=tol, atol=tol)


@needs_cc
def test_non_finite_values_land_where_the_specification_puts_them():
    rng = np.random.default_rng(7)
    x, w1, b1, w2, b2 = _operands(rng, 2, 5, 11, (14, 13), (3, 3), np.float32)
    x[0, 1, 3, 4], x[1, 0, 10, 0], x[1, 2, 0, 12] = np.nan, np.inf, -np.inf
    w2[4, 0, 0, 0] = np.inf  # (times the zero frame: NaN at the border, as the specification)
    for clamps in [(None, None), (RELU6, RELU6), (RELU, HARDTANH)]:
        attrs = _attrs((2, 2), ((1, 1), (1, 1)), (1, 1), clamps)
        p = conv_geometry(dict(attrs, groups=11, padding=attrs["padding"]), (14, 13), w2.shape)
        got = cinverted_residual.forward(x, w1, b1, w2, b2, p, clamps)
        spec = POINTWISE_DEPTHWISE.kernel(x, w1, b1, w2, b2, **attrs)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(spec))
        np.testing.assert_array_equal(np.isinf(got), np.isinf(spec))
        finite = np.isfinite(spec)
        np.testing.assert_allclose(got[finite], spec[finite], rtol=2e-5, atol=2e-5)


def _mobilenet_blocks(cin=5, image=30):
    nn = torch.nn

    def block(cin, mid, cout, stride):
        return nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU6(),
            nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), nn.BatchNorm2d(mid),
            nn.ReLU6(), nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout),
        )  # fmt: skip

    torch.manual_seed(0)
    net = nn.Sequential(block(cin, 21, 8, 2), block(8, 32, 8, 1))
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    return net.eval(), torch.randn(3, cin, image, image)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{dynamo: (path, input, PyTorch's output)}: each exporter's file, written once."""
    folder = tmp_path_factory.mktemp("onnx55")
    return {dynamo: _export(folder, dynamo) for dynamo in (False, True)}


def _export(tmp_path, dynamo: bool):
    net, x = _mobilenet_blocks()
    path = str(tmp_path / f"blocks_{dynamo}.onnx")
    kwargs = {"dynamo": dynamo, "opset_version": 18 if dynamo else 17}
    torch.onnx.export(net, (x,), path, input_names=["x"], **kwargs)
    with torch.no_grad():
        expected = net(x).numpy()
    return path, x.numpy(), expected


@pytest.mark.parametrize("fused", [True, False], ids=["fusion-forced", "fusion-declined"])
@pytest.mark.parametrize("dynamo", [False, True], ids=["script", "dynamo"])
def test_exported_blocks_against_onnxruntime(exported, monkeypatch, dynamo, fused):
    ort = pytest.importorskip("onnxruntime")
    from ember.graph import interpreter
    from ember.runtime import cgraph

    monkeypatch.setattr(cinverted_residual, "pays", lambda *args: fused)
    path, x, expected = exported[dynamo]
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    theirs = session.run(None, {session.get_inputs()[0].name: x})[0]
    f = ember.onnx.load(path)
    ours = f(x).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ours, expected, rtol=1e-4, atol=1e-4)
    graph = f._function.graph
    ops = [n.op.name for n in graph.nodes if n.kind == "call"]
    # both blocks' expansion and depthwise convolutions, where the kernel can run
    want = 2 if fused and ccompile.compiler_available() else 0
    assert ops.count("pointwise_depthwise") == want, ops
    spec = interpreter.all_values(graph, [x])[graph.outputs[0].name]
    np.testing.assert_allclose(ours, spec, rtol=1e-5, atol=1e-5)
    steps = cgraph.c_steps(graph)
    if steps is not None:
        for threads in (1, 2):
            got = cgraph.CGraphProgram(graph, steps, None, threads)(x)[0]
            np.testing.assert_allclose(got, spec, rtol=1e-5, atol=1e-5)


@needs_cc
def test_the_measured_choice_is_kept_and_a_damaged_file_is_measured_again(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cinverted_residual._choices, "_loaded", {})
    p = conv_geometry(
        dict(stride=(2, 2), padding=((1, 1), (1, 1)), dilation=(1, 1), groups=24), (20, 20),
        (24, 1, 3, 3),
    )  # fmt: skip
    shapes = ((2, 6, 20, 20), (24, 6, 1, 1), (24, 1, 3, 3))
    measured = []
    real = cinverted_residual._measure

    def counting(*args):
        measured.append(args)
        return real(*args)

    monkeypatch.setattr(cinverted_residual, "_measure", counting)
    first = cinverted_residual.pays(*shapes, p, np.float32, (RELU6, RELU6))
    assert len(measured) == 1 and isinstance(first, bool)
    path = cinverted_residual._choices.path()
    data = json.loads(path.read_text())
    assert list(data["choices"].values()) == [first]
    cinverted_residual._choices.forget()  # (another process: reads the file)
    assert cinverted_residual.pays(*shapes, p, np.float32, (RELU6, RELU6)) == first
    assert len(measured) == 1
    path.write_text('{"format": 1, "machine": "x", "choices": {"a": "yes"}}')
    os.chmod(path, 0o644)
    cinverted_residual._choices.forget()
    cinverted_residual.pays(*shapes, p, np.float32, (RELU6, RELU6))
    assert len(measured) == 2


def test_without_a_compiler_the_kernel_declines(monkeypatch):
    monkeypatch.setattr(ccompile, "compiler_available", lambda: False)
    cinverted_residual._function.cache_clear()
    try:
        rng = np.random.default_rng(3)
        operands = _operands(rng, 1, 3, 6, (8, 8), (3, 3), np.float32)
        p = conv_geometry(
            dict(stride=(1, 1), padding=((1, 1), (1, 1)), dilation=(1, 1), groups=6), (8, 8),
            (6, 1, 3, 3),
        )  # fmt: skip
        assert cinverted_residual.forward(*operands, p, (RELU6, RELU6)) is None
        assert not cinverted_residual.pays((1, 3, 8, 8), (6, 3, 1, 1), (6, 1, 3, 3), p,
                                           np.float32, (RELU6, RELU6))  # fmt: skip
    finally:
        cinverted_residual._function.cache_clear()


def test_the_op_refuses_mismatched_operands():
    from ember.errors import EmberError
    from ember.types import TensorType

    f32 = ember.float32
    x, w1 = TensorType((1, 3, 8, 8), f32), TensorType((6, 4, 1, 1), f32)
    b, w2 = TensorType((6,), f32), TensorType((6, 1, 3, 3), f32)
    attrs = _attrs((1, 1), ((1, 1), (1, 1)), (1, 1), (None, None))
    with pytest.raises(EmberError, match="pointwise_depthwise.*w1|w1.*pointwise_depthwise"):
        POINTWISE_DEPTHWISE.infer(x, w1, b, w2, b, **attrs)
    with pytest.raises(EmberError, match="float32 or float64"):
        i = TensorType((1, 3, 8, 8), ember.int32)
        POINTWISE_DEPTHWISE.infer(i, w1, b, w2, b, **attrs)


@needs_cc
def test_one_thread_and_two_give_the_same_bits():
    """The band height depends on the thread count (a small batch gets shorter bands); each
    output's sums do not, so the results are identical."""
    rng = np.random.default_rng(11)
    operands = _operands(rng, 1, 6, 13, (23, 19), (3, 3), np.float32)
    p = conv_geometry(
        dict(stride=(2, 2), padding=((1, 1), (1, 1)), dilation=(1, 1), groups=13), (23, 19),
        (13, 1, 3, 3),
    )  # fmt: skip
    before = ember.get_num_threads()
    try:
        results = []
        for threads in (1, 2):
            ember.set_num_threads(threads)
            results.append(cinverted_residual.forward(*operands, p, (RELU6, RELU6)))
    finally:
        ember.set_num_threads(before)
    assert results[0].tobytes() == results[1].tobytes()
