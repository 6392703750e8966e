"""Energy-based and score-based models as whole PyTorch programs: an EBM trained by contrastive
divergence with Langevin sampling (gradients with respect to inputs inside the step), and a
denoising / exact score-matching step that differentiates a gradient (create_graph).
"""

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def ebm_langevin(torch, ctx):
    nn = torch.nn

    class Energy(nn.Module):
        def __init__(s):
            super().__init__()
            s.net = nn.Sequential(
                nn.Linear(2, 16), nn.SiLU(), nn.Linear(16, 16), nn.SiLU(), nn.Linear(16, 1)
            )

        def forward(s, x):
            return s.net(x).squeeze(-1)

    E = ctx.init(Energy())
    opt = torch.optim.Adam(E.parameters(), lr=1e-3, betas=(0.0, 0.999))
    rng = np.random.default_rng(30)
    data = ctx.t(rng.standard_normal((8, 2)).astype(np.float32) * 0.3 + 1.0)
    noises = [ctx.t(rng.standard_normal((4, 8, 2)).astype(np.float32)) for _ in range(3)]
    x0 = ctx.t(rng.uniform(-1, 1, (8, 2)).astype(np.float32))

    def langevin(x, noise, steps=4, step_size=0.05):
        x = x.clone().detach().requires_grad_(True)
        for k in range(steps):
            e = E(x).sum()
            (g,) = torch.autograd.grad(e, x)
            x = (x - step_size * g + (2 * step_size) ** 0.5 * 0.1 * noise[k]).detach()
            x.requires_grad_(True)
        return x.detach()

    def step(data, x0, noise):
        neg = langevin(x0, noise)
        e_pos, e_neg = E(data), E(neg)
        loss = e_pos.mean() - e_neg.mean() + 0.1 * (e_pos**2 + e_neg**2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, neg

    step = ctx.fn(step)
    res = []
    for noise in noises:
        loss, neg = step(data, x0, noise)
        res += [loss.item(), neg]
    return {"res": res, "w": E.net[0].weight}


def score_matching(torch, ctx):
    nn = torch.nn

    class Score(nn.Module):
        def __init__(s):
            super().__init__()
            s.net = nn.Sequential(nn.Linear(2, 16), nn.Softplus(), nn.Linear(16, 2))

        def forward(s, x):
            return s.net(x)

    s_net = ctx.init(Score())
    opt = torch.optim.SGD(s_net.parameters(), lr=0.05, momentum=0.5)
    rng = np.random.default_rng(31)
    x = ctx.t(rng.standard_normal((6, 2)).astype(np.float32))
    eps = ctx.t(rng.standard_normal((6, 2)).astype(np.float32))

    def exact_sm(x):
        x = x.requires_grad_(True)
        s = s_net(x)
        trace = 0.0
        for i in range(x.shape[1]):
            (gi,) = torch.autograd.grad(s[:, i].sum(), x, create_graph=True)
            trace = trace + gi[:, i]
        return (0.5 * (s**2).sum(1) + trace).mean()

    def step(x, eps, sigma=0.1):
        dsm = ((s_net(x + sigma * eps) + eps / sigma) ** 2).sum(1).mean() * sigma**2
        esm = exact_sm(x.clone())
        loss = dsm + esm
        opt.zero_grad()
        loss.backward()
        opt.step()
        return dsm, esm

    step = ctx.fn(step)
    res = [[v.item() for v in step(x, eps)] for _ in range(3)]
    return {"res": res, "w": s_net.net[2].weight}


PROGRAMS = [ebm_langevin, score_matching]
CAPTURED = [ebm_langevin, score_matching]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
