"""Training loops as users write them, run eagerly and with each marked step captured: a
DataLoader whose last batch is smaller with a per-epoch StepLR, freezing and unfreezing a
backbone with per-group learning rates set by hand, gradient accumulation with an EMA model
updated in its own step, bfloat16 autocast with GradScaler, train/eval steps around a
cumulative-average BatchNorm, a warmup-cosine LambdaLR, and steps that take and return dicts
and namedtuples (the last three in test_hunt13_loops2.py).
"""

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741


def ragged_batches(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    D = torch.utils.data
    m = ctx.init(nn.Sequential(nn.Linear(3, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 1)))
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    rng = np.random.default_rng(20)
    X = torch.tensor(rng.standard_normal((10, 3)).astype(np.float32))
    Y = torch.tensor(rng.standard_normal((10, 1)).astype(np.float32))
    loader = D.DataLoader(D.TensorDataset(X, Y), batch_size=4)

    def step(x, y, scale=1.0):
        pred = m(x)
        loss = F.mse_loss(pred, y) * scale
        opt.zero_grad()
        loss.backward()
        norm = nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        return {"loss": loss, "norm": norm, "n": x.shape[0]}

    step = ctx.fn(step)
    hist = []
    for epoch in range(3):
        for x, y in loader:
            r = step(x, y, scale=2.0 if epoch == 2 else 1.0)
            hist.append([r["loss"].item(), r["norm"], r["n"]])
        sched.step()
    return [hist, opt.param_groups[0]["lr"], m.state_dict()]


def freeze_schedule(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.backbone = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 6), nn.ReLU())
            s.head = nn.Linear(6, 3)

        def forward(s, x):
            return s.head(s.backbone(x))

    m = ctx.init(Net())
    opt = torch.optim.SGD(
        [
            {"params": m.backbone.parameters(), "lr": 0.0},
            {"params": m.head.parameters()},
        ],
        lr=0.1,
        momentum=0.9,
        nesterov=True,
    )
    rng = np.random.default_rng(21)
    x = ctx.t(rng.standard_normal((6, 4)).astype(np.float32))
    y = ctx.t(rng.integers(0, 3, 6))

    def step(x, y):
        loss = F.cross_entropy(m(x), y, label_smoothing=0.05)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    for p in m.backbone.parameters():
        p.requires_grad_(False)
    losses = [step(x, y) for _ in range(2)]
    for p in m.backbone.parameters():
        p.requires_grad_(True)
    for i in range(3):
        opt.param_groups[0]["lr"] = 0.01 * (i + 1)
        losses.append(step(x, y))
    return [losses, m.state_dict(), [g["lr"] for g in opt.param_groups]]


def grad_accum_ema(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    m = ctx.init(
        nn.Sequential(
            nn.Conv1d(2, 4, 3, padding=1, bias=False),
            nn.BatchNorm1d(4),
            nn.ReLU(),
            nn.AdaptiveAvgPool1d(1),
            nn.Flatten(),
            nn.Linear(4, 2),
        )
    )
    ema = ctx.init(
        nn.Sequential(
            nn.Conv1d(2, 4, 3, padding=1, bias=False),
            nn.BatchNorm1d(4),
            nn.ReLU(),
            nn.AdaptiveAvgPool1d(1),
            nn.Flatten(),
            nn.Linear(4, 2),
        ),
        "ema",
    )
    for p in ema.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1, amsgrad=True)
    rng = np.random.default_rng(22)
    xs = [ctx.t(rng.standard_normal((3, 2, 7)).astype(np.float32)) for _ in range(4)]
    ys = [ctx.t(rng.integers(0, 2, 3)) for _ in range(4)]

    def micro(x, y):
        loss = F.cross_entropy(m(x), y) / 2
        loss.backward()
        return loss

    def update():
        opt.step()
        opt.zero_grad()
        with torch.no_grad():
            for pe, pm in zip(ema.parameters(), m.parameters()):
                pe.mul_(0.9).add_(pm, alpha=0.1)
            for be, bm in zip(ema.buffers(), m.buffers()):
                be.copy_(bm)

    micro, update = ctx.fn(micro), ctx.fn(update)
    losses = []
    for i in range(4):
        losses.append(micro(xs[i], ys[i]))
        if i % 2 == 1:
            update()
    ema.eval()
    with torch.no_grad():
        pred = ema(xs[0])
    return [losses, pred, ema.state_dict(), opt.state_dict()["state"][0]["max_exp_avg_sq"]]


def amp_bf16_loop(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    m = ctx.init(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)))
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8, growth_interval=2)
    rng = np.random.default_rng(23)
    x = ctx.t(rng.standard_normal((6, 8)).astype(np.float32))
    y = ctx.t(rng.integers(0, 4, 6))

    def step(x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = m(x)
            loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(m.parameters(), 5.0)
        scaler.step(opt)
        scaler.update()
        return loss, logits.dtype

    step = ctx.fn(step)
    out = [step(x, y) for _ in range(4)]
    return [[o[0].float() for o in out], out[0][1], scaler.get_scale(), m.state_dict()]


PROGRAMS = [ragged_batches, freeze_schedule, grad_accum_ema, amp_bf16_loop]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
