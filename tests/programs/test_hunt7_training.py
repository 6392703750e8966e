"""Training machinery as whole programs: Newton's method with autograd.functional's Hessian
(and jacobian, vjp, jvp, hvp, vhp), an SN-GAN discriminator with spectral and weight norm,
BatchNorm's modes (momentum=None, no running statistics, eval switching), containers of
parameters and modules, TorchScript patterns, TransE with a max-norm embedding, word2vec with
sparse gradients and SparseAdam, in-place-heavy training code with tensor hooks.
"""

import io

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741


def newton_hessian(torch, ctx):
    AF = torch.autograd.functional
    rng = np.random.default_rng(0)
    X = ctx.t(rng.standard_normal((40, 3)))  # float64 data
    y = ctx.t((rng.uniform(size=40) < 0.5).astype(np.float64))

    def nll(w):
        z = X @ w[:3] + w[3]
        return torch.nn.functional.binary_cross_entropy_with_logits(z, y) + 0.01 * (w**2).sum()

    w = torch.zeros(4, dtype=torch.float64)
    hist = []
    for _ in range(4):
        g = AF.jacobian(nll, w)
        H = AF.hessian(nll, w)
        w = w - torch.linalg.solve(H, g)
        hist.append(nll(w).item())
    v = torch.ones(4, dtype=torch.float64)
    _, hv = AF.hvp(nll, w, v)
    _, vh = AF.vhp(nll, w, v)
    _, vj = AF.vjp(lambda w: torch.sigmoid(X @ w[:3]), w, torch.ones(40, dtype=torch.float64))
    _, jv = AF.jvp(lambda w: torch.sigmoid(X @ w[:3]), w, v)
    J = AF.jacobian(lambda a, b: (a * b).sum(0) + b.exp(), (X[:5, :2], X[5:10, :2]))
    H2 = AF.hessian(lambda a, b: (a * b.sin()).sum(), (X[0], X[1]))
    Jv = AF.jacobian(lambda a: a.cumsum(0) ** 2, X[0], vectorize=True)
    return {
        "w": w,
        "hist": hist,
        "hv": hv,
        "vh": vh,
        "vj": vj,
        "jv": jv,
        "J": list(J),
        "H2": [list(r) for r in H2],
        "Jv": Jv,
    }


def sngan(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    SN = nn.utils.spectral_norm
    PSN = nn.utils.parametrizations.spectral_norm
    WN = nn.utils.parametrizations.weight_norm

    class D(nn.Module):
        def __init__(s):
            super().__init__()
            s.c1 = SN(nn.Conv2d(1, 8, 3, 2, 1))
            s.c2 = PSN(nn.Conv2d(8, 16, 3, 2, 1))
            s.fc = SN(nn.Linear(16 * 2 * 2, 1))

        def forward(s, x):
            x = F.leaky_relu(s.c1(x), 0.1)
            x = F.leaky_relu(s.c2(x), 0.1)
            return s.fc(x.flatten(1))

    class G(nn.Module):
        def __init__(s):
            super().__init__()
            s.fc = WN(nn.Linear(6, 16 * 2 * 2))
            s.up = nn.Sequential(
                nn.Upsample(scale_factor=2),
                WN(nn.Conv2d(16, 8, 3, 1, 1)),
                nn.ReLU(),
                nn.Upsample(scale_factor=2),
                nn.Conv2d(8, 1, 3, 1, 1),
                nn.Tanh(),
            )

        def forward(s, z):
            return s.up(s.fc(z).view(-1, 16, 2, 2))

    d, g = ctx.init(D(), "d"), ctx.init(G(), "g")
    od = torch.optim.Adam(d.parameters(), lr=2e-4, betas=(0.0, 0.9))
    og = torch.optim.Adam(g.parameters(), lr=2e-4, betas=(0.0, 0.9))
    rng = np.random.default_rng(1)
    real = ctx.t(rng.uniform(-1, 1, (4, 1, 8, 8)).astype(np.float32))
    z = ctx.t(rng.standard_normal((4, 6)).astype(np.float32))

    def dstep(real, z):
        fake = g(z).detach()
        loss = F.relu(1.0 - d(real)).mean() + F.relu(1.0 + d(fake)).mean()
        od.zero_grad()
        loss.backward()
        od.step()
        return loss

    def gstep(z):
        loss = -d(g(z)).mean()
        og.zero_grad()
        loss.backward()
        og.step()
        return loss

    dstep, gstep = ctx.fn(dstep), ctx.fn(gstep)
    out = []
    for _ in range(3):
        out.append(dstep(real, z))
        out.append(gstep(z))
    d.eval()
    with torch.no_grad():
        score = d(real)
        sigma = torch.linalg.matrix_norm(d.c2.weight.flatten(1), ord=2)
    sd = {k: v for k, v in d.state_dict().items()}
    return {
        "out": out,
        "score": score,
        "sigma": sigma,
        "sd": sd,
        "gsd": dict(g.state_dict()),
        "keys": sorted(sd),
    }


def batchnorm_modes(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.bn_cum = nn.BatchNorm1d(6, momentum=None)
            s.fc = nn.Linear(6, 6)
            s.bn_none = nn.BatchNorm1d(6, track_running_stats=False)
            s.bn_noaff = nn.BatchNorm1d(6, affine=False, momentum=0.3)
            s.inorm = nn.InstanceNorm1d(6, affine=True, track_running_stats=True)
            s.out = nn.Linear(6, 2)

        def forward(s, x):
            h = s.fc(s.bn_cum(x))
            h = F.gelu(s.bn_none(h))
            h = s.bn_noaff(h)
            h = s.inorm(h.unsqueeze(-1).expand(-1, -1, 3)).mean(-1)
            return s.out(h)

    m = ctx.init(Net())
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    rng = np.random.default_rng(2)
    xs = [ctx.t(rng.standard_normal((8, 6)).astype(np.float32) * (i + 1)) for i in range(3)]
    y = ctx.t(rng.integers(0, 2, 8))

    def step(x, y):
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    losses = []
    for x in xs:
        m.train()
        losses.append(step(x, y))
        m.eval()
        with torch.no_grad():
            losses.append(m(x))
    m.bn_cum.reset_running_stats()
    m.train()
    with torch.no_grad():
        m(xs[0])
    return {
        "l": losses,
        "sd": dict(m.state_dict()),
        "nb": m.bn_cum.num_batches_tracked.item(),
        "none_rm": m.bn_none.running_mean is None,
    }


def containers(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Multi(nn.Module):
        def __init__(s, tasks):
            super().__init__()
            s.trunk = nn.ModuleList([nn.Linear(5, 8), nn.Linear(8, 8)])
            s.heads = nn.ModuleDict({t: nn.Linear(8, n) for t, n in tasks.items()})
            s.temps = nn.ParameterDict({t: nn.Parameter(torch.ones(1)) for t in tasks})
            s.scales = nn.ParameterList([nn.Parameter(torch.full((8,), 0.5)) for _ in range(2)])
            s.register_buffer("steps", torch.zeros((), dtype=torch.long))
            s.register_buffer("scratch", torch.zeros(3), persistent=False)

        def forward(s, x):
            for lin, sc in zip(s.trunk, s.scales):
                x = F.silu(lin(x)) * sc
            return {t: h(x) / s.temps[t] for t, h in s.heads.items()}

    tasks = {"cls": 3, "reg": 1}
    m = ctx.init(Multi(tasks))
    m.heads["aux"] = nn.Linear(8, 2)
    m.temps["aux"] = nn.Parameter(torch.tensor([2.0]))
    with torch.no_grad():
        m.heads["aux"].weight.copy_(torch.linspace(-1, 1, 16).view(2, 8))
        m.heads["aux"].bias.zero_()
    m.scales.append(nn.Parameter(torch.zeros(1)))
    opt = torch.optim.Adam(
        [
            {"params": [p for n, p in m.named_parameters() if "temps" not in n]},
            {"params": m.temps.parameters(), "lr": 1e-3},
        ],
        lr=1e-2,
    )
    rng = np.random.default_rng(3)
    x = ctx.t(rng.standard_normal((6, 5)).astype(np.float32))
    yc = ctx.t(rng.integers(0, 3, 6))
    yr = ctx.t(rng.standard_normal((6, 1)).astype(np.float32))
    ya = ctx.t(rng.integers(0, 2, 6))

    def step(x, yc, yr, ya):
        out = m(x)
        losses = {
            "cls": F.cross_entropy(out["cls"], yc),
            "reg": F.smooth_l1_loss(out["reg"], yr),
            "aux": F.cross_entropy(out["aux"], ya),
        }
        total = sum(losses.values())
        opt.zero_grad()
        total.backward()
        opt.step()
        m.steps += 1
        return total, losses

    step = ctx.fn(step)
    res = [step(x, yc, yr, ya) for _ in range(3)]
    names = [n for n, _ in m.named_modules()]
    pnames = [n for n, _ in m.named_parameters()]
    counts = sum(p.numel() for p in m.parameters() if p.requires_grad)
    m.apply(lambda mod: mod.reset_parameters() if isinstance(mod, nn.Identity) else None)
    return {
        "res": res,
        "names": names,
        "pnames": pnames,
        "count": counts,
        "sd": sorted(m.state_dict()),
        "steps": m.steps,
        "keys": list(m.heads.keys()),
        "len": [len(m.heads), len(m.temps), len(m.scales)],
    }


def jit_patterns(torch, ctx):
    nn = torch.nn

    @torch.jit.script
    def fused_gelu(x, bias):
        y = x + bias
        return y * 0.5 * (1.0 + torch.erf(y / 1.41421))

    class Block(nn.Module):
        def __init__(s):
            super().__init__()
            s.fc = nn.Linear(6, 6)
            s.ln = nn.LayerNorm(6)

        def forward(s, x):
            return s.ln(x + fused_gelu(s.fc(x), s.fc.bias))

    m = ctx.init(nn.Sequential(Block(), Block(), nn.Linear(6, 2)))
    rng = np.random.default_rng(4)
    x = ctx.t(rng.standard_normal((4, 6)).astype(np.float32))
    traced = torch.jit.trace(m, (x,))
    scripted = torch.jit.script(m[0])
    with torch.no_grad():
        a, b, c = m(x), traced(x), scripted(x)
    buf = io.BytesIO()
    torch.jit.save(traced, buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    opt = torch.optim.SGD(traced.parameters(), lr=0.1)
    for _ in range(2):
        loss = traced(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        d = loaded(x)
    frozen = torch.jit.freeze(torch.jit.script(m.eval()))
    return {
        "a": a,
        "b": b,
        "c": c,
        "d": d,
        "loss": loss,
        "after": m(x).detach(),
        "frozen": frozen(x),
    }


def transe(torch, ctx):
    nn = torch.nn

    class TransE(nn.Module):
        def __init__(s, n_ent, n_rel, dim, margin=1.0):
            super().__init__()
            s.ent = nn.Embedding(n_ent, dim, max_norm=1.0)
            s.rel = nn.Embedding(n_rel, dim)
            s.loss = nn.MarginRankingLoss(margin=margin)

        def score(s, h, r, t):
            return torch.norm(s.ent(h) + s.rel(r) - s.ent(t), p=1, dim=-1)

        def forward(s, pos, neg):
            ps = s.score(*pos.unbind(1))
            ns = s.score(*neg.unbind(1))
            target = torch.full_like(ps, -1.0)
            return s.loss(ps, ns, target), ps, ns

    m = ctx.init(TransE(12, 3, 6), "kg")
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    rng = np.random.default_rng(5)
    pos = rng.integers(0, 12, (10, 3))
    pos[:, 1] = rng.integers(0, 3, 10)
    neg = pos.copy()
    neg[:5, 0] = rng.integers(0, 12, 5)
    neg[5:, 2] = rng.integers(0, 12, 5)
    pos, neg = ctx.t(pos), ctx.t(neg)
    out = []
    for _ in range(3):
        loss, ps, ns = m(pos, neg)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out += [loss, ps.detach()]
    with torch.no_grad():
        # rank all tails for the first triple
        h, r, t = pos[0]
        scores = torch.norm(m.ent.weight[h] + m.rel.weight[r] - m.ent.weight, p=1, dim=1)
        rank = (scores < scores[t]).sum() + 1
    return {"out": out, "ent": m.ent.weight, "norms": m.ent.weight.norm(dim=1), "rank": rank}


def word2vec(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class SkipGram(nn.Module):
        def __init__(s, vocab, dim):
            super().__init__()
            s.u = nn.Embedding(vocab, dim, sparse=True)
            s.v = nn.Embedding(vocab, dim, sparse=True)

        def forward(s, center, ctxw, negs):
            u = s.u(center)
            pos = F.logsigmoid((u * s.v(ctxw)).sum(-1))
            neg = F.logsigmoid(-torch.bmm(s.v(negs), u.unsqueeze(2)).squeeze(2)).sum(1)
            return -(pos + neg).mean()

    m = ctx.init(SkipGram(20, 5), "w2v")
    opt = torch.optim.SparseAdam(list(m.parameters()), lr=0.05)
    rng = np.random.default_rng(6)
    batches = [
        (
            ctx.t(rng.integers(0, 20, 8)),
            ctx.t(rng.integers(0, 20, 8)),
            ctx.t(rng.integers(0, 20, (8, 4))),
        )
        for _ in range(3)
    ]
    losses, nnz = [], []
    for c, o, n in batches:
        loss = m(c, o, n)
        opt.zero_grad()
        loss.backward()
        # (a sparse COO gradient, as PyTorch's: its dense form counts the touched rows)
        dense_g = m.u.weight.grad.to_dense()
        nnz.append(int((dense_g.abs().sum(1) > 0).sum()))
        opt.step()
        losses.append(loss)
    emb = F.normalize(m.u.weight.detach(), dim=1)
    sim = emb @ emb.T
    return {
        "l": losses,
        "nnz": nnz,
        "g": dense_g,
        "u": m.u.weight,
        "v": m.v.weight,
        "nearest": sim.topk(3, dim=1).indices[:, 1:],
    }


def inplace_hooks(torch, ctx):
    rng = np.random.default_rng(7)
    W = ctx.t(rng.standard_normal((6, 4)).astype(np.float32)).requires_grad_()
    b = torch.zeros(4, requires_grad=True)
    x = ctx.t(rng.standard_normal((5, 6)).astype(np.float32))
    idx = ctx.t(np.array([0, 2, 2, 4, 1]))
    seen = []

    def step(W, b, x, idx):
        h = x @ W + b
        h.retain_grad()
        h.register_hook(lambda g: g.clamp(-3.0, 3.0))
        seen.append(h.sum().detach())
        a = h.clone()
        a.clamp_(-1.0, 1.0)
        a.masked_fill_(a.abs() < 0.1, 0.0)
        a.mul_(2).add_(0.5, alpha=-1)
        pooled = torch.zeros(5, 4).index_add_(0, idx, a)
        red = torch.zeros(5, 4).scatter_reduce_(
            0, idx[:, None].expand(-1, 4), a, "amax", include_self=False
        )
        loss = pooled.pow(2).sum() + red.sum()
        loss.backward()
        return loss, h.grad.clone()

    step = ctx.fn(step)
    losses = []
    for _ in range(3):
        loss, hg = step(W, b, x, idx)
        with torch.no_grad():
            W.sub_(0.01 * W.grad)
            b -= 0.01 * b.grad
        W.grad.zero_()
        b.grad = None
        losses += [loss.detach(), hg]
    y = W.detach()
    y.detach_()
    z = y.clone().requires_grad_(False)
    z.add_(1).div_(2).sqrt_().log1p_().neg_().exp_()
    c = torch.arange(10.0)
    c[::2] = c[1::2]
    c.clamp_(max=7).fmod_(3)
    return {
        "l": losses,
        "seen": seen,
        "W": W,
        "b": b,
        "z": z,
        "c": c,
        "leaf": [W.is_leaf, y.requires_grad, z.is_leaf],
    }


PROGRAMS = [
    newton_hessian,
    sngan,
    batchnorm_modes,
    containers,
    jit_patterns,
    transe,
    word2vec,
    inplace_hooks,
]
CAPTURED = [sngan, batchnorm_modes, containers, inplace_hooks]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
