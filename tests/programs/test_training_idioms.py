"""Training idioms as whole PyTorch programs: accumulation, schedulers, EMA, weight tying and
parametrizations, checkpointing and save/load, module surgery, distillation, contrastive losses,
word2vec.
"""

import io
import os
import tempfile

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def accum_sched(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    m = ctx.init(
        nn.Sequential(
            nn.Linear(6, 16), nn.LayerNorm(16), nn.SiLU(), nn.Dropout(0.0), nn.Linear(16, 3)
        )
    )
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.01)
    warm = 3
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm))
    rng = np.random.default_rng(0)
    xs = [ctx.t(rng.standard_normal((4, 6)).astype(np.float32)) for _ in range(8)]
    ys = [ctx.t(rng.integers(0, 3, 4)) for _ in range(8)]
    accum = 2
    res = []
    lrs = []
    norms = []

    def micro(x, y):
        loss = F.cross_entropy(m(x), y) / accum
        loss.backward()
        return loss

    micro = ctx.fn(micro)
    for i, (x, y) in enumerate(zip(xs, ys)):
        res.append(micro(x, y).item())
        if (i + 1) % accum == 0:
            n = torch.nn.utils.clip_grad_norm_(m.parameters(), max_norm=0.5)
            norms.append(n.item())
            torch.nn.utils.clip_grad_value_(m.parameters(), 0.1)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            lrs.append(sched.get_last_lr()[0])
    opt2 = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    oc = torch.optim.lr_scheduler.OneCycleLR(
        opt2, max_lr=0.5, total_steps=10, pct_start=0.3, anneal_strategy="cos"
    )
    ol = []
    for _ in range(6):
        opt2.step()
        oc.step()
        ol.append(opt2.param_groups[0]["lr"])
        ol.append(opt2.param_groups[0]["momentum"])
    return {
        "l": res,
        "lrs": lrs,
        "norms": norms,
        "ol": ol,
        "s": dict(m.state_dict()),
        "st": opt.state_dict()["state"][0]["exp_avg"],
    }


def ema(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    import copy

    m = ctx.init(
        nn.Sequential(
            nn.Conv2d(1, 4, 3),
            nn.BatchNorm2d(4),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(4, 2),
        )
    )
    e = copy.deepcopy(m)
    for p in e.parameters():
        p.requires_grad_(False)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((4, 1, 6, 6)).astype(np.float32))
    y = ctx.t(rng.integers(0, 2, 4))

    def step(x, y):
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for pe, pm in zip(e.parameters(), m.parameters()):
                pe.lerp_(pm, 0.1)
            for be, bm in zip(e.buffers(), m.buffers()):
                if be.dtype.is_floating_point:
                    be.mul_(0.9).add_(bm, alpha=0.1)
                else:
                    be.copy_(bm)
        return loss

    step = ctx.fn(step)
    res = [step(x, y).item() for _ in range(3)]
    return {"l": res, "e": dict(e.state_dict())}


def tying_and_norms(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    P = nn.utils.parametrizations

    class LM(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(20, 8)
            s.rnn = nn.LSTM(8, 8, batch_first=True)
            s.proj = P.weight_norm(nn.Linear(8, 8))
            s.sn = P.spectral_norm(nn.Linear(8, 8))
            s.dec = nn.Linear(8, 20)
            s.dec.weight = s.emb.weight

        def forward(s, x):
            h, _ = s.rnn(s.emb(x))
            return s.dec(torch.tanh(s.sn(s.proj(h))))

    m = LM()
    m = ctx.init(m)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.integers(0, 20, (2, 5)))
    res = []
    for _ in range(3):
        opt.zero_grad()
        out = m(x[:, :-1])
        loss = F.cross_entropy(out.reshape(-1, 20), x[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        res.append(loss.item())
    m.eval()
    with torch.no_grad():
        ev = m(x)
    names = [n for n, _ in m.named_parameters()]
    return {
        "l": res,
        "ev": ev,
        "names": names,
        "tied": m.dec.weight is m.emb.weight,
        "sd": sorted(m.state_dict().keys()),
    }


def ckpt_saveload(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    from_cp = torch.utils.checkpoint

    class Blk(nn.Module):
        def __init__(s):
            super().__init__()
            s.f = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8))

        def forward(s, x):
            return x + s.f(x)

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.blocks = nn.ModuleList([Blk() for _ in range(3)])
            s.head = nn.Linear(8, 1)
            s.register_buffer("steps", torch.zeros((), dtype=torch.long))

        def forward(s, x):
            for b in s.blocks:
                x = from_cp.checkpoint(b, x, use_reentrant=False)
            s.steps += 1
            return s.head(x)

    m = ctx.init(Net())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((4, 8)).astype(np.float32))
    y = ctx.t(rng.standard_normal((4, 1)).astype(np.float32))

    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    res = [step(x, y).item() for _ in range(2)]
    d = tempfile.mkdtemp()
    path = os.path.join(d, "ck.pt")
    torch.save({"model": m.state_dict(), "opt": opt.state_dict(), "epoch": 2}, path)
    m2 = Net()
    opt2 = torch.optim.Adam(m2.parameters(), lr=1e-2)
    ck = torch.load(path)
    m2.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["opt"])
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf, weights_only=True)
    for _ in range(2):
        opt2.zero_grad()
        loss = F.mse_loss(m2(x), y)
        loss.backward()
        opt2.step()
        res.append(loss.item())
    return {
        "l": res,
        "epoch": ck["epoch"],
        "steps": m2.steps,
        "sd": dict(sd),
        "m2": dict(m2.state_dict()),
    }


def surgery(torch, ctx):
    nn, _F = torch.nn, torch.nn.functional
    m = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=2), nn.BatchNorm2d(8), nn.ReLU()),
        nn.AdaptiveMaxPool2d((2, 2)),
        nn.Flatten(),
        nn.Linear(32, 4),
    )
    m = ctx.init(m)
    for name, mod in list(m.named_modules()):
        if isinstance(mod, nn.ReLU):
            parent = m.get_submodule(name.rsplit(".", 1)[0]) if "." in name else m
            setattr(parent, name.rsplit(".", 1)[-1], nn.Hardswish())
    m[-1] = nn.Linear(32, 2)
    with torch.no_grad():
        m[-1].weight.copy_(torch.arange(64, dtype=torch.float32).reshape(2, 32) / 100)
        m[-1].bias.fill_(0.1)
    for p in m[0].parameters():
        p.requires_grad = False
    trainable = [p for p in m.parameters() if p.requires_grad]
    opt = torch.optim.SGD(trainable, lr=0.1)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((2, 3, 5, 5)).astype(np.float32))
    loss = m(x).logsumexp(1).sum()
    loss.backward()
    opt.step()
    kinds = [type(v).__name__ for _, v in m.named_modules()]
    ng = sum(p.numel() for p in m.parameters() if p.requires_grad)
    return {
        "l": loss.item(),
        "kinds": kinds,
        "ng": ng,
        "g0": m[0].weight.grad is None,
        "w": m[3][0].weight,
        "out": m(x),
    }


def distill(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    teacher = ctx.init(nn.Sequential(nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 5)), "t")
    student = ctx.init(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 5)), "s")
    teacher.eval()
    opt = torch.optim.SGD(student.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((10, 6)).astype(np.float32))
    y = ctx.t(rng.integers(0, 5, 10))
    y[3] = -100
    T = 3.0
    kl = nn.KLDivLoss(reduction="batchmean", log_target=True)
    w = torch.tensor([1.0, 2.0, 0.5, 1.0, 1.5])

    def step(x, y):
        with torch.no_grad():
            tl = teacher(x)
        sl = student(x)
        l_kd = kl(F.log_softmax(sl / T, dim=1), F.log_softmax(tl / T, dim=1)) * T * T
        l_kd2 = F.kl_div(
            F.log_softmax(sl / T, dim=1), F.softmax(tl / T, dim=1), reduction="batchmean"
        )
        l_ce = F.cross_entropy(sl, y, weight=w, ignore_index=-100, label_smoothing=0.1)
        loss = 0.7 * l_kd + 0.3 * l_ce + l_kd2
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, l_ce

    step = ctx.fn(step)
    res = [[v.item() for v in step(x, y)] for _ in range(3)]
    nll = F.nll_loss(F.log_softmax(student(x), 1), y, weight=w, reduction="none")
    return {"l": res, "nll": nll}


def contrastive(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    enc = ctx.init(
        nn.Sequential(nn.Linear(10, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 8))
    )
    opt = torch.optim.SGD(enc.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    rng = np.random.default_rng(0)
    a = ctx.t(rng.standard_normal((6, 10)).astype(np.float32))
    p = ctx.t(rng.standard_normal((6, 10)).astype(np.float32))
    n = ctx.t(rng.standard_normal((6, 10)).astype(np.float32))
    tgt = ctx.t(np.array([1, -1, 1, 1, -1, -1], np.float32))
    cos = nn.CosineEmbeddingLoss(margin=0.2)
    trip = nn.TripletMarginLoss(margin=1.0, p=2, swap=True)

    def step(a, p, n, tgt):
        opt.zero_grad()
        za, zp, zn = enc(a), enc(p), enc(n)
        l1 = cos(za, zp, tgt) + trip(za, zp, zn)
        qa, qp = F.normalize(za, dim=1), F.normalize(zp, dim=-1)
        logits = qa @ qp.t() / 0.1
        labels = torch.arange(qa.shape[0])
        info = F.cross_entropy(logits, labels)
        info2 = -(torch.diag(logits) - torch.logsumexp(logits, dim=1)).mean()
        sim = F.cosine_similarity(za.unsqueeze(1), zp.unsqueeze(0), dim=-1)
        loss = l1 + info + info2 + sim.mean() + F.pairwise_distance(za, zn).mean() * 0.01
        loss.backward()
        opt.step()
        return loss, info, info2

    step = ctx.fn(step)
    res = [[v.item() for v in step(a, p, n, tgt)] for _ in range(3)]
    return {"l": res, "s": dict(enc.state_dict())}


def word2vec(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class SG(nn.Module):
        def __init__(s):
            super().__init__()
            s.inp = nn.Embedding(30, 8)
            s.out = nn.Embedding(30, 8)
            s.inp.weight.data.uniform_(-0.5 / 8, 0.5 / 8)
            s.out.weight.data.zero_()

        def forward(s, c, ctxw, neg):
            v = s.inp(c)
            u = s.out(ctxw)
            un = s.out(neg)
            pos = F.logsigmoid((v * u).sum(-1))
            ng = F.logsigmoid(-torch.bmm(un, v.unsqueeze(2)).squeeze(2)).sum(-1)
            return -(pos + ng).mean()

    m = ctx.init(SG())
    opt = torch.optim.Adagrad(m.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    freq = rng.random(30) ** 0.75
    res = []

    def step(c, w, neg):
        opt.zero_grad()
        loss = m(c, w, neg)
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    g = torch.Generator().manual_seed(3)
    fr = torch.tensor(freq, dtype=torch.float)
    fr[0] = 0.0  # never drawn
    drawn = torch.multinomial(fr, 12 * 5, replacement=True, generator=g).view(12, 5)
    for _ in range(3):
        c = ctx.t(rng.integers(0, 30, 12))
        w = ctx.t(rng.integers(0, 30, 12))
        neg = ctx.t(rng.integers(0, 30, (12, 5)))  # the libraries' generators differ
        res.append(step(c, w, neg).item())
    drawn_ok = bool(((drawn > 0) & (drawn < 30)).all())
    return {"l": res, "e": m.inp.weight, "drawn": [drawn_ok, drawn.dtype, tuple(drawn.shape)]}


PROGRAMS = [
    accum_sched,
    ema,
    tying_and_norms,
    ckpt_saveload,
    surgery,
    distill,
    contrastive,
    word2vec,
]
CAPTURED = [accum_sched, ema, ckpt_saveload, distill, contrastive, word2vec]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
