"""Probabilistic programs as users write them: a VAE with a low-rank Gaussian posterior and a
full-covariance prior (kl_divergence across the two families), a continuous-Bernoulli VAE for
data in [0, 1] with its KL to a Beta and to a Uniform reference, a survival model with a Gamma
likelihood and right censoring through Gamma.cdf, quantiles of fitted Gumbel, Kumaraswamy
and InverseGamma distributions through icdf/cdf, and a Beta policy and a Dirichlet latent
trained through rsample (Gamma's implicit reparameterization).
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741


def lowrank_vae(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions

    class VAE(nn.Module):
        def __init__(s, d=6, z=3, rank=2):
            super().__init__()
            s.z, s.rank = z, rank
            s.enc = nn.Sequential(nn.Linear(d, 16), nn.Tanh())
            s.mu = nn.Linear(16, z)
            s.factor = nn.Linear(16, z * rank)
            s.log_diag = nn.Linear(16, z)
            s.dec = nn.Sequential(nn.Linear(z, 16), nn.Tanh(), nn.Linear(16, d))
            s.prior_tril = nn.Parameter(torch.eye(z) + 0.1 * torch.ones(z, z).tril(-1))

        def posterior(s, x):
            h = s.enc(x)
            W = s.factor(h).view(-1, s.z, s.rank) * 0.3
            return D.LowRankMultivariateNormal(s.mu(h), W, s.log_diag(h).exp() + 1e-3)

        def prior(s):
            L = s.prior_tril.tril(-1) + torch.diag(F.softplus(s.prior_tril.diagonal()))
            return D.MultivariateNormal(torch.zeros(s.z), scale_tril=L)

    m = ctx.init(VAE())
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(30)
    x = ctx.t(rng.standard_normal((5, 6)).astype(np.float32))
    eps_w = ctx.t(rng.standard_normal((5, 2)).astype(np.float32))
    eps_d = ctx.t(rng.standard_normal((5, 3)).astype(np.float32))

    def step(x, eps_w, eps_d):
        q = m.posterior(x)
        # the reparameterized draw with fixed noise (rsample's own noise differs per library)
        z = q.loc + (q.cov_factor @ eps_w.unsqueeze(-1)).squeeze(-1) + q.cov_diag.sqrt() * eps_d
        rec = F.mse_loss(m.dec(z), x, reduction="none").sum(-1)
        kl = D.kl_divergence(q, m.prior())
        loss = (rec + kl).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, kl

    step = ctx.fn(step)
    out = [step(x, eps_w, eps_d) for _ in range(3)]
    with torch.no_grad():
        q = m.posterior(x)
        p = m.prior()
        back = D.kl_divergence(p, q)
        both = D.kl_divergence(q, m.posterior(x.flip(0)))
        lp = q.log_prob(q.mean) - p.log_prob(q.mean)
    return [out, back, both, lp, m.prior_tril]


def cb_vae(torch, ctx):
    nn, _F = torch.nn, torch.nn.functional
    D = torch.distributions

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.enc = nn.Linear(8, 4)
            s.dec = nn.Linear(2, 8)

        def forward(s, x, eps):
            mu, logvar = s.enc(x).chunk(2, -1)
            z = mu + (0.5 * logvar).exp() * eps
            px = D.ContinuousBernoulli(logits=s.dec(z))
            kl = D.kl_divergence(D.Normal(mu, (0.5 * logvar).exp()), D.Normal(0.0, 1.0)).sum(-1)
            return px, kl

    m = ctx.init(Net())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(31)
    x = ctx.t(rng.uniform(0.05, 0.95, (6, 8)).astype(np.float32))
    eps = ctx.t(rng.standard_normal((6, 2)).astype(np.float32))
    losses = []
    for _ in range(3):
        px, kl = m(x, eps)
        loss = (-px.log_prob(x).sum(-1) + kl).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss)
    with torch.no_grad():
        px, _ = m(x, eps)
        # away from 0.5, where the closed forms switch: their variance cancels by a factor of
        # about 1 / (1 - 2p)^2 (300 at 0.45, where a one-ulp difference in float32 log, which
        # differs between CPUs' vector logs, moved the KL to Normal by 1e-4 relative)
        probs = px.probs.clamp(0.05, 0.4)
        cb = D.ContinuousBernoulli(probs=probs)
        other = D.ContinuousBernoulli(probs=probs.flip(0))
        out = {
            "cb_cb": D.kl_divergence(cb, other),
            "beta_cb": D.kl_divergence(D.Beta(x + 1, 2 - x), cb),
            "cb_unif": D.kl_divergence(cb, D.Uniform(-0.1 * torch.ones(8), 1.2 * torch.ones(8))),
            "cb_unif_inf": D.kl_divergence(cb, D.Uniform(torch.zeros(8), torch.ones(8))),
            "unif_cb": D.kl_divergence(D.Uniform(0.1 * torch.ones(8), 0.9 * torch.ones(8)), cb),
            "cb_normal": D.kl_divergence(cb, D.Normal(0.5, 0.3)),
            "cb_exp": D.kl_divergence(cb, D.Exponential(torch.full((8,), 2.0))),
            "normal_cb": D.kl_divergence(D.Normal(torch.zeros(8), 1.0), cb),
            "mean": cb.mean,
            "cdf": cb.cdf(x),
        }
    return [losses, out]


def gamma_survival(torch, ctx):
    nn = torch.nn
    D = torch.distributions

    class Surv(nn.Module):
        def __init__(s):
            super().__init__()
            s.body = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
            # (the shape is fixed: neither library differentiates Gamma.cdf in it)
            s.register_buffer("shape", torch.tensor(1.5))

        def forward(s, x):
            rate = nn.functional.softplus(s.body(x).squeeze(-1)) + 0.1
            return D.Gamma(s.shape.expand_as(rate), rate)

    m = ctx.init(Surv())
    opt = torch.optim.Adam(m.parameters(), lr=2e-2)
    rng = np.random.default_rng(32)
    x = ctx.t(rng.standard_normal((8, 3)).astype(np.float32))
    t = ctx.t(rng.uniform(0.2, 3.0, 8).astype(np.float32))
    event = ctx.t(np.array([1, 0, 1, 1, 0, 1, 0, 1], np.float32))

    def step(x, t, event):
        d = m(x)
        # observed events: log density; censored: log survival = log(1 - cdf)
        ll = event * d.log_prob(t) + (1 - event) * torch.log1p(-d.cdf(t)).clamp(min=-30)
        loss = -ll.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    losses = [step(x, t, event) for _ in range(4)]
    with torch.no_grad():
        d = m(x)
        grid = torch.tensor([0.5, 1.0, 2.0]).unsqueeze(-1)
        surv = 1 - d.cdf(grid)
        chi = D.Chi2(torch.tensor([2.0, 4.0])).cdf(torch.tensor([1.0, 3.0]))
    return [losses, surv, chi, m.state_dict()]


def quantile_fits(torch, ctx):
    D = torch.distributions
    rng = np.random.default_rng(33)
    data = ctx.t(rng.gumbel(1.0, 2.0, 64).astype(np.float32))
    loc = torch.zeros((), requires_grad=True)
    log_scale = torch.zeros((), requires_grad=True)
    opt = torch.optim.Adam([loc, log_scale], lr=0.1)
    for _ in range(20):
        nll = -D.Gumbel(loc, log_scale.exp()).log_prob(data).mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
    g = D.Gumbel(loc, log_scale.exp())
    qs = torch.tensor([0.05, 0.5, 0.95])
    q = g.icdf(qs)
    roundtrip = g.cdf(q)
    # quantile loss: push the fitted 95% quantile towards the empirical one
    emp = torch.quantile(data, 0.95)
    (g.icdf(torch.tensor(0.95)) - emp).pow(2).backward()
    u = ctx.t(rng.uniform(0.01, 0.99, 6).astype(np.float32))
    k = D.Kumaraswamy(torch.tensor(2.0), torch.tensor(3.0))
    kq = k.icdf(u)
    ig = D.InverseGamma(torch.tensor([2.0, 3.0]), torch.tensor([1.0, 0.5]))
    return [
        nll,
        q,
        roundtrip,
        loc.grad,
        log_scale.grad,
        kq,
        k.cdf(kq),
        ig.cdf(torch.tensor([0.5, 0.3])),
    ]


def reparam_draws(torch, ctx):
    # a Beta policy trained through rsample (SAC-style) and a Dirichlet latent: the draws
    # differ between libraries, so the program returns what a seed does not change
    nn = torch.nn
    D = torch.distributions

    class Actor(nn.Module):
        def __init__(s):
            super().__init__()
            s.net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 4))

        def forward(s, obs):
            a, b = nn.functional.softplus(s.net(obs)).add(1.0).chunk(2, -1)
            return D.Beta(a, b)

    actor = ctx.init(Actor())
    critic = ctx.init(nn.Linear(5, 1), "critic")
    rng = np.random.default_rng(34)
    obs = ctx.t(rng.standard_normal((6, 3)).astype(np.float32))
    dist = actor(obs)
    act = dist.rsample()
    q = critic(torch.cat([obs, act], -1)).squeeze(-1)
    loss = (0.1 * dist.log_prob(act).sum(-1) - q).mean()
    loss.backward()
    grads = [p.grad for p in actor.parameters()]
    conc = torch.tensor([[0.5, 1.0, 2.0], [3.0, 3.0, 3.0]], requires_grad=True)
    z = D.Dirichlet(conc).rsample((4,))
    (z * torch.tensor([1.0, 0.0, -1.0])).sum().backward()
    t = D.StudentT(torch.tensor(4.0), torch.zeros(2), torch.ones(2)).rsample((3,))
    return [
        tuple(act.shape),
        bool(((act > 0) & (act < 1)).all()),
        act.requires_grad,
        [tuple(g.shape) for g in grads],
        all(bool(g.isfinite().all()) and bool(g.abs().sum() > 0) for g in grads),
        tuple(z.shape),
        bool(torch.allclose(z.sum(-1), torch.ones(4, 2), atol=1e-5)),
        bool(conc.grad.isfinite().all()),
        tuple(t.shape),
        dist.has_rsample,
    ]


PROGRAMS = [lowrank_vae, cb_vae, gamma_survival, quantile_fits, reparam_draws]
CAPTURED = [lowrank_vae, gamma_survival]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
