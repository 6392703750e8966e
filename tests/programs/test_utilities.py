"""Library utilities as PyTorch programs use them: the scheduler zoo, SWA and EMA averaged models
with update_bn, forward/backward/tensor hooks, data utilities (random_split, ConcatDataset,
pad/pack/unpad sequences, samplers), nn.init.
"""

import math

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def sched_zoo(torch, ctx):
    nn = torch.nn
    out = {}

    def run(make, n=8, metric=None):
        p = nn.Parameter(torch.zeros(1))
        opt = torch.optim.SGD([p], lr=0.1, momentum=0.9)
        s = make(opt)
        lrs = []
        for i in range(n):
            opt.step()
            if metric is None:
                s.step()
            else:
                s.step(metric[i])
            lrs.append(opt.param_groups[0]["lr"])
        return lrs

    S = torch.optim.lr_scheduler
    out["plateau"] = run(
        lambda o: S.ReduceLROnPlateau(
            o, mode="min", factor=0.5, patience=1, threshold=0.01, cooldown=1, min_lr=1e-3
        ),
        metric=[1, 0.9, 0.95, 0.95, 0.96, 0.5, 0.6, 0.7],
    )
    out["warm_restarts"] = run(
        lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.01)
    )
    out["seq"] = run(
        lambda o: S.SequentialLR(
            o,
            [S.LinearLR(o, start_factor=0.1, total_iters=3), S.ExponentialLR(o, gamma=0.9)],
            milestones=[3],
        )
    )
    out["chain"] = run(
        lambda o: S.ChainedScheduler(
            [S.ConstantLR(o, factor=0.5, total_iters=2), S.ExponentialLR(o, gamma=0.9)]
        )
    )
    out["cyclic"] = run(
        lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2, mode="triangular2")
    )
    out["poly"] = run(lambda o: S.PolynomialLR(o, total_iters=5, power=2.0))
    out["step"] = run(lambda o: S.StepLR(o, 3, 0.5))
    out["cos"] = run(lambda o: S.CosineAnnealingLR(o, T_max=4, eta_min=0.001))
    out["onecycle_lin"] = run(
        lambda o: S.OneCycleLR(
            o, max_lr=1.0, total_steps=8, anneal_strategy="linear", three_phase=True
        )
    )
    out["mult"] = run(lambda o: S.MultiplicativeLR(o, lambda e: 0.95))
    return out


def swa(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    from_swa = torch.optim.swa_utils
    m = ctx.init(nn.Sequential(nn.Linear(3, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 1)))
    swa_model = from_swa.AveragedModel(m)
    ema_model = from_swa.AveragedModel(m, multi_avg_fn=from_swa.get_ema_multi_avg_fn(0.9))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    swa_s = from_swa.SWALR(opt, swa_lr=0.05, anneal_epochs=2, anneal_strategy="cos")
    rng = np.random.default_rng(0)
    X = ctx.t(rng.standard_normal((12, 3)).astype(np.float32))
    Y = ctx.t(rng.standard_normal((12, 1)).astype(np.float32))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=4)
    lrs = []
    for _ in range(3):
        for xb, yb in loader:
            opt.zero_grad()
            F.mse_loss(m(xb), yb).backward()
            opt.step()
            ema_model.update_parameters(m)
        swa_model.update_parameters(m)
        swa_s.step()
        lrs.append(opt.param_groups[0]["lr"])
    from_swa.update_bn(loader, swa_model)
    return {
        "swa": dict(swa_model.state_dict()),
        "ema": dict(ema_model.state_dict()),
        "lrs": lrs,
        "n": swa_model.n_averaged,
    }


def hooks_prog(torch, ctx):
    nn = torch.nn
    m = ctx.init(nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2)))
    acts = {}

    def save(name):
        def hook(mod, inp, out):
            acts[name] = out.detach()

        return hook

    hs = [m[i].register_forward_hook(save(f"l{i}")) for i in range(3)]
    pre = m[2].register_forward_pre_hook(lambda mod, inp: (inp[0] * 2,))
    grads = {}
    m[0].register_full_backward_hook(lambda mod, gi, go: grads.__setitem__("go", go[0].clone()))
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    y = m(x)
    x.register_hook(lambda g: g * 0.5)
    for p in m.parameters():
        p.register_hook(lambda g: g.clamp(-0.1, 0.1))
    y.pow(2).sum().backward()
    for h in hs:
        h.remove()
    pre.remove()
    y2 = m(x)
    return {
        "acts": acts,
        "go": grads["go"],
        "gx": x.grad,
        "gp": [p.grad for p in m.parameters()],
        "y2": y2,
        "nacts": len(acts),
    }


def data_utils(torch, ctx):
    D = torch.utils.data
    g = torch.Generator().manual_seed(0)
    ds = D.TensorDataset(torch.arange(10.0).unsqueeze(1), torch.arange(10))
    a, b = D.random_split(ds, [0.7, 0.3], generator=g)
    c = D.ConcatDataset([ds, D.Subset(ds, [1, 3])])
    out = {"lens": [len(a), len(b), len(c)], "c11": c[11]}

    class Seq(D.Dataset):
        def __init__(s):
            s.items = [torch.tensor([1, 2, 3]), torch.tensor([4]), torch.tensor([5, 6])]

        def __len__(s):
            return len(s.items)

        def __getitem__(s, i):
            return s.items[i], len(s.items[i])

    def collate(batch):
        seqs, lens = zip(*batch)
        return torch.nn.utils.rnn.pad_sequence(
            seqs, batch_first=True, padding_value=-1
        ), torch.tensor(lens)

    dl = D.DataLoader(Seq(), batch_size=3, collate_fn=collate)
    out["pad"] = list(next(iter(dl)))
    out["padl"] = torch.nn.utils.rnn.pad_sequence(
        [torch.tensor([1, 2, 3]), torch.tensor([4])], batch_first=True, padding_side="left"
    )
    ps = torch.nn.utils.rnn.pack_sequence(
        [torch.tensor([1.0, 2, 3]), torch.tensor([4.0])], enforce_sorted=False
    )
    out["ps"] = [ps.data, ps.batch_sizes]
    up = torch.nn.utils.rnn.unpad_sequence(out["pad"][0], out["pad"][1], batch_first=True)
    out["up"] = up
    dl2 = D.DataLoader(ds, batch_size=4, sampler=D.SequentialSampler(ds), drop_last=True)
    out["nb"] = len(dl2)
    bs = list(D.BatchSampler(D.SequentialSampler(range(7)), batch_size=3, drop_last=False))
    out["bs"] = bs
    return out


def init_prog(torch, ctx):
    nn = torch.nn
    out = {}
    out["gain"] = [nn.init.calculate_gain(n) for n in ["relu", "tanh", "sigmoid", "linear"]] + [
        nn.init.calculate_gain("leaky_relu", 0.2),
        nn.init.calculate_gain("selu"),
    ]
    w = torch.empty(64, 32)
    nn.init.orthogonal_(w)
    out["orth"] = (w.t() @ w - torch.eye(32)).abs().max().item() < 1e-4
    nn.init.trunc_normal_(w, std=0.02, a=-0.04, b=0.04)
    out["trunc"] = bool((w.abs() <= 0.04).all())
    nn.init.xavier_uniform_(w, gain=nn.init.calculate_gain("relu"))
    out["xu"] = bool((w.abs() <= math.sqrt(2) * math.sqrt(6 / 96)).all())
    nn.init.kaiming_uniform_(w, a=math.sqrt(5))
    out["ku"] = bool((w.abs() <= 1 / math.sqrt(32)).all())
    nn.init.eye_(w)
    out["eye"] = w.sum().item()
    c = torch.empty(4, 4, 3, 3)
    nn.init.dirac_(c)
    out["dirac"] = c.sum().item()
    nn.init.zeros_(c)
    nn.init.ones_(c)
    out["ones"] = c.sum().item()
    fan = nn.init._calculate_fan_in_and_fan_out(c)
    out["fan"] = list(fan)
    s = torch.empty(100, 100)
    nn.init.sparse_(s, 0.3)
    out["sparse"] = int((s == 0).sum(0).min().item())
    return out


PROGRAMS = [sched_zoo, swa, hooks_prog, data_utils, init_prog]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)
