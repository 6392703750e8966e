"""Programs of hunt59 on optimizers and schedulers, run on PyTorch and on ember: the less
common optimizers (Rprop with its step sizes, ASGD's averages, NAdam with decoupled weight
decay, RAdam, Adamax, Adagrad with lr_decay) over parameter groups of their own settings,
their state_dicts saved mid-run and loaded into fresh optimizers; LBFGS with a strong-Wolfe
line search; schedulers chained and sequenced, OneCycleLR's three phases with momentum
cycling, CosineAnnealingWarmRestarts stepped by fractional epochs, ReduceLROnPlateau in max
mode with cooldown, each resumed from its state_dict; SparseAdam on a sparse Embedding;
an exponential moving average by AveragedModel and BatchNorm statistics by update_bn.
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def _data(ctx, seed, n=16, d=4):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = (x @ rng.standard_normal((d, 1)) + 0.1 * rng.standard_normal((n, 1))).astype(np.float32)
    return ctx.t(x), ctx.t(y)


def rare_optimizers(torch, ctx):
    """Each optimizer on its own copy of a two-layer regressor, with two parameter groups
    (the bias group without weight decay and a different lr); after three steps its
    state_dict goes into a fresh optimizer on the same parameters, which takes two more."""
    nn = torch.nn
    F = nn.functional
    x, y = _data(ctx, 0)
    makers = {
        "rprop": lambda g: torch.optim.Rprop(g, lr=0.01, etas=(0.4, 1.3), step_sizes=(1e-4, 0.5)),
        "asgd": lambda g: torch.optim.ASGD(g, lr=0.05, lambd=1e-3, alpha=0.75, t0=2, weight_decay=1e-3),
        "nadam": lambda g: torch.optim.NAdam(g, lr=0.01, momentum_decay=3e-3, weight_decay=0.01, decoupled_weight_decay=True),
        "radam": lambda g: torch.optim.RAdam(g, lr=0.01, weight_decay=0.01, decoupled_weight_decay=True),
        "adamax": lambda g: torch.optim.Adamax(g, lr=0.02, betas=(0.8, 0.99), weight_decay=1e-3),
        "adagrad": lambda g: torch.optim.Adagrad(g, lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1),
        "adadelta": lambda g: torch.optim.Adadelta(g, lr=1.0, rho=0.8, weight_decay=1e-3),
        "rmsprop": lambda g: torch.optim.RMSprop(g, lr=0.01, centered=True, momentum=0.5),
    }
    out = {}
    for name, make in makers.items():
        net = ctx.init(nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 1)), f"net_{name}")
        decay = [p for n, p in net.named_parameters() if n.endswith("weight")]
        no_decay = [p for n, p in net.named_parameters() if n.endswith("bias")]
        groups = [{"params": decay}, {"params": no_decay, "weight_decay": 0.0, "lr": 0.005}]
        opt = make(groups)
        holder = {"opt": opt}

        def step(x, y):
            holder["opt"].zero_grad()
            loss = F.mse_loss(net(x), y)
            loss.backward()
            holder["opt"].step()
            return loss.detach()

        step = ctx.fn(step)
        losses = []
        for i in range(5):
            if i == 3:
                sd = opt.state_dict()
                opt = make(groups)
                opt.load_state_dict(sd)
                holder["opt"] = opt
            losses.append(step(x, y).item())
        st = opt.state_dict()["state"]
        out[name] = [losses, net[0].weight, sorted(st[0].keys()), [st[0][k] for k in sorted(st[0]) if k != "step"]]
    return out


def lbfgs_wolfe(torch, ctx):
    """LBFGS with the strong-Wolfe line search fitting a small logistic regression and a
    Rosenbrock function, the closure counting its calls; history_size small enough to wrap."""
    F = torch.nn.functional
    rng = np.random.default_rng(1)
    X = ctx.t(rng.standard_normal((30, 3)).astype(np.float32))
    yl = ctx.t((rng.uniform(size=30) > 0.5).astype(np.float32))
    w = torch.zeros(3, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], lr=1, max_iter=15, history_size=3, line_search_fn="strong_wolfe")
    calls = [0]

    def closure():
        calls[0] += 1
        opt.zero_grad()
        loss = F.binary_cross_entropy_with_logits(X @ w + b, yl) + 0.01 * w.pow(2).sum()
        loss.backward()
        return loss

    l1 = opt.step(closure)
    l2 = opt.step(closure)
    p = ctx.t(np.array([-1.2, 1.0], dtype=np.float64)).requires_grad_()
    opt2 = torch.optim.LBFGS([p], lr=0.5, max_iter=40, tolerance_grad=1e-9, tolerance_change=1e-12)

    def rosen():
        opt2.zero_grad()
        loss = (1 - p[0]) ** 2 + 100 * (p[1] - p[0] ** 2) ** 2
        loss.backward()
        return loss

    for _ in range(3):
        opt2.step(rosen)
    st = opt.state_dict()["state"][0]
    return [l1.detach(), l2.detach(), w.detach(), b.detach(), calls[0], p.detach(), st["func_evals"], st["n_iter"]]


def scheduler_zoo(torch, ctx):
    """Schedulers driving SGD with momentum: SequentialLR (LinearLR warm-up then
    ExponentialLR), ChainedScheduler (StepLR and MultiplicativeLR), OneCycleLR three_phase with
    cycle_momentum, CosineAnnealingWarmRestarts with T_mult stepped by fractional epochs,
    CyclicLR triangular2, PolynomialLR; each saved by state_dict half way and loaded into a
    freshly made scheduler. Returns every lr and momentum seen."""
    S = torch.optim.lr_scheduler
    p = torch.nn.Parameter(torch.ones(2))

    def sgd():
        return torch.optim.SGD([p], lr=0.1, momentum=0.9)

    makers = {
        "sequential": lambda o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, total_iters=3), S.ExponentialLR(o, gamma=0.8)], milestones=[3]),
        "chained": lambda o: S.ChainedScheduler([S.StepLR(o, step_size=2, gamma=0.5), S.MultiplicativeLR(o, lambda e: 0.95)]),
        "onecycle": lambda o: S.OneCycleLR(o, max_lr=1.0, total_steps=10, three_phase=True, anneal_strategy="linear", div_factor=10, final_div_factor=100),
        "polynomial": lambda o: S.PolynomialLR(o, total_iters=6, power=2.0),
        "cyclic": lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2, mode="triangular2"),
    }
    out = {}
    for name, make in makers.items():
        opt = sgd()
        sch = make(opt)
        seen = []
        for i in range(9):
            if i == 4:
                sd = sch.state_dict()
                opt2 = sgd()
                opt2.load_state_dict(opt.state_dict())
                opt = opt2
                sch = make(opt)
                sch.load_state_dict(sd)
            opt.step()
            sch.step()
            seen.append([round(g["lr"], 10) for g in opt.param_groups] + [round(float(opt.param_groups[0]["momentum"]), 10)])
        out[name] = [seen, [round(v, 10) for v in sch.get_last_lr()]]
    opt = sgd()
    sch = S.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2, eta_min=0.001)
    seen = []
    for epoch in range(3):
        for it in range(4):
            sch.step(epoch + it / 4)
            seen.append(round(opt.param_groups[0]["lr"], 10))
    out["warm_restarts"] = [seen, sch.T_cur, sch.T_i]
    return out


def plateau_resume(torch, ctx):
    """ReduceLROnPlateau in max mode (a validation accuracy) with threshold_mode abs,
    cooldown and min_lr over two parameter groups; resumed from its state_dict half way."""
    S = torch.optim.lr_scheduler
    a = torch.nn.Parameter(torch.ones(2))
    b = torch.nn.Parameter(torch.ones(2))
    opt = torch.optim.Adam([{"params": [a]}, {"params": [b], "lr": 0.01}], lr=0.1)
    make = lambda o: S.ReduceLROnPlateau(o, mode="max", factor=0.5, patience=1, threshold=0.01, threshold_mode="abs", cooldown=1, min_lr=[0.02, 0.004])
    sch = make(opt)
    accs = [0.5, 0.6, 0.605, 0.6, 0.59, 0.7, 0.7, 0.69, 0.695, 0.7, 0.7, 0.7]
    seen = []
    for i, acc in enumerate(accs):
        if i == 6:
            sd = sch.state_dict()
            sch = make(opt)
            sch.load_state_dict(sd)
        sch.step(acc)
        seen.append([round(g["lr"], 10) for g in opt.param_groups])
    return [seen, sch.num_bad_epochs, sch.cooldown_counter, float(sch.best), [round(v, 10) for v in sch.get_last_lr()]]


def sparse_adam_embedding(torch, ctx):
    """A bag-of-words classifier whose Embedding has sparse=True: SparseAdam on it, Adam on the
    rest; the embedding's gradient is a sparse COO tensor (coalesced to compare)."""
    nn = torch.nn
    F = nn.functional
    emb = ctx.init(nn.Embedding(12, 5, sparse=True), "emb")
    head = ctx.init(nn.Linear(5, 3), "head")
    opt_s = torch.optim.SparseAdam(list(emb.parameters()), lr=0.05)
    opt_d = torch.optim.Adam(head.parameters(), lr=0.05)
    rng = np.random.default_rng(2)
    def fwd_bwd(tok, y):
        logits = head(emb(tok).mean(1))
        loss = F.cross_entropy(logits, y)
        opt_s.zero_grad()
        opt_d.zero_grad()
        loss.backward()
        return loss.detach()

    fwd_bwd = ctx.fn(fwd_bwd)
    out = []
    for _ in range(3):
        tok = ctx.t(rng.integers(0, 12, (4, 6)))
        y = ctx.t(rng.integers(0, 3, 4))
        loss = fwd_bwd(tok, y)
        g = emb.weight.grad
        out.append([g.is_sparse, g.coalesce().indices(), g.coalesce().values(), g.to_dense()])
        opt_s.step()
        opt_d.step()
        out.append(loss)
    return out + [emb.weight, head.weight]


def ema_and_update_bn(torch, ctx):
    """AveragedModel with get_ema_multi_avg_fn(0.9) and use_buffers=True tracking a small CNN
    through training, SWALR annealing, then update_bn recomputing BatchNorm statistics of an
    equal-weight SWA copy over a DataLoader of (x, y) batches."""
    nn = torch.nn
    F = nn.functional
    swa = torch.optim.swa_utils
    net = ctx.init(
        nn.Sequential(nn.Conv2d(1, 3, 3), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(), nn.Linear(3 * 16, 2)),
        "net",
    )
    ema = swa.AveragedModel(net, multi_avg_fn=swa.get_ema_multi_avg_fn(0.9), use_buffers=True)
    avg = swa.AveragedModel(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    sched = swa.SWALR(opt, swa_lr=0.01, anneal_epochs=2, anneal_strategy="cos")
    rng = np.random.default_rng(3)
    xs = ctx.t(rng.standard_normal((12, 1, 6, 6)).astype(np.float32))
    ys = ctx.t(rng.integers(0, 2, 12))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xs, ys), batch_size=4)
    lrs = []
    def step(xb, yb):
        opt.zero_grad()
        F.cross_entropy(net(xb), yb).backward()
        opt.step()
        ema.update_parameters(net)

    step = ctx.fn(step)
    for epoch in range(3):
        for xb, yb in loader:
            step(xb, yb)
        avg.update_parameters(net)
        sched.step()
        lrs.append(round(opt.param_groups[0]["lr"], 10))
    swa.update_bn(loader, avg)
    bn = avg.module[1]
    ema.eval()
    avg.eval()
    return [lrs, ema.module[0].weight, ema.module[1].running_mean, bn.running_mean, bn.running_var, avg.n_averaged, ema(xs[:2]), avg(xs[:2])]


PROGRAMS = [rare_optimizers, lbfgs_wolfe, scheduler_zoo, plateau_resume, sparse_adam_embedding, ema_and_update_bn]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", [rare_optimizers, sparse_adam_embedding, ema_and_update_bn], ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
