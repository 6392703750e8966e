"""transforms/cheap_remat.py: a bfloat16-autocast training step recomputes its parameters'
casts in the backward where that plans lower, with every value bitwise as without it; and
transforms/fuse.py defers a transformer's FFN ReLU mask into its gradient's loop."""

from __future__ import annotations

import numpy as np
import pytest

import ember
from ember import zoo
from ember.capture import compile as compile_module
from ember.kernels import ccompile
from ember.ops._registry import REGISTRY
from ember.plan import measure_peak
from ember.transforms import fuse

nn = ember.nn


def _encoder(seed=0):
    ember.manual_seed(seed)
    return nn.Sequential(
        nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True), nn.Linear(128, 10)
    )


def _step(model, autocast=True):
    opt = ember.optim.AdamW(model.parameters(), lr=1e-3)

    def step(x, y):
        opt.zero_grad()
        with ember.autocast("cpu", dtype=ember.bfloat16, enabled=autocast):
            out = model(x)
            loss = nn.functional.cross_entropy(out.reshape(-1, 10), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    return step


def _inputs():
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((4, 64, 128)).astype(np.float32))
    y = ember.tensor(rng.integers(0, 10, (4, 64)))
    return x, y


def _run(x, y, steps=2):
    """(the compiled program, the losses and the parameters after ``steps`` steps)."""
    model = _encoder()
    fn = ember.function(_step(model))
    losses = [fn(x, y).numpy().copy() for _ in range(steps)]
    params = [p.detach().numpy().copy() for p in model.parameters()]
    return fn, fn.compile(x, y), losses, params


def _casts_of_inputs_after_loss(graph) -> list:
    """Casts of graph inputs (parameters, the batch) placed after the loss's log_softmax: the
    backward's recomputed copies."""
    inputs = {id(v) for v in graph.inputs}
    loss = next(i for i, n in enumerate(graph.nodes) if n.target == "log_softmax")

    def from_input(v):
        while v.node.kind == "call" and v.node.op.view:  # (the batch, permuted)
            v = v.node.inputs[0]
        return id(v) in inputs

    return [
        n
        for n in graph.nodes[loss:]
        if n.target == "cast" and n.outputs[0].ndim and from_input(n.inputs[0])
    ]


def test_cast_is_the_rule_holder():
    assert REGISTRY["cast"].remat_free
    assert not REGISTRY["matmul"].remat_free and not REGISTRY["exp"].remat_free


# (the plans these decisions are scored on are the compiled loops': without a compiler NumPy
# runs the fused groups, holding their temporaries, and the choices differ; as amp56's test)
_COMPILED_LOOPS = pytest.mark.skipif(
    not ccompile.compiler_available(), reason="the choices are scored on compiled loops' plans"
)


@_COMPILED_LOOPS
def test_recomputed_casts_lower_the_peak_and_change_no_bit(bare_executors, monkeypatch):
    x, y = _inputs()
    fn, program, losses, params = _run(x, y)
    recast = _casts_of_inputs_after_loss(program.graph)
    assert recast, str(program.graph)
    planned = program.memory_plan.peak_bytes
    measured = measure_peak(fn, x, y)
    assert abs(measured - planned) <= 0.05 * measured, (planned, measured)

    monkeypatch.setattr(compile_module, "recomputes_cheap", lambda call, options: False)
    fn_b, program_b, losses_b, params_b = _run(x, y)
    assert not _casts_of_inputs_after_loss(program_b.graph)
    assert planned < program_b.memory_plan.peak_bytes
    assert measured < measure_peak(fn_b, x, y)
    for a, b in zip(losses + params, losses_b + params_b):
        assert a.dtype == b.dtype and np.array_equal(a, b)


def _bool_held_across_forward(graph) -> list:
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    loss = next(i for i, n in enumerate(graph.nodes) if n.target == "log_softmax")
    return [
        v
        for n in graph.nodes[:loss]
        for v in n.outputs
        if v.dtype is ember.bool and v.ndim == 3 and any(position[id(u)] > loss for u in v.users)
    ]


def _zoo_transformer_step():
    """The zoo's transformer encoder (batch 8 x 128 tokens, width 256) under bfloat16
    autocast: its FFN mask is 1 MiB, held across the step's peak when made in the forward."""
    x, y = (ember.tensor(a) for a in zoo.inputs("transformer", 8))
    ember.manual_seed(0)
    model = zoo.build("transformer", ember)
    step = ember.function(_step(model))
    step(x, y)  # (AdamW's state is made by the first step)
    return x, y, step.compile(x, y)


@_COMPILED_LOOPS
def test_the_ffn_mask_is_computed_in_its_gradients_loop(bare_executors, monkeypatch):
    x, y, program = _zoo_transformer_step()
    assert not _bool_held_across_forward(program.graph)
    # the grouping before: every mask joined the forward's loop, held to the backward
    monkeypatch.setattr(fuse, "_grouping", lambda graph: fuse._groups(graph)[0])
    _, _, early = _zoo_transformer_step()
    assert _bool_held_across_forward(early.graph)
    assert program.memory_plan.peak_bytes < early.memory_plan.peak_bytes


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def test_the_step_matches_torch_autocast(torch, bare_executors):
    """The dtypes PyTorch's CPU autocast gives (a bfloat16 product, float32 loss, float32
    gradients of float32 parameters) and its loss, to bfloat16's precision."""
    x, y = _inputs()
    model = _encoder()
    twin = torch.nn.Sequential(
        torch.nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True),
        torch.nn.Linear(128, 10),
    )
    with torch.no_grad():
        for p, q in zip(twin.parameters(), model.parameters()):
            p.copy_(torch.from_numpy(q.detach().numpy().copy()))
    fn = ember.function(_step(model))
    loss = fn(x, y)
    tx, ty = torch.from_numpy(x.numpy()), torch.from_numpy(y.numpy())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = twin(tx)
        tloss = torch.nn.functional.cross_entropy(out.reshape(-1, 10), ty.reshape(-1))
    assert out.dtype == torch.bfloat16 and tloss.dtype == torch.float32
    assert loss.dtype is ember.float32
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=2e-2)
    for p in model.parameters():
        assert p.dtype is ember.float32
