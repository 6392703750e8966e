"""Training recipes as whole PyTorch programs: mixup/cutmix with label smoothing and a focal
loss, a Siamese network with triplet and cosine-embedding losses, weight-decay parameter groups
with freezing and add_param_group, a DataLoader with a sampler and a collate_fn, packed
variable-length sequences inside a captured step.
"""

import io

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def mixup_focal(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def focal_loss(logits, target, gamma=2.0, alpha=0.25):
        p = torch.sigmoid(logits)
        ce = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
        p_t = p * target + (1 - p) * (1 - target)
        a_t = alpha * target + (1 - alpha) * (1 - target)
        return (a_t * ce * (1 - p_t) ** gamma).sum() / target.sum().clamp(min=1.0)

    def soft_ce(logits, soft):
        return torch.sum(-soft * F.log_softmax(logits, dim=-1), dim=-1).mean()

    m = ctx.init(
        nn.Sequential(
            nn.Conv2d(3, 6, 3, padding=1, bias=False),  # (a bias before BatchNorm: noise)
            nn.BatchNorm2d(6),
            nn.Hardswish(),
            nn.AvgPool2d(2),
            nn.Flatten(),
            nn.Linear(6 * 4 * 4, 4),
        )
    )
    opt = torch.optim.NAdam(m.parameters(), lr=2e-3)
    rng = np.random.default_rng(10)
    x = ctx.t(rng.standard_normal((6, 3, 8, 8)).astype(np.float32))
    y = ctx.t(rng.integers(0, 4, 6))
    perm = ctx.t(rng.permutation(6))
    lam = float(rng.beta(0.4, 0.4))

    def step(x, y, perm, box):
        y1 = F.one_hot(y, 4).float()
        y1 = y1 * (1 - 0.1) + 0.1 / 4
        if box is None:
            xm = lam * x + (1 - lam) * x[perm]
            lm = lam
        else:
            x1, y1_, x2, y2_ = box
            xm = x.clone()
            xm[:, :, y1_:y2_, x1:x2] = x[perm][:, :, y1_:y2_, x1:x2]
            lm = 1 - (x2 - x1) * (y2_ - y1_) / (x.size(-1) * x.size(-2))
        target = lm * y1 + (1 - lm) * y1[perm]
        logits = m(xm)
        loss = soft_ce(logits, target) + 0.5 * focal_loss(logits, F.one_hot(y, 4).float())
        loss2 = lm * F.cross_entropy(logits, y, label_smoothing=0.1) + (1 - lm) * F.cross_entropy(
            logits, y[perm], label_smoothing=0.1
        )
        opt.zero_grad()
        (loss + loss2).backward()
        opt.step()
        return loss, loss2

    step = ctx.fn(step)
    res = []
    for box in (None, (2, 1, 6, 5), None):
        a, b = step(x, y, perm, box)
        res += [a.item(), b.item()]
    return {"l": res, "sd": dict(m.state_dict())}


def siamese(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Embed(nn.Module):
        def __init__(s):
            super().__init__()
            s.net = nn.Sequential(
                nn.Linear(10, 16), nn.PReLU(16), nn.Dropout(0.0), nn.Linear(16, 8)
            )

        def forward(s, x):
            return F.normalize(s.net(x), p=2, dim=1)

    m = ctx.init(Embed())
    opt = torch.optim.Adamax(m.parameters(), lr=1e-2)
    triplet = nn.TripletMarginLoss(margin=0.3, p=2, swap=True)
    tdist = nn.TripletMarginWithDistanceLoss(
        distance_function=lambda a, b: 1 - F.cosine_similarity(a, b), margin=0.2
    )
    cos = nn.CosineEmbeddingLoss(margin=0.1)
    contr = nn.HingeEmbeddingLoss(margin=1.0)
    rng = np.random.default_rng(11)
    X = ctx.t(rng.standard_normal((12, 10)).astype(np.float32))
    labels = ctx.t(np.repeat(np.arange(4), 3))

    def mine(emb, labels):
        d = torch.cdist(emb, emb)
        same = labels[:, None] == labels[None, :]
        eye = torch.eye(len(labels), dtype=torch.bool)
        pos = d.masked_fill(~same | eye, -1.0).argmax(1)
        neg = d.masked_fill(same, float("inf")).argmin(1)
        return pos, neg

    def step(X, labels):
        emb = m(X)
        with torch.no_grad():
            pos, neg = mine(emb, labels)
        l1 = triplet(emb, emb[pos], emb[neg])
        l2 = tdist(emb, emb[pos], emb[neg])
        tgt = torch.where(labels == labels.roll(1), 1, -1)
        l3 = cos(emb, emb.roll(1, 0), tgt)
        l4 = contr(F.pairwise_distance(emb, emb.roll(1, 0)), tgt.float())
        loss = l1 + l2 + l3 + 0.1 * l4
        opt.zero_grad()
        loss.backward()
        opt.step()
        return torch.stack([l1, l2, l3, l4]), pos, neg

    step = ctx.fn(step)
    res = [step(X, labels) for _ in range(3)]
    with torch.no_grad():
        e = m(X)
        sim = e @ e.T
        top = sim.fill_diagonal_(-2).topk(2, dim=1)
    return {"res": res, "top": top.indices, "prelu": m.net[1].weight}


def param_groups(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(10, 6)
            s.body = nn.Sequential(nn.Linear(6, 8), nn.LayerNorm(8), nn.ReLU())
            s.head = nn.Linear(8, 3)
            s.extra = nn.Linear(3, 3)

        def forward(s, x):
            return s.extra(s.head(s.body(s.emb(x).mean(1))))

    def init_fn(mod):
        if isinstance(mod, nn.Linear):
            nn.init.xavier_uniform_(mod.weight, gain=nn.init.calculate_gain("relu"))
            nn.init.zeros_(mod.bias)
        elif isinstance(mod, nn.Embedding):
            nn.init.normal_(mod.weight, std=0.02)
        elif isinstance(mod, nn.LayerNorm):
            nn.init.ones_(mod.weight)
            nn.init.constant_(mod.bias, 0.1)

    m = Net()
    m.apply(init_fn)  # random draws differ between libraries: ctx.init overwrites them
    m = ctx.init(m)
    decay, no_decay = [], []
    for mn, mod in m.named_modules():
        for pn, p in mod.named_parameters(recurse=False):
            if mn.startswith("extra"):
                continue
            if pn.endswith("bias") or isinstance(mod, (nn.LayerNorm, nn.Embedding)):
                no_decay.append(p)
            else:
                decay.append(p)
    for p in m.emb.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": 0.1},
            {"params": no_decay, "weight_decay": 0.0, "lr": 5e-3},
        ],
        lr=1e-2,
    )
    rng = np.random.default_rng(12)
    x = ctx.t(rng.integers(0, 10, (5, 4)))
    y = ctx.t(rng.integers(0, 3, 5))

    def step(x, y):
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    res = [step(x, y).item() for _ in range(2)]
    opt.add_param_group({"params": list(m.extra.parameters()), "lr": 1e-3, "weight_decay": 0.0})
    cstep = ctx.fn(step)
    res += [cstep(x, y).item() for _ in range(2)]
    buf = io.BytesIO()
    torch.save({"model": m.state_dict(), "opt": opt.state_dict()}, buf)
    buf.seek(0)
    ck = torch.load(buf)
    m2 = Net()
    m2.load_state_dict(ck["model"])
    opt2 = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": 0.1},
            {"params": no_decay, "weight_decay": 0.0, "lr": 5e-3},
            {"params": list(m.extra.parameters()), "lr": 1e-3, "weight_decay": 0.0},
        ],
        lr=1e-2,
    )
    opt2.load_state_dict(ck["opt"])
    groups = [
        {k: v for k, v in g.items() if k != "params"} for g in opt2.state_dict()["param_groups"]
    ]
    return {
        "l": res,
        "sd": dict(m2.state_dict()),
        "groups": groups,
        "ng": [len(g["params"]) for g in opt.param_groups],
        "emb_grad": m.emb.weight.grad,
        "steps": [float(s["step"]) for s in opt2.state_dict()["state"].values()],
        "nparams": sum(p.numel() for p in m.parameters() if p.requires_grad),
    }


def loader_prog(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    Dt = torch.utils.data

    class SeqDataset(Dt.Dataset):
        def __init__(s, n):
            r = np.random.default_rng(13)
            s.items = [
                (r.integers(1, 9, r.integers(2, 6)).tolist(), int(r.integers(0, 2)))
                for _ in range(n)
            ]

        def __len__(s):
            return len(s.items)

        def __getitem__(s, i):
            seq, lab = s.items[i]
            return torch.tensor(seq), lab

    def collate(batch):
        seqs, labs = zip(*batch)
        lengths = torch.tensor([len(q) for q in seqs])
        padded = nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=0)
        return padded, lengths, torch.tensor(labs)

    class EveryOther(Dt.Sampler):
        def __init__(s, n):
            s.n = n

        def __iter__(s):
            return iter(list(range(0, s.n, 2)) + list(range(1, s.n, 2)))

        def __len__(s):
            return s.n

    ds = SeqDataset(14)
    g = torch.Generator().manual_seed(0)
    train, val = Dt.random_split(ds, [10, 4], generator=g)
    loader = Dt.DataLoader(ds, batch_size=4, sampler=EveryOther(len(ds)), collate_fn=collate)
    bs = Dt.BatchSampler(Dt.SequentialSampler(range(7)), batch_size=3, drop_last=False)

    class Model(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(9, 4, padding_idx=0)
            s.gru = nn.GRU(4, 5, batch_first=True, bidirectional=True)
            s.out = nn.Linear(10, 2)

        def forward(s, x, lengths):
            packed = nn.utils.rnn.pack_padded_sequence(
                s.emb(x), lengths, batch_first=True, enforce_sorted=False
            )
            out, h = s.gru(packed)
            unpacked, ul = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
            mask = torch.arange(unpacked.size(1))[None] < ul[:, None]
            pooled = (unpacked * mask.unsqueeze(-1)).sum(1) / ul[:, None]
            return s.out(pooled) + s.out(torch.cat([h[0], h[1]], -1))

    m = ctx.init(Model())
    opt = torch.optim.Adagrad(m.parameters(), lr=0.05)
    res = []
    for _ in range(2):
        for x, lengths, y in loader:
            opt.zero_grad()
            loss = F.cross_entropy(m(x, lengths), y)
            loss.backward()
            opt.step()
            res.append(loss.item())
    return {
        "l": res,
        "lens": [len(train), len(val)],
        "bs": [list(b) for b in bs],
        "first": next(iter(loader))[0],
        "nb": len(loader),
    }


def packed_captured(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    rnn = ctx.init(nn.LSTM(3, 4, batch_first=True), "rnn")
    head = ctx.init(nn.Linear(4, 1), "head")
    opt = torch.optim.SGD(list(rnn.parameters()) + list(head.parameters()), lr=0.1)
    rng = np.random.default_rng(14)
    x = ctx.t(rng.standard_normal((3, 5, 3)).astype(np.float32))
    lengths = ctx.t(np.array([5, 2, 4]))
    y = ctx.t(rng.standard_normal((3, 1)).astype(np.float32))

    def step(x, lengths, y):
        packed = nn.utils.rnn.pack_padded_sequence(
            x, lengths, batch_first=True, enforce_sorted=False
        )
        out, (h, c) = rnn(packed)
        padded, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=5)
        loss = F.mse_loss(head(h[-1]), y) + padded.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, padded

    step = ctx.fn(step)
    res = [step(x, lengths, y) for _ in range(2)]
    return {"res": res}


PROGRAMS = [mixup_focal, siamese, param_groups, loader_prog, packed_captured]
CAPTURED = [mixup_focal, siamese, param_groups, packed_captured]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
