"""A fused group two convolutions' results meet in (a ResNet downsampling block as ONNX files
write it: ``relu((conv(x) + b1) + (conv(x', w') + b2))``) split so each convolution stores a
part (transforms/epilogue_split.py): the shortcut's bias by its convolution, the first bias,
the sum and the ReLU by the other. Over random geometries (strides, padding, dilation, 1x1
and 3x3 shortcuts) in float32 and float64 with NaN and infinities: the split graph gives the
unsplit graph's bits in generated code and the C graph runner, and agrees with the NumPy
interpreter and PyTorch. Without a compiler nothing fuses and the NumPy kernels run."""

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


def _bits(a):
    return np.ascontiguousarray(np.asarray(a)).view(np.uint8)


def _runs(graph):
    runs = {"generated code": compile_graph(graph)}
    steps = cgraph.c_steps(graph)
    if steps is not None:
        runs["C graph runner"] = cgraph.CGraphProgram(graph, steps, threads=1)
    return runs


def _conv_epilogues(graph):
    return [
        n
        for n in graph.nodes
        if n.kind == "call" and n.op.name == "fused_epilogue" and n.attrs["producer"].name == "conv"
    ]


def _case(seed, dtype):
    """(the block as a function of its arrays, the arrays): a main convolution of stride 1 and
    a shortcut convolution of a random stride reaching the same output size."""
    rng = np.random.default_rng(seed)
    n, cin, cout = int(rng.integers(1, 3)), int(rng.integers(1, 6)), int(rng.integers(1, 9))
    size = int(rng.integers(3, 9))
    k_main = int(rng.choice([1, 3]))
    k_short, stride = int(rng.choice([1, 3])), int(rng.integers(1, 3))
    dilation = int(rng.integers(1, 3)) if k_short == 3 else 1
    pad_short = dilation * (k_short - 1) // 2
    big = (size - 1) * stride + 1  # (the shortcut's input: stride * (size - 1) + 1 rows)
    arrays = [
        rng.standard_normal((n, cin, size, size)),
        rng.standard_normal((cout, cin, k_main, k_main)),
        rng.standard_normal(cout),
        rng.standard_normal((n, cin, big, big)),
        rng.standard_normal((cout, cin, k_short, k_short)),
        rng.standard_normal(cout),
    ]
    arrays = [a.astype(dtype) for a in arrays]
    arrays[3].reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    arrays[5][-1] = -np.inf

    def block(x, w1, b1, x2, w2, b2):
        main = F.conv2d(x, w1, padding=k_main // 2) + b1.reshape(1, -1, 1, 1)
        shortcut = F.conv2d(x2, w2, stride=stride, padding=pad_short, dilation=dilation)
        return F.relu(main + (shortcut + b2.reshape(1, -1, 1, 1)))

    return block, arrays


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", range(5))
def test_the_split_block_gives_the_unsplit_graphs_bits(seed, dtype, monkeypatch):
    monkeypatch.setenv("EMBER_CONV_LAYOUT", "count")  # (both graphs' convolutions: one layout)
    block, arrays = _case(seed, dtype)
    graph = ember.trace(block, *map(ember.tensor, arrays), opt_level=0).graph
    unsplit, _ = optimize(graph.copy(), passes=[FUSE, DCE])
    split, _ = optimize(graph.copy(), passes=[FUSE, DCE, EPILOGUE], check=arrays)
    split.verify()
    calls = [n for n in split.nodes if n.kind == "call" and n.op.name != "reshape"]
    if COMPILER:  # both convolutions store their part: nothing else runs
        assert len(_conv_epilogues(split)) == 2 and len(calls) == 2
    for (way, want_run), got_run in zip(_runs(unsplit).items(), _runs(split).values()):
        np.testing.assert_array_equal(_bits(got_run(*arrays)[0]), _bits(want_run(*arrays)[0]), way)
    want = interpreter.run(graph, arrays)[0]
    got = np.asarray(compile_graph(split)(*arrays)[0])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == np.float32 else 1e-12, atol=1e-5)


def test_the_split_block_agrees_with_torch():
    torch = pytest.importorskip("torch")
    block, arrays = _case(11, np.float64)
    graph = ember.trace(block, *map(ember.tensor, arrays), opt_level=0).graph
    split, _ = optimize(graph.copy(), passes=[FUSE, DCE, EPILOGUE])
    got = np.asarray(compile_graph(split)(*arrays)[0])
    t = [torch.from_numpy(a) for a in arrays]
    geometry = _torch_geometry(graph)
    main = torch.nn.functional.conv2d(t[0], t[1], t[2], **geometry[0])
    shortcut = torch.nn.functional.conv2d(t[3], t[4], t[5], **geometry[1])
    want = torch.relu(main + shortcut).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def _torch_geometry(graph):
    """The traced convolutions' stride, padding and dilation as PyTorch's keywords."""
    found = []
    for node in graph.nodes:
        if node.kind == "call" and node.op.name == "conv":
            a = node.attrs
            found.append(
                dict(
                    stride=a["stride"],
                    padding=tuple(p[0] for p in a["padding"]),
                    dilation=a["dilation"],
                )
            )
    return found


def test_a_group_whose_other_part_no_producer_takes_is_left_whole():
    # the shortcut is an input scaled: no second producer would store the side part, and a
    # loop of its own would cost what the split saves
    def block(x, w1, b1, r):
        return F.relu(F.conv2d(x, w1) + b1.reshape(1, -1, 1, 1) + r * 2)

    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 5, 5), (4, 3, 1, 1), (4,))]
    arrays.append(rng.standard_normal((2, 4, 5, 5)).astype(np.float32))
    graph = ember.trace(block, *map(ember.tensor, arrays), opt_level=0).graph
    fused, _ = optimize(graph.copy(), passes=[FUSE, DCE, EPILOGUE], check=arrays)
    assert not _conv_epilogues(fused)
    assert [n.op.name for n in fused.nodes if n.kind == "call"].count("fused_elementwise") == 1
