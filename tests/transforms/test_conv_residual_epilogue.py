"""A convolution's residual epilogue (ops/conv_epilogue.py's `epilogue_spec`, kernels/cconv.py's
stores): ``relu(conv(x) + b + shortcut)`` and ``conv(x) + y`` stored by the C kernel, the
shortcut read as each tile is stored. The fused graph gives the unfused graph's bits (NaN,
infinities and signed zeros in the shortcut included) in generated code and in the C graph
runner, on both forward layouts; what the store cannot do in the unfused order (a residual
before the bias, a mask of the value before the residual, half precision, a broadcast
shortcut) stays apart; a residual block's compiled forward fuses its sum, and its training step
equals eager steps and PyTorch's gradients; without a compiler nothing fuses and the NumPy
kernels run."""

import numpy as np
import pytest

import ember
import ember.types
from ember.kernels import ccompile, cconv
from ember.kernels.conv_plan import plan
from ember.kernels.cstep import STEP_CALL, function_address
from ember.ops import REGISTRY
from ember.ops import _conv_kernels as K
from ember.ops.conv_epilogue import epilogue_spec
from ember.ops.program import Const, Input, Instr, Program, Temp
from ember.runtime import cgraph
from ember.runtime.codegen import compile_graph
from ember.transforms import DCE, optimize
from ember.transforms.epilogue import EPILOGUE
from ember.transforms.fuse import FUSE

F = ember.nn.functional


def _residual_epilogues(graph):
    return [
        n
        for n in graph.nodes
        if n.kind == "call"
        and n.op.name == "fused_epilogue"
        and n.attrs["producer"].name == "conv"
        and sum(i.op is REGISTRY["add"] for i in n.attrs["program"]) >= 1
        and any(
            tuple(v.type.shape) == tuple(n.outputs[0].type.shape)
            for v in n.inputs[n.attrs["n_producer"] :]
        )
    ]


def _bits(a):
    a = np.ascontiguousarray(np.asarray(a))
    return a.view(np.uint8) if a.dtype != np.bool_ else a


def _runs(graph):
    runs = {"generated code": compile_graph(graph)}
    steps = cgraph.c_steps(graph)
    if steps is not None:
        runs["C graph runner"] = cgraph.CGraphProgram(graph, steps, threads=1)
    return runs


PROGRAMS = {
    "relu(conv + b + r)": lambda x, w, b, r, s: F.relu(
        F.conv2d(x, w, stride=s, padding=1) + b.reshape(1, -1, 1, 1) + r
    ),
    "conv + r": lambda x, w, b, r, s: F.conv2d(x, w, stride=s, padding=1) + r,
    "r + conv, relu6": lambda x, w, b, r, s: F.relu6(r + F.conv2d(x, w, stride=s, padding=1)),
    "own bias, relu and mask": lambda x, w, b, r, s: (lambda y: (y, y > 0))(
        F.relu(F.conv2d(x, w, b, stride=s, padding=1) + r)
    ),
}


def _arrays(n, cin, cout, size, stride, dtype, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cin, size, size)).astype(dtype)
    w = rng.standard_normal((cout, cin, 3, 3)).astype(dtype)
    b = rng.standard_normal((cout,)).astype(dtype)
    out = (size + 2 - 3) // stride + 1
    r = rng.standard_normal((n, cout, out, out)).astype(dtype)
    r.reshape(-1)[:5] = [np.nan, np.inf, -np.inf, -0.0, 0.0]
    return [x, w, b, r]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("program", list(PROGRAMS))
@pytest.mark.parametrize("geometry", [(2, 5, 12, 9, 1), (3, 8, 20, 8, 2), (1, 16, 64, 4, 1)])
def test_the_fused_residual_gives_the_unfused_graphs_bits(geometry, program, dtype, monkeypatch):
    # (both graphs' convolutions take the counted layout: the same sums in the same order)
    monkeypatch.setenv("EMBER_CONV_LAYOUT", "count")
    n, cin, cout, size, stride = geometry
    arrays = _arrays(n, cin, cout, size, stride, dtype, seed=size)
    fn = PROGRAMS[program]
    graph = ember.trace(lambda *a: fn(*a, stride), *map(ember.tensor, arrays), opt_level=0).graph
    unfused, _ = optimize(graph.copy(), passes=[FUSE, DCE])
    fused, _ = optimize(graph.copy(), passes=[FUSE, DCE, EPILOGUE])
    fused.verify()
    assert bool(_residual_epilogues(fused)) == ccompile.compiler_available()
    assert not _residual_epilogues(unfused)
    for (way, want_run), got_run in zip(_runs(unfused).items(), _runs(fused).values()):
        want, got = want_run(*arrays), got_run(*arrays)
        for g, e in zip(got, want):
            assert np.asarray(g).dtype == np.asarray(e).dtype
            np.testing.assert_array_equal(_bits(g), _bits(e), err_msg=way)


@pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("wide", [False, True])
def test_both_layouts_store_the_residual(wide, dtype):
    n, cin, cout, size = 3, 16, 40, 5
    x, w, b, r = _arrays(n, cin, cout, size, 1, dtype, seed=7)
    p = plan((size, size), (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), cin * 9, cout)
    made = cconv.forward_step(x.shape, w.shape, p, dtype, True, wide=wide, split=False)
    step, args, keep = made
    out = np.empty(r.shape, dtype)
    args = args.copy()
    args[0], args[1], args[2], args[3] = (
        x.ctypes.data,
        w.ctypes.data,
        b.ctypes.data,
        out.ctypes.data,
    )
    args[cconv.residual_slot(made, dtype)] = r.ctypes.data
    STEP_CALL(function_address(step))(args.ctypes.data)
    want = np.maximum(K.conv_forward(x, w, p, 1) + b[:, None, None] + r, 0)
    bound = K.conv_forward(abs(x), abs(w), p, 1) + abs(b[:, None, None]) + abs(r)
    limit = 2 * cin * 9 * np.finfo(dtype).eps * np.nan_to_num(bound, posinf=0)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(out[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    assert np.all(np.abs(out - want)[finite] <= limit[finite] + np.finfo(dtype).tiny)
    del keep


def test_the_spec_refuses_what_the_store_does_not_do():
    t = ember.types.TensorType
    result = t((2, 4, 5, 5), ember.float32)
    bias = t((1, 4, 1, 1), ember.float32)
    full = t((2, 4, 5, 5), ember.float32)
    add = REGISTRY["add"]
    out = (((2, 4, 5, 5), "float32"),)
    types = [result, bias, full]
    # conv + bias + residual, then relu: taken, the residual the program's input 2
    program = Program(
        (
            Instr(add, (Input(0), Input(1))),
            Instr(add, (Temp(0), Input(2))),
            Instr(REGISTRY["relu"], (Temp(1),)),
        )
    )
    spec = epilogue_spec(program, (2,), out, types, 0, result)
    assert spec is not None and spec.bias == 1 and spec.residual == 2 and spec.clamp
    # the residual before the bias: the sums would round in another order
    before = Program((Instr(add, (Input(0), Input(2))), Instr(add, (Temp(0), Input(1)))))
    assert epilogue_spec(before, (1,), out, types, 0, result) is None
    # a mask of the value before the residual, then the sum
    gt = Instr(REGISTRY["gt"], (Input(0), Const(0.0, ember.float32)))
    masked = Program((gt, Instr(add, (Input(0), Input(2)))))
    mask = (((2, 4, 5, 5), "bool"),)
    assert epilogue_spec(masked, (0, 1), mask + out, types, 0, result) is None
    # a residual after the clamp
    late = Program((Instr(REGISTRY["relu"], (Input(0),)), Instr(add, (Temp(0), Input(2)))))
    assert epilogue_spec(late, (1,), out, types, 0, result) is None
    # a broadcast shortcut (one plane for every channel)
    plane = t((2, 1, 5, 5), ember.float32)
    assert epilogue_spec(Program((Instr(add, (Input(0), Input(1))),)), (0,), out,
                         [result, plane], 0, result) is None  # fmt: skip
    # half precision: the unfused sum rounds the convolution's result first
    half = t((2, 4, 5, 5), ember.bfloat16)
    halves = (((2, 4, 5, 5), "bfloat16"),)
    sum_ = Program((Instr(add, (Input(0), Input(1))),))
    assert epilogue_spec(sum_, (0,), halves, [half, half], 0, half) is None


class _Block(ember.nn.Module):
    """A residual basic block (ResNet's, without batch norm): relu(conv2(relu(conv1(x))) + x)."""

    def __init__(self, channels):
        super().__init__()
        self.conv1 = ember.nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = ember.nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return F.relu(self.conv2(F.relu(self.conv1(x))) + x)


def test_a_residual_block_fuses_its_sum_and_equals_eager_and_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 8, 6, 6)).astype(np.float32)
    block = _Block(8)

    def step(x):
        loss = (block(x) ** 2).mean()
        loss.backward()
        return loss

    compiled = ember.function(step)
    got = float(compiled(ember.tensor(x)).numpy())
    grads = [p.grad.numpy().copy() for p in block.parameters()]
    for p in block.parameters():
        p.grad = None
    want = float(step(ember.tensor(x)).detach().numpy())
    assert abs(got - want) <= 1e-5 * max(1.0, abs(want))
    for g, p in zip(grads, block.parameters()):
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-4, atol=1e-5)
    # inference: the block's sum stored by its second convolution
    with ember.no_grad():
        forward = ember.function(block)
        got = forward(ember.tensor(x)).numpy()
        np.testing.assert_allclose(got, block(ember.tensor(x)).numpy(), rtol=1e-5, atol=1e-5)
    assert bool(_residual_epilogues(forward.graph)) == ccompile.compiler_available()
    # PyTorch's gradients of the same block
    twin = torch.nn.ModuleDict(
        {
            "conv1": torch.nn.Conv2d(8, 8, 3, padding=1),
            "conv2": torch.nn.Conv2d(8, 8, 3, padding=1),
        }
    )
    with torch.no_grad():
        for name in ("conv1", "conv2"):
            twin[name].weight.copy_(torch.from_numpy(getattr(block, name).weight.detach().numpy()))
            twin[name].bias.copy_(torch.from_numpy(getattr(block, name).bias.detach().numpy()))
    tx = torch.from_numpy(x)
    y = torch.relu(twin["conv2"](torch.relu(twin["conv1"](tx))) + tx)
    (y**2).mean().backward()
    for name in ("conv1", "conv2"):
        np.testing.assert_allclose(
            getattr(block, name).weight.grad.numpy(),
            twin[name].weight.grad.numpy(),
            rtol=1e-4,
            atol=1e-5,
        )
