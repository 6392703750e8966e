"""``clip`` with constant bounds (``torch.clamp(x, 0, 6)``, ONNX's Clip with attribute bounds)
fuses: into elementwise loops through its C expression, into a convolution's, a depthwise
convolution's and a product's store through its ``clamp`` rule. Either bound may be None. The
fused results are np.clip's bits (the op's kernel): NaN kept, a value equal to a bound kept
when both bounds are given and made the bound when one is, lo > hi giving hi, a NaN bound
giving NaN; and the values are PyTorch's (and onnxruntime's for an imported Clip)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ember
import ember.nn.functional as F
from ember.kernels import ccompile
from ember.ops._registry import REGISTRY

pytestmark = pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")

SPECIAL = [np.nan, -np.inf, np.inf, -0.0, 0.0, 6.0, -6.0, 3.0, 7.0, -1.0, 1e30, -0.5, 1.0]
BOUNDS = [
    (0.0, 6.0),
    (None, 6.0),
    (0.0, None),
    (-0.5, None),
    (6.0, 0.0),
    (-0.0, 0.0),
    (0.0, -0.0),
    (3.0, 3.0),
    (float("nan"), 1.0),
    (1.0, float("nan")),
    (-np.inf, np.inf),
]


def _calls(function) -> list:
    return [n for n in function.graph.nodes if n.kind == "call"]


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint8)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("lo,hi", BOUNDS)
def test_fused_loop_is_np_clip(lo, hi, dtype):
    x = np.array(SPECIAL * 97, dtype)  # (past a vector's worth, with a remainder)
    function = ember.function(lambda t: ember.clamp(t * 1.0 + 0.0, lo, hi))
    got = function(ember.tensor(x)).numpy()
    assert np.array_equal(_bits(got), _bits(np.clip(x * 1.0 + 0.0, lo, hi)))
    (node,) = _calls(function)
    assert [i.op.name for i in node.attrs["program"]][-1] == "clip"


@pytest.mark.skipif(not ccompile.compiler_available(), reason="fusion into C needs a compiler")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_fused_loop_half_precision(dtype):
    x = ember.tensor(np.array(SPECIAL * 9, np.float32)).to(getattr(ember, dtype))
    for lo, hi in [(0.0, 6.1), (None, 0.3), (-0.0, None)]:
        function = ember.function(lambda t: ember.clamp(t * 2.0, lo, hi))
        got = function(x).float().numpy()
        want = ember.clamp(x * 2.0, lo, hi).float().numpy()  # (eager: NumPy's kernels)
        assert np.array_equal(_bits(got), _bits(want)), (lo, hi)
        assert len(_calls(function)) == 1


def test_clamp_rule_reads_open_bounds():
    clamp = REGISTRY["clip"].clamp
    assert tuple(clamp({"lo": 0.0, "hi": 6.0}, (None,))) == (0.0, 6.0, False, False)
    # (one bound keeps ties too: PyTorch's clamp(-0.0, min=0) is -0.0)
    assert tuple(clamp({"lo": 0.0, "hi": None}, (None,))) == (0.0, np.inf, False, False)
    assert tuple(clamp({"lo": None, "hi": 1.0}, (None,))) == (-np.inf, 1.0, False, False)
    assert clamp({"lo": 6.0, "hi": 0.0}, (None,)) is None  # (every value hi)
    assert clamp({"lo": float("nan"), "hi": 1.0}, (None,)) is None


def _specials(shape, seed: int) -> np.ndarray:
    """Normal values with NaN, signed zeros and values at the bounds sprinkled in."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32) * 3
    flat = x.reshape(-1)
    picks = rng.choice(flat.size, size=len(SPECIAL) * 4, replace=False)
    flat[picks] = np.array(SPECIAL * 4, np.float32)
    return x


STORE_BOUNDS = [(0.0, 6.0), (-0.5, None), (None, 1.0), (-1.0, 1.0)]


@pytest.mark.skipif(not ccompile.compiler_available(), reason="fusion into C needs a compiler")
@pytest.mark.parametrize("lo,hi", STORE_BOUNDS)
@pytest.mark.parametrize("layer", ["conv", "depthwise", "linear"])
def test_store_takes_the_clamp(layer, lo, hi):
    rng = np.random.default_rng(1)
    if layer == "linear":
        x = _specials((37, 24), 2)
        w = rng.standard_normal((40, 24)).astype(np.float32)
        b = rng.standard_normal(40).astype(np.float32)
        ours, theirs = F.linear, torch.nn.functional.linear
        options = {}
    else:
        groups = 8 if layer == "depthwise" else 1
        x = _specials((2, 8, 13, 13), 3)
        w = rng.standard_normal((16 if groups == 1 else 8, 8 // groups, 3, 3))
        w = w.astype(np.float32)
        b = rng.standard_normal(w.shape[0]).astype(np.float32)
        ours, theirs = F.conv2d, torch.nn.functional.conv2d
        options = {"padding": 1, "groups": groups}

    def producer(t):
        return ours(t, ember.tensor(w), ember.tensor(b), **options)

    function = ember.function(lambda t: ember.clamp(producer(t), lo, hi))
    got = function(ember.tensor(x)).numpy()
    (node,) = _calls(function)
    assert node.op.name == "fused_epilogue"
    assert [i.op.name for i in node.attrs["program"]][-1] == "clip"
    # the store's clamp is np.clip of the producer's own result (the same sums unclamped)
    unclamped = ember.function(producer)(ember.tensor(x)).numpy()
    assert np.array_equal(_bits(got), _bits(np.clip(unclamped, lo, hi)))
    want = torch.clamp(theirs(torch.tensor(x), torch.tensor(w), torch.tensor(b), **options), lo, hi)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not ccompile.compiler_available(), reason="fusion into C needs a compiler")
@pytest.mark.parametrize("bounds", [{"min": 0.0, "max": 6.0}, {"min": -0.25}, {"max": 0.5}])
def test_onnx_clip_attributes_fuse_into_conv(bounds):
    """Clip before opset 11 takes its bounds as attributes: imported as ``clip``, fused into
    the convolution's store, against onnxruntime."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto as TP
    from onnx import helper as h
    from onnx import numpy_helper

    rng = np.random.default_rng(4)
    w = rng.standard_normal((6, 4, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    graph = h.make_graph(
        [
            h.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1]),
            h.make_node("Clip", ["y"], ["z"], **bounds),
        ],
        "conv_clip",
        [h.make_tensor_value_info("x", TP.FLOAT, [2, 4, 9, 9])],
        [h.make_tensor_value_info("z", TP.FLOAT, [2, 6, 9, 9])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 6)])
    model.ir_version = 7
    data = model.SerializeToString()
    x = rng.standard_normal((2, 4, 9, 9)).astype(np.float32)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {"x": x})
    function = ember.onnx.load(data)
    got = function(ember.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert [n.op.name for n in _calls(function)] == ["fused_epilogue"]
