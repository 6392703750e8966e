"""A bfloat16-autocast step's loss saves its 16-bit logits and two float32 numbers per row,
not the float32 log-probabilities (ops/softmax.py's ``row_statistics`` rule,
transforms/row_statistics.py, tried by transforms/cheap_remat.py): the full float32 result is
never stored, the planned and measured peaks are lower, the values are the kernels' (bitwise
on the reference interpreter, within float32 rounding on the compiled loops) and PyTorch's
autocast's to bfloat16's precision."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.graph import interpreter
from ember.kernels import ccompile
from ember.plan import measure_peak
from ember.transforms.remat import forward_nodes
from ember.transforms.row_statistics import saves_bytes, split

nn = ember.nn
F = nn.functional
CLASSES = 600
ROWS = (4 * 32, CLASSES)


class _Head(nn.Module):
    """An embedding, a GELU layer and a head over many classes."""

    def __init__(self, width=64):
        super().__init__()
        self.embed = nn.Embedding(CLASSES, width)
        self.fc = nn.Linear(width, width)
        self.head = nn.Linear(width, CLASSES)

    def forward(self, tokens):
        return self.head(F.gelu(self.fc(self.embed(tokens))))


def _inputs():
    rng = np.random.default_rng(0)
    return rng.integers(0, CLASSES, (4, 32)), rng.integers(0, CLASSES, (4, 32))


def _run(steps=2):
    ember.manual_seed(0)
    model = _Head()
    opt = ember.optim.AdamW(model.parameters(), lr=1e-3)

    def step(x, y):
        opt.zero_grad()
        with ember.autocast("cpu", dtype=ember.bfloat16):
            loss = F.cross_entropy(model(x).reshape(-1, CLASSES), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    x, y = (ember.tensor(v) for v in _inputs())
    fn = ember.function(step)
    losses = [fn(x, y).numpy().copy() for _ in range(steps)]
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    params = [p.detach().numpy().copy() for p in model.parameters()]
    return fn, fn.compile(x, y), (x, y), losses + grads + params


def _kept_whole(monkeypatch):
    monkeypatch.setattr("ember.transforms.cheap_remat.saves_bytes", lambda node: False)


def test_the_split_gives_the_kernel_s_bits_on_the_interpreter(bare_executors, monkeypatch):
    # the split's nodes are the NumPy kernel's own steps (and the gather picks the logits
    # before the elementwise rest): the reference interpreter gives every value bit for bit.
    # (Split by hand: whether the step keeps it is the memory plan's call, which differs
    # without a compiler, where NumPy's fused groups hold more.)
    _kept_whole(monkeypatch)
    fn, program, args, _ = _run(steps=1)
    graph = program.graph
    node = next(n for n in graph.nodes if n.target == "log_softmax")
    assert saves_bytes(node)
    arrays = program.fed_arrays(*args)
    split_graph = graph.copy()
    n_user = program.memory_parts().n_user
    node = next(n for n in split_graph.nodes if n.target == "log_softmax")
    assert split(split_graph, node, forward_nodes(split_graph, n_user))
    assert not [n for n in split_graph.nodes if n.target == "log_softmax"]
    split_graph.verify()
    want = interpreter.run(graph, arrays)
    got = interpreter.run(split_graph, arrays)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


@pytest.mark.skipif(
    not ccompile.compiler_available(),
    reason="the peaks it compares are the compiled loops' (NumPy's fused groups hold more)",
)
def test_the_loss_saves_the_logits_not_the_log_probabilities(bare_executors, monkeypatch):
    fn, program, args, values = _run()
    graph = program.graph
    assert not [n for n in graph.nodes if n.target == "log_softmax"]
    # no float32 value of the logits' shape is ever stored: the backward's log-probabilities
    # are recomputed inside the gradient's loop, the forward's on the targets' elements only
    assert not [
        n
        for n in graph.nodes
        for v in n.outputs
        if v.dtype is ember.float32 and tuple(v.type.shape) == ROWS
    ]
    planned = program.memory_plan.peak_bytes
    measured = measure_peak(fn, *args)
    assert abs(measured - planned) <= 0.05 * measured, (planned, measured)

    _kept_whole(monkeypatch)
    fn_b, program_b, args_b, values_b = _run()
    assert [n for n in program_b.graph.nodes if n.target == "log_softmax"]
    assert planned < program_b.memory_plan.peak_bytes
    assert measured < measure_peak(fn_b, *args_b)
    # the same float32 values but for the C library's exp and log against kernels/csoftmax.py's
    # (an ulp or so), which a 16-bit gradient's rounding may carry to one bfloat16 ulp
    for a, b in zip(values, values_b):
        assert a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=2**-7, atol=2**-7 * np.abs(b).max())


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def test_the_step_matches_torch_autocast(torch, bare_executors):
    ember.manual_seed(0)
    model = _Head()
    ref = torch.nn.Module()
    ref.embed = torch.nn.Embedding(CLASSES, 64)
    ref.fc = torch.nn.Linear(64, 64)
    ref.head = torch.nn.Linear(64, CLASSES)
    with torch.no_grad():
        for name, p in model.named_parameters():
            ref.get_parameter(name).copy_(torch.tensor(p.detach().numpy()))
    x, y = _inputs()

    def ours(x, y):
        with ember.autocast("cpu", dtype=ember.bfloat16):
            loss = F.cross_entropy(model(x).reshape(-1, CLASSES), y.reshape(-1))
        loss.backward()
        return loss

    def theirs(x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = ref.head(torch.nn.functional.gelu(ref.fc(ref.embed(x))))
            loss = torch.nn.functional.cross_entropy(out.reshape(-1, CLASSES), y.reshape(-1))
        loss.backward()
        return loss

    loss = ember.function(ours)(ember.tensor(x), ember.tensor(y))
    want = theirs(torch.tensor(x), torch.tensor(y))
    assert loss.dtype is ember.float32 and want.dtype is torch.float32
    np.testing.assert_allclose(loss.item(), want.item(), rtol=2e-2)
    for name, p in model.named_parameters():
        g, w = p.grad.numpy(), ref.get_parameter(name).grad.numpy()
        assert g.dtype == w.dtype == np.float32
        assert np.abs(g - w).max() <= 0.05 * np.abs(w).max(), name
