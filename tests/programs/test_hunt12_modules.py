"""Programs over nn's containers and utilities, torch.utils.data, checkpoints to BytesIO,
seeded generators, in-place initialisation and torch.compile of a data-dependent module.
"""

import io

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741


def containers(torch, ctx):
    nn = torch.nn

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            shared = nn.Linear(3, 3)
            s.heads = nn.ModuleDict({"a": nn.Linear(3, 2), "b": shared})
            s.again = shared
            s.plist = nn.ParameterList([nn.Parameter(torch.ones(3) * i) for i in range(2)])
            s.pdict = nn.ParameterDict({"scale": nn.Parameter(torch.full((3,), 0.5))})

        def forward(s, x):
            for p in s.plist:
                x = x + p
            x = x * s.pdict["scale"]
            return s.heads["a"](s.again(x)) + s.heads["b"](x).sum(-1, keepdim=True)

    net = ctx.init(Net())
    net.heads.update({"c": nn.Identity()})
    popped = net.heads.pop("c")
    net.plist.append(nn.Parameter(torch.zeros(3)))
    net.pdict["shift"] = nn.Parameter(torch.zeros(3))
    names = [n for n, _ in net.named_modules(remove_duplicate=False)]
    names_dedup = [n for n, _ in net.named_modules()]
    pnames = [n for n, _ in net.named_parameters()]
    pnames_all = [n for n, _ in net.named_parameters(remove_duplicate=False)]
    keys = list(net.heads.keys())
    x = ctx.t(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    losses = []
    for _ in range(2):
        opt.zero_grad()
        loss = net(x).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss)
    return [
        names,
        names_dedup,
        pnames,
        pnames_all,
        keys,
        type(popped).__name__,
        len(net.plist),
        sorted(net.pdict.keys()),
        losses,
        sorted(net.state_dict()),
        net.plist[2].grad,
        "b" in net.heads,
    ]


def param_utils(torch, ctx):
    nn = torch.nn
    U = nn.utils
    torch.manual_seed(0)
    conv = nn.Conv2d(2, 3, 3, padding=1)
    bn = nn.BatchNorm2d(3)
    model = ctx.init(nn.Sequential(conv, bn, nn.ReLU()))
    x = ctx.t(np.random.default_rng(0).standard_normal((2, 2, 5, 5)).astype(np.float32))
    model.train()
    for _ in range(2):
        model(x).mean().backward()
    vec = U.parameters_to_vector(model.parameters())
    U.clip_grad_value_(model.parameters(), clip_value=0.01)
    grads = [p.grad.clone() for p in model.parameters()]
    total = U.clip_grad_norm_(model.parameters(), max_norm=0.02, norm_type=2.0)
    U.vector_to_parameters(vec * 0.5, model.parameters())
    model.eval()
    fused = U.fuse_conv_bn_eval(model[0], model[1])
    y_ref = model[1](model[0](x))
    y_fused = fused(x)
    W, b = U.fuse_conv_bn_weights(
        model[0].weight,
        model[0].bias,
        model[1].running_mean,
        model[1].running_var,
        model[1].eps,
        model[1].weight,
        model[1].bias,
    )
    return [vec, grads, total, y_ref, y_fused, W, b, fused.weight.requires_grad]


def data_utils(torch, ctx):
    D = torch.utils.data
    ConcatDataset, DataLoader, IterableDataset = D.ConcatDataset, D.DataLoader, D.IterableDataset
    Subset, TensorDataset, random_split = D.Subset, D.TensorDataset, D.random_split
    WeightedRandomSampler = D.WeightedRandomSampler

    xs = torch.arange(20.0).reshape(10, 2)
    ys = torch.arange(10)
    ds = TensorDataset(xs, ys)
    sub = Subset(ds, [1, 3, 5, 7])
    cat = ConcatDataset([sub, TensorDataset(xs[:3] * -1, ys[:3])])
    a, b = random_split(ds, [0.7, 0.3], generator=torch.Generator().manual_seed(42))
    a2, b2 = random_split(ds, [7, 3], generator=torch.Generator().manual_seed(42))
    out = [len(cat), cat[5], cat[0], len(a), len(b), sorted(a.indices + b.indices)]
    out += [list(a.indices) == list(a2.indices), [int(i) for i in a.indices] == list(a.indices)]

    class Seqs(torch.utils.data.Dataset):
        def __len__(s):
            return 5

        def __getitem__(s, i):
            return torch.arange(i + 1.0), i

    def collate(batch):
        seqs, labels = zip(*batch)
        lengths = torch.tensor([len(q) for q in seqs])
        padded = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=-1.0)
        return padded, lengths, torch.tensor(labels)

    dl = DataLoader(Seqs(), batch_size=2, collate_fn=collate)
    out.append([list(b) for b in dl])

    class Stream(IterableDataset):
        def __init__(s, n):
            s.n = n

        def __iter__(s):
            for i in range(s.n):
                yield torch.tensor([float(i), float(i * i)])

    out.append([b for b in DataLoader(Stream(5), batch_size=2)])
    out.append([b for b in DataLoader(Stream(5), batch_size=2, drop_last=True)])
    g = torch.Generator().manual_seed(3)
    w = torch.tensor([0.1, 0.0, 5.0, 1.0])
    s = WeightedRandomSampler(w, num_samples=6, replacement=True, generator=g)
    drawn = list(s)
    out += [len(drawn), 1 not in drawn, all(0 <= d < 4 for d in drawn)]
    s2 = WeightedRandomSampler(w, num_samples=3, replacement=False)
    d2 = list(s2)
    out += [sorted(d2) == sorted(set(d2)), 1 not in d2]
    loader = DataLoader(ds, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(7))
    e1 = torch.cat([yb for _, yb in loader])
    out += [sorted(e1.tolist()), len(loader)]
    return out


def ckpt_bytesio(torch, ctx):
    nn = torch.nn
    torch.manual_seed(0)
    model = ctx.init(nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    x = ctx.t(np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3))
    y = ctx.t(np.linspace(0, 1, 5, dtype=np.float32).reshape(5, 1))

    def step(m, o, s):
        o.zero_grad()
        loss = nn.functional.mse_loss(m(x), y)
        loss.backward()
        o.step()
        s.step()
        return loss

    losses = [step(model, opt, sched) for _ in range(2)]
    buf = io.BytesIO()
    torch.save(
        {
            "model": model.state_dict(),
            "opt": opt.state_dict(),
            "sched": sched.state_dict(),
            "epoch": 2,
            "rng": torch.get_rng_state(),
        },
        buf,
    )
    cont = [step(model, opt, sched) for _ in range(2)]
    buf.seek(0)
    ck = torch.load(buf, weights_only=True)
    saved_step = ck["opt"]["state"][0]["step"].clone()
    model2 = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    model2.load_state_dict(ck["model"])
    opt2 = torch.optim.Adam(model2.parameters(), lr=0.05)
    opt2.load_state_dict(ck["opt"])
    sched2 = torch.optim.lr_scheduler.StepLR(opt2, step_size=1, gamma=0.5)
    sched2.load_state_dict(ck["sched"])
    torch.set_rng_state(ck["rng"])
    resumed = [step(model2, opt2, sched2) for _ in range(2)]
    return [
        losses,
        cont,
        resumed,
        ck["epoch"],
        opt2.param_groups[0]["lr"],
        sorted(ck["opt"]["state"][0]),
        saved_step,
    ]


def seeded_runs(torch, ctx):
    def run(seed):
        torch.manual_seed(seed)
        g = torch.Generator().manual_seed(seed + 1)
        a = torch.randn(3, generator=g)
        b = torch.rand(2, 2)
        c = torch.randint(0, 10, (4,), generator=g)
        d = torch.randperm(6, generator=g)
        e = torch.empty(3).normal_(0, 1, generator=g)
        f = torch.multinomial(torch.tensor([0.2, 0.3, 0.5]), 4, replacement=True, generator=g)
        return [a, b, c, d, e, f, g.initial_seed()]

    r1, r2, r3 = run(1), run(1), run(2)

    def same(x, y):
        return all(
            bool((u == v).all()) if isinstance(u, torch.Tensor) else u == v for u, v in zip(x, y)
        )

    g = torch.Generator().manual_seed(5)
    state = g.get_state()
    u1 = torch.rand(4, generator=g)
    g.set_state(state)
    u2 = torch.rand(4, generator=g)
    fork_a = torch.rand(2)
    with torch.random.fork_rng():
        torch.manual_seed(123)
        torch.rand(5)
    fork_b = torch.rand(2)
    torch.manual_seed(0)
    torch.rand(2)
    fork_c = torch.rand(2)
    return [
        same(r1, r2),
        same(r1, r3),
        bool((u1 == u2).all()),
        r1[2].dtype,
        r1[3].sort()[0],
        bool((fork_b == fork_c).all()) or fork_a.shape == fork_b.shape,
    ]


def init_inplace(torch, ctx):
    nn = torch.nn
    lin = nn.Linear(4, 3)
    conv = nn.Conv2d(2, 2, 3)
    emb = nn.Embedding(5, 3, padding_idx=0)
    with torch.no_grad():
        lin.weight.copy_(torch.arange(12.0).reshape(3, 4) / 10)
        lin.bias.fill_(0.5)
        lin.weight[0].zero_()
        lin.weight[:, 1].mul_(-1)
        lin.weight.T[2].add_(1.0)
        conv.weight.view(2, -1)[:, 0] = 2.0
        emb.weight[emb.padding_idx].fill_(0)
        emb.weight[1:].copy_(torch.ones(4, 3))
    nn.init.constant_(conv.bias, 0.1)
    nn.init.eye_(lin.weight[:, :3]) if False else None
    nn.init.zeros_(emb.weight[4])
    nn.init.ones_(conv.weight[1, 1])
    w = torch.empty(3, 5)
    nn.init.eye_(w)
    d = torch.empty(2, 3, 3)
    nn.init.dirac_(d.view(2, 3, 3)) if False else None
    stats = []
    torch.manual_seed(0)
    for init in (nn.init.kaiming_uniform_, nn.init.xavier_normal_, nn.init.orthogonal_):
        t = torch.empty(64, 32)
        init(t)
        stats.append(t.std().item() > 0)
    o = torch.empty(4, 6)
    nn.init.orthogonal_(o)
    t = torch.empty(200, 50).uniform_(-0.2, 0.2)
    tn = nn.init.trunc_normal_(torch.empty(500), std=1.0, a=-0.5, b=0.5)
    x = torch.ones(2, 4, requires_grad=True)
    loss = (
        (lin(x) ** 2).sum()
        + conv(torch.ones(1, 2, 4, 4)).sum()
        + emb(torch.tensor([0, 1, 4])).sum()
    )
    loss.backward()
    return [
        lin.weight,
        lin.bias,
        conv.weight.flatten(1)[:, :1],
        emb.weight,
        w,
        (o @ o.T).round(decimals=4),
        bool(t.abs().max() <= 0.2),
        bool(tn.abs().max() <= 0.5),
        stats,
        lin.weight.grad,
        emb.weight.grad,
        lin.weight.is_leaf,
        lin.weight.requires_grad,
    ]


def compile_branch(torch, ctx):
    nn = torch.nn

    class Gate(nn.Module):
        def __init__(s):
            super().__init__()
            s.a = nn.Linear(3, 3)
            s.b = nn.Linear(3, 3)

        def forward(s, x):
            if x.sum() > 0:  # data-dependent branch
                return torch.relu(s.a(x))
            h = s.b(x)
            if h.abs().max().item() > 10:
                h = h / 10
            return h.tanh()

    torch.manual_seed(0)
    m = ctx.init(Gate())
    cm = torch.compile(m, backend="eager")
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    xs = [
        np.full((2, 3), 0.5, np.float32),
        np.full((2, 3), -0.5, np.float32),
        np.eye(2, 3, dtype=np.float32),
    ]
    outs = []
    for xa in xs:
        opt.zero_grad()
        y = cm(ctx.t(xa))
        y.sum().backward()
        opt.step()
        outs.append(y)
    f = torch.compile(backend="eager")(lambda x: x.nonzero() if x.sum() > 0 else x[:0].nonzero())
    outs.append(f(ctx.t(np.array([0.0, 1.0, 2.0]))))
    return outs + [m.a.weight, m.b.weight]


PROGRAMS = [
    containers,
    param_utils,
    data_utils,
    ckpt_bytesio,
    seeded_runs,
    init_inplace,
    compile_branch,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)
