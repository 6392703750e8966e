"""Programs of hunt59 whose steps ``ember.function``/``ember.compile`` capture (PyTorch runs
them eagerly): gradient accumulation with an optimizer step every other call steered by a
closure counter, metrics under no_grad inside a step, a logged ``.item()``, an argument
changed in place through slices, activation checkpointing inside a captured step, a tensor
default argument, an int argument choosing how many chunks a function returns, and a KV cache
held in a dict that grows by one position per compiled call.
"""

import numpy as np
import pytest

import ember

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005

pytestmark = pytest.mark.filterwarnings("ignore:ember.compile")


def _compiled(torch, ctx, f):
    return ember.compile(f) if ctx.capture and not ctx.is_torch else f


def accumulate_every_other(torch, ctx):
    """Two micro-batch backwards per call, the optimizer stepping and zeroing on every
    second call (a counter in a closure dict), metrics (accuracy, the logits' norm) under
    no_grad, and the loss logged by .item() into a history list outside."""
    nn = torch.nn
    F = nn.functional
    model = ctx.init(nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3)), "m")
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    state = {"calls": 0}

    def step(xa, ya, xb, yb):
        total = 0
        for x, y in ((xa, ya), (xb, yb)):
            logits = model(x)
            loss = F.cross_entropy(logits, y) / 2
            loss.backward()
            total = total + loss.detach()
        with torch.no_grad():
            acc = (model(xa).argmax(1) == ya).float().mean()
            norm = model(xb).norm()
        state["calls"] += 1
        if state["calls"] % 2 == 0:
            opt.step()
            opt.zero_grad()
        return total, acc, norm

    step = ctx.fn(step)
    rng = np.random.default_rng(0)
    hist = []
    out = []
    for _ in range(4):
        args = []
        for _ in range(2):
            args += [ctx.t(rng.standard_normal((5, 4)).astype(np.float32)), ctx.t(rng.integers(0, 3, 5))]
        total, acc, norm = step(*args)
        hist.append(round(total.item(), 5))
        out.append([total, acc, norm, None if model[0].weight.grad is None else model[0].weight.grad.clone()])
    return [out, hist, state["calls"], model[2].weight]


def inplace_argument_slices(torch, ctx):
    """A function normalising an argument in place through slices (x[:, 0] -= mean, x[1:] *=
    2, x.clamp_ on a column) and returning a view of it; a tensor default argument; the
    caller's tensor must hold the new values after each call."""
    default_scale = torch.tensor([1.0, 2.0, 3.0])

    def normalise(x, scale=default_scale):
        x[:, 0] -= x[:, 0].mean()
        x[1:] *= 2
        x[:, 2].clamp_(-0.5, 0.5)
        return x[:, 1:] * scale[1:]

    normalise = ctx.fn(normalise)
    rng = np.random.default_rng(1)
    out = []
    for i in range(3):
        x = ctx.t(rng.standard_normal((4, 3)).astype(np.float32))
        v = normalise(x) if i != 1 else normalise(x, torch.tensor([0.5, 0.5, 0.5]))
        out.append([x.clone(), v])
    return out


def checkpointed_step(torch, ctx):
    """A captured training step whose two blocks run under torch.utils.checkpoint
    (use_reentrant=False), with LayerNorm and GELU inside; AdamW steps."""
    nn = torch.nn
    cp = torch.utils.checkpoint
    blocks = ctx.init(nn.ModuleList([nn.Sequential(nn.LayerNorm(6), nn.Linear(6, 6), nn.GELU()) for _ in range(2)]), "b")
    head = ctx.init(nn.Linear(6, 1), "h")
    opt = torch.optim.AdamW(list(blocks.parameters()) + list(head.parameters()), lr=1e-2, eps=1e-6)

    def step(x, y):
        h = x
        for b in blocks:
            h = h + cp.checkpoint(b, h, use_reentrant=False)
        loss = nn.functional.mse_loss(head(h), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = ctx.fn(step)
    rng = np.random.default_rng(2)
    out = []
    for _ in range(3):
        out.append(step(ctx.t(rng.standard_normal((5, 6)).astype(np.float32)), ctx.t(rng.standard_normal((5, 1)).astype(np.float32))))
    return out + [blocks[0][1].weight, head.weight.grad]


def chunks_by_int(torch, ctx):
    """A compiled function taking an int saying how many chunks to split into, returning a
    list of their sums (its length depends on the int), and a dict keyed by the int."""

    def f(x, n):
        parts = x.chunk(n, dim=0)
        return [p.sum(0) for p in parts], {f"n{n}": torch.stack([p.mean() for p in parts])}

    f = _compiled(torch, ctx, f)
    rng = np.random.default_rng(3)
    x = ctx.t(rng.standard_normal((6, 2)).astype(np.float32))
    return [f(x, 2), f(x, 3), f(x, 2), f(x * 2, 6)]


def kv_cache_compiled(torch, ctx):
    """An attention layer's compiled forward for one new token at a time, keys and values
    kept in a dict that grows by one position per call (sizes change every call: automatic
    dynamic shapes), compared with full recomputation under a causal mask."""
    nn = torch.nn
    F = nn.functional
    qkv = ctx.init(nn.Linear(4, 12), "qkv")
    cache = {}

    def step(tok):
        q, k, v = qkv(tok).split(4, dim=-1)
        if "k" in cache:
            k = torch.cat([cache["k"], k], dim=1)
            v = torch.cat([cache["v"], v], dim=1)
        cache["k"], cache["v"] = k, v
        return F.scaled_dot_product_attention(q, k, v)

    step = _compiled(torch, ctx, step)
    rng = np.random.default_rng(4)
    xs = ctx.t(rng.standard_normal((1, 5, 4)).astype(np.float32))
    outs = [step(xs[:, t : t + 1]) for t in range(5)]
    q, k, v = qkv(xs).split(4, dim=-1)
    full = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return [torch.cat(outs, 1), full, cache["k"].shape[1]]


PROGRAMS = [accumulate_every_other, inplace_argument_slices, checkpointed_step, chunks_by_int, kv_cache_compiled]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
