"""Training programs of hunt55, each run on PyTorch and on ember: every learning-rate
scheduler resumed from its state_dict (OneCycleLR three-phase and linear, warm restarts,
SequentialLR, ChainedScheduler, LambdaLR, PolynomialLR, CyclicLR modes, ReduceLROnPlateau's
mode/threshold/cooldown, a CosineAnnealingLR built at last_epoch), SWA and EMA averaged models
with SWALR and update_bn, gradient accumulation with clip_grad_value_ and
clip_grads_with_norm_, data pipelines (random_split by fractions and a generator, ConcatDataset,
Weighted/SubsetRandom/Batch samplers, collate_fn, drop_last, IterableDataset, ChainDataset,
StackDataset), module surgery (named_modules replacement, apply, kwargs pre/post hooks, full
backward (pre) hooks, freezing, strict=False loading, state_dict and load hooks, half/bfloat16/
double), and a checkpoint holding one module, list and dict twice, which loads them once
(aliases kept) as PyTorch's pickle memo does.
"""

import io

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def _net(torch, ctx, key="m"):
    nn = torch.nn
    net = ctx.init(
        nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.BatchNorm1d(8), nn.Linear(8, 2)), key
    )
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((16, 4)).astype(np.float32))
    y = ctx.t(rng.standard_normal((16, 2)).astype(np.float32))
    return net, x, y


def schedulers_resume(torch, ctx):
    net, x, y = _net(torch, ctx)
    S = torch.optim.lr_scheduler
    res = []
    makers = [
        lambda o: S.OneCycleLR(
            o, max_lr=0.1, total_steps=12, pct_start=0.3, anneal_strategy="cos", three_phase=True
        ),
        lambda o: S.OneCycleLR(
            o,
            max_lr=[0.1],
            epochs=3,
            steps_per_epoch=4,
            anneal_strategy="linear",
            cycle_momentum=True,
        ),
        lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=1e-4),
        lambda o: S.SequentialLR(
            o,
            [S.LinearLR(o, start_factor=0.1, total_iters=3), S.ExponentialLR(o, gamma=0.9)],
            milestones=[3],
        ),
        lambda o: S.ChainedScheduler([S.StepLR(o, 2, 0.5), S.MultiplicativeLR(o, lambda e: 0.95)]),
        lambda o: S.LambdaLR(o, lr_lambda=[lambda e: 1 / (e + 1)]),
        lambda o: S.PolynomialLR(o, total_iters=8, power=2.0),
        lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2, mode="triangular2"),
        lambda o: S.CyclicLR(
            o, base_lr=0.01, max_lr=0.1, step_size_up=2, mode="exp_range", gamma=0.9
        ),
        lambda o: S.MultiStepLR(o, milestones=[2, 5], gamma=0.3),
        lambda o: S.ConstantLR(o, factor=0.5, total_iters=4),
    ]
    for mk in makers:
        opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
        sch = mk(opt)
        lrs = []
        for i in range(6):
            opt.step()
            sch.step()
            lrs.append(opt.param_groups[0]["lr"])
        sd = sch.state_dict()
        sd = {k: v for k, v in sd.items() if not callable(v) and k not in ("_schedulers",)}
        # resume
        opt2 = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
        sch2 = mk(opt2)
        sch2.load_state_dict(sch.state_dict())
        opt2.load_state_dict(opt.state_dict())
        for i in range(3):
            opt2.step()
            sch2.step()
            lrs.append(opt2.param_groups[0]["lr"])
        res.append(
            [
                lrs,
                sch.get_last_lr(),
                sorted(
                    k
                    for k in sd.keys()
                    if k not in ("_is_initial", "_get_lr_called_within_step", "_scale_fn_custom")
                ),
                getattr(sch, "last_epoch", None),
                opt.param_groups[0].get("momentum"),
            ]
        )
    # ReduceLROnPlateau
    opt = torch.optim.Adam(net.parameters(), lr=0.1)
    pl = S.ReduceLROnPlateau(
        opt,
        mode="max",
        factor=0.5,
        patience=1,
        threshold=0.1,
        threshold_mode="abs",
        cooldown=1,
        min_lr=0.01,
    )
    lrs = []
    for m in [1.0, 1.05, 1.02, 1.2, 1.1, 1.0, 1.0, 1.0, 0.9]:
        pl.step(m)
        lrs.append(opt.param_groups[0]["lr"])
    sd = pl.state_dict()
    res.append(
        [lrs, pl.num_bad_epochs, pl.best, pl.cooldown_counter, sorted(sd.keys()), pl.get_last_lr()]
    )
    # last_epoch resume
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for g in opt.param_groups:
        g["initial_lr"] = 0.1
    sch = S.CosineAnnealingLR(opt, T_max=10, last_epoch=4)
    lrs = [opt.param_groups[0]["lr"]]
    for _ in range(3):
        opt.step()
        sch.step()
        lrs.append(opt.param_groups[0]["lr"])
    res.append(lrs)
    return res


def swa_prog(torch, ctx):
    net, x, y = _net(torch, ctx)
    from_utils = torch.optim.swa_utils
    swa = from_utils.AveragedModel(net)
    ema = from_utils.AveragedModel(net, multi_avg_fn=from_utils.get_ema_multi_avg_fn(0.9))
    ema2 = from_utils.AveragedModel(net, avg_fn=from_utils.get_ema_avg_fn(0.8), use_buffers=True)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    sched = from_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=3, anneal_strategy="cos")
    lrs = []
    for ep in range(6):
        for i in range(0, 16, 8):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(net(x[i : i + 8]), y[i : i + 8])
            loss.backward()
            opt.step()
        swa.update_parameters(net)
        ema.update_parameters(net)
        ema2.update_parameters(net)
        sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    loader = [(x[i : i + 4], y[i : i + 4]) for i in range(0, 16, 4)]
    from_utils.update_bn(loader, swa)
    swa.eval()
    return [
        lrs,
        swa(x),
        ema(x),
        ema2(x),
        swa.n_averaged,
        dict(swa.state_dict()),
        sorted(ema2.state_dict().keys()),
        swa.module[2].running_var,
    ]


def grad_accum_clip_value(torch, ctx):
    net, x, y = _net(torch, ctx)
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    opt.zero_grad(set_to_none=False)
    grads0 = [p.grad for p in net.parameters()]
    losses = []
    for step in range(8):
        xb, yb = x[(step % 4) * 4 : (step % 4 + 1) * 4], y[(step % 4) * 4 : (step % 4 + 1) * 4]
        loss = torch.nn.functional.smooth_l1_loss(net(xb), yb, beta=0.5) / 4
        loss.backward()
        losses.append(loss.item())
        if (step + 1) % 4 == 0:
            torch.nn.utils.clip_grad_value_(net.parameters(), clip_value=0.05)
            n = torch.nn.utils.get_total_norm([p.grad for p in net.parameters()], norm_type=2.0)
            torch.nn.utils.clip_grads_with_norm_(net.parameters(), max_norm=0.1, total_norm=n)
            opt.step()
            opt.zero_grad(set_to_none=False)
    return [losses, [p.grad for p in net.parameters()], grads0, list(net.parameters()), n]


def data_pipeline(torch, ctx):
    D = torch.utils.data
    rng = np.random.default_rng(0)
    X = ctx.t(rng.standard_normal((20, 3)).astype(np.float32))
    Y = ctx.t(rng.integers(0, 3, 20))
    ds = D.TensorDataset(X, Y)
    g = torch.Generator().manual_seed(42)
    tr, va, te = D.random_split(ds, [0.6, 0.25, 0.15], generator=g)
    tr2, va2 = D.random_split(ds, [15, 5], generator=torch.Generator().manual_seed(1))
    res = [tr.indices, va.indices, te.indices, list(tr2.indices), len(va2)]
    cat = D.ConcatDataset([tr, va2])
    res.append([len(cat), cat.cumulative_sizes, cat[16][1].item()])
    w = [1.0 if y == 0 else 3.0 for y in Y.tolist()]
    ws = D.WeightedRandomSampler(
        w, num_samples=12, replacement=True, generator=torch.Generator().manual_seed(3)
    )
    res.append(list(ws))
    ws2 = D.WeightedRandomSampler(
        torch.tensor(w, dtype=torch.float64),
        num_samples=8,
        replacement=False,
        generator=torch.Generator().manual_seed(3),
    )
    res.append(list(ws2))
    srs = D.SubsetRandomSampler([1, 5, 7, 9, 11], generator=torch.Generator().manual_seed(5))
    res.append(list(srs))
    bs = D.BatchSampler(D.SequentialSampler(range(10)), batch_size=3, drop_last=False)
    res.append(list(bs))
    bs2 = D.BatchSampler(
        D.RandomSampler(range(10), generator=torch.Generator().manual_seed(6)),
        batch_size=4,
        drop_last=True,
    )
    res.append(list(bs2))

    def collate(batch):
        xs, ys = zip(*batch)
        return {"x": torch.stack(xs), "y": torch.tensor(ys), "n": len(batch)}

    dl = D.DataLoader(
        ds,
        batch_size=6,
        shuffle=True,
        drop_last=True,
        collate_fn=collate,
        generator=torch.Generator().manual_seed(7),
    )
    out = [(b["x"], b["y"], b["n"]) for b in dl]
    res.append([len(dl)] + [list(o) for o in out])
    dl2 = D.DataLoader(ds, batch_sampler=bs2)
    res.append([b for b in dl2])
    dl3 = D.DataLoader(ds, sampler=ws, batch_size=5)
    res.append([b for b in dl3])
    res.append(
        D.default_collate(
            [
                {"a": torch.tensor([1.0]), "b": 2, "c": (3.0, "s")},
                {"a": torch.tensor([2.0]), "b": 4, "c": (5.0, "t")},
            ]
        )
    )

    class Stream(D.IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            info = D.get_worker_info()
            lo, hi = 0, self.n
            if info is not None:
                per = (self.n + info.num_workers - 1) // info.num_workers
                lo = info.id * per
                hi = min(lo + per, self.n)
            return iter(range(lo, hi))

    res.append([b.tolist() for b in D.DataLoader(Stream(7), batch_size=3)])
    res.append([b for b in D.DataLoader(Stream(7), batch_size=None)])
    seen = []

    def wif(wid):
        seen.append(wid)

    res.append(
        [
            b.tolist()
            for b in D.DataLoader(Stream(5), batch_size=2, worker_init_fn=wif, num_workers=0)
        ]
    )
    ch = D.ChainDataset([Stream(3), Stream(2)])
    res.append(list(ch))
    sub = D.Subset(ds, [3, 1, 4])
    res.append([sub[0][0], sub[2][1], len(sub)])
    st = D.StackDataset(X, Y)
    res.append(list(st[2]))
    return res


def module_surgery(torch, ctx):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(3, 4, 3, padding=1),
                nn.BatchNorm2d(4),
                nn.ReLU(inplace=True),
                nn.Conv2d(4, 4, 3),
                nn.ReLU(),
            )
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(4, 5)

        def forward(self, x, scale=1.0):
            return self.fc(self.pool(self.features(x)).flatten(1)) * scale

    torch.manual_seed(0)
    net = ctx.init(Net())
    # replace ReLU with GELU via named_modules
    for name, mod in list(net.named_modules()):
        for cname, child in list(mod.named_children()):
            if isinstance(child, nn.ReLU):
                setattr(mod, cname, nn.SiLU())

    def init_fn(m):
        if isinstance(m, nn.Conv2d):
            nn.init.constant_(m.weight, 0.05)
            nn.init.zeros_(m.bias)

    net.apply(init_fn)
    log = []

    def pre(mod, args, kwargs):
        log.append(("pre", sorted(kwargs)))
        kwargs = dict(kwargs)
        kwargs["scale"] = 2.0
        return args, kwargs

    h1 = net.register_forward_pre_hook(pre, with_kwargs=True)

    def post(mod, args, kwargs, out):
        log.append(("post", kwargs.get("scale")))
        return out + 1

    h2 = net.register_forward_hook(post, with_kwargs=True)
    gin = []

    def bh(mod, gi, go):
        gin.append([g.shape if g is not None else None for g in gi] + [g.shape for g in go])
        return (gi[0] * 0.5,)

    h3 = net.fc.register_full_backward_hook(bh)
    bpre = []
    h4 = net.fc.register_full_backward_pre_hook(lambda m, go: bpre.append(go[0].sum().item()))
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((2, 3, 6, 6)).astype(np.float32), requires_grad=True)
    out = net(x, scale=3.0)
    out.sum().backward()
    res = [out, log, gin, bpre, x.grad]
    for h in (h1, h2, h3, h4):
        h.remove()
    # freezing
    net.features.requires_grad_(False)
    res.append([n for n, p in net.named_parameters() if p.requires_grad])
    # load_state_dict(strict=False)
    sd = net.state_dict()
    sd["extra.weight"] = torch.zeros(1)
    del sd["fc.bias"]
    r = net.load_state_dict(sd, strict=False)
    res.append([sorted(r.missing_keys), sorted(r.unexpected_keys)])
    try:
        net.load_state_dict(sd)
        res.append("no error")
    except RuntimeError as e:
        res.append(isinstance(e, RuntimeError))

    # state_dict hooks
    def sd_hook(module, state_dict, prefix, local_metadata):
        state_dict[prefix + "hooked"] = torch.tensor(1.0)
        return state_dict

    net.fc._register_state_dict_hook(sd_hook)
    res.append(sorted(net.state_dict().keys()))
    calls = []
    net.register_load_state_dict_post_hook(
        lambda m, keys: calls.append((sorted(keys.missing_keys), sorted(keys.unexpected_keys)))
    )
    sd2 = net.state_dict()
    r2 = net.load_state_dict(sd2, strict=False)
    res.append(calls)
    pre_calls = []

    def lpre(state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
        pre_calls.append(prefix)
        state_dict.pop(prefix + "hooked", None)

    net.fc._register_load_state_dict_pre_hook(lpre)
    r3 = net.load_state_dict(sd2)
    res.append([pre_calls, sorted(r3.missing_keys), sorted(r3.unexpected_keys)])
    # dtype conversions
    h = Net().half()
    res.append(
        [p.dtype for p in h.parameters()][:2]
        + [h.features[1].running_mean.dtype, h.features[1].num_batches_tracked.dtype]
    )
    b = net.to(torch.bfloat16)
    res.append(b(x.detach().to(torch.bfloat16)).float())
    d = net.double()
    res.append(d(x.detach().double()))
    res.append([m.__class__.__name__ for m in net.modules()])
    res.append(net.get_submodule("features.1").num_features)
    res.append(net.get_parameter("fc.weight").shape)
    return res


def checkpoint_aliasing(torch, ctx):
    nn = torch.nn
    torch.manual_seed(0)
    shared = nn.Linear(3, 3)

    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = shared
            self.b = shared

    model = nn.Sequential(shared, nn.Tanh(), shared)
    buf = io.BytesIO()
    enc = nn.Linear(3, 3)
    opt = torch.optim.SGD(enc.parameters(), lr=0.1, momentum=0.9)
    enc(torch.ones(1, 3)).sum().backward()
    opt.step()
    torch.save(
        {
            "m1": enc,
            "m2": enc,
            "w": enc.weight,
            "sd": enc.state_dict(),
            "opt": opt.state_dict(),
            "twice": [enc.bias, enc.bias],
            "view": enc.weight[1],
        },
        buf,
    )
    buf.seek(0)
    obj = torch.load(buf, weights_only=False)
    res = [
        obj["m1"] is obj["m2"],
        obj["w"] is obj["m1"].weight,
        obj["twice"][0] is obj["twice"][1],
        obj["sd"]["weight"].data_ptr() == obj["m1"].weight.data_ptr(),
    ]
    with torch.no_grad():
        obj["view"].add_(1.0)
    res.append(obj["m1"].weight)
    buf2 = io.BytesIO()
    torch.save(model, buf2)
    buf2.seek(0)
    m2 = torch.load(buf2, weights_only=False)
    res.append([m2[0] is m2[2], sorted(m2.state_dict().keys()), len(list(m2.parameters()))])
    buf3 = io.BytesIO()
    t = torch.arange(10.0)
    torch.save({"a": t[2:5], "b": t[::2], "c": t}, buf3)
    buf3.seek(0)
    o3 = torch.load(buf3)
    o3["c"][2] = 100.0
    res.append([o3["a"], o3["b"], o3["a"].storage_offset(), o3["b"].stride()])
    shared_list, shared_dict = [torch.ones(2)], {"k": 1}
    buf4 = io.BytesIO()
    torch.save(
        {
            "a": shared_list,
            "b": shared_list,
            "c": shared_dict,
            "d": [shared_dict, shared_dict],
            "e": ([],),
        },
        buf4,
    )
    buf4.seek(0)
    o4 = torch.load(buf4)
    o4["a"].append(3)
    res.append([o4["a"] is o4["b"], o4["c"] is o4["d"][0] is o4["d"][1], len(o4["b"]), o4["e"]])
    return res


PROGRAMS = [
    schedulers_resume,
    swa_prog,
    grad_accum_clip_value,
    data_pipeline,
    module_surgery,
    checkpoint_aliasing,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)
