"""Probabilistic and structured-output programs: Sinkhorn optimal transport in log space, a
Gaussian mixture fitted by EM, a mixture density network, a conditional neural process, a
hypernetwork, sparsemax and entmax-1.5 attention, quantile (pinball) and Cox survival losses.
"""

import math

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741


def sinkhorn(torch, ctx):
    def log_sinkhorn(a, b, C, eps, iters):
        f = torch.zeros_like(a)
        g = torch.zeros_like(b)
        log_a, log_b = a.log(), b.log()
        for _ in range(iters):
            f = -eps * torch.logsumexp((g[None, :] - C) / eps + log_b[None, :], dim=1)
            g = -eps * torch.logsumexp((f[:, None] - C) / eps + log_a[:, None], dim=0)
        P = torch.exp((f[:, None] + g[None, :] - C) / eps + log_a[:, None] + log_b[None, :])
        return P, (P * C).sum()

    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((6, 2)).astype(np.float64)).requires_grad_()
    y = ctx.t(rng.standard_normal((5, 2)).astype(np.float64) + 1.0)
    a = torch.full((6,), 1 / 6, dtype=torch.float64)
    b = torch.softmax(ctx.t(rng.standard_normal(5)), 0)
    opt = torch.optim.SGD([x], lr=0.5)

    def step(x, y):
        C = torch.cdist(x, y, p=2) ** 2
        P, cost = log_sinkhorn(a, b, C, 0.1, 30)
        opt.zero_grad()
        cost.backward()
        opt.step()
        return cost, P

    step = ctx.fn(step)
    out = [step(x, y) for _ in range(3)]
    P = out[-1][1]
    return {"out": out, "marg": [P.sum(1), P.sum(0)], "x": x.detach(), "assign": P.argmax(1)}


def gmm_em(torch, ctx):
    rng = np.random.default_rng(1)
    pts = np.concatenate(
        [rng.standard_normal((30, 2)) * 0.5 + [2, 0], rng.standard_normal((30, 2)) * 0.7 + [-2, 1]]
    ).astype(np.float32)
    X = ctx.t(pts)
    K, N, D = 2, X.shape[0], X.shape[1]
    mu = X[torch.tensor([0, 45])].clone()
    cov = torch.eye(D).repeat(K, 1, 1)
    pi = torch.full((K,), 1.0 / K)
    lls = []

    def e_step(X, mu, cov, pi):
        dist = torch.distributions.MultivariateNormal(mu, covariance_matrix=cov)
        logp = dist.log_prob(X[:, None, :]) + pi.log()
        ll = torch.logsumexp(logp, dim=1)
        return (logp - ll[:, None]).exp(), ll.mean()

    e_step = ctx.fn(e_step)
    for _ in range(6):
        resp, ll = e_step(X, mu, cov, pi)
        lls.append(ll)
        Nk = resp.sum(0)
        mu = (resp.T @ X) / Nk[:, None]
        diff = X[:, None, :] - mu[None]
        cov = torch.einsum("nk,nkd,nke->kde", resp, diff, diff) / Nk[:, None, None]
        cov = cov + 1e-4 * torch.eye(D)
        pi = Nk / N
    chol = torch.linalg.cholesky(cov)
    return {
        "ll": lls,
        "mu": mu,
        "cov": cov,
        "pi": pi,
        "chol": chol,
        "labels": resp.argmax(1),
        "logdet": torch.logdet(cov),
    }


def mdn(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions

    class MDN(nn.Module):
        def __init__(s, k=3):
            super().__init__()
            s.k = k
            s.body = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh())
            s.pi = nn.Linear(16, k)
            s.mu = nn.Linear(16, k)
            s.log_sigma = nn.Linear(16, k)

        def forward(s, x):
            h = s.body(x)
            return F.log_softmax(s.pi(h), -1), s.mu(h), s.log_sigma(h).clamp(-5, 3).exp()

    def mdn_nll(log_pi, mu, sigma, y):
        comp = -0.5 * ((y - mu) / sigma) ** 2 - sigma.log() - 0.5 * math.log(2 * math.pi)
        return -torch.logsumexp(log_pi + comp, dim=-1).mean()

    m = ctx.init(MDN())
    opt = torch.optim.Adam(m.parameters(), lr=5e-3)
    rng = np.random.default_rng(2)
    yv = rng.uniform(-1, 1, (40, 1)).astype(np.float32)
    xv = (yv + 0.3 * np.sin(2 * np.pi * yv) + rng.uniform(-0.1, 0.1, yv.shape)).astype(np.float32)
    x, y = ctx.t(xv), ctx.t(yv)

    def step(x, y):
        log_pi, mu, sigma = m(x)
        loss = mdn_nll(log_pi, mu, sigma, y)
        mix = D.MixtureSameFamily(D.Categorical(logits=log_pi), D.Normal(mu, sigma))
        loss2 = -mix.log_prob(y.squeeze(-1)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, loss2.detach()

    step = ctx.fn(step)
    out = [step(x, y) for _ in range(4)]
    with torch.no_grad():
        log_pi, mu, sigma = m(x[:5])
        mix = D.MixtureSameFamily(D.Categorical(logits=log_pi), D.Normal(mu, sigma))
        mean, var = mix.mean, mix.variance
        cdf = mix.cdf(torch.zeros(5))
    return {"out": out, "mean": mean, "var": var, "cdf": cdf}


def neural_process(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class CNP(nn.Module):
        def __init__(s, r=16):
            super().__init__()
            s.enc = nn.Sequential(nn.Linear(2, r), nn.ReLU(), nn.Linear(r, r))
            s.dec = nn.Sequential(nn.Linear(r + 1, r), nn.ReLU(), nn.Linear(r, 2))

        def forward(s, xc, yc, xt, cmask):
            h = s.enc(torch.cat([xc, yc], -1))
            w = cmask.unsqueeze(-1).float()
            r = (h * w).sum(1) / w.sum(1).clamp_min(1)
            rt = r.unsqueeze(1).expand(-1, xt.size(1), -1)
            out = s.dec(torch.cat([rt, xt], -1))
            mu, raw = out.unbind(-1)
            sigma = 0.1 + 0.9 * F.softplus(raw)
            return mu, sigma

    m = ctx.init(CNP())
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    rng = np.random.default_rng(3)
    B, Nc, Nt = 4, 6, 8
    xs = rng.uniform(-2, 2, (B, Nc + Nt, 1)).astype(np.float32)
    amp = rng.uniform(0.5, 2, (B, 1, 1)).astype(np.float32)
    ys = (amp * np.sin(xs)).astype(np.float32)
    cmask = np.ones((B, Nc), dtype=bool)
    cmask[1, 4:] = False
    cmask[3, 2:] = False
    xc, yc = ctx.t(xs[:, :Nc]), ctx.t(ys[:, :Nc])
    xt, yt = ctx.t(xs[:, Nc:]), ctx.t(ys[:, Nc:])
    cm = ctx.t(cmask)

    def step(xc, yc, xt, yt, cm):
        mu, sigma = m(xc, yc, xt, cm)
        dist = torch.distributions.Independent(torch.distributions.Normal(mu, sigma), 1)
        loss = -dist.log_prob(yt.squeeze(-1)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, sigma.mean()

    step = ctx.fn(step)
    out = [step(xc, yc, xt, yt, cm) for _ in range(4)]
    return {"out": out, "w": m.dec[2].weight}


def hypernetwork(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class HyperLinear(nn.Module):
        def __init__(s, z_dim, fin, fout):
            super().__init__()
            s.fin, s.fout = fin, fout
            s.w_gen = nn.Linear(z_dim, fin * fout)
            s.b_gen = nn.Linear(z_dim, fout)

        def forward(s, x, z):
            W = s.w_gen(z).view(-1, s.fout, s.fin)
            b = s.b_gen(z)
            return torch.baddbmm(b.unsqueeze(1), x, W.transpose(1, 2))

    class HyperNet(nn.Module):
        def __init__(s, n_tasks=3, z_dim=4):
            super().__init__()
            s.task_emb = nn.Embedding(n_tasks, z_dim)
            s.l1 = HyperLinear(z_dim, 2, 8)
            s.l2 = HyperLinear(z_dim, 8, 1)

        def forward(s, x, task):
            z = s.task_emb(task)
            return s.l2(F.elu(s.l1(x, z)), z)

    m = ctx.init(HyperNet())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(4)
    x = ctx.t(rng.standard_normal((3, 10, 2)).astype(np.float32))
    task = ctx.t(np.array([0, 1, 2]))
    coef = ctx.t(rng.standard_normal((3, 2, 1)).astype(np.float32))

    def step(x, task, coef):
        y = torch.bmm(x, coef).sin()
        pred = m(x, task)
        loss = F.mse_loss(pred, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    out = [step(x, task, coef) for _ in range(4)]
    # functional call with swapped-in generated weights
    z = m.task_emb.weight[1:2]
    W1 = m.l1.w_gen(z).view(8, 2)
    y1 = torch.func.functional_call(
        nn.Linear(2, 8), {"weight": W1, "bias": m.l1.b_gen(z)[0]}, (x[1],)
    )
    return {"out": out, "y1": y1.detach()}


def sparse_attention(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def sparsemax(z, dim=-1):
        z_sorted, _ = torch.sort(z, dim=dim, descending=True)
        k = torch.arange(1, z.size(dim) + 1, dtype=z.dtype)
        shape = [1] * z.dim()
        shape[dim] = -1
        k = k.view(shape)
        cssv = z_sorted.cumsum(dim) - 1
        support = (k * z_sorted) > cssv
        k_z = support.sum(dim=dim, keepdim=True)
        tau = cssv.gather(dim, k_z - 1) / k_z.to(z.dtype)
        return torch.clamp(z - tau, min=0)

    def entmax15(z, dim=-1, iters=25):
        z = z / 2
        max_val, _ = z.max(dim=dim, keepdim=True)
        lo = max_val - 1
        hi = max_val
        for _ in range(iters):
            tau = (lo + hi) / 2
            p = torch.clamp(z - tau, min=0) ** 2
            big = p.sum(dim, keepdim=True) >= 1
            lo = torch.where(big, tau, lo)
            hi = torch.where(big, hi, tau)
        p = torch.clamp(z - (lo + hi) / 2, min=0) ** 2
        return p / p.sum(dim, keepdim=True)

    class SparseAttn(nn.Module):
        def __init__(s, d):
            super().__init__()
            s.q, s.k, s.v = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
            s.out = nn.Linear(d, 3)

        def forward(s, x, kind):
            scores = s.q(x) @ s.k(x).transpose(-1, -2) / math.sqrt(x.size(-1))
            p = sparsemax(scores) if kind == "sparsemax" else entmax15(scores)
            return s.out((p @ s.v(x)).mean(1)), p

    m = ctx.init(SparseAttn(6))
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.5)
    rng = np.random.default_rng(5)
    x = ctx.t(rng.standard_normal((4, 5, 6)).astype(np.float32) * 2)
    y = ctx.t(rng.integers(0, 3, 4))

    def step(x, y, kind):
        logits, p = m(x, kind)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, p, (p > 0).sum(-1)

    step = ctx.fn(step)
    out = [step(x, y, k) for k in ("sparsemax", "entmax", "sparsemax", "entmax")]
    z = ctx.t(np.array([[1.0, 0.8, -1.0, 0.1], [0.0, 0.0, 0.0, 0.0]], dtype=np.float32))
    return {"out": out, "sp": sparsemax(z), "ent": entmax15(z)}


def survival_quantile(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def cox_ph_loss(risk, time, event):
        order = torch.argsort(time, descending=True)
        risk, event = risk[order], event[order]
        log_cumsum = torch.logcumsumexp(risk, dim=0)
        return -((risk - log_cumsum) * event).sum() / event.sum().clamp(min=1)

    def pinball(pred, y, qs):
        diff = y.unsqueeze(-1) - pred
        return torch.max(qs * diff, (qs - 1) * diff).mean()

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.body = nn.Sequential(
                nn.Linear(5, 12), nn.SELU(), nn.AlphaDropout(0.0), nn.Linear(12, 12), nn.SELU()
            )
            s.risk = nn.Linear(12, 1, bias=False)
            s.quant = nn.Linear(12, 3)

        def forward(s, x):
            h = s.body(x)
            q = s.quant(h)
            # monotone quantiles: first plus cumulative softplus gaps
            q = torch.cat([q[:, :1], q[:, :1] + F.softplus(q[:, 1:]).cumsum(1)], 1)
            return s.risk(h).squeeze(-1), q

    m = ctx.init(Net())
    opt = torch.optim.Adam(m.parameters(), lr=3e-3, amsgrad=True)
    rng = np.random.default_rng(6)
    x = ctx.t(rng.standard_normal((16, 5)).astype(np.float32))
    time = ctx.t(
        rng.permutation(16).astype(np.float32) + rng.uniform(0, 0.5, 16).astype(np.float32)
    )
    event = ctx.t((rng.uniform(size=16) < 0.7).astype(np.float32))
    y = ctx.t(rng.standard_normal(16).astype(np.float32))
    qs = torch.tensor([0.1, 0.5, 0.9])

    def step(x, time, event, y):
        risk, q = m(x)
        l1 = cox_ph_loss(risk, time, event)
        l2 = pinball(q, y, qs)
        opt.zero_grad()
        (l1 + l2).backward()
        opt.step()
        return l1, l2

    step = ctx.fn(step)
    out = [step(x, time, event, y) for _ in range(4)]
    with torch.no_grad():
        risk, q = m(x)
        # concordance index
        dt = time[:, None] < time[None, :]
        dr = risk[:, None] > risk[None, :]
        valid = dt & event.bool()[:, None]
        cindex = (valid & dr).sum().float() / valid.sum()
        coverage = ((y > q[:, 0]) & (y < q[:, 2])).float().mean()
    return {"out": out, "cindex": cindex, "cov": coverage, "q": q}


PROGRAMS = [
    sinkhorn,
    gmm_em,
    mdn,
    neural_process,
    hypernetwork,
    sparse_attention,
    survival_quantile,
]
CAPTURED = PROGRAMS


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
