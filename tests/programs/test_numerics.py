"""Numerical programs: Gaussian-process regression (Cholesky, cholesky_solve, solve_triangular,
slogdet, lstsq), PCA and k-means (SVD, eigvalsh, QR, norms, pinv), a VQ-VAE straight-through
step, a sparse GCN.
"""

import math

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def gp_regression(torch, ctx):
    rng = np.random.default_rng(0)
    X = ctx.t(rng.uniform(-2, 2, (8, 1)))
    Y = torch.sin(X * 2).squeeze(1) + ctx.t(0.05 * rng.standard_normal(8))
    log_ls = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
    log_sf = torch.tensor(0.0, dtype=torch.float64, requires_grad=True)
    log_sn = torch.tensor(-2.0, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([log_ls, log_sf, log_sn], lr=0.05)
    res = []
    for _ in range(3):
        opt.zero_grad()
        d2 = torch.cdist(X, X).pow(2)
        K = log_sf.exp() ** 2 * torch.exp(-0.5 * d2 / log_ls.exp() ** 2) + (
            log_sn.exp() ** 2 + 1e-6
        ) * torch.eye(8, dtype=torch.float64)
        L = torch.linalg.cholesky(K)
        alpha = torch.cholesky_solve(Y.unsqueeze(1), L)
        nll = (
            0.5 * (Y.unsqueeze(0) @ alpha).squeeze()
            + torch.log(torch.diagonal(L)).sum()
            + 4 * math.log(2 * math.pi)
        )
        nll.backward()
        opt.step()
        res.append(nll.item())
    Xs = ctx.t(np.linspace(-2, 2, 5)[:, None])
    Ks = log_sf.exp() ** 2 * torch.exp(-0.5 * torch.cdist(Xs, X).pow(2) / log_ls.exp() ** 2)
    with torch.no_grad():
        mean = Ks @ alpha
        v = torch.linalg.solve_triangular(L, Ks.t(), upper=False)
        var = log_sf.exp() ** 2 - (v**2).sum(0)
        sd, ld = torch.linalg.slogdet(K)
    lst = torch.linalg.lstsq(X, Y.unsqueeze(1)).solution
    return {"l": res, "mean": mean, "var": var, "ld": ld, "lst": lst, "p": [log_ls, log_sf, log_sn]}


def pca_kmeans(torch, ctx):
    rng = np.random.default_rng(0)
    X = ctx.t(
        np.concatenate([rng.standard_normal((10, 3)) + 3, rng.standard_normal((10, 3)) - 3]).astype(
            np.float32
        )
    )
    Xc = X - X.mean(0, keepdim=True)
    U, S, Vh = torch.linalg.svd(Xc, full_matrices=False)
    proj = Xc @ Vh[:2].t()
    ev = torch.linalg.eigvalsh(Xc.t() @ Xc / 19)
    cov = torch.cov(X.t())
    c = X[[0, 10]].clone()
    for _ in range(5):
        d = torch.cdist(X, c)
        assign = d.argmin(1)
        c = torch.stack([X[assign == k].mean(0) for k in range(2)])
    inertia = ((X - c[assign]) ** 2).sum()
    q, r = torch.linalg.qr(Xc)
    return {
        "S": S,
        "absproj": proj.abs(),
        "ev": ev,
        "cov": cov,
        "c": c,
        "a": assign,
        "in": inertia,
        "rdiag": r.diagonal().abs(),
        "norm": torch.linalg.matrix_norm(Xc),
        "n2": torch.linalg.matrix_norm(Xc, ord=2),
        "nuc": torch.linalg.matrix_norm(Xc, "nuc"),
        "pinv": torch.linalg.pinv(Xc[:4]),
        "cond": torch.linalg.cond(Xc[:3, :3]),
        "rank": torch.linalg.matrix_rank(Xc),
    }


def gumbel_vq(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class VQ(nn.Module):
        def __init__(s, K=6, D=4):
            super().__init__()
            s.emb = nn.Embedding(K, D)
            s.emb.weight.data.uniform_(-1 / K, 1 / K)

        def forward(s, z):
            flat = z.reshape(-1, z.shape[-1])
            d = (
                flat.pow(2).sum(1, keepdim=True)
                - 2 * flat @ s.emb.weight.t()
                + s.emb.weight.pow(2).sum(1)
            )
            idx = d.argmin(1)
            q = s.emb(idx).view_as(z)
            loss = F.mse_loss(q, z.detach()) + 0.25 * F.mse_loss(z, q.detach())
            q = z + (q - z).detach()
            return q, loss, idx

    enc = ctx.init(nn.Linear(5, 4), "e")
    vq = ctx.init(VQ(), "v")
    dec = ctx.init(nn.Linear(4, 5), "d")
    opt = torch.optim.Adam([*enc.parameters(), *vq.parameters(), *dec.parameters()], lr=1e-2)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((3, 7, 5)).astype(np.float32))

    def step(x):
        opt.zero_grad()
        q, vl, idx = vq(enc(x))
        loss = F.mse_loss(dec(q), x) + vl
        loss.backward()
        opt.step()
        return loss, idx

    step = ctx.fn(step)
    res = [step(x) for _ in range(3)]
    perp = torch.exp(
        -(lambda p: (p * torch.log(p + 1e-10)).sum())(F.one_hot(res[-1][1], 6).float().mean(0))
    )
    return {"r": res, "perp": perp}


def sparse_gcn(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(0)
    N = 8
    edges = rng.integers(0, N, (2, 20))
    edges = np.concatenate([edges, np.stack([np.arange(N)] * 2)], 1)
    A = torch.sparse_coo_tensor(ctx.t(edges), torch.ones(edges.shape[1]), (N, N)).coalesce()
    deg = torch.sparse.sum(A, dim=1).to_dense()
    dinv = deg.pow(-0.5)
    vals = dinv[A.indices()[0]] * A.values() * dinv[A.indices()[1]]
    An = torch.sparse_coo_tensor(A.indices(), vals, (N, N))
    X = ctx.t(rng.standard_normal((N, 4)).astype(np.float32))
    y = ctx.t(rng.integers(0, 2, N))
    l1 = ctx.init(nn.Linear(4, 8), "a")
    l2 = ctx.init(nn.Linear(8, 2), "b")
    opt = torch.optim.Adam([*l1.parameters(), *l2.parameters()], lr=1e-2)
    res = []
    for _ in range(3):
        opt.zero_grad()
        h = F.relu(torch.sparse.mm(An, l1(X)))
        out = torch.sparse.mm(An, l2(h))
        loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        res.append(loss.item())
    dense = An.to_dense()
    return {"l": res, "dense": dense, "deg": deg, "nnz": A._nnz()}


PROGRAMS = [gp_regression, pca_kmeans, gumbel_vq, sparse_gcn]
CAPTURED = [gumbel_vq]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
