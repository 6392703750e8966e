"""Training programs of hunt45: steps whose captured function returns Python numbers (a dict of
``.item()`` metrics, an accuracy from an int ``.item()``, a running sum of items, a dataclass
``StepOutput`` holding an OrderedDict of items), a captured eval returning ``.tolist()``
predictions, clipping by value and by norm (and adaptively, by a bound from an ``.item()``),
``torch.tensor`` of items for an all-reduce, ReduceLROnPlateau fed the returned numbers,
CosineAnnealingWarmRestarts, ChainedScheduler and SequentialLR, gradient accumulation, and a
multi-task head on eight losses under NAdam.
"""

import collections
import dataclasses

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007


def classifier_item_metrics(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    model = ctx.init(nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Dropout(0.0), nn.Linear(16, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, nesterov=True)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=0)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((24, 6)).astype(np.float32))
    y = ctx.t(rng.integers(0, 4, 24))

    @ctx.fn
    def train_step(xb, yb):
        model.train()
        logits = model(xb)
        loss = F.cross_entropy(logits, yb, label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
        opt.step()
        correct = (logits.argmax(dim=1) == yb).sum().item()
        return {
            "loss": loss.item(),
            "acc": correct / yb.size(0),
            "correct": correct,
            "grad_norm": gnorm.item(),
            "pct": 100.0 * correct / len(yb),
        }

    @ctx.fn
    def evaluate(xb, yb):
        model.eval()
        with torch.no_grad():
            logits = model(xb)
            loss = F.cross_entropy(logits, yb, reduction="sum")
            pred = logits.argmax(1)
        return loss.item() / xb.shape[0], pred.eq(yb).float().mean().item(), pred.tolist()

    history = []
    for epoch in range(4):
        total, n = 0.0, 0
        for i in range(0, 24, 8):
            m = train_step(x[i : i + 8], y[i : i + 8])
            total += m["loss"] * 8
            n += 8
            history.append(m)
        val_loss, val_acc, preds = evaluate(x, y)
        sched.step(val_loss)
        history.append([total / n, val_loss, val_acc, preds, opt.param_groups[0]["lr"]])
    types = [type(v).__name__ for v in history[0].values()]
    return [history, types, model[0].weight, model[3].bias]


def regression_running_sum(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(3, 12), nn.Tanh(), nn.Linear(12, 12), nn.SiLU())
            self.head = nn.Linear(12, 1)

        def forward(self, x):
            return self.head(self.body(x)).squeeze(-1)

    model = ctx.init(Net())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.8, 0.95))
    sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2, eta_min=1e-4)
    rng = np.random.default_rng(1)
    X = ctx.t(rng.standard_normal((4, 5, 3)).astype(np.float32))
    Y = ctx.t(rng.standard_normal((4, 5)).astype(np.float32))

    @ctx.fn
    def accumulate(X, Y):
        # four micro-batches, one optimizer step; the numbers summed as an eager loop would
        opt.zero_grad()
        running, worst = 0.0, 0.0
        for k in range(X.shape[0]):
            pred = model(X[k])
            loss = F.smooth_l1_loss(pred, Y[k], beta=0.5) / X.shape[0]
            loss.backward()
            running += loss.item()
            worst = worst + (pred - Y[k]).abs().max().item() / X.shape[0]
        nn.utils.clip_grad_value_(model.parameters(), clip_value=0.05)
        grads = [p.grad.abs().max().item() for p in model.parameters()]
        opt.step()
        return running, worst, grads, -running, abs(running - 1.0) ** 0.5

    lrs, out = [], []
    for epoch in range(5):
        out.append(accumulate(X, Y))
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    return [out, lrs, model.head.weight, model.body[2].bias]


def chained_schedules(torch, ctx):
    nn = torch.nn
    model = ctx.init(
        nn.Sequential(nn.Conv1d(2, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6, 2))
    )
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if name.endswith("bias") else decay).append(p)
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}],
        lr=1e-2,
    )
    warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=2)
    cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=1e-3)
    seq = torch.optim.lr_scheduler.SequentialLR(opt, schedulers=[warm, cos], milestones=[2])
    rng = np.random.default_rng(2)
    x = ctx.t(rng.standard_normal((5, 2, 6)).astype(np.float32))
    y = ctx.t(rng.standard_normal((5, 2)).astype(np.float32))

    @ctx.fn
    def step(x, y):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()

    losses, lrs = [], []
    for _ in range(6):
        losses.append(step(x, y))
        seq.step()
        lrs.append([g["lr"] for g in opt.param_groups])

    # a chained pair on a second optimizer: both factors multiply at every step
    opt2 = torch.optim.SGD(model.parameters(), lr=1.0)
    chain = torch.optim.lr_scheduler.ChainedScheduler(
        [
            torch.optim.lr_scheduler.ExponentialLR(opt2, gamma=0.9),
            torch.optim.lr_scheduler.StepLR(opt2, step_size=2, gamma=0.5),
        ]
    )
    lrs2 = []
    for _ in range(5):
        opt2.step()
        chain.step()
        lrs2.append(chain.get_last_lr()[0])
    state = seq.state_dict()
    return [losses, lrs, lrs2, state["last_epoch"], state["_milestones"], model[3].weight]


def adaptive_clip_metrics(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    model = ctx.init(nn.Sequential(nn.Linear(5, 10), nn.ReLU(), nn.Linear(10, 3)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(12)
    x = ctx.t(rng.standard_normal((12, 5)).astype(np.float32))
    y = ctx.t(rng.integers(0, 3, 12))

    @ctx.fn
    def step(x, y):
        logits = model(x)
        # outlier-robust inputs to the loss: logits clamped at three standard deviations
        spread = logits.detach().std().item()
        logits = logits.clamp(min=-3 * spread, max=3 * spread)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():  # adaptive clipping by value: twice the mean magnitude
            thr = 2 * p.grad.abs().mean().item()
            p.grad.clamp_(-thr, thr)
        opt.step()
        correct = (logits.argmax(-1) == y).sum().item()
        n = y.shape[0]
        # what a distributed loop would all_reduce: [loss sum, correct, count]
        stats = torch.tensor([loss.item() * n, correct, n], dtype=torch.float64)
        conf = torch.full((n,), 1.0).masked_fill(
            logits.argmax(-1) != y, logits.softmax(-1).max().item()
        )
        return stats, conf, torch.tensor(logits.argmax(-1).tolist()), correct

    out = [step(x, y) for _ in range(3)]
    return [out, model[0].weight, model[2].bias]


@dataclasses.dataclass
class StepOutput:
    loss: float
    logits: object
    metrics: dict
    step_kind: str = "train"


def text_cnn_step_output(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class TextCNN(nn.Module):
        def __init__(self, V=15, E=6, C=3):
            super().__init__()
            self.emb = nn.Embedding(V, E, padding_idx=0)
            self.convs = nn.ModuleList([nn.Conv1d(E, 4, k, padding=k // 2) for k in (2, 3)])
            self.fc = nn.Linear(8, C)

        def forward(self, tok):
            h = self.emb(tok).transpose(1, 2)  # (B, E, T)
            pooled = [F.adaptive_max_pool1d(F.relu(conv(h)), 1).squeeze(-1) for conv in self.convs]
            return self.fc(F.dropout(torch.cat(pooled, 1), 0.0, self.training))

    model = ctx.init(TextCNN())
    opt = torch.optim.Adagrad(model.parameters(), lr=0.1, lr_decay=0.01)
    rng = np.random.default_rng(13)
    tok = ctx.t(rng.integers(0, 15, (5, 7)))
    lab = ctx.t(rng.integers(0, 3, 5))

    @ctx.fn
    def step(tok, lab):
        logits = model(tok)
        loss = F.cross_entropy(logits, lab)
        opt.zero_grad()
        loss.backward()
        opt.step()
        metrics = collections.OrderedDict()
        metrics["acc"] = (logits.argmax(1) == lab).float().mean().item()
        metrics["margin"] = (logits.max(1).values - logits.min(1).values).mean().item()
        return StepOutput(loss.item(), logits.detach(), metrics)

    outs = [step(tok, lab) for _ in range(3)]
    return [
        [[o.loss, o.logits, dict(o.metrics), type(o.metrics).__name__, o.step_kind] for o in outs],
        type(outs[0]).__name__,
        model.fc.weight,
    ]


def multitask_losses(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class MultiHead(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = nn.Sequential(nn.Linear(6, 12), nn.LayerNorm(12), nn.SiLU())
            self.tags = nn.Linear(12, 4)  # multi-label
            self.count = nn.Linear(12, 1)  # Poisson rate (log)
            self.reg = nn.Linear(12, 2)  # Gaussian mean and log-variance
            self.emb = nn.Linear(12, 5)  # metric embedding

        def forward(self, x):
            h = self.trunk(x)
            mu, logvar = self.reg(h).unbind(-1)
            return self.tags(h), self.count(h).squeeze(-1), mu, logvar.exp(), self.emb(h)

    model = ctx.init(MultiHead())
    opt = torch.optim.NAdam(model.parameters(), lr=5e-3, momentum_decay=4e-3)
    rng = np.random.default_rng(14)
    x = ctx.t(rng.standard_normal((8, 6)).astype(np.float32))
    tags = ctx.t((rng.random((8, 4)) > 0.6).astype(np.float32))
    counts = ctx.t(rng.poisson(2.0, 8).astype(np.float32))
    target = ctx.t(rng.standard_normal(8).astype(np.float32))
    same = ctx.t(np.where(rng.random(8) > 0.5, 1.0, -1.0).astype(np.float32))
    pos_weight = ctx.t(np.array([1.0, 2.0, 0.5, 3.0], dtype=np.float32))

    @ctx.fn
    def step(x, tags, counts, target, same):
        logits, log_rate, mu, var, emb = model(x)
        anchor, positive, negative = emb, emb.roll(1, 0), emb.flip(0)
        losses = {
            "bce": F.binary_cross_entropy_with_logits(logits, tags, pos_weight=pos_weight),
            "mlsm": F.multilabel_soft_margin_loss(logits, tags),
            "poisson": F.poisson_nll_loss(log_rate, counts, log_input=True, full=True),
            "gauss": F.gaussian_nll_loss(mu, target, var, full=True, eps=1e-4),
            "cos": F.cosine_embedding_loss(anchor, positive, same, margin=0.2),
            "triplet": F.triplet_margin_with_distance_loss(
                anchor,
                positive,
                negative,
                distance_function=lambda a, b: 1 - F.cosine_similarity(a, b),
                margin=0.5,
                swap=True,
            ),
            "rank": F.margin_ranking_loss(mu, target, same, margin=0.1),
            "kl": F.kl_div(
                F.log_softmax(emb, -1),
                F.log_softmax(positive.detach(), -1),
                reduction="batchmean",
                log_target=True,
            ),
        }
        total = sum(losses.values())
        opt.zero_grad()
        total.backward()
        opt.step()
        out = {k: v.item() for k, v in losses.items()}
        out["total"] = total.item()
        return out

    hist = [step(x, tags, counts, target, same) for _ in range(3)]
    return [hist, model.reg.weight, model.trunk[1].weight]


PROGRAMS = [
    text_cnn_step_output,
    multitask_losses,
    classifier_item_metrics,
    regression_running_sum,
    chained_schedules,
    adaptive_clip_metrics,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
