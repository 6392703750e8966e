"""Functional transforms and policy gradients as whole PyTorch programs: PPO with
torch.distributions, torch.func (functional_call, vmap, grad, jacrev, hessian) for per-sample
gradients and Newton steps, a custom autograd.Function with needs_input_grad under capture.
"""

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def ppo(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions

    class ActorCritic(nn.Module):
        def __init__(s):
            super().__init__()
            s.body = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh())
            s.pi = nn.Linear(32, 3)
            s.mu = nn.Linear(32, 2)
            s.log_std = nn.Parameter(torch.full((2,), -0.5))
            s.v = nn.Linear(32, 1)

        def forward(s, obs):
            h = s.body(obs)
            cat = D.Categorical(logits=s.pi(h))
            normal = D.Normal(s.mu(h), s.log_std.exp().expand(obs.shape[0], 2))
            return cat, D.Independent(normal, 1), s.v(h).squeeze(-1)

    ac = ctx.init(ActorCritic())
    opt = torch.optim.Adam(ac.parameters(), lr=3e-4, eps=1e-5)
    rng = np.random.default_rng(7)
    T = 16
    obs = ctx.t(rng.standard_normal((T, 4)).astype(np.float32))
    a_d = ctx.t(rng.integers(0, 3, T))
    a_c = ctx.t(rng.standard_normal((T, 2)).astype(np.float32))
    rew = ctx.t(rng.standard_normal(T).astype(np.float32))
    done = ctx.t((rng.random(T) < 0.2).astype(np.float32))

    with torch.no_grad():
        cat, nrm, values = ac(obs)
        old_lp = cat.log_prob(a_d) + nrm.log_prob(a_c)
        # generalized advantage estimation, backwards in time
        adv = torch.zeros_like(rew)
        last, next_v = 0.0, 0.0
        gamma, lam = 0.99, 0.95
        for t in reversed(range(T)):
            nonterminal = 1.0 - done[t]
            delta = rew[t] + gamma * next_v * nonterminal - values[t]
            last = delta + gamma * lam * nonterminal * last
            adv[t] = last
            next_v = values[t]
        returns = adv + values

    def update(obs, a_d, a_c, old_lp, adv, returns):
        cat, nrm, v = ac(obs)
        lp = cat.log_prob(a_d) + nrm.log_prob(a_c)
        ratio = (lp - old_lp).exp()
        nadv = (adv - adv.mean()) / (adv.std() + 1e-8)
        s1 = ratio * nadv
        s2 = torch.clamp(ratio, 0.8, 1.2) * nadv
        pg = -torch.min(s1, s2).mean()
        vf = 0.5 * F.smooth_l1_loss(v, returns)
        ent = cat.entropy().mean() + nrm.entropy().mean()
        loss = pg + 0.5 * vf - 0.01 * ent
        opt.zero_grad()
        loss.backward()
        gn = nn.utils.clip_grad_norm_(ac.parameters(), 0.5)
        opt.step()
        # (the simple estimator: (ratio - 1) - log ratio cancels to a few ulps of exp, which
        # a fused C loop and NumPy round differently)
        approx_kl = (old_lp - lp).mean()
        clipfrac = ((ratio - 1).abs() > 0.2).float().mean()
        return loss, gn, approx_kl.detach(), clipfrac

    update = ctx.fn(update)
    res = []
    for _ in range(2):
        for idx in (ctx.t(np.arange(0, 8)), ctx.t(np.arange(8, 16))):
            out = update(obs[idx], a_d[idx], a_c[idx], old_lp[idx], adv[idx], returns[idx])
            res.append([o.item() for o in out])
    cat, nrm, _ = ac(obs[:2])
    kl = D.kl_divergence(cat, D.Categorical(probs=torch.full((2, 3), 1 / 3)))
    return {
        "res": res,
        "adv": adv,
        "kl": kl,
        "probs": cat.probs,
        "shape": [list(nrm.batch_shape), list(nrm.event_shape), list(cat.sample().shape)],
        "mean": nrm.mean,
        "std": nrm.stddev,
    }


def func_transforms(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    from functools import partial

    fn = torch.func
    model = ctx.init(nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2)))
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}
    rng = np.random.default_rng(8)
    x = ctx.t(rng.standard_normal((5, 3)).astype(np.float32))
    y = ctx.t(rng.integers(0, 2, 5))

    def loss_fn(params, buffers, xi, yi):
        out = fn.functional_call(model, (params, buffers), (xi.unsqueeze(0),))
        return F.cross_entropy(out, yi.unsqueeze(0))

    per_sample = fn.vmap(fn.grad(loss_fn), in_dims=(None, None, 0, 0))(params, buffers, x, y)
    # the mean of per-sample gradients is the batch gradient
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()
    batch = {k: p.grad for k, p in model.named_parameters()}
    clipped = {}
    norms = torch.stack([g.flatten(1).norm(dim=1) for g in per_sample.values()]).norm(dim=0)
    scale = (1.0 / norms).clamp(max=1.0)
    for k, g in per_sample.items():
        clipped[k] = (g * scale.view(-1, *([1] * (g.ndim - 1)))).mean(0)

    def f(z):
        return (z.sin() * z).sum() + (z[0] * z[1]) ** 2

    z = ctx.t(np.array([0.3, -0.7, 1.1], np.float32))
    H = fn.hessian(f)(z)
    J = fn.jacrev(lambda v: torch.tanh(v) * v.sum())(z)
    Jf = fn.jacfwd(lambda v: v.exp().cumsum(0))(z)
    val, g = fn.grad_and_value(f)(z)
    newton = z - torch.linalg.solve(H, fn.grad(f)(z))

    def predict(p, xi):
        return fn.functional_call(model, p, (xi,))

    batched = fn.vmap(predict, in_dims=(None, 0))(params, x.view(5, 1, 3))
    ens = fn.stack_module_state([model, model])[0]["0.weight"]
    vm = fn.vmap(partial(torch.mv, x[:2].T), in_dims=1)(torch.ones(2, 4))
    return {
        "ps": per_sample,
        "batch": batch,
        "mean_ok": {k: per_sample[k].mean(0) for k in per_sample},
        "clipped": clipped,
        "H": H,
        "J": J,
        "Jf": Jf,
        "vg": [val, g],
        "newton": newton,
        "batched": batched,
        "ens": ens,
        "vm": vm,
    }


def custom_function(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class ScaledSwish(torch.autograd.Function):
        @staticmethod
        def forward(ctx_, x, beta, scale):
            s = torch.sigmoid(beta * x)
            ctx_.save_for_backward(x, s, beta)
            ctx_.scale = scale
            return x * s * scale

        @staticmethod
        def backward(ctx_, g):
            x, s, beta = ctx_.saved_tensors
            gx = gb = None
            if ctx_.needs_input_grad[0]:
                gx = g * ctx_.scale * (s + beta * x * s * (1 - s))
            if ctx_.needs_input_grad[1]:
                gb = (g * ctx_.scale * x * x * s * (1 - s)).sum().reshape(beta.shape)
            return gx, gb, None

    class StraightThroughRound(torch.autograd.Function):
        @staticmethod
        def forward(ctx_, x):
            return torch.round(x * 4) / 4

        @staticmethod
        def backward(ctx_, g):
            return g

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.l1 = nn.Linear(4, 8)
            s.beta = nn.Parameter(torch.tensor([1.0]))
            s.l2 = nn.Linear(8, 1)

        def forward(s, x):
            h = ScaledSwish.apply(s.l1(x), s.beta, 1.5)
            return s.l2(StraightThroughRound.apply(h))

    m = ctx.init(Net())
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    rng = np.random.default_rng(9)
    x = ctx.t(rng.standard_normal((6, 4)).astype(np.float32))
    y = ctx.t(rng.standard_normal((6, 1)).astype(np.float32))

    def step(x, y):
        loss = F.mse_loss(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    res = [step(x, y).item() for _ in range(3)]
    # frozen beta: needs_input_grad[1] is False and its gradient stays None
    m.beta.requires_grad_(False)
    m.zero_grad(set_to_none=True)
    F.mse_loss(m(x), y).backward()
    xi = x.clone().requires_grad_()
    out = ScaledSwish.apply(xi, torch.tensor([0.7], dtype=torch.float64).float(), 2.0)
    (gx,) = torch.autograd.grad(out.sum(), xi)
    return {
        "l": res,
        "beta_grad": m.beta.grad,
        "w": m.l1.weight.grad,
        "gx": gx,
        "beta": m.beta,
    }


def dp_sgd(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    fn = torch.func
    model = ctx.init(nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 2)))
    rng = np.random.default_rng(29)
    x = ctx.t(rng.standard_normal((5, 3)).astype(np.float32))
    y = ctx.t(rng.integers(0, 2, 5))

    def step(x, y, clip=1.0, lr=0.1):
        params = {k: v.detach() for k, v in model.named_parameters()}

        def loss_fn(p, xi, yi):
            return F.cross_entropy(fn.functional_call(model, p, (xi[None],)), yi[None])

        grads = fn.vmap(fn.grad(loss_fn), in_dims=(None, 0, 0))(params, x, y)
        norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads.values()]).norm(dim=0)
        scale = (clip / (norms + 1e-6)).clamp(max=1.0)
        with torch.no_grad():
            for k, p in model.named_parameters():
                g = grads[k] * scale.view(-1, *([1] * (grads[k].ndim - 1)))
                p.sub_(lr * g.mean(0))
        # a Newton step's curvature of the loss in the last bias
        b = model[2].bias.detach()
        H = fn.hessian(lambda bb: F.cross_entropy(model[2](model[1](model[0](x))) - b + bb, y))(b)
        return norms, H

    step = ctx.fn(step)
    res = [step(x, y) for _ in range(3)]
    return {"res": res, "w": model[0].weight}


PROGRAMS = [ppo, func_transforms, custom_function, dp_sgd]
CAPTURED = [ppo, custom_function, dp_sgd]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
