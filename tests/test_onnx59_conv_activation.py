"""A convolution store's activation (kernels/cconv_activation.py, ops/conv_epilogue.py): SiLU as
ONNX files write it (``y * sigmoid(y)``) and as one op, HardSwish, HardSigmoid, GELU (erf and
tanh), sigmoid, after the bias, a residual or a ReLU6 clamp, stored by the one-group kernels
(rows of a panel's tile, strided runs, the taps and wide layouts of small planes) and the
depthwise ones, float32 and float64. The fused graph agrees with the unfused one in generated
code and the C graph runner (the activation is the unfused loop's own C expression: equal
but for the vector math library's few ulps), with the NumPy interpreter (the specification) and
PyTorch; an imported ONNX model agrees with onnxruntime. Without a compiler nothing fuses and
the NumPy kernels run (the same assertions, the fused-node count excepted)."""

import zlib

import numpy as np
import pytest

import ember
from ember.graph import interpreter
from ember.kernels import ccompile
from ember.runtime import cgraph
from ember.runtime.codegen import compile_graph
from ember.transforms import DCE, optimize
from ember.transforms.epilogue import EPILOGUE
from ember.transforms.fuse import FUSE

F = ember.nn.functional
COMPILER = ccompile.compiler_available()

ACTIVATIONS = {
    "silu as x * sigmoid(x)": (lambda y: y * ember.sigmoid(y), "silu"),
    "silu": (F.silu, "silu"),
    "hardswish": (F.hardswish, "hardswish"),
    "hardsigmoid": (F.hardsigmoid, "hardsigmoid"),
    "gelu": (F.gelu, "gelu"),
    "gelu tanh": (lambda y: F.gelu(y, approximate="tanh"), "gelu_tanh"),
    "sigmoid": (ember.sigmoid, "sigmoid"),
    "relu6 then silu": (lambda y: F.silu(F.relu6(y)), "relu6_silu"),
}
# (in channels, out channels, height, width, kernel, stride, groups): a panel's rows, strided
# runs, a small plane (the taps or wide layouts), 1x1 planes, depthwise
GEOMETRIES = [
    (3, 20, 9, 21, 3, 1, 1),
    (4, 12, 13, 17, 3, 2, 1),
    (24, 40, 3, 3, 1, 1, 1),
    (40, 10, 1, 1, 1, 1, 1),
    (6, 6, 11, 19, 3, 1, 6),
    (8, 8, 12, 9, 5, 2, 8),
]


def _torch_activation(torch, key):
    tf = torch.nn.functional
    return {
        "silu": tf.silu,
        "hardswish": tf.hardswish,
        "hardsigmoid": tf.hardsigmoid,
        "gelu": tf.gelu,
        "gelu_tanh": lambda y: tf.gelu(y, approximate="tanh"),
        "sigmoid": torch.sigmoid,
        "relu6_silu": lambda y: tf.silu(tf.relu6(y)),
    }[key]


def _case(geometry, dtype, seed, residual=False):
    cin, cout, h, w, k, stride, groups = geometry
    rng = np.random.default_rng(seed)
    x = (3 * rng.standard_normal((2, cin, h, w))).astype(dtype)
    wt = rng.standard_normal((cout, cin // groups, k, k)).astype(dtype)
    b = rng.standard_normal(cout).astype(dtype)
    x.reshape(-1)[:2] = [np.nan, -np.inf]  # (NaN and infinities through the activation)
    arrays = [x, wt, b]
    geo = dict(stride=stride, padding=k // 2, groups=groups)
    if residual:
        oh, ow = (h + 2 * (k // 2) - k) // stride + 1, (w + 2 * (k // 2) - k) // stride + 1
        arrays.append(rng.standard_normal((2, cout, oh, ow)).astype(dtype))
    return arrays, geo


def _runs(graph):
    runs = {"generated code": compile_graph(graph)}
    steps = cgraph.c_steps(graph)
    if steps is not None:
        runs["C graph runner"] = cgraph.CGraphProgram(graph, steps, threads=1)
    return runs


def _activated_stores(graph) -> int:
    return sum(
        1
        for n in graph.nodes
        if n.kind == "call"
        and n.op.name == "fused_epilogue"
        and n.attrs["producer"].name == "conv"
        and any(i.op.name not in ("add", "maximum", "minimum", "relu") for i in n.attrs["program"])
    )


def _tolerance(dtype):
    # the vector math library's few ulps against the scalar and NumPy's functions, times the
    # activation's slope (at most about 1.1 for these)
    return (2e-6, 1e-6) if dtype == np.float32 else (1e-13, 1e-13)


def _check(block, arrays, dtype, torch_want=None):
    graph = ember.trace(block, *map(ember.tensor, arrays), opt_level=0).graph
    unfused, _ = optimize(graph.copy(), passes=[FUSE, DCE])
    fused, _ = optimize(graph.copy(), passes=[FUSE, DCE, EPILOGUE], check=arrays)
    fused.verify()
    if COMPILER:
        assert _activated_stores(fused) == 1, str(fused)
    rtol, atol = _tolerance(dtype)
    want = interpreter.run(graph, arrays)[0]  # (the NumPy specification)
    unfused_runs = _runs(unfused)
    for way, run in _runs(fused).items():
        got = np.asarray(run(*arrays)[0])
        same = np.asarray(unfused_runs[way](*arrays)[0])
        for other in (same, want):
            np.testing.assert_array_equal(np.isnan(got), np.isnan(other), way)
            np.testing.assert_allclose(got, other, rtol=rtol, atol=atol, err_msg=way)
    if torch_want is not None:
        got = np.asarray(compile_graph(fused)(*arrays)[0])
        np.testing.assert_allclose(got, torch_want, rtol=max(rtol, 1e-5), atol=max(atol, 1e-5))


# each activation on three of the geometries (in turn, so every geometry takes several), float32;
# float64 on one
CASES = [
    (name, GEOMETRIES[(i + j) % len(GEOMETRIES)], np.float32)
    for i, name in enumerate(ACTIVATIONS)
    for j in range(3)
] + [(name, GEOMETRIES[i % len(GEOMETRIES)], np.float64) for i, name in enumerate(ACTIVATIONS)]


@pytest.mark.parametrize(("name", "geometry", "dtype"), CASES)
def test_the_stored_activation_agrees_with_the_unfused_graph_and_numpy(name, geometry, dtype):
    act, _ = ACTIVATIONS[name]
    arrays, geo = _case(geometry, dtype, seed=zlib.crc32(repr((name, geometry)).encode()) % 1000)

    def block(x, w, b):
        return act(F.conv2d(x, w, b, **geo))

    _check(block, arrays, dtype)


@pytest.mark.parametrize("geometry", [GEOMETRIES[0], GEOMETRIES[1], GEOMETRIES[3]])
@pytest.mark.parametrize("name", ["silu as x * sigmoid(x)", "hardswish"])
def test_an_activation_after_a_residual_is_stored_too(name, geometry):
    act, _ = ACTIVATIONS[name]
    arrays, geo = _case(geometry, np.float32, seed=7, residual=True)

    def block(x, w, b, r):
        return act(F.conv2d(x, w, b, **geo) + r)

    _check(block, arrays, np.float32)


@pytest.mark.parametrize(
    ("name", "geometry"),
    [(name, GEOMETRIES[(2 * i) % len(GEOMETRIES)]) for i, name in enumerate(ACTIVATIONS)],
)
def test_the_stored_activation_agrees_with_torch(name, geometry):
    torch = pytest.importorskip("torch")
    act, key = ACTIVATIONS[name]
    arrays, geo = _case(geometry, np.float64, seed=3)
    arrays[0].reshape(-1)[:2] = 0.5  # (PyTorch's own NaN handling is not what is compared)
    t = [torch.from_numpy(a) for a in arrays]
    want = _torch_activation(torch, key)(torch.nn.functional.conv2d(*t, **geo)).numpy()

    def block(x, w, b):
        return act(F.conv2d(x, w, b, **geo))

    _check(block, arrays, np.float64, torch_want=want)


def test_a_mask_or_half_precision_keeps_the_activation_apart():
    """A ReLU mask read beside the activation, or a 16-bit result, leaves the activation a node
    of its own (the store would mask the value before it; a 16-bit store rounds first)."""
    arrays, geo = _case(GEOMETRIES[0], np.float32, seed=1)

    def masked(x, w, b):
        y = F.conv2d(x, w, b, **geo)
        return F.silu(y), y > 0

    graph = ember.trace(masked, *map(ember.tensor, arrays), opt_level=0).graph
    fused, _ = optimize(graph.copy(), passes=[FUSE, DCE, EPILOGUE], check=arrays)
    assert _activated_stores(fused) == 0
    for got, want in zip(compile_graph(fused)(*arrays), interpreter.run(graph, arrays)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=2e-6, atol=1e-6)
    half = [a.astype(ember.bfloat16.np) for a in arrays]

    def block(x, w, b):
        return F.silu(F.conv2d(x, w, b, **geo))

    graph = ember.trace(block, *map(ember.tensor, half), opt_level=0).graph
    fused, _ = optimize(graph.copy(), passes=[FUSE, DCE, EPILOGUE], check=half)
    assert _activated_stores(fused) == 0


@pytest.mark.parametrize("activation", ["silu", "hardswish", "hardsigmoid"])
def test_an_imported_models_stored_activation_agrees_with_onnxruntime(tmp_path, activation):
    torch = pytest.importorskip("torch")
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    nn = torch.nn
    acts = {"silu": nn.SiLU, "hardswish": nn.Hardswish, "hardsigmoid": nn.Hardsigmoid}
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, 2, 1),
        nn.BatchNorm2d(16),
        acts[activation](),
        nn.Conv2d(16, 16, 3, 1, 1, groups=16),
        acts[activation](),
        nn.Conv2d(16, 24, 1),
        acts[activation](),
    ).eval()
    x = torch.randn(2, 3, 20, 20) * 3
    path = str(tmp_path / "model.onnx")
    torch.onnx.export(model, (x,), path, opset_version=17, dynamo=False)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    want = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    f = ember.onnx.load(path)
    got = f(ember.tensor(x.numpy()))
    got = (got[0] if isinstance(got, tuple) else got).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if COMPILER:
        assert _activated_stores(f.graph) == 3  # (the two convolutions and the depthwise one)
