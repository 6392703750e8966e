"""Optimization and simulation programs: sharpness-aware minimization (weights perturbed and
restored in place around a second backward), user-written optimizers subclassing
torch.optim.Optimizer (Lion, and a Lookahead wrapper), Transformer-XL style memories kept on
the module between calls, a Kalman filter, n-body forces from autograd of a potential,
weight-standardized convolutions with soft-argmax keypoints, an echo state network fitted by
least squares.
"""

import math

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741, B007


def sam(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class SAM(torch.optim.Optimizer):
        def __init__(s, params, base_optimizer, rho=0.05, **kwargs):
            defaults = dict(rho=rho, **kwargs)
            super().__init__(params, defaults)
            s.base_optimizer = base_optimizer(s.param_groups, **kwargs)
            s.param_groups = s.base_optimizer.param_groups

        @torch.no_grad()
        def first_step(s, zero_grad=False):
            grad_norm = s._grad_norm()
            for group in s.param_groups:
                scale = group["rho"] / (grad_norm + 1e-12)
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    s.state[p]["old_p"] = p.data.clone()
                    p.add_(p.grad * scale.to(p))
            if zero_grad:
                s.zero_grad()

        @torch.no_grad()
        def second_step(s, zero_grad=False):
            for group in s.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.data = s.state[p]["old_p"]
            s.base_optimizer.step()
            if zero_grad:
                s.zero_grad()

        def _grad_norm(s):
            return torch.norm(
                torch.stack(
                    [
                        p.grad.norm(p=2)
                        for g in s.param_groups
                        for p in g["params"]
                        if p.grad is not None
                    ]
                ),
                p=2,
            )

    m = ctx.init(nn.Sequential(nn.Linear(5, 16), nn.GELU(), nn.Linear(16, 3)))
    opt = SAM(m.parameters(), torch.optim.SGD, rho=0.1, lr=0.1, momentum=0.9)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((12, 5)).astype(np.float32))
    y = ctx.t(rng.integers(0, 3, 12))

    def step(x, y):
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.first_step(zero_grad=True)
        loss2 = F.cross_entropy(m(x), y)
        loss2.backward()
        opt.second_step(zero_grad=True)
        return loss, loss2

    step = ctx.fn(step)
    out = [step(x, y) for _ in range(3)]
    return {"out": out, "sd": dict(m.state_dict())}


def custom_optimizers(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Lion(torch.optim.Optimizer):
        def __init__(s, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
            if not 0.0 <= lr:
                raise ValueError(f"Invalid learning rate: {lr}")
            super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

        @torch.no_grad()
        def step(s, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in s.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.data.mul_(1 - group["lr"] * group["weight_decay"])
                    grad = p.grad
                    state = s.state[p]
                    if len(state) == 0:
                        state["exp_avg"] = torch.zeros_like(p)
                    exp_avg = state["exp_avg"]
                    beta1, beta2 = group["betas"]
                    update = exp_avg * beta1 + grad * (1 - beta1)
                    p.add_(torch.sign(update), alpha=-group["lr"])
                    exp_avg.mul_(beta2).add_(grad, alpha=1 - beta2)
            return loss

    class Lookahead:
        def __init__(s, base, k=2, alpha=0.5):
            s.base, s.k, s.alpha = base, k, alpha
            s.param_groups = base.param_groups
            s.slow = [[p.detach().clone() for p in g["params"]] for g in s.param_groups]
            s.counter = 0

        def zero_grad(s):
            s.base.zero_grad()

        def step(s):
            s.base.step()
            s.counter += 1
            if s.counter % s.k == 0:
                with torch.no_grad():
                    for group, slows in zip(s.param_groups, s.slow):
                        for p, q in zip(group["params"], slows):
                            q.add_(p - q, alpha=s.alpha)
                            p.copy_(q)

    m = ctx.init(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)))
    opt = Lookahead(Lion(m.parameters(), lr=1e-2, weight_decay=0.1), k=2)
    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((8, 4)).astype(np.float32))
    y = ctx.t(rng.standard_normal((8, 2)).astype(np.float32))

    def inner(x, y):
        loss = F.mse_loss(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.base.step()
        return loss

    inner = ctx.fn(inner)
    out = []
    for i in range(4):
        out.append(inner(x, y))
        opt.counter += 1
        if opt.counter % opt.k == 0:
            with torch.no_grad():
                for group, slows in zip(opt.param_groups, opt.slow):
                    for p, q in zip(group["params"], slows):
                        q.add_(p - q, alpha=opt.alpha)
                        p.copy_(q)
    # the closure form of step
    lion2 = Lion(m.parameters(), lr=1e-3)

    def closure():
        lion2.zero_grad()
        loss = F.mse_loss(m(x), y)
        loss.backward()
        return loss

    l2 = lion2.step(closure)
    return {
        "out": out,
        "sd": dict(m.state_dict()),
        "l2": l2,
        "state": opt.base.state_dict()["state"][0]["exp_avg"],
    }


def transformer_xl_memory(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class MemLayer(nn.Module):
        def __init__(s, d, heads, mem_len):
            super().__init__()
            # (bias=False: the key bias's gradient is zero, softmax ignores a shift)
            s.attn = nn.MultiheadAttention(d, heads, batch_first=True, bias=False)
            s.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.ReLU(), nn.Linear(2 * d, d))
            s.n1, s.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
            s.mem_len = mem_len
            s.mem = None

        def forward(s, x):
            ctxt = x if s.mem is None else torch.cat([s.mem, x], 1)
            T, M = x.size(1), ctxt.size(1) - x.size(1)
            mask = torch.triu(torch.ones(T, T + M, dtype=torch.bool), diagonal=1 + M)
            h, _ = s.attn(x, ctxt, ctxt, attn_mask=mask, need_weights=False)
            x = s.n1(x + h)
            x = s.n2(x + s.ff(x))
            s.mem = ctxt[:, -s.mem_len :].detach()
            return x

    class XL(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(16, 8)
            s.layers = nn.ModuleList([MemLayer(8, 2, 4) for _ in range(2)])
            s.out = nn.Linear(8, 16)

        def reset(s):
            for l in s.layers:
                l.mem = None

        def forward(s, ids):
            x = s.emb(ids)
            for l in s.layers:
                x = l(x)
            return s.out(x)

    m = ctx.init(XL())
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    rng = np.random.default_rng(2)
    stream = rng.integers(0, 16, (2, 13))
    segs = [(ctx.t(stream[:, i : i + 3]), ctx.t(stream[:, i + 1 : i + 4])) for i in (0, 3, 6, 9)]

    def step(x, y):
        logits = m(x)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    m.reset()
    first = step(*segs[0])  # the first segment has no memory (eager: another signature)
    step = ctx.fn(step)
    out = [first] + [step(x, y) for x, y in segs[1:]]
    mems = [l.mem for l in m.layers]
    return {"out": out, "mems": mems}


def kalman(torch, ctx):
    rng = np.random.default_rng(3)
    dt = 0.1
    Fm = torch.tensor([[1.0, dt], [0.0, 1.0]], dtype=torch.float64)
    H = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    zs = ctx.t(np.cumsum(rng.standard_normal(20)) * 0.1 + rng.standard_normal(20) * 0.3)
    log_q = torch.tensor(-2.0, dtype=torch.float64, requires_grad=True)
    log_r = torch.tensor(-1.0, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([log_q, log_r], lr=0.1)

    def filter_nll(zs):
        Q = torch.exp(log_q) * torch.tensor(
            [[dt**3 / 3, dt**2 / 2], [dt**2 / 2, dt]], dtype=torch.float64
        )
        R = torch.exp(log_r).reshape(1, 1)
        x = torch.zeros(2, 1, dtype=torch.float64)
        P = torch.eye(2, dtype=torch.float64)
        nll = 0.0
        means = []
        for z in zs:
            x = Fm @ x
            P = Fm @ P @ Fm.T + Q
            S = H @ P @ H.T + R
            K = P @ H.T @ torch.linalg.inv(S)
            innov = z.reshape(1, 1) - H @ x
            nll = (
                nll
                + 0.5 * (innov.T @ torch.linalg.solve(S, innov)).squeeze()
                + 0.5 * torch.logdet(2 * math.pi * S)
            )
            x = x + K @ innov
            P = (torch.eye(2, dtype=torch.float64) - K @ H) @ P
            means.append(x[0, 0])
        return nll, torch.stack(means)

    def step(zs):
        nll, means = filter_nll(zs)
        opt.zero_grad()
        nll.backward()
        opt.step()
        return nll, means

    step = ctx.fn(step)
    out = [step(zs) for _ in range(3)]
    return {"out": out, "q": log_q.detach(), "r": log_r.detach(), "g": log_q.grad}


def nbody(torch, ctx):
    rng = np.random.default_rng(4)
    pos = ctx.t(rng.standard_normal((6, 3)))
    vel = ctx.t(rng.standard_normal((6, 3)) * 0.1)
    mass = ctx.t(rng.uniform(0.5, 2.0, 6))

    def potential(pos, mass, soft=0.1):
        d = torch.cdist(pos, pos)
        inv = 1.0 / torch.sqrt(d**2 + soft**2)
        mm = mass[:, None] * mass[None, :]
        return -0.5 * (mm * inv * (1 - torch.eye(len(mass), dtype=pos.dtype))).sum()

    def forces(pos, mass):
        pos = pos.detach().requires_grad_(True)
        U = potential(pos, mass)
        (g,) = torch.autograd.grad(U, pos)
        return -g, U.detach()

    def leapfrog(pos, vel, mass, dt):
        f, U = forces(pos, mass)
        vel = vel + 0.5 * dt * f / mass[:, None]
        pos = pos + dt * vel
        f, _ = forces(pos, mass)
        vel = vel + 0.5 * dt * f / mass[:, None]
        return pos, vel, U

    leapfrog = ctx.fn(leapfrog)
    energies = []
    for _ in range(5):
        pos, vel, U = leapfrog(pos, vel, mass, 0.01)
        K = 0.5 * (mass[:, None] * vel**2).sum()
        energies.append((K + U).item())
    momentum = (mass[:, None] * vel).sum(0)
    # analytic forces against autograd
    diff = pos[:, None, :] - pos[None, :, :]
    r2 = (diff**2).sum(-1) + 0.01
    fa = -(mass[:, None, None] * mass[None, :, None] * diff / r2[..., None] ** 1.5).sum(1)
    fg, _ = forces(pos, mass)
    return {"E": energies, "pos": pos, "p": momentum, "fa": fa, "fg": fg}


def ws_keypoints(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class WSConv2d(nn.Conv2d):
        def forward(s, x):
            w = s.weight
            mean = w.mean(dim=(1, 2, 3), keepdim=True)
            std = w.std(dim=(1, 2, 3), keepdim=True, unbiased=False) + 1e-5
            return F.conv2d(x, (w - mean) / std, s.bias, s.stride, s.padding, s.dilation, s.groups)

    def soft_argmax(heat, beta=10.0):
        B, K, H, W = heat.shape
        p = F.softmax(heat.view(B, K, -1) * beta, -1).view(B, K, H, W)
        ys = torch.linspace(-1, 1, H)
        xs = torch.linspace(-1, 1, W)
        gy, gx = torch.meshgrid(ys, xs, indexing="ij")
        return torch.stack([(p * gx).sum((-2, -1)), (p * gy).sum((-2, -1))], -1)

    class KP(nn.Module):
        def __init__(s):
            super().__init__()
            s.body = nn.Sequential(
                WSConv2d(1, 8, 3, padding=1),
                nn.GroupNorm(4, 8),
                nn.SiLU(),
                WSConv2d(8, 8, 3, padding=2, dilation=2),
                nn.GroupNorm(4, 8),
                nn.SiLU(),
                nn.Conv2d(8, 2, 1, bias=False),
            )  # (softmax follows)

        def forward(s, x):
            return soft_argmax(s.body(x))

    m = ctx.init(KP())
    opt = torch.optim.Adam(m.parameters(), lr=2e-3)
    rng = np.random.default_rng(5)
    img = ctx.t(rng.standard_normal((3, 1, 10, 10)).astype(np.float32))
    kp = ctx.t(rng.uniform(-0.8, 0.8, (3, 2, 2)).astype(np.float32))

    def step(img, kp):
        pred = m(img)
        loss = F.mse_loss(pred, kp)
        # a structural sampler check: the heatmap sampled at the prediction
        sampled = F.grid_sample(img, pred.unsqueeze(1), align_corners=True)
        opt.zero_grad()
        (loss + 0.01 * sampled.pow(2).mean()).backward()
        opt.step()
        return loss, pred

    step = ctx.fn(step)
    out = [step(img, kp) for _ in range(3)]
    return {"out": out, "w": m.body[0].weight}


def echo_state(torch, ctx):
    rng = np.random.default_rng(6)
    N, T = 30, 60
    W = rng.standard_normal((N, N))
    W *= 0.9 / np.max(np.abs(np.linalg.eigvals(W)))
    Win = rng.uniform(-0.5, 0.5, (N, 1))
    u = np.sin(np.arange(T + 1) / 4.0)
    W, Win, U = ctx.t(W), ctx.t(Win), ctx.t(u)

    def run_reservoir(U, W, Win, leak):
        x = torch.zeros(N, dtype=torch.float64)
        states = []
        for t in range(T):
            pre = W @ x + Win[:, 0] * U[t]
            x = (1 - leak) * x + leak * torch.tanh(pre)
            states.append(x)
        return torch.stack(states)

    X = ctx.fn(run_reservoir)(U, W, Win, 0.3)
    washout = 10
    A = torch.cat([X[washout:], torch.ones(T - washout, 1, dtype=torch.float64)], 1)
    y = U[washout + 1 : T + 1].unsqueeze(1)
    sol = torch.linalg.lstsq(A, y).solution
    ridge = torch.linalg.solve(A.T @ A + 1e-6 * torch.eye(N + 1, dtype=torch.float64), A.T @ y)
    pred = A @ ridge
    rmse = torch.sqrt(torch.mean((pred - y) ** 2))
    eig = torch.linalg.eigvals(W).abs().max()
    return {
        "X": X,
        "sol_fit": (A @ sol - y).abs().max() < 1e-3,
        "ridge": ridge,
        "rmse": rmse,
        "rho": eig,
    }


PROGRAMS = [sam, custom_optimizers, transformer_xl_memory, kalman, nbody, ws_keypoints, echo_state]
CAPTURED = PROGRAMS


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
