"""Flows and operator learning as whole PyTorch programs: a Fourier neural operator with complex
weights, a Glow step (ActNorm with data-dependent initialization, an LU-parametrized invertible
1x1 convolution, affine coupling, slogdet), and distributions with reparametrized sampling.
"""

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def fno(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class SpectralConv1d(nn.Module):
        def __init__(s, cin, cout, modes):
            super().__init__()
            s.modes = modes
            scale = 1 / (cin * cout)
            s.weights = nn.Parameter(scale * torch.rand(cin, cout, modes, dtype=torch.cfloat))

        def forward(s, x):
            B, C, N = x.shape
            x_ft = torch.fft.rfft(x)
            out_ft = torch.zeros(B, s.weights.shape[1], N // 2 + 1, dtype=torch.cfloat)
            out_ft[:, :, : s.modes] = torch.einsum("bix,iox->box", x_ft[:, :, : s.modes], s.weights)
            return torch.fft.irfft(out_ft, n=N)

    class FNO(nn.Module):
        def __init__(s, width=6, modes=4):
            super().__init__()
            s.lift = nn.Linear(2, width)
            s.convs = nn.ModuleList([SpectralConv1d(width, width, modes) for _ in range(2)])
            s.ws = nn.ModuleList([nn.Conv1d(width, width, 1) for _ in range(2)])
            s.proj = nn.Sequential(nn.Linear(width, 16), nn.GELU(), nn.Linear(16, 1))

        def forward(s, a):
            grid = torch.linspace(0, 1, a.shape[1]).reshape(1, -1, 1).repeat(a.shape[0], 1, 1)
            x = s.lift(torch.cat([a.unsqueeze(-1), grid], dim=-1)).permute(0, 2, 1)
            for i, (c, w) in enumerate(zip(s.convs, s.ws)):
                x = c(x) + w(x)
                if i < len(s.convs) - 1:
                    x = F.gelu(x)
            return s.proj(x.permute(0, 2, 1)).squeeze(-1)

    m = ctx.init(FNO())
    opt = torch.optim.Adam(m.parameters(), lr=5e-3)
    rng = np.random.default_rng(18)
    a = ctx.t(rng.standard_normal((4, 16)).astype(np.float32))
    # the target: the antiderivative-like smoothing of a, computed spectrally
    u = torch.fft.irfft(torch.fft.rfft(a) / (1 + torch.arange(9) ** 2), n=16)

    def step(a, u):
        pred = m(a)
        loss = torch.linalg.vector_norm(pred - u, dim=1).div(torch.linalg.norm(u, dim=1)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    res = [step(a, u).item() for _ in range(3)]
    w = m.convs[0].weights
    return {
        "l": res,
        "u": u,
        "w": torch.view_as_real(w.detach()),
        "dtype": w.dtype,
        "g": torch.view_as_real(w.grad),
        "state": opt.state_dict()["state"][1]["exp_avg"].abs(),
    }


def glow(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class ActNorm(nn.Module):
        def __init__(s, c):
            super().__init__()
            s.loc = nn.Parameter(torch.zeros(1, c, 1, 1))
            s.logs = nn.Parameter(torch.zeros(1, c, 1, 1))
            s.register_buffer("initialized", torch.tensor(0, dtype=torch.uint8))

        def forward(s, x):
            if s.initialized.item() == 0:
                with torch.no_grad():
                    mean = x.mean(dim=(0, 2, 3), keepdim=True)
                    std = x.std(dim=(0, 2, 3), keepdim=True)
                    s.loc.data.copy_(-mean)
                    s.logs.data.copy_(torch.log(1 / (std + 1e-6)))
                    s.initialized.fill_(1)
            H, W = x.shape[2:]
            return (x + s.loc) * torch.exp(s.logs), H * W * s.logs.sum()

    class InvConv(nn.Module):
        def __init__(s, c):
            super().__init__()
            q = torch.linalg.qr(torch.randn(c, c))[0]
            P, L, U = torch.linalg.lu(q)
            sdiag = torch.diagonal(U)
            s.register_buffer("P", P)
            s.register_buffer("sign_s", torch.sign(sdiag))
            s.register_buffer("lmask", torch.tril(torch.ones(c, c), -1))
            s.register_buffer("eye", torch.eye(c))
            s.L = nn.Parameter(L)
            s.log_s = nn.Parameter(torch.log(torch.abs(sdiag)))
            s.U = nn.Parameter(torch.triu(U, 1))

        def weight(s):
            L = s.L * s.lmask + s.eye
            U = s.U * s.lmask.T + torch.diag(s.sign_s * torch.exp(s.log_s))
            return s.P @ L @ U

        def forward(s, x):
            H, W = x.shape[2:]
            w = s.weight()
            return F.conv2d(x, w.unsqueeze(-1).unsqueeze(-1)), H * W * s.log_s.sum()

    class Coupling(nn.Module):
        def __init__(s, c):
            super().__init__()
            s.net = nn.Sequential(
                nn.Conv2d(c // 2, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, c, 3, padding=1)
            )
            nn.init.zeros_(s.net[-1].weight)
            nn.init.zeros_(s.net[-1].bias)

        def forward(s, x):
            xa, xb = x.chunk(2, 1)
            h = s.net(xa)
            shift, scale = h[:, 0::2], h[:, 1::2]
            scale = torch.sigmoid(scale + 2.0)
            yb = (xb + shift) * scale
            return torch.cat([xa, yb], 1), torch.log(scale).flatten(1).sum(1)

    class Glow(nn.Module):
        def __init__(s, c=4):
            super().__init__()
            s.an, s.inv, s.cp = ActNorm(c), InvConv(c), Coupling(c)

        def forward(s, x):
            x, l1 = s.an(x)
            x, l2 = s.inv(x)
            x, l3 = s.cp(x)
            return x, l1 + l2 + l3

    def squeeze2d(x):
        B, C, H, W = x.shape
        x = x.view(B, C, H // 2, 2, W // 2, 2).permute(0, 1, 3, 5, 2, 4)
        return x.reshape(B, C * 4, H // 2, W // 2)

    m = ctx.init(Glow())
    # (SGD: after ActNorm's data-dependent initialization, loc's gradient is rounding noise,
    # which Adam would scale up to full steps)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.5)
    rng = np.random.default_rng(19)
    x = ctx.t(rng.standard_normal((6, 1, 4, 4)).astype(np.float32) * 0.5 + 0.2)
    prior = torch.distributions.Normal(torch.tensor(0.0), torch.tensor(1.0))
    z0, ld0 = m(squeeze2d(x))  # the first call initializes ActNorm from the data

    def step(x):
        z, logdet = m(squeeze2d(x))
        nll = -(prior.log_prob(z).flatten(1).sum(1) + logdet).mean() / z[0].numel()
        opt.zero_grad()
        nll.backward()
        opt.step()
        return nll

    step = ctx.fn(step)
    res = [step(x).item() for _ in range(3)]
    w = m.inv.weight()
    sign, logabs = torch.linalg.slogdet(w)
    return {
        "l": res,
        "z0": z0,
        "ld0": ld0,
        "loc": m.an.loc,
        "init": m.an.initialized,
        "slogdet": [sign, logabs, m.inv.log_s.sum()],
        "inv": torch.linalg.inv(w) @ w,
    }


def distributions_vi(torch, ctx):
    nn = torch.nn
    D = torch.distributions

    class Posterior(nn.Module):
        def __init__(s, d=3):
            super().__init__()
            s.mu = nn.Parameter(torch.zeros(d))
            s.raw_scale = nn.Parameter(torch.full((d,), -1.0))
            s.tril = nn.Parameter(torch.zeros(d, d))
            s.logits = nn.Parameter(torch.zeros(2))
            s.locs = nn.Parameter(torch.tensor([[-1.0], [1.0]]))

        def q(s):
            scale = torch.nn.functional.softplus(s.raw_scale)
            L = torch.tril(s.tril, -1) + torch.diag(scale)
            return D.MultivariateNormal(s.mu, scale_tril=L)

        def mix(s):
            comp = D.Independent(D.Normal(s.locs, torch.ones(2, 1) * 0.5), 1)
            return D.MixtureSameFamily(D.Categorical(logits=s.logits), comp)

    m = ctx.init(Posterior())
    opt = torch.optim.Adam(m.parameters(), lr=5e-2)
    target = D.MultivariateNormal(
        torch.tensor([1.0, -1.0, 0.5]),
        covariance_matrix=torch.tensor([[1.0, 0.3, 0.0], [0.3, 0.5, 0.1], [0.0, 0.1, 0.8]]),
    )
    rng = np.random.default_rng(20)
    eps_all = ctx.t(rng.standard_normal((3, 16, 3)).astype(np.float32))
    data = ctx.t(np.concatenate([rng.normal(-1.2, 0.5, 10), rng.normal(0.8, 0.5, 6)])[:, None])

    def step(eps, data):
        q = m.q()
        z = q.loc + eps @ q.scale_tril.T  # reparametrized draws from fixed noise
        elbo = (target.log_prob(z) - q.log_prob(z)).mean()
        kl = D.kl_divergence(q, target)
        nll = -m.mix().log_prob(data).mean()
        loss = -elbo + 0.1 * kl + nll
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, kl

    step = ctx.fn(step)
    res = []
    for i in range(3):
        loss, kl = step(eps_all[i], data)
        res += [loss.item(), kl.item()]
    q = m.q()
    lowrank = D.LowRankMultivariateNormal(torch.zeros(3), torch.ones(3, 1) * 0.5, torch.ones(3))
    beta = D.Beta(torch.tensor([2.0]), torch.tensor([3.0]))
    tr = D.TransformedDistribution(
        D.Normal(torch.zeros(2), torch.ones(2)), [D.transforms.ExpTransform()]
    )
    pts = torch.tensor([[0.2, 0.4], [1.5, 0.7]])
    return {
        "l": res,
        "cov": q.covariance_matrix,
        "ent": q.entropy(),
        "mix_mean": m.mix().mean,
        "lowrank": [lowrank.log_prob(torch.ones(3)), lowrank.entropy(), lowrank.covariance_matrix],
        "beta": [beta.log_prob(torch.tensor([0.3])), beta.mean, beta.variance, beta.entropy()],
        "tr": tr.log_prob(pts),
        "cdf": D.Normal(0.0, 2.0).cdf(torch.tensor([-1.0, 0.5])),
        "icdf": D.Normal(0.0, 2.0).icdf(torch.tensor([0.1, 0.7])),
    }


PROGRAMS = [fno, glow, distributions_vi]
CAPTURED = [fno, glow, distributions_vi]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
