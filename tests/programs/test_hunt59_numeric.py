"""Programs of hunt59 on numerics, run on PyTorch and on ember: a Fourier neural operator's
spectral convolution with complex weights trained by Adam (complex parameters), complex
autograd (Wirtinger gradients of real losses of complex values, view_as_real/view_as_complex,
polar, angle), distributions beyond Normal (log_prob, entropy, cdf/icdf, KL pairs, moments,
constraints, transforms), sparse COO and CSR tensors in a graph convolution with gradients,
and in-place updates with index_put_ accumulate, scatter_reduce, index_add_ alpha,
masked_scatter_, addcmul_/addcdiv_, lerp_ and clamp_ with tensor bounds.
"""


import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def fno_spectral(torch, ctx):
    """A 1-D Fourier layer: rfft along the grid, the lowest modes multiplied by complex
    weights (einsum over channels, a cfloat Parameter), irfft back with n, a pointwise
    Conv1d skip and GELU; trained three steps with Adam on a smoothing target."""
    nn = torch.nn
    F = nn.functional

    class SpectralConv(nn.Module):
        def __init__(self, c, modes):
            super().__init__()
            self.modes = modes
            scale = 1 / (c * c)
            self.w = nn.Parameter(scale * torch.randn(c, c, modes, dtype=torch.cfloat))

        def forward(self, x):
            n = x.shape[-1]
            xf = torch.fft.rfft(x, norm="ortho")
            out = torch.zeros(x.shape[0], x.shape[1], n // 2 + 1, dtype=torch.cfloat)
            out[:, :, : self.modes] = torch.einsum("bix,iox->box", xf[:, :, : self.modes], self.w)
            return torch.fft.irfft(out, n=n, norm="ortho")

    class FNO(nn.Module):
        def __init__(self):
            super().__init__()
            self.lift = nn.Conv1d(1, 4, 1)
            self.spec = SpectralConv(4, 3)
            self.skip = nn.Conv1d(4, 4, 1)
            self.proj = nn.Conv1d(4, 1, 1)

        def forward(self, x):
            h = self.lift(x)
            h = F.gelu(self.spec(h) + self.skip(h))
            return self.proj(h)

    model = ctx.init(FNO(), "fno")
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 1, 16)).astype(np.float32)
    y = np.stack([np.convolve(r[0], np.ones(3) / 3, mode="same") for r in x])[:, None].astype(np.float32)
    x, y = ctx.t(x), ctx.t(y)
    def step(x, y):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = ctx.fn(step)
    losses = [step(x, y) for _ in range(3)]
    return [losses, model.spec.w, model.spec.w.grad, opt.state_dict()["state"][2]["exp_avg_sq"]]


def complex_autograd(torch, ctx):
    """Gradients of real losses of complex values: |z|^2 of a complex product, abs and angle,
    polar from magnitude/phase leaves, view_as_real/view_as_complex round trips, complex
    matmul, conj, and a complex leaf's .grad (PyTorch's conjugate Wirtinger convention)."""
    rng = np.random.default_rng(1)
    a = ctx.t((rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))).astype(np.complex64)).requires_grad_()
    b = ctx.t((rng.standard_normal(3) + 1j * rng.standard_normal(3)).astype(np.complex64)).requires_grad_()
    mag = ctx.t(rng.uniform(0.5, 2, 3).astype(np.float32)).requires_grad_()
    ph = ctx.t(rng.uniform(-3, 3, 3).astype(np.float32)).requires_grad_()
    z = a @ b
    p = torch.polar(mag, ph)
    w = z * p.conj() + torch.view_as_complex(torch.view_as_real(b) * 2)
    loss = (w.abs() ** 2).sum() + w.angle().sum() + (a.real * a.imag).sum() + torch.view_as_real(z).pow(2).mean()
    loss.backward()
    e = torch.exp(1j * ph.detach())
    return [z, p, w, loss.detach(), a.grad, b.grad, mag.grad, ph.grad, e, torch.fft.fft(e).abs(), torch.linalg.eigvals(a.detach() @ a.detach().mH).real.sort().values]


def distribution_zoo(torch, ctx):
    """log_prob, entropy, mean, variance, cdf and icdf where defined, for Beta, Gamma,
    Laplace, StudentT, LogNormal, Binomial, Poisson, NegativeBinomial, Geometric, Categorical,
    OneHotCategorical, Dirichlet, Multinomial, Weibull, Cauchy, HalfNormal, Chi2,
    ContinuousBernoulli, Kumaraswamy, LowRankMultivariateNormal; KL pairs; gradients of the
    parameters through log_prob."""
    D = torch.distributions
    rng = np.random.default_rng(2)
    pos = lambda *s: ctx.t(rng.uniform(0.5, 2.0, s).astype(np.float32)).requires_grad_()
    x01 = ctx.t(rng.uniform(0.1, 0.9, 3).astype(np.float32))
    xpos = ctx.t(rng.uniform(0.2, 3.0, 3).astype(np.float32))
    xreal = ctx.t(rng.standard_normal(3).astype(np.float32))
    counts = ctx.t(np.array([0.0, 2.0, 5.0], dtype=np.float32))
    a, b, c = pos(3), pos(3), pos(3)
    out = {}
    dists = {
        "beta": (D.Beta(a, b), x01),
        "gamma": (D.Gamma(a, b), xpos),
        "laplace": (D.Laplace(xreal.detach() * 0, b), xreal),
        "studentt": (D.StudentT(c + 2, a, b), xreal),
        "lognormal": (D.LogNormal(a - 1, b), xpos),
        "weibull": (D.Weibull(b, c), xpos),
        "cauchy": (D.Cauchy(a, b), xreal),
        "halfnormal": (D.HalfNormal(b), xpos),
        "chi2": (D.Chi2(c + 1), xpos),
        "cbern": (D.ContinuousBernoulli(probs=x01.detach() * 0.5 + a * 0.1), x01),
        "kumaraswamy": (D.Kumaraswamy(a, b), x01),
        "binomial": (D.Binomial(10, probs=torch.sigmoid(a)), counts),
        "poisson": (D.Poisson(c * 2), counts),
        "negbin": (D.NegativeBinomial(total_count=c * 3, probs=torch.sigmoid(b - 1)), counts),
        "geometric": (D.Geometric(probs=torch.sigmoid(a - 1)), counts),
    }
    total = 0
    for name, (d, v) in dists.items():
        lp = d.log_prob(v)
        total = total + lp.sum()
        row = [lp]
        for attr in ("mean", "variance", "entropy", "cdf", "icdf"):
            try:
                if attr == "entropy":
                    val = d.entropy()
                elif attr == "cdf":
                    val = d.cdf(v)
                elif attr == "icdf":
                    val = d.icdf(x01)
                else:
                    val = getattr(d, attr)
                row.append(val)
            except NotImplementedError:
                row.append("n/a")
        out[name] = row
    total.backward()
    out["grads"] = [a.grad, b.grad, c.grad]
    logits = ctx.t(rng.standard_normal((2, 4)).astype(np.float32))
    cat = D.Categorical(logits=logits)
    ohc = D.OneHotCategorical(logits=logits)
    dirich = D.Dirichlet(ctx.t(np.array([0.5, 1.0, 2.0], dtype=np.float32)))
    mult = D.Multinomial(6, logits=logits[0])
    lr = D.LowRankMultivariateNormal(torch.zeros(3), ctx.t(rng.standard_normal((3, 2)).astype(np.float32)), ctx.t(np.array([1.0, 0.5, 2.0], dtype=np.float32)))
    out["discrete"] = [
        cat.log_prob(ctx.t(np.array([1, 3]))), cat.entropy(), cat.probs, ohc.log_prob(torch.eye(4)[[2, 0]]),
        dirich.log_prob(ctx.t(np.array([0.2, 0.3, 0.5], dtype=np.float32))), dirich.entropy(), dirich.mean,
        mult.log_prob(ctx.t(np.array([1.0, 2.0, 0.0, 3.0], dtype=np.float32))), lr.log_prob(xreal), lr.entropy(), lr.covariance_matrix,
        cat.enumerate_support().shape[0], tuple(cat.batch_shape), tuple(dirich.event_shape),
    ]
    kl = D.kl_divergence
    out["kl"] = [
        kl(D.Beta(a.detach(), b.detach()), D.Beta(b.detach(), a.detach())),
        kl(D.Gamma(a.detach(), b.detach()), D.Gamma(c.detach(), a.detach())),
        kl(D.Categorical(logits=logits), D.Categorical(logits=logits.flip(0))),
        kl(D.Poisson(a.detach()), D.Poisson(b.detach())),
        kl(D.Laplace(xreal, a.detach()), D.Laplace(xreal * 0, b.detach())),
        kl(D.Dirichlet(a.detach()), D.Dirichlet(b.detach())),
        kl(D.Exponential(a.detach()), D.Gamma(b.detach(), c.detach())),
    ]
    return out


def sparse_gcn(torch, ctx):
    """A two-layer graph convolution on a sparse normalized adjacency: COO built from edge
    indices (duplicates summed by coalesce), D^-1/2 A D^-1/2 values computed from a
    scatter of degrees, torch.sparse.mm with the dense features (gradient reaching the
    weights), the CSR form's product, torch.sparse.sum, and a sparse tensor's to_dense,
    indices, values and nnz; trained two steps."""
    nn = torch.nn
    F = nn.functional
    src = np.array([0, 1, 1, 2, 3, 4, 4, 0, 2, 2])
    dst = np.array([1, 0, 2, 1, 4, 3, 0, 4, 1, 1])
    n = 5
    idx = ctx.t(np.stack([np.concatenate([src, np.arange(n)]), np.concatenate([dst, np.arange(n)])]))
    vals = torch.ones(idx.shape[1])
    A = torch.sparse_coo_tensor(idx, vals, (n, n)).coalesce()
    deg = torch.zeros(n).index_add_(0, A.indices()[0], A.values())
    dinv = deg.pow(-0.5)
    norm_vals = dinv[A.indices()[0]] * A.values() * dinv[A.indices()[1]]
    An = torch.sparse_coo_tensor(A.indices(), norm_vals, (n, n))
    W1 = ctx.init(nn.Linear(3, 4, bias=False), "w1")
    W2 = ctx.init(nn.Linear(4, 2, bias=False), "w2")
    opt = torch.optim.SGD(list(W1.parameters()) + list(W2.parameters()), lr=0.1)
    rng = np.random.default_rng(3)
    X = ctx.t(rng.standard_normal((n, 3)).astype(np.float32))
    y = ctx.t(np.array([0, 1, 0, 1, 1]))
    def step(X, y):
        h = F.relu(torch.sparse.mm(An, W1(X)))
        out = torch.sparse.mm(An, W2(h))
        loss = F.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = ctx.fn(step)
    losses = [step(X, y) for _ in range(2)]
    csr = An.to_sparse_csr()
    dense = An.to_dense()
    return [A.indices(), A.values(), A._nnz(), dense, losses, W1.weight.grad, csr.crow_indices(), csr.col_indices(), csr @ X, torch.sparse.sum(An, dim=1).to_dense(), (An @ X)]


def inplace_updates(torch, ctx):
    """Bookkeeping by in-place ops: a histogram by index_put_ with accumulate=True (repeated
    indices), per-segment max and mean by scatter_reduce (include_self False, then True),
    index_add_ with alpha, masked_scatter_, addcmul_/addcdiv_ as an Adam step by hand,
    lerp_ with a tensor weight, clamp_ with tensor bounds, x.add_(y, alpha=), copy_ with
    broadcasting, and in-place ops on views (diagonal, a column slice) writing through."""
    rng = np.random.default_rng(4)
    ids = ctx.t(rng.integers(0, 5, 20))
    w = ctx.t(rng.uniform(size=20).astype(np.float32))
    hist = torch.zeros(5).index_put_((ids,), w, accumulate=True)
    seg = torch.full((5,), -1.0).scatter_reduce(0, ids, w, reduce="amax", include_self=False)
    segmean = torch.ones(5).scatter_reduce(0, ids, w, reduce="mean", include_self=True)
    segprod = torch.ones(5).scatter_reduce(0, ids, w + 0.5, reduce="prod")
    acc = torch.zeros(5, 2).index_add_(0, ids[:6], torch.ones(6, 2), alpha=-0.5)
    m = ctx.t(rng.uniform(size=(3, 4)) > 0.5)
    ms = torch.zeros(3, 4).masked_scatter_(m, torch.arange(12.0))
    p = ctx.t(rng.standard_normal(4).astype(np.float32))
    g = ctx.t(rng.standard_normal(4).astype(np.float32))
    m1, v1 = torch.zeros(4), torch.zeros(4)
    for t in range(1, 3):
        m1.mul_(0.9).add_(g, alpha=0.1)
        v1.mul_(0.999).addcmul_(g, g, value=0.001)
        denom = (v1 / (1 - 0.999**t)).sqrt_().add_(1e-8)
        p.addcdiv_(m1, denom, value=-0.01 / (1 - 0.9**t))
    l = torch.zeros(4).lerp_(g, torch.linspace(0, 1, 4))
    c = g.clone().clamp_(min=torch.full((4,), -0.2), max=ctx.t(np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32)))
    M = torch.zeros(3, 3)
    M.diagonal().add_(torch.arange(3.0))
    M[:, 1].mul_(2).add_(1)
    M.fill_diagonal_(7.0, wrap=False)
    b = torch.empty(2, 4)
    b.copy_(g)
    x = torch.arange(6.0).view(2, 3)
    x.t_()
    return [hist, seg, segmean, segprod, acc, ms, p, m1, v1, l, c, M, b, x, x.is_contiguous()]


PROGRAMS = [fno_spectral, complex_autograd, distribution_zoo, sparse_gcn, inplace_updates]


CAPTURED = [fno_spectral, sparse_gcn]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
