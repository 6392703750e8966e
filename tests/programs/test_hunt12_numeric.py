"""Programs over the numeric namespaces: torch.distributions, torch.fft in a spectral layer,
torch.linalg in small optimisations, complex weights, sparse COO, data-processing indexing ops,
einsum attention variants.
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741


def distributions_prog(torch, ctx):
    D = torch.distributions
    rng = np.random.default_rng(0)
    logits = ctx.t(rng.standard_normal(3), requires_grad=True)
    loc = ctx.t(rng.standard_normal((3, 2)), requires_grad=True)
    log_scale = ctx.t(rng.standard_normal((3, 2)) * 0.1, requires_grad=True)
    mix = D.MixtureSameFamily(
        D.Categorical(logits=logits), D.Independent(D.Normal(loc, log_scale.exp()), 1)
    )
    x = ctx.t(rng.standard_normal((4, 1, 2)))
    lp = mix.log_prob(x)  # (4, 1): broadcasting over the batch
    lp.sum().backward()
    base = D.Normal(torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64))
    flow = D.TransformedDistribution(
        base, [D.transforms.AffineTransform(loc=1.0, scale=2.0), D.transforms.SigmoidTransform()]
    )
    y = ctx.t(np.array([[0.2, 0.7], [0.5, 0.9]]))
    q = D.Normal(loc.detach(), log_scale.detach().exp())
    p = D.Normal(torch.zeros(3, 2, dtype=torch.float64), torch.ones(3, 2, dtype=torch.float64))
    kl = D.kl_divergence(q, p)
    kl_ind = D.kl_divergence(D.Independent(q, 1), D.Independent(p, 1))
    mu = ctx.t(np.array([0.5, -0.3]), requires_grad=True)
    torch.manual_seed(0)
    r = D.Normal(mu, 1.0).rsample((5,))
    s = D.Normal(mu, 1.0).sample((5,))
    r.sum().backward()
    cat_kl = D.kl_divergence(
        D.Categorical(probs=ctx.t(np.array([0.2, 0.8]))),
        D.Categorical(probs=ctx.t(np.array([0.5, 0.5]))),
    )
    mvn = D.MultivariateNormal(
        torch.zeros(2, dtype=torch.float64), scale_tril=ctx.t(np.array([[1.0, 0], [0.5, 2.0]]))
    )
    return [
        lp,
        logits.grad,
        loc.grad,
        log_scale.grad,
        flow.log_prob(y),
        kl,
        kl_ind,
        r.shape,
        s.requires_grad,
        r.requires_grad,
        mu.grad,
        mix.mean,
        mix.variance,
        cat_kl,
        mvn.log_prob(ctx.t(np.array([[0.3, -1.0], [1.0, 2.0]]))),
        mvn.entropy(),
        mix.batch_shape,
        mix.event_shape,
        D.Independent(q, 1).batch_shape,
    ]


def spectral(torch, ctx):
    nn = torch.nn

    class SpectralConv2d(nn.Module):
        def __init__(s, c, m):
            super().__init__()
            s.m = m
            w = torch.randn(c, c, m, m, 2) * 0.1
            s.w = nn.Parameter(w)

        def forward(s, x):
            H, W = x.shape[-2:]
            xf = torch.fft.rfft2(x, norm="ortho")
            wc = torch.view_as_complex(s.w)
            out = torch.zeros_like(xf)
            out[..., : s.m, : s.m] = torch.einsum("bixy,ioxy->boxy", xf[..., : s.m, : s.m], wc)
            return torch.fft.irfft2(out, s=(H, W), norm="ortho")

    torch.manual_seed(0)
    layer = ctx.init(SpectralConv2d(2, 3))
    x = ctx.t(np.random.default_rng(1).standard_normal((2, 2, 6, 8)).astype(np.float32))
    opt = torch.optim.Adam(layer.parameters(), lr=0.01)
    fwd = ctx.fn(lambda x: (layer(x) - x).pow(2).mean())
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = fwd(x)
        loss.backward()
        opt.step()
        losses.append(loss)
    sig = ctx.t(np.random.default_rng(2).standard_normal((4, 6)))
    spec = torch.fft.fftshift(torch.fft.fft2(sig), dim=(-2, -1))
    back = torch.fft.ifftshift(spec, dim=(-2, -1))
    rn = torch.fft.irfftn(torch.fft.rfftn(sig, dim=(0, 1)), s=sig.shape, dim=(0, 1))
    freqs = torch.fft.rfftfreq(8, d=0.5)
    return [
        losses,
        layer.w.grad,
        spec.abs(),
        torch.fft.ifft2(back).real,
        rn,
        freqs,
        torch.fft.fftfreq(5),
    ]


def linalg_opt(torch, ctx):
    rng = np.random.default_rng(3)
    A0 = rng.standard_normal((4, 4))
    S = ctx.t(A0 @ A0.T + 4 * np.eye(4))
    b = ctx.t(rng.standard_normal((4, 2)))
    L_param = ctx.t(np.tril(rng.standard_normal((4, 4))) + 3 * np.eye(4), requires_grad=True)
    out = []
    for _ in range(2):
        L = torch.tril(L_param)
        x = torch.linalg.solve_triangular(L, b, upper=False)
        y = torch.linalg.solve_triangular(L.mT, x, upper=True)
        loss = (S @ y - b).pow(2).sum()
        (g,) = torch.autograd.grad(loss, L_param)
        with torch.no_grad():
            L_param -= 0.01 * g
        out += [loss, g]
    C, info = torch.linalg.cholesky_ex(S)
    bad, info_bad = torch.linalg.cholesky_ex(-S)
    X = ctx.t(rng.standard_normal((6, 3)))
    yv = ctx.t(rng.standard_normal((6, 1)))
    sol = torch.linalg.lstsq(X, yv)
    w, V = torch.linalg.eigh(S)
    K = ctx.t(rng.standard_normal((3, 3)) * 0.3, requires_grad=True)
    E = torch.linalg.matrix_exp(K)
    E.trace().backward()
    inv = torch.cholesky_inverse(C)
    return [
        out,
        C,
        info,
        info_bad,
        sol.solution,
        w,
        V.abs(),
        E,
        K.grad,
        inv,
        torch.linalg.slogdet(S).logabsdet,
        torch.linalg.matrix_norm(S, "nuc"),
    ]


def complex_train(torch, ctx):
    rng = np.random.default_rng(4)
    W = ctx.t((rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))).astype(np.complex64))
    W.requires_grad_(True)
    x = ctx.t((rng.standard_normal((5, 3)) + 1j * rng.standard_normal((5, 3))).astype(np.complex64))
    target = ctx.t(rng.standard_normal((5, 3)).astype(np.float32))
    opt = torch.optim.Adam([W], lr=0.05)

    def objective(x, target):
        y = x @ W
        amp = y.abs()
        ri = torch.view_as_real(y)
        return (amp - target).pow(2).mean() + 0.1 * ri[..., 1].pow(2).mean() + y.angle().mean()

    objective = ctx.fn(objective)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = objective(x, target)
        loss.backward()
        opt.step()
        losses.append(loss)
    z = torch.complex(target, target * 2)
    return [
        losses,
        W,
        W.grad,
        z.conj().imag.resolve_neg(),
        z.conj().resolve_conj().imag,
        torch.polar(target.abs(), target),
        z.real.dtype,
    ]


def sparse_prog(torch, ctx):
    nn = torch.nn
    idx = ctx.t(np.array([[0, 1, 2, 2], [1, 0, 2, 3]]))
    vals = ctx.t(np.array([1.0, 2.0, 3.0, 4.0], np.float32))
    A = torch.sparse_coo_tensor(idx, vals, (3, 4))
    dense = ctx.t(np.arange(8, dtype=np.float32).reshape(4, 2), requires_grad=True)
    y = torch.sparse.mm(A, dense)
    y.sum().backward()
    coal = (A + A).coalesce()
    torch.manual_seed(0)
    emb = ctx.init(nn.Embedding(6, 3, sparse=True))
    head = ctx.init(nn.Linear(3, 1), "head")
    opt_s = torch.optim.SparseAdam(list(emb.parameters()), lr=0.1)
    opt_d = torch.optim.Adam(head.parameters(), lr=0.1)
    tokens = ctx.t(np.array([[0, 2], [2, 5]]))
    losses = []
    for _ in range(3):
        opt_s.zero_grad()
        opt_d.zero_grad()
        loss = head(emb(tokens).mean(1)).pow(2).sum()
        loss.backward()
        losses.append(loss)
        g = emb.weight.grad
        opt_s.step()
        opt_d.step()
    return [
        y,
        dense.grad,
        coal.indices(),
        coal.values(),
        A.to_dense(),
        losses,
        emb.weight,
        g.to_dense(),
        torch.sparse.sum(A, dim=1).to_dense(),
        A.t().to_dense(),
    ]


def data_processing(torch, ctx):
    rng = np.random.default_rng(5)
    scores = ctx.t(rng.standard_normal(12).astype(np.float32))
    groups = ctx.t(np.array([0, 1, 2, 1, 0, 3, 3, 2, 1, 0, 2, 3]))
    x = torch.where(scores > 0, scores, torch.zeros_like(scores))
    masked = scores.masked_fill(groups == 1, float("-inf"))
    amax = torch.zeros(4).scatter_reduce(0, groups, scores, reduce="amax", include_self=False)
    mean = torch.zeros(4).scatter_reduce(0, groups, scores, reduce="mean", include_self=True)
    prod = torch.ones(4).scatter_reduce(0, groups, scores, reduce="prod")
    sums = torch.zeros(4).index_add_(0, groups, scores, alpha=0.5)
    counts = torch.bincount(groups, minlength=5)
    wcounts = torch.bincount(groups, weights=scores)
    hist = torch.histc(scores, bins=5, min=-2, max=2)
    edges = ctx.t(np.array([-1.0, 0.0, 0.5, 1.0], np.float32))
    ss = torch.searchsorted(edges, scores)
    ssr = torch.searchsorted(edges, scores, right=True, side="right")
    bk = torch.bucketize(scores, edges)
    bkr = torch.bucketize(scores, edges, right=True)
    uniq, inv, cnt = torch.unique(groups, return_inverse=True, return_counts=True)
    uc = torch.unique_consecutive(ctx.t(np.array([1, 1, 2, 2, 2, 1, 3])))
    topv, topi = scores.topk(3)
    s_sorted, order = torch.sort(scores, stable=True, descending=True)
    cs = torch.cumsum(scores, 0)
    cm = torch.cummax(scores, 0)
    w = ctx.t(rng.standard_normal(12).astype(np.float32), requires_grad=True)
    agg = torch.zeros(4).scatter_reduce(0, groups, w * scores, reduce="sum")
    agg2 = torch.zeros(4).index_add(0, groups, w)
    (agg.pow(2).sum() + agg2.pow(3).sum()).backward()
    return [
        x,
        masked,
        amax,
        mean,
        prod,
        sums,
        counts,
        wcounts,
        hist,
        ss,
        ssr,
        bk,
        bkr,
        uniq,
        inv,
        cnt,
        uc,
        topv,
        topi,
        s_sorted,
        order,
        cs,
        cm.values,
        cm.indices,
        w.grad,
        torch.kthvalue(scores, 3).values,
        torch.nanmedian(masked.nan_to_num(0.0)),
    ]


def einsum_attention(torch, ctx):
    nn = torch.nn
    F = nn.functional

    class Attn(nn.Module):
        def __init__(s, d=8, h=2):
            super().__init__()
            s.h = h
            s.qkv = nn.Linear(d, 3 * d)
            s.o = nn.Linear(d, d)
            s.rel = nn.Parameter(torch.randn(h, 5, 5) * 0.1)

        def forward(s, x):
            B, T, D = x.shape
            q, k, v = s.qkv(x).chunk(3, -1)
            q, k, v = (t.reshape(B, T, s.h, D // s.h) for t in (q, k, v))
            att = torch.einsum("bqhd,bkhd->bhqk", q, k) / (D // s.h) ** 0.5
            att = att + s.rel[:, :T, :T]
            causal = torch.ones(T, T, dtype=torch.bool).triu(1)
            att = att.masked_fill(causal, float("-inf")).softmax(-1)
            y = torch.einsum("bhqk,bkhd->bqhd", att, v).reshape(B, T, D)
            # linear attention branch with elu+1 features
            qf, kf = F.elu(q) + 1, F.elu(k) + 1
            kv = torch.einsum("bthd,bthe->bhde", kf, v)
            z = 1 / (torch.einsum("bthd,bhd->bth", qf, kf.sum(1)) + 1e-6)
            lin = torch.einsum("bthd,bhde,bth->bthe", qf, kv, z).reshape(B, T, D)
            # multi-query: shared k/v
            mq = torch.einsum("bqhd,bkd->bhqk", q, k.mean(2)).softmax(-1)
            mqy = torch.einsum("bhqk,bkd->bqhd", mq, v.mean(2)).reshape(B, T, D)
            return s.o(y + lin + mqy)

    torch.manual_seed(0)
    m = ctx.init(Attn())
    x = ctx.t(np.random.default_rng(6).standard_normal((2, 5, 8)).astype(np.float32))
    opt = torch.optim.AdamW(m.parameters(), lr=0.01)
    step = ctx.fn(lambda x: m(x).pow(2).mean())
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = step(x)
        loss.backward()
        opt.step()
        losses.append(loss)
    bil = torch.einsum("bi,ij,bj->b", x[:, 0], m.o.weight, x[:, 1])
    return [
        losses,
        m.rel.grad,
        bil,
        torch.einsum("ii->i", m.o.weight),
        torch.einsum("...ij->...ji", x).shape,
    ]


def sparse_gat(torch, ctx):
    """Graph attention over a sparse adjacency: scores on the edges, torch.sparse.softmax per
    row, aggregation with torch.sparse.mm."""
    nn = torch.nn
    edges = np.array([[0, 0, 1, 2, 2, 3, 3, 4], [1, 2, 0, 3, 4, 0, 4, 2]])
    torch.manual_seed(0)
    proj = ctx.init(nn.Linear(4, 3), "proj")
    att = ctx.init(nn.Linear(6, 1, bias=False), "att")
    feats = ctx.t(np.random.default_rng(8).standard_normal((5, 4)).astype(np.float32))
    src, dst = ctx.t(edges[0]), ctx.t(edges[1])
    opt = torch.optim.Adam(list(proj.parameters()) + list(att.parameters()), lr=0.05)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        h = proj(feats)
        e = nn.functional.leaky_relu(att(torch.cat([h[src], h[dst]], -1)).squeeze(-1), 0.2)
        A = torch.sparse_coo_tensor(torch.stack([src, dst]), e, (5, 5))
        alpha = torch.sparse.softmax(A, dim=1)
        out = torch.sparse.mm(alpha, h)
        loss = out.pow(2).mean() - torch.sparse.log_softmax(A, 1).coalesce().values().mean()
        loss.backward()
        opt.step()
        losses.append(loss)
    return [losses, proj.weight.grad, att.weight.grad, alpha.to_dense()]


def kl_zoo_vi(torch, ctx):
    """Variational fits whose KL terms pair different families (Laplace/Gumbel posteriors
    against a Normal prior, Gamma against Exponential, Beta against Uniform)."""
    D = torch.distributions
    loc = ctx.t(np.array([0.3, -0.2]), requires_grad=True)
    log_s = ctx.t(np.array([-0.5, 0.1]), requires_grad=True)
    log_a = ctx.t(np.array([0.4, 0.9]), requires_grad=True)
    opt = torch.optim.SGD([loc, log_s, log_a], lr=0.1)
    prior = D.Normal(torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64))
    out = []
    for _ in range(3):
        opt.zero_grad()
        s, a = log_s.exp(), log_a.exp()
        kl = (
            D.kl_divergence(D.Laplace(loc, s), prior)
            + D.kl_divergence(D.Gumbel(loc, s), prior)
            + D.kl_divergence(D.Gamma(a, s), D.Exponential(torch.ones(2, dtype=torch.float64)))
            + D.kl_divergence(D.Beta(a, s), D.Uniform(0.0, 1.0))
            + D.kl_divergence(D.Normal(loc, s), D.Laplace(0.0, 1.0))
        ).sum()
        kl.backward()
        opt.step()
        out += [kl, loc.grad.clone(), log_a.grad.clone()]
    return out


PROGRAMS = [
    distributions_prog,
    spectral,
    linalg_opt,
    complex_train,
    sparse_prog,
    data_processing,
    einsum_attention,
    sparse_gat,
    kl_zoo_vi,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "program", [spectral, complex_train, einsum_attention], ids=lambda p: p.__name__
)
def test_captured(program):
    check_program(program, capture=True, rtol=1e-4, atol=1e-5)
