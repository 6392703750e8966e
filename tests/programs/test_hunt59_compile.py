"""Programs of hunt59 run through ``ember.compile`` and ``ember.function`` (in the captured
run; PyTorch runs them eagerly): dataclasses and NamedTuples in and out of a compiled step,
nested dicts of tensors returned, Python control flow on shapes, on a flag argument and on a
config object's attributes, a compiled loss with a list argument whose length changes, a
training step whose optimizer is built lazily on the first call, methods of a module
compiled by decorator, a function closing over a tensor that is later updated in place, and
a compiled generator-style rollout with a Python for-loop over a tensor's rows.
"""

import dataclasses
from typing import NamedTuple

import numpy as np
import pytest

import ember

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005

pytestmark = pytest.mark.filterwarnings("ignore:ember.compile")


def _compiled(torch, ctx, f, **kwargs):
    return ember.compile(f, **kwargs) if ctx.capture and not ctx.is_torch else f


@dataclasses.dataclass
class Batch:
    x: object
    y: object
    weight: object = None


class Stats(NamedTuple):
    loss: object
    acc: object
    extra: dict


def dataclass_io(torch, ctx):
    """A compiled training step taking a dataclass batch (weight None on some calls) and
    returning a NamedTuple whose third field is a dict of tensors; the optimizer steps inside."""
    nn = torch.nn
    F = nn.functional
    model = ctx.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)), "m")
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def step(batch):
        logits = model(batch.x)
        per = F.cross_entropy(logits, batch.y, reduction="none")
        loss = per.mean() if batch.weight is None else (per * batch.weight).sum() / batch.weight.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        acc = (logits.argmax(1) == batch.y).float().mean()
        return Stats(loss.detach(), acc, {"max": per.max().detach(), "logits": logits.detach()})

    step = _compiled(torch, ctx, step)
    rng = np.random.default_rng(0)
    out = []
    for i in range(4):
        b = Batch(ctx.t(rng.standard_normal((5, 4)).astype(np.float32)), ctx.t(rng.integers(0, 3, 5)))
        if i % 2:
            b.weight = ctx.t(rng.uniform(0.5, 1.5, 5).astype(np.float32))
        s = step(b)
        out.append([s.loss, s.acc, s.extra["max"], s.extra["logits"], type(s).__name__, sorted(s.extra)])
    return out + [model[2].weight]


def shape_control_flow(torch, ctx):
    """A compiled function branching on x.shape (even or odd length, more than 4 rows), on a
    boolean flag argument and on a config object's attribute changed between calls; a
    while loop halving until the size is small; results as a nested dict."""

    class Cfg:
        mode = "sum"
        scale = 2.0

    cfg = Cfg()

    def f(x, flag):
        out = {}
        if x.shape[0] % 2 == 0:
            out["half"] = x.view(2, -1, x.shape[1]).sum(0)
        else:
            out["half"] = x[1:] * 2
        h = x
        n = 0
        while h.shape[0] > 2:
            h = h[::2] + h[1::2][: h[::2].shape[0]] if h.shape[0] % 2 == 0 else h[:-1]
            n += 1
        out["reduced"] = {"h": h, "n": n}
        red = h.sum() if cfg.mode == "sum" else h.amax()
        out["red"] = red * cfg.scale if flag else -red
        return out

    f = _compiled(torch, ctx, f)
    rng = np.random.default_rng(1)
    res = []
    for rows, flag, mode in [(8, True, "sum"), (5, False, "sum"), (6, True, "max"), (8, True, "max"), (8, False, "sum")]:
        cfg.mode = mode
        cfg.scale = 2.0 if rows != 6 else 3.0
        res.append(f(ctx.t(rng.standard_normal((rows, 3)).astype(np.float32)), flag))
    return res


def lazy_optimizer_step(torch, ctx):
    """A training step that builds its optimizer on first call (a LazyLinear model whose
    parameters exist only after the first forward), a list of losses whose length grows
    passed back in, and gradient clipping by value inside."""
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    model = ctx.init(model, "m")
    state = {}

    def step(x, y, history):
        if "opt" not in state:
            state["opt"] = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
        opt = state["opt"]
        loss = nn.functional.smooth_l1_loss(model(x), y, beta=0.5)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(model.parameters(), 0.05)
        opt.step()
        prev = sum(history) / len(history) if history else loss.detach() * 0
        return loss.detach(), prev

    step = _compiled(torch, ctx, step)
    rng = np.random.default_rng(2)
    hist = []
    out = []
    for _ in range(4):
        x = ctx.t(rng.standard_normal((6, 3)).astype(np.float32))
        y = ctx.t(rng.standard_normal((6, 1)).astype(np.float32))
        loss, prev = step(x, y, list(hist))
        hist.append(loss)
        out.append([loss, prev])
    return out + [model[0].weight]


def compiled_methods(torch, ctx):
    """A module whose forward is compiled per instance (module.compile() in PyTorch 2.x, the
    function ember.compile'd otherwise), a buffer updated in place between calls (a running
    mean that the function reads: the update must be seen), and a closure over a tensor that
    is mutated in place after the first call."""
    nn = torch.nn

    class Normalizer(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.zeros(3))
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            return self.lin(x - self.mean)

    m = ctx.init(Normalizer(), "n")
    fwd = _compiled(torch, ctx, m)
    bias = torch.zeros(3)
    g = _compiled(torch, ctx, lambda x: (x + bias).relu().sum(1))
    rng = np.random.default_rng(3)
    out = []
    for i in range(3):
        x = ctx.t(rng.standard_normal((4, 3)).astype(np.float32))
        out.append(fwd(x))
        out.append(g(x))
        with torch.no_grad():
            m.mean.mul_(0.5).add_(x.mean(0), alpha=0.5)
        bias.add_(0.25)
    return out + [m.mean]


def rollout_loop(torch, ctx):
    """A compiled recurrent rollout: a GRUCell stepped in a Python loop over the rows of an
    action tensor, rewards accumulated with a discount, the discounted returns computed
    backwards in Python, and a REINFORCE-style loss whose gradient is taken outside."""
    nn = torch.nn
    cell = ctx.init(nn.GRUCell(2, 4), "cell")
    head = ctx.init(nn.Linear(4, 3), "head")

    def rollout(actions, h0):
        h = h0
        logps, values = [], []
        for t in range(actions.shape[0]):
            h = cell(actions[t].unsqueeze(0).float(), h)
            lp = head(h).log_softmax(-1)
            logps.append(lp[0, t % 3])
            values.append(h.mean())
        rets = []
        R = torch.zeros(())
        for v in reversed(values):
            R = v.detach() + 0.9 * R
            rets.insert(0, R)
        rets = torch.stack(rets)
        return -(torch.stack(logps) * (rets - rets.mean())).sum(), rets, h

    rollout = _compiled(torch, ctx, rollout)
    rng = np.random.default_rng(4)
    out = []
    for T in (5, 5, 3):
        a = ctx.t(rng.integers(0, 2, (T, 2)))
        loss, rets, h = rollout(a, torch.zeros(1, 4))
        loss.backward()
        out.append([loss.detach(), rets, h.detach()])
    return out + [cell.weight_hh.grad, head.bias.grad]


PROGRAMS = [dataclass_io, shape_control_flow, lazy_optimizer_step, compiled_methods, rollout_loop]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_compiled(program):
    check_program(program, capture=True)
