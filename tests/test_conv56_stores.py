"""The forward convolution's stores and packing copies with whole vectors unmasked
(kernels/cconv_source.py: `store_run`'s residual load and store, `copy_run`, `copy_evens`) and
the residual's runs fetched a block of channels ahead: output rows and packed runs of a vector
exactly, of more (a whole vector and a tail) and of less, at stride 1 and 2, with dilation and
groups, in float32 and float64 with NaN and infinities. A residual block's store
(``relu(conv(x) + b + r)``, ops/conv_epilogue.py) gives the unfused graph's bits in generated
code and the C graph runner, and agrees with the NumPy interpreter and PyTorch; the plain
forward's C kernel agrees with the NumPy kernel and PyTorch. Without a compiler nothing fuses
and the NumPy kernels run."""

import numpy as np
import pytest

import ember
from ember.graph import interpreter
from ember.kernels import ccompile
from ember.ops.conv import CONV
from ember.runtime import cgraph
from ember.runtime.codegen import compile_graph
from ember.transforms import DCE, optimize
from ember.transforms.epilogue import EPILOGUE
from ember.transforms.fuse import FUSE

F = ember.nn.functional
COMPILER = ccompile.compiler_available()
# output widths around a vector of float32 (16) and float64 (8) lanes: less, exactly, a tail
WIDTHS = (5, 8, 9, 16, 17, 33)


def _bits(a):
    return np.ascontiguousarray(np.asarray(a)).view(np.uint8)


def _runs(graph):
    runs = {"generated code": compile_graph(graph)}
    steps = cgraph.c_steps(graph)
    if steps is not None:
        runs["C graph runner"] = cgraph.CGraphProgram(graph, steps, threads=1)
    return runs


def _residual_case(seed, dtype):
    """(the block, its arrays): relu(conv(x, w, b) + r), more output channels than a block of
    the micro-kernel's 8 rows (the residual fetched a block ahead), stride 1 or 2."""
    rng = np.random.default_rng(seed)
    n, cin, cout = int(rng.integers(1, 3)), int(rng.integers(1, 5)), int(rng.integers(9, 21))
    k, stride = int(rng.choice([1, 3])), int(rng.integers(1, 3))
    dilation = int(rng.integers(1, 3)) if k == 3 else 1
    pad = dilation * (k - 1) // 2
    width = int(rng.choice(WIDTHS))
    height = int(rng.integers(1, 4))
    size = ((height - 1) * stride + 1, (width - 1) * stride + 1)
    arrays = [
        rng.standard_normal((n, cin) + size),
        rng.standard_normal((cout, cin, k, k)),
        rng.standard_normal(cout),
        rng.standard_normal((n, cout, height, width)),
    ]
    arrays = [a.astype(dtype) for a in arrays]
    arrays[3].reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    arrays[0].reshape(-1)[-1] = np.inf

    def block(x, w, b, r):
        y = F.conv2d(x, w, b, stride=stride, padding=pad, dilation=dilation)
        return F.relu(y + r)

    return block, arrays, dict(stride=stride, padding=pad, dilation=dilation)


def _residual_stores(graph) -> int:
    return sum(
        1
        for n in graph.nodes
        if n.kind == "call" and n.op.name == "fused_epilogue" and n.attrs["producer"].name == "conv"
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", range(6))
def test_the_residual_store_gives_the_unfused_graphs_bits(seed, dtype, monkeypatch):
    monkeypatch.setenv("EMBER_CONV_LAYOUT", "count")  # (both graphs' convolutions: one layout)
    block, arrays, _ = _residual_case(seed, dtype)
    graph = ember.trace(block, *map(ember.tensor, arrays), opt_level=0).graph
    unfused, _ = optimize(graph.copy(), passes=[FUSE, DCE])
    fused, _ = optimize(graph.copy(), passes=[FUSE, DCE, EPILOGUE], check=arrays)
    fused.verify()
    if COMPILER:  # the convolution stores the sum and the ReLU
        assert _residual_stores(fused) == 1
    for (way, want_run), got_run in zip(_runs(unfused).items(), _runs(fused).values()):
        np.testing.assert_array_equal(_bits(got_run(*arrays)[0]), _bits(want_run(*arrays)[0]), way)
    want = interpreter.run(graph, arrays)[0]
    got = np.asarray(compile_graph(fused)(*arrays)[0])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == np.float32 else 1e-12, atol=1e-5)


@pytest.mark.parametrize("seed", range(3))
def test_the_residual_store_agrees_with_torch(seed):
    torch = pytest.importorskip("torch")
    block, arrays, geometry = _residual_case(100 + seed, np.float64)
    got = ember.function(block)(*map(ember.tensor, arrays)).numpy()
    t = [torch.from_numpy(a) for a in arrays]
    want = torch.relu(torch.nn.functional.conv2d(t[0], t[1], t[2], **geometry) + t[3]).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _forward_case(seed, dtype):
    rng = np.random.default_rng(seed)
    groups = int(rng.choice([1, 1, 2]))
    n, cout = int(rng.integers(1, 4)), groups * int(rng.integers(1, 12))
    cin = groups * int(rng.integers(1, 4))
    k, stride = int(rng.choice([1, 2, 3])), int(rng.integers(1, 3))
    dilation = int(rng.integers(1, 3)) if k > 1 else 1
    pad = int(rng.integers(0, k))
    width = int(rng.choice(WIDTHS))
    reach = dilation * (k - 1) + 1
    size = (int(rng.integers(reach, reach + 4)), (width - 1) * stride + reach - 2 * pad)
    size = (size[0], max(size[1], reach))
    x = rng.standard_normal((n, cin) + size).astype(dtype)
    w = rng.standard_normal((cout, cin // groups, k, k)).astype(dtype)
    x.reshape(-1)[0] = np.nan
    attrs = dict(stride=(stride,) * 2, padding=((pad, pad),) * 2, dilation=(dilation,) * 2)
    return x, w, dict(attrs, groups=groups)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", range(12))
def test_the_forwards_packed_runs_agree_with_numpy_and_torch(seed, dtype):
    x, w, attrs = _forward_case(seed, dtype)
    got = CONV.run(x, w, **attrs)  # (the C kernel where it applies)
    want = CONV.kernel(x, w, **attrs)  # (the NumPy specification)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    torch = pytest.importorskip("torch")
    theirs = torch.nn.functional.conv2d(
        torch.from_numpy(x),
        torch.from_numpy(w),
        stride=attrs["stride"],
        padding=tuple(p[0] for p in attrs["padding"]),
        dilation=attrs["dilation"],
        groups=attrs["groups"],
    ).numpy()
    np.testing.assert_allclose(got, theirs, rtol=tol, atol=tol)
