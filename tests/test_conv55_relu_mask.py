"""A convolution's store writes the ReLU gradient's mask as a graph computes it: ``relu(y) != 0``
(NaN true), the form graph autodiff gives a ReLU's gradient (ops/elementwise.py), beside
``> 0`` (NaN false); kernels/cclamp.py's block says which (ops/conv_epilogue.py). Checked over
random geometries (strides, padding, dilation, groups) in float32 and float64 with NaN,
infinities and signed zeros: the fused graph gives the unfused graph's bits in generated code
and the C graph runner, and agrees with the NumPy interpreter and PyTorch. A training step's
forward saves the mask where the backward reads the ReLU's result only through it
(transforms/forward_masks.py), and the convolution stores it; without a compiler nothing
fuses and the NumPy kernels give the same values."""

import numpy as np
import pytest

import ember
import ember.types
from ember.graph import interpreter
from ember.kernels import ccompile
from ember.ops import REGISTRY
from ember.ops.conv_epilogue import epilogue_spec
from ember.ops.program import Const, Input, Instr, Program, Temp
from ember.runtime import cgraph
from ember.runtime.codegen import compile_graph
from ember.transforms import DCE, optimize
from ember.transforms.epilogue import EPILOGUE
from ember.transforms.fuse import FUSE

F = ember.nn.functional
COMPILER = ccompile.compiler_available()


def _bits(a):
    a = np.ascontiguousarray(np.asarray(a))
    return a.view(np.uint8) if a.dtype != np.bool_ else a


def _runs(graph):
    runs = {"generated code": compile_graph(graph)}
    steps = cgraph.c_steps(graph)
    if steps is not None:
        runs["C graph runner"] = cgraph.CGraphProgram(graph, steps, threads=1)
    return runs


def _program(node):
    return node.attrs.get("program", ()) if node.op is not None else ()


def _ne_epilogues(graph):
    return [
        n
        for n in graph.nodes
        if n.kind == "call"
        and n.op.name == "fused_epilogue"
        and n.attrs["producer"].name == "conv"
        and any(i.op is REGISTRY["ne"] for i in n.attrs["program"])
    ]


PROGRAMS = {
    "relu, != 0": lambda y: (lambda r: (r, r != 0))(F.relu(y)),
    "relu6, != 0": lambda y: (lambda r: (r, r != 0))(F.relu6(y)),
    "!= 0 alone": lambda y: (y, y != 0),
}


def _geometry(seed):
    """A random convolution: (x shape, w shape, stride, padding, dilation, groups)."""
    rng = np.random.default_rng(seed)
    groups = int(rng.choice([1, 1, 2]))
    cin, cout = groups * int(rng.integers(1, 5)), groups * int(rng.integers(1, 6))
    k = int(rng.choice([1, 3]))
    stride, dilation = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    padding = int(rng.integers(0, 2))
    size = int(rng.integers(dilation * (k - 1) + 2, 11))
    n = int(rng.integers(1, 4))
    return (n, cin, size, size + 1), (cout, cin // groups, k, k), stride, padding, dilation, groups


def _arrays(geometry, dtype, seed):
    x_shape, w_shape = geometry[:2]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(dtype)
    w = rng.standard_normal(w_shape).astype(dtype)
    b = rng.standard_normal(w_shape[0]).astype(dtype)
    b[0] = -np.inf if w_shape[0] > 1 else b[0]  # (a channel of -inf: the mask false there)
    # NaN and infinities in one sample's first channel, a zero weight row: exact zeros
    x.reshape(-1)[: min(3, x.size)] = [np.nan, np.inf, -np.inf][: min(3, x.size)]
    w[-1] = 0.0
    b[-1] = -0.0
    return [x, w, b]


def _traced(program, geometry, arrays, own_bias):
    _, _, stride, padding, dilation, groups = geometry

    def fn(x, w, b):
        if own_bias:
            y = F.conv2d(x, w, b, stride, padding, dilation, groups)
        else:
            y = F.conv2d(x, w, None, stride, padding, dilation, groups) + b.reshape(1, -1, 1, 1)
        return PROGRAMS[program](y)

    return ember.trace(fn, *map(ember.tensor, arrays), opt_level=0).graph


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("program", list(PROGRAMS))
@pytest.mark.parametrize("seed", range(3))
def test_the_fused_ne_mask_gives_the_unfused_graphs_bits(seed, program, dtype, monkeypatch):
    # (both graphs' convolutions take the counted layout: the same sums in the same order)
    monkeypatch.setenv("EMBER_CONV_LAYOUT", "count")
    geometry = _geometry(seed)
    arrays = _arrays(geometry, dtype, seed)
    graph = _traced(program, geometry, arrays, own_bias=seed % 2 == 1)
    unfused, _ = optimize(graph.copy(), passes=[FUSE, DCE])
    fused, _ = optimize(graph.copy(), passes=[FUSE, DCE, EPILOGUE])
    fused.verify()
    assert not _ne_epilogues(unfused)
    if COMPILER and geometry[-1] == 1:
        assert len(_ne_epilogues(fused)) == 1
    for (way, want_run), got_run in zip(_runs(unfused).items(), _runs(fused).values()):
        want, got = want_run(*arrays), got_run(*arrays)
        for g, e in zip(got, want):
            assert np.asarray(g).dtype == np.asarray(e).dtype
            np.testing.assert_array_equal(_bits(g), _bits(e), err_msg=way)
    # the NumPy interpreter: the same values within rounding, the same mask away from zero
    reference = interpreter.run(graph, arrays)
    got = compile_graph(fused)(*arrays)
    _agree(got, reference, dtype)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("stride", [1, 2])
def test_half_precision_stores_the_unfused_mask(stride, dtype):
    # (16-bit stores: the mask compares the rounded value, as the unfused ne reads it)
    half = getattr(ember, dtype)
    rng = np.random.default_rng(stride)
    shapes = ((2, 5, 9, 9), (6, 5, 3, 3), (6,))
    tensors = [ember.tensor(rng.standard_normal(s).astype(np.float32)).to(half) for s in shapes]
    tensors[0][0, 0, 0, 0] = float("nan")
    tensors[0][0, 1, 0, 1] = float("inf")

    def fn(x, w, b):
        y = F.relu(F.conv2d(x, w, b, stride=stride, padding=1))
        return y, y != 0

    graph = ember.trace(fn, *tensors, opt_level=0).graph
    arrays = [t.detach().numpy() for t in tensors]
    unfused, _ = optimize(graph.copy(), passes=[FUSE, DCE])
    fused, _ = optimize(graph.copy(), passes=[FUSE, DCE, EPILOGUE])
    assert len(_ne_epilogues(fused)) == int(COMPILER)
    for g, e in zip(compile_graph(fused)(*arrays), compile_graph(unfused)(*arrays)):
        np.testing.assert_array_equal(_bits(g), _bits(e))


def _agree(got, want, dtype):
    (value, mask), (value_want, mask_want) = [np.asarray(a) for a in got], want
    np.testing.assert_array_equal(np.isnan(value), np.isnan(value_want))
    np.testing.assert_allclose(value, value_want, rtol=1e-4 if dtype == np.float32 else 1e-12)
    clear = np.isnan(value_want) | (np.abs(value_want) > 1e-3)  # (away from rounding's reach)
    np.testing.assert_array_equal(mask[clear], mask_want[clear])
    np.testing.assert_array_equal(mask[np.isnan(value_want)], True)  # NaN: the mask passes


@pytest.mark.parametrize("seed", range(2))
def test_the_fused_mask_agrees_with_torch(seed):
    torch = pytest.importorskip("torch")
    geometry = _geometry(seed + 10)
    _, _, stride, padding, dilation, groups = geometry
    arrays = _arrays(geometry, np.float64, seed)
    graph = _traced("relu, != 0", geometry, arrays, own_bias=True)
    fused, _ = optimize(graph.copy(), passes=[FUSE, DCE, EPILOGUE])
    got = compile_graph(fused)(*arrays)
    x, w, b = map(torch.from_numpy, arrays)
    y = torch.relu(torch.nn.functional.conv2d(x, w, b, stride, padding, dilation, groups))
    _agree(got, (y.numpy(), (y != 0).numpy()), np.float64)


def test_the_spec_marks_the_ne_mask_and_refuses_one_before_the_clamp():
    t = ember.types.TensorType
    result = t((2, 4, 5, 5), ember.float32)
    bias = t((1, 4, 1, 1), ember.float32)
    zero = Const(0.0, ember.float32)
    add = Instr(REGISTRY["add"], (Input(0), Input(1)))
    relu = Instr(REGISTRY["relu"], (Temp(0),))
    out, mask = (((2, 4, 5, 5), "float32"),), (((2, 4, 5, 5), "bool"),)
    ne_relu = Instr(REGISTRY["ne"], (Temp(1), zero))
    spec = epilogue_spec(
        Program((add, relu, ne_relu)), (1, 2), out + mask, [result, bias], 0, result
    )
    assert spec.mask == 1 and spec.clamp[4] is True  # (the block's "v != 0")
    gt_relu = Instr(REGISTRY["gt"], (Temp(1), zero))
    spec = epilogue_spec(
        Program((add, relu, gt_relu)), (1, 2), out + mask, [result, bias], 0, result
    )
    assert spec.mask == 1 and len(spec.clamp) == 4  # (v > 0)
    # != 0 of the value before the ReLU: a negative value passes it, its clamp does not
    ne_pre = Instr(REGISTRY["ne"], (Temp(0), zero))
    program = Program((add, relu, ne_pre))
    assert epilogue_spec(program, (1, 2), out + mask, [result, bias], 0, result) is None
    # no clamp: the mask of the stored value, an unbounded block that only says "!= 0"
    ne_biased = Instr(REGISTRY["ne"], (Temp(0), zero))
    spec = epilogue_spec(Program((add, ne_biased)), (0, 1), out + mask, [result, bias], 0, result)
    assert spec.clamp == (-np.inf, np.inf, False, False, True)


def _pooled_net():
    nn = ember.nn
    ember.manual_seed(5)
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(8, 8, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 4),
    )


def test_a_compiled_training_forward_saves_the_mask_stored_by_the_convolution():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(2).standard_normal((4, 3, 10, 10)).astype(np.float32)
    model = _pooled_net()
    compiled = ember.compile(model)
    (compiled(ember.tensor(x)) ** 2).mean().backward()
    got = [p.grad.numpy().copy() for p in model.parameters()]
    for p in model.parameters():
        p.grad = None
    (model(ember.tensor(x)) ** 2).mean().backward()
    for g, p in zip(got, model.parameters()):
        np.testing.assert_array_equal(g, p.grad.numpy())  # the same ops on the same values
    # PyTorch's gradients of the same network
    twin = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3, stride=2, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(8, 4),
    )
    with torch.no_grad():
        for mine, theirs in zip(model.parameters(), twin.parameters()):
            theirs.copy_(torch.from_numpy(mine.detach().numpy()))
    (twin(torch.from_numpy(x)) ** 2).mean().backward()
    for g, theirs in zip(got, twin.parameters()):
        np.testing.assert_allclose(g, theirs.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_the_forward_saves_a_mask_not_the_relu_result():
    x = np.random.default_rng(3).standard_normal((4, 3, 10, 10)).astype(np.float32)
    compiled = ember.function(_pooled_net())
    (compiled(ember.tensor(x)) ** 2).mean().backward()
    forward, backward = compiled.graphs["forward"], compiled.graphs["backward"]
    saved = [v.type for v in backward.inputs if v.name.startswith("saved")]
    # the last ReLU's result (4, 8, 5, 5) is read by the average pooling only: its mask saved
    assert ember.types.TensorType((4, 8, 5, 5), ember.bool) in saved
    assert ember.types.TensorType((4, 8, 5, 5), ember.float32) not in saved
    if COMPILER:
        assert len(_ne_epilogues(forward)) == 1


def _early_mask_net(dtype):
    # (a frozen first layer and a wide second one: the fusion pass computes the second ReLU's
    # mask in the forward, where it lowers the planned peak, transforms/fuse.py)
    nn = ember.nn
    ember.manual_seed(1)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(4, 64, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(64, 10),
    ).to(dtype)
    for p in list(model.parameters())[:2]:
        p.requires_grad_(False)
    return model


def _training_step(model):
    opt = ember.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.01)

    def step(x):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    return step


def test_a_training_step_stores_its_forward_mask_with_the_convolution_and_equals_eager():
    x = ember.tensor(np.random.default_rng(4).standard_normal((8, 3, 16, 16)))
    model = _early_mask_net(ember.float64)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    compiled = ember.function(_training_step(model))
    losses = [compiled(x).item() for _ in range(2)]
    if COMPILER:
        # the gradient's != 0 mask is never a loop of its own: made in the forward it is
        # stored by the convolution with its bias and ReLU (one node); where the fusion pass
        # plans lower by computing it in the backward (transforms/fuse.py decides on the
        # fused plans) it joins the loop that reads it
        masks = [
            n
            for n in compiled.graph.nodes
            if n.kind == "call"
            and (n.op is REGISTRY["ne"] or any(i.op is REGISTRY["ne"] for i in _program(n)))
        ]
        assert masks
        for n in masks:
            assert n in _ne_epilogues(compiled.graph) or any(
                i.op is REGISTRY["where"] for i in _program(n)
            ), n
    got = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.load_state_dict(start)
    eager = _training_step(model)
    want = [eager(x).item() for _ in range(2)]
    np.testing.assert_allclose(losses, want, rtol=1e-12)
    for k, v in model.state_dict().items():
        np.testing.assert_allclose(got[k].numpy(), v.numpy(), rtol=1e-10, atol=1e-13)
