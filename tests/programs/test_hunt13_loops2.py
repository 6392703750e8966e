"""Training loops, continued from test_hunt13_loops.py: train and evaluation steps captured
separately around a cumulative-average BatchNorm (each run sets the mode its function set), a
warmup-cosine LambdaLR stepped between captured steps, and steps that take and return dicts
and namedtuples."""

import collections
import math

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741


def eval_modes(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.c = nn.Conv2d(
                1, 4, 3, padding=1, bias=False
            )  # (a bias before BatchNorm: zero gradient)
            s.bn = nn.BatchNorm2d(4, momentum=None)
            s.drop = nn.Dropout2d(0.0)
            s.fc = nn.Linear(4, 3)

        def forward(s, x):
            h = F.relu(s.bn(s.c(x)))
            h = s.drop(h)
            return s.fc(h.mean((2, 3)))

    m = ctx.init(Net())
    opt = torch.optim.RMSprop(m.parameters(), lr=1e-2, centered=True, momentum=0.5)
    rng = np.random.default_rng(24)
    xs = ctx.t(rng.standard_normal((8, 1, 5, 5)).astype(np.float32))
    ys = ctx.t(rng.integers(0, 3, 8))

    def train(x, y):
        m.train()
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    @torch.no_grad()
    def evaluate(x, y):
        m.eval()
        logits = m(x)
        return F.cross_entropy(logits, y, reduction="sum"), (logits.argmax(1) == y).sum()

    train, evaluate = ctx.fn(train), ctx.fn(evaluate)
    out = []
    for _ep in range(3):
        out.append(train(xs[:4], ys[:4]))
        out.append(train(xs[4:], ys[4:]))
        l, c = evaluate(xs, ys)
        out.append([l, c.item()])
    return [out, m.bn.num_batches_tracked, m.bn.running_var, m.training]


def lr_warmup_manual(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    m = ctx.init(nn.Sequential(nn.Embedding(10, 6), nn.Flatten(), nn.Linear(18, 2)))
    decay, no_decay = [], []
    for n, p in m.named_parameters():
        (no_decay if n.endswith("bias") or "0." in n else decay).append(p)
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}],
        lr=1e-2,
        betas=(0.8, 0.95),
    )
    total, warm = 6, 2

    def lr_at(s):
        if s < warm:
            return (s + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * (s - warm) / (total - warm)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    rng = np.random.default_rng(25)
    ids = ctx.t(rng.integers(0, 10, (4, 3)))
    y = ctx.t(rng.integers(0, 2, 4))

    def step(ids, y):
        loss = F.cross_entropy(m(ids), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    # (the scheduler steps outside the captured step: ember.function refuses a trace that
    # changes a param group's lr, since the graph would not rerun that Python code)
    step = ctx.fn(step)
    out = []
    for _ in range(total):
        loss = step(ids, y)
        sched.step()
        out.append([loss, sched.get_last_lr()])
    return [out, m.state_dict(), sched.state_dict()["last_epoch"]]


def dict_outputs(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    Out = collections.namedtuple("Out", ["logits", "aux", "extra"])

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.enc = nn.Linear(5, 8)
            s.cls = nn.Linear(8, 3)
            s.reg = nn.Linear(8, 1)

        def forward(s, batch, return_aux=True):
            h = torch.relu(s.enc(batch["x"]))
            aux = s.reg(h).squeeze(-1) if return_aux else None
            return Out(s.cls(h), aux, {"h_norm": h.norm(dim=-1)})

    m = ctx.init(Net())
    opt = torch.optim.Adagrad(m.parameters(), lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1)
    rng = np.random.default_rng(26)
    batch = {
        "x": ctx.t(rng.standard_normal((4, 5)).astype(np.float32)),
        "y": ctx.t(rng.integers(0, 3, 4)),
        "t": ctx.t(rng.standard_normal(4).astype(np.float32)),
    }

    def step(batch, w_aux=0.5):
        out = m(batch)
        l1 = F.cross_entropy(out.logits, batch["y"])
        l2 = F.smooth_l1_loss(out.aux, batch["t"])
        loss = l1 + w_aux * l2
        opt.zero_grad()
        loss.backward()
        opt.step()
        return {"total": loss, "parts": (l1, l2), "norm": out.extra["h_norm"]}

    step = ctx.fn(step)
    res = [step(batch) for _ in range(2)] + [step(batch, w_aux=0.0)]
    with torch.no_grad():
        o = m(batch, return_aux=False)
    return [res, o.aux is None, o.logits, type(o).__name__]


PROGRAMS = [eval_modes, lr_warmup_manual, dict_outputs]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
