"""A convolution's clamp epilogue (ReLU, ReLU6, hardtanh, ONNX Clip's maximum and minimum with
constants) stored by its C kernel: the fused graph gives the unfused graph's bits, NaN, infinities
and signed zeros included, in generated code and in the C graph runner; without a compiler
nothing fuses and the NumPy kernels run (CC=/bin/false)."""

import zlib

import numpy as np
import pytest

import ember
from ember import dtypes as dt
from ember.kernels import ccompile
from ember.runtime import cgraph
from ember.runtime.codegen import compile_graph
from ember.transforms import DCE, optimize
from ember.transforms.epilogue import EPILOGUE
from ember.transforms.fuse import FUSE

F = ember.nn.functional


def _clip_as_onnx(y):
    # ONNX's Clip(0, 6) as the importer writes it, tensor bounds folded to constants
    return ember.minimum(ember.maximum(y, 0.0), 6.0)


ACTIVATIONS = {
    "relu": F.relu,
    "relu6": F.relu6,
    "hardtanh": lambda y: F.hardtanh(y, -0.5, 1.25),
    "hardtanh_zero_top": lambda y: F.hardtanh(y, -2.0, 0.0),
    "clip": _clip_as_onnx,
    "min_then_max": lambda y: ember.maximum(ember.minimum(y, 6.0), 0.0),
}


def _geometry(seed: int, depthwise: bool):
    rng = np.random.default_rng(seed)
    n, cin, cout = (int(rng.integers(1, a)) for a in (3, 6, 12))
    if depthwise:  # (a channel multiplier of 1 or 2)
        cin = int(rng.integers(2, 20))
        cout = cin * int(rng.choice([1, 1, 2]))
    size = tuple(int(rng.integers(3, 12)) for _ in range(2))
    kernel = int(rng.choice([3, 5])) if depthwise else int(rng.choice([1, 3]))
    stride = int(rng.choice([1, 2]))
    padding = int(rng.integers(0, kernel // 2 + 1))
    return n, cin, cout, size, kernel, stride, padding


def _arrays(geometry, dtype, seed, depthwise):
    n, cin, cout, size, kernel, _, _ = geometry
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin) + size).astype(np.float32) * 3
    w = rng.standard_normal((cout, 1 if depthwise else cin, kernel, kernel)).astype(np.float32)
    b = rng.standard_normal((cout,)).astype(np.float32)
    flat = x.reshape(-1)
    picks = rng.choice(flat.size, size=min(flat.size, 6), replace=False)
    flat[picks] = [np.nan, np.inf, -np.inf, -0.0, 0.0, np.nan][: len(picks)]
    w.reshape(-1)[0] = -0.0
    return [a.astype(dtype) for a in (x, w, b)]


def _bits(a):
    a = np.ascontiguousarray(np.asarray(a))
    return a.view(np.uint8) if a.dtype != np.bool_ else a


def _runs(graph):
    """The graph run by generated code and, where every node has a step, the C graph runner."""
    runs = {"generated code": compile_graph(graph)}
    steps = cgraph.c_steps(graph)
    if steps is not None:
        runs["C graph runner"] = cgraph.CGraphProgram(graph, steps, threads=1)
    return runs


def _clamp_epilogues(graph):
    return [
        n
        for n in graph.nodes
        if n.kind == "call"
        and n.op.name == "fused_epilogue"
        and any(i.op.clamp is not None for i in n.attrs["program"])
    ]


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("activation", list(ACTIVATIONS))
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kind", ["dense", "depthwise"])
def test_the_fused_clamp_gives_the_unfused_graphs_bits(kind, seed, activation, dtype, monkeypatch):
    # (both graphs' convolutions take the counted layout: the same sums in the same order)
    monkeypatch.setenv("EMBER_CONV_LAYOUT", "count")
    depthwise = kind == "depthwise"
    geometry = _geometry(zlib.crc32(f"{seed}".encode()), depthwise)
    _, cin, _, _, _, stride, padding = geometry
    groups = cin if depthwise else 1
    np_dtype = np.dtype(getattr(dt, dtype).np)
    arrays = _arrays(geometry, np_dtype, seed, depthwise)
    act = ACTIVATIONS[activation]

    def fn(x, w, b):
        conv = dict(stride=stride, padding=padding, groups=groups)
        if dtype == "bfloat16":  # (the convolution's own bias: a half-precision add stays apart)
            return act(F.conv2d(x, w, b, **conv))
        return act(F.conv2d(x, w, **conv) + b.reshape(1, -1, 1, 1))

    examples = [ember.tensor(a) for a in arrays]
    graph = ember.trace(fn, *examples, opt_level=0).graph
    unfused, _ = optimize(graph.copy(), passes=[FUSE, DCE])
    fused, _ = optimize(graph.copy(), passes=[FUSE, DCE, EPILOGUE])
    fused.verify()
    assert bool(_clamp_epilogues(fused)) == ccompile.compiler_available()
    assert not _clamp_epilogues(unfused)
    for (way, want_run), got_run in zip(_runs(unfused).items(), _runs(fused).values()):
        want, got = want_run(*arrays), got_run(*arrays)
        for g, e in zip(got, want):
            assert np.asarray(g).dtype == np.asarray(e).dtype
            np.testing.assert_array_equal(_bits(g), _bits(e), err_msg=way)


def test_a_depthwise_convolution_stores_no_mask():
    # (the depthwise kernels store the value alone: a ReLU's mask keeps its own loop)
    x = ember.randn(1, 4, 6, 6)
    w = ember.randn(4, 1, 3, 3)

    def fn(x, w):
        y = F.relu(F.conv2d(x, w, groups=4))
        return y, y > 0

    graph = ember.trace(fn, x, w).graph
    fused, _ = optimize(graph, passes=[FUSE, DCE, EPILOGUE])
    assert not _clamp_epilogues(fused)
