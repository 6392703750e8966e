"""A bfloat16-autocast step's loss over many classes holds no float32 copy of its logits and
no dense one-hot gradient (transforms/widened_reads.py, ops/gather.py's one-hot adjoint,
transforms/fuse_expand.py), and an attention's float32 query, key and value casts are
recomputed in the backward together (transforms/cheap_remat.py): every value bitwise as
before, the planned and measured peaks lower."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.kernels import ccompile
from ember.ops import gather as gather_ops
from ember.plan import measure_peak
from ember.transforms import pipeline
from ember.transforms.widened_reads import WIDENED_READS

nn = ember.nn
F = nn.functional
CLASSES = 500


class _Block(nn.Module):
    """An embedding, one attention whose product runs in float32 under autocast
    (scaled_dot_product_attention casts q, k and v up) and a head over many classes."""

    def __init__(self, width=64, heads=4):
        super().__init__()
        self.heads = heads
        self.embed = nn.Embedding(CLASSES, width)
        self.qkv = nn.Linear(width, 3 * width)
        self.head = nn.Linear(width, CLASSES)

    def forward(self, tokens):
        b, t = tokens.shape
        h = self.embed(tokens)
        q, k, v = self.qkv(h).reshape(b, t, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.head(a.permute(0, 2, 1, 3).reshape(b, t, -1) + h)


def _run(steps=2):
    ember.manual_seed(0)
    model = _Block()
    opt = ember.optim.AdamW(model.parameters(), lr=1e-3)

    def step(x, y):
        opt.zero_grad()
        with ember.autocast("cpu", dtype=ember.bfloat16):
            out = model(x)
            loss = F.cross_entropy(out.reshape(-1, CLASSES), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    rng = np.random.default_rng(0)
    x = ember.tensor(rng.integers(0, CLASSES, (4, 64)))
    y = ember.tensor(rng.integers(0, CLASSES, (4, 64)))
    fn = ember.function(step)
    losses = [fn(x, y).numpy().copy() for _ in range(steps)]
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    params = [p.detach().numpy().copy() for p in model.parameters()]
    return fn, fn.compile(x, y), (x, y), losses + grads + params


def _wide(graph, dtype, shape) -> list:
    return [
        n
        for n in graph.nodes
        for v in n.outputs
        if v.dtype is dtype and tuple(v.type.shape) == shape and n.kind == "call"
    ]


def _without_the_changes(monkeypatch):
    """The step as compiled before: the float32 copy of the logits, the dense scatter, the
    copies shared back, and no grouped recomputation (every cast alone)."""
    passes = tuple(p for p in pipeline.PASSES if p is not WIDENED_READS)
    monkeypatch.setattr(pipeline, "PASSES", passes)
    monkeypatch.setattr(gather_ops, "_picks_one_per_row", lambda *a: False)
    monkeypatch.setattr("ember.transforms.fuse.expand_per_reader", lambda g, reads: False)
    monkeypatch.setattr("ember.transforms.cheap_remat._shared", lambda *args: [])


@pytest.mark.skipif(
    not ccompile.compiler_available(),
    reason="the peaks it compares are the compiled loops' (NumPy's fused groups hold more)",
)
def test_the_loss_and_attention_hold_less_and_change_no_bit(bare_executors, monkeypatch):
    # (the loss's log_softmax kept whole on both sides: split into its row statistics, it is
    # computed by fused loops, not kernels/csoftmax.py, an ulp apart: tests/test_amp60_*)
    monkeypatch.setattr("ember.transforms.cheap_remat.saves_bytes", lambda node: False)
    fn, program, args, values = _run()
    rows = (4 * 64, CLASSES)
    graph = program.graph
    # the logits' float32 copy and the dense one-hot gradient are never made
    assert not [n for n in _wide(graph, ember.float32, rows) if n.target != "log_softmax"]
    assert not [n for n in graph.nodes if n.target == "scatter_add"]
    # the attention's float32 operands are recomputed in the backward
    assert len([n for n in graph.nodes if n.outputs and n.outputs[0].name.endswith("_remat")])
    planned = program.memory_plan.peak_bytes
    measured = measure_peak(fn, *args)
    assert abs(measured - planned) <= 0.05 * measured, (planned, measured)

    _without_the_changes(monkeypatch)
    fn_b, program_b, args_b, values_b = _run()
    assert [n for n in program_b.graph.nodes if n.target == "scatter_add"]
    assert planned < program_b.memory_plan.peak_bytes
    assert measured < measure_peak(fn_b, *args_b)
    for a, b in zip(values, values_b):
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


def test_copies_are_shared_only_while_the_first_is_read(bare_executors):
    """share_copies keeps a recomputed cast (its copy reads the forward's source, not the
    forward's float32 result, which would be held across the step)."""
    _, program, _, _ = _run(steps=1)
    graph = program.graph
    remat = [n for n in graph.nodes if n.outputs and n.outputs[0].name.endswith("_remat")]
    assert remat
    for n in remat:
        assert not any(v.name + "_remat" == n.outputs[0].name for v in n.inputs)


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def test_the_gradients_match_torch_autocast(torch, bare_executors):
    """The step's dtypes and values are PyTorch's autocast's (float32 loss and gradients), to
    bfloat16's precision."""
    ember.manual_seed(0)
    model = _Block()
    ref = torch.nn.Module()
    ref.embed = torch.nn.Embedding(CLASSES, 64)
    ref.qkv = torch.nn.Linear(64, 192)
    ref.head = torch.nn.Linear(64, CLASSES)
    with torch.no_grad():
        for name, p in model.named_parameters():
            ref.get_parameter(name).copy_(torch.tensor(p.detach().numpy()))
    rng = np.random.default_rng(1)
    x = rng.integers(0, CLASSES, (4, 64))
    y = rng.integers(0, CLASSES, (4, 64))

    def ours(x, y):
        with ember.autocast("cpu", dtype=ember.bfloat16):
            loss = F.cross_entropy(model(x).reshape(-1, CLASSES), y.reshape(-1))
        loss.backward()
        return loss

    def theirs(x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            b, t = x.shape
            h = ref.embed(x)
            q, k, v = ref.qkv(h).reshape(b, t, 3, 4, -1).permute(2, 0, 3, 1, 4)
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            out = ref.head(a.permute(0, 2, 1, 3).reshape(b, t, -1) + h)
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
        scale = np.abs(w).max()
        assert np.abs(g - w).max() <= 0.05 * scale, name
