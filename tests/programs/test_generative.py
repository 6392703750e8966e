"""Generative and structured models as whole PyTorch programs: a VAE, a DCGAN step, a RealNVP flow,
capsule routing.
"""

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def vae(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(20, 16), nn.ReLU())
            self.mu = nn.Linear(16, 4)
            self.logvar = nn.Linear(16, 4)
            self.dec = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 20))

        def forward(self, x, eps):
            h = self.enc(x)
            mu, logvar = self.mu(h), self.logvar(h)
            std = torch.exp(0.5 * logvar)
            z = mu + eps * std
            return self.dec(z), mu, logvar

    m = ctx.init(VAE())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    x = ctx.t((rng.random((8, 20)) > 0.5).astype(np.float32))
    losses = []

    def step(x, eps):
        opt.zero_grad()
        logits, mu, logvar = m(x, eps)
        bce = F.binary_cross_entropy_with_logits(logits, x, reduction="sum")
        kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        loss = (bce + kld) / x.size(0)
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    for _i in range(4):
        eps = ctx.t(rng.standard_normal((8, 4)).astype(np.float32))
        losses.append(step(x, eps).item())
    return {"losses": losses, "w": m.dec[2].weight}


def gan(torch, ctx):
    nn, _F = torch.nn, torch.nn.functional
    G = nn.Sequential(
        nn.ConvTranspose2d(8, 16, 4, 1, 0, bias=False),
        nn.BatchNorm2d(16),
        nn.ReLU(True),
        nn.ConvTranspose2d(16, 3, 4, 2, 1, bias=False),
        nn.Tanh(),
    )
    D = nn.Sequential(
        nn.Conv2d(3, 16, 4, 2, 1, bias=False),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(16, 1, 4, 1, 0, bias=False),
        nn.Flatten(),
    )

    def init_fn(m):
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.normal_(m.weight, 0.0, 0.02)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.normal_(m.weight, 1.0, 0.02)
            nn.init.constant_(m.bias, 0)

    G.apply(init_fn)
    D.apply(init_fn)
    G = ctx.init(G, "G")
    D = ctx.init(D, "D")
    optD = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optG = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    crit = nn.BCEWithLogitsLoss()
    rng = np.random.default_rng(1)
    out = []

    def step(real, noise):
        D.zero_grad()
        b = real.size(0)
        label = torch.full((b, 1), 1.0)
        errD_real = crit(D(real), label)
        errD_real.backward()
        fake = G(noise)
        label.fill_(0.0)
        errD_fake = crit(D(fake.detach()), label)
        errD_fake.backward()
        optD.step()
        G.zero_grad()
        label.fill_(1.0)
        errG = crit(D(fake), label)
        errG.backward()
        optG.step()
        return errD_real + errD_fake, errG

    step = ctx.fn(step)
    for _i in range(3):
        real = ctx.t(rng.uniform(-1, 1, (4, 3, 8, 8)).astype(np.float32))
        noise = ctx.t(rng.standard_normal((4, 8, 1, 1)).astype(np.float32))
        d, g = step(real, noise)
        out.append([d.item(), g.item()])
    return {"losses": out, "G": G.state_dict(), "D": dict(D.state_dict())}


def realnvp(torch, ctx):
    nn, _F = torch.nn, torch.nn.functional

    class Coupling(nn.Module):
        def __init__(s, mask):
            super().__init__()
            s.register_buffer("mask", mask)
            s.s = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 4), nn.Tanh())
            s.t = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 4))

        def forward(s, x):
            xm = x * s.mask
            sc = s.s(xm) * (1 - s.mask)
            tr = s.t(xm) * (1 - s.mask)
            y = xm + (1 - s.mask) * (x * torch.exp(sc) + tr)
            return y, sc.sum(dim=1)

    class Flow(nn.Module):
        def __init__(s):
            super().__init__()
            masks = [torch.tensor([1.0, 0, 1, 0]), torch.tensor([0.0, 1, 0, 1])] * 2
            s.layers = nn.ModuleList([Coupling(m) for m in masks])
            s.W = nn.Parameter(torch.eye(4) + 0.1 * torch.randn(4, 4))

        def forward(s, x):
            ld = torch.zeros(x.shape[0])
            for layer in s.layers:
                x, d = layer(x)
                ld = ld + d
            x = x @ s.W
            sign, lad = torch.linalg.slogdet(s.W)
            ld = ld + lad
            return x, ld

    m = ctx.init(Flow())
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((16, 4)).astype(np.float32))
    prior = torch.distributions.MultivariateNormal(torch.zeros(4), torch.eye(4))

    def step(x):
        opt.zero_grad()
        z, ld = m(x)
        loss = -(prior.log_prob(z) + ld).mean()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    res = [step(x).item() for _ in range(3)]
    return {"l": res, "W": m.W, "logdet": torch.logdet(m.W.detach())}


def capsule(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def squash(s, dim=-1):
        n2 = (s**2).sum(dim=dim, keepdim=True)
        return n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-8)

    class Caps(nn.Module):
        def __init__(s):
            super().__init__()
            s.conv = nn.Conv2d(1, 8, 3)
            s.W = nn.Parameter(0.1 * torch.randn(1, 32, 4, 6, 4))

        def forward(s, x, iters=3):
            u = s.conv(x)  # B,8,4,4
            B = u.size(0)
            u = u.view(B, 2, 4, 16).permute(0, 1, 3, 2).reshape(B, 32, 4)
            u = squash(u)
            u_hat = (s.W @ u[:, :, None, :, None]).squeeze(-1)  # B,32,4,6
            b = torch.zeros(B, 32, 4, device=x.device)
            for i in range(iters):
                c = F.softmax(b, dim=2)
                sj = (c.unsqueeze(-1) * u_hat).sum(dim=1)
                v = squash(sj)
                if i < iters - 1:
                    b = b + (u_hat * v.unsqueeze(1)).sum(-1)
            return v

    m = ctx.init(Caps())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((3, 1, 6, 6)).astype(np.float32))
    y = ctx.t(np.array([0, 3, 1]))

    def margin_loss(v, y):
        L = v.norm(dim=-1)
        T = F.one_hot(y, 4).float()
        return (T * F.relu(0.9 - L) ** 2 + 0.5 * (1 - T) * F.relu(L - 0.1) ** 2).sum(1).mean()

    def step(x, y):
        opt.zero_grad()
        v = m(x)
        loss = margin_loss(v, y)
        loss.backward()
        opt.step()
        return loss, v

    step = ctx.fn(step)
    res = [step(x, y) for _ in range(3)]
    return {"r": res}


PROGRAMS = [vae, gan, realnvp, capsule]
CAPTURED = [vae, gan, realnvp, capsule]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
