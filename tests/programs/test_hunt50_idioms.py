"""Programs of hunt50 (idioms), each run on PyTorch and on ember (eagerly, and with their marked
steps in ember.function): a walk of the autograd graph by ``next_functions`` with node hooks and
metadata; PyTorch's exception classes caught around calls (a view of a transposed tensor, a
float32-float64 product, an index out of range, ...) with fallbacks; memory sharing decided by
``untyped_storage().data_ptr()``; a run resumed from a checkpoint holding an argparse Namespace
loaded under ``serialization.safe_globals``; PPO with GAE; double DQN with polyak averaging; an
importance-weighted autoencoder; planar flows; k-means++; per-group learning rates with
freezing; container surgery (Sequential slicing, insert, del, ModuleDict, ParameterList, a
non-persistent buffer).
"""

import argparse
import inspect
import io
import math

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, E702, E701, C408, SIM118


def graph_walk(torch, ctx):
    """A torchviz-like walk of the autograd graph, node hooks and metadata."""
    nn, F = torch.nn, torch.nn.functional
    model = ctx.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)))
    x = ctx.t(np.linspace(-1, 1, 20, dtype=np.float32).reshape(5, 4))
    y = ctx.t(np.array([0, 1, 2, 1, 0]))
    loss = F.cross_entropy(model(x), y)
    seen, order, stack = set(), [], [loss.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        order.append(type(fn).__name__)
        for nxt, _ in fn.next_functions:
            stack.append(nxt)
    leaves = sorted(
        tuple(fn.variable.shape) for fn in seen if type(fn).__name__ == "AccumulateGrad"
    )
    calls = []
    h = loss.grad_fn.register_hook(lambda gi, go: calls.append(("post", gi[0].shape, len(go))))
    h2 = loss.grad_fn.register_prehook(lambda go: calls.append(("pre", float(go[0]))))
    loss.grad_fn.metadata["tag"] = "loss"
    loss.backward()
    h.remove()
    h2.remove()
    # (ember's nodes are fewer: one for linear, PyTorch's addmm of a transposed weight; one for
    # cross_entropy, PyTorch's log_softmax and nll_loss)
    return [
        order[0],
        "ReluBackward0" in order,
        leaves,
        calls,
        loss.grad_fn.metadata["tag"],
        loss.grad_fn.name(),
        [p.grad for p in model.parameters()],
    ]


def error_fallbacks(torch, ctx):
    """Code that catches PyTorch's exception classes around calls and falls back."""
    x = ctx.t(np.arange(12, dtype=np.float32).reshape(3, 4))
    log = []
    try:
        flat = x.t().view(-1)
        log.append("view")
    except RuntimeError:
        flat = x.t().reshape(-1)
        log.append("reshape")
    try:
        out = x @ ctx.t(np.ones((4, 2)))  # float64
        log.append("mixed")
    except RuntimeError as e:
        out = x @ ctx.t(np.ones((4, 2))).to(x.dtype)
        log.append("same dtype" if "dtype" in str(e) else "other")
    try:
        x[5]
    except IndexError:
        log.append("index")
    try:
        torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=-1)
    except ValueError:
        log.append("lr")
    try:
        torch.cat([x, torch.zeros(2, 5)])
    except RuntimeError:
        log.append("cat")
    try:
        w = torch.zeros(3, requires_grad=True)
        w.numpy()
    except RuntimeError:
        log.append("numpy")
        arr = w.detach().numpy()
    try:
        torch.arange(0, 5, -1)
    except RuntimeError:
        log.append("arange")
    try:
        torch.nn.Linear(3, 4)(x)
    except RuntimeError:
        log.append("linear")
    try:
        torch.zeros(2, 3).expand(4, 3)
    except RuntimeError:
        log.append("expand")
    try:
        x.sum(dim=4)
    except IndexError:
        log.append("dim")
    try:
        torch.tensor([1, 2]).float().long().requires_grad_()
    except RuntimeError:
        log.append("int grad")
    return [flat, out, log, arr]


def memory_sharing(torch, ctx):
    """Programs that decide by data_ptr / storage whether a result aliases its input."""
    x = ctx.t(np.arange(24, dtype=np.float32).reshape(2, 3, 4))

    def shares(a, b):
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()

    checks = {
        "view": shares(x, x.view(6, 4)),
        "permute": shares(x, x.permute(2, 0, 1)),
        "contiguous of permute": shares(x, x.permute(2, 0, 1).contiguous()),
        "reshape of permute": shares(x, x.permute(2, 0, 1).reshape(-1)),
        "narrow": shares(x, x.narrow(1, 1, 2)),
        "unbind": shares(x, x.unbind(0)[1]),
        "chunk": shares(x, x.chunk(2, dim=2)[1]),
        "detach": shares(x, x.detach()),
        "clone": shares(x, x.clone()),
        "float": shares(x, x.float()),
        "double": shares(x, x.double()),
        "expand": shares(x[:, :1], x[:, :1].expand(2, 3, 4)),
        "contiguous is self": x.contiguous() is x,
        "is_contiguous t": x.transpose(1, 2).is_contiguous(),
        "offset": x[1, 2].storage_offset(),
        "ptr diff": (x[1, 2].data_ptr() - x.data_ptr()) // x.element_size(),
        "nbytes": x.untyped_storage().nbytes(),
        "stride": x.transpose(0, 2).stride(),
    }
    y = x.clone()
    v = y[:, 1]
    v.mul_(10)  # in place through a view: y sees it
    z = y.permute(2, 0, 1)
    if not z.is_contiguous():
        z = z.contiguous()
    z.add_(1)  # a copy: y does not see it
    return [checks, y, z]


def resume_safe_globals(torch, ctx):
    """Checkpoint with args Namespace + model + optimizer + scheduler + RNG state in a BytesIO,
    resumed with safe_globals: the resumed run equals the uninterrupted one."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(3)
    X = ctx.t(rng.normal(size=(32, 6)).astype(np.float32))
    Y = ctx.t(rng.integers(0, 3, 32))

    def make(key):
        m = ctx.init(
            nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Dropout(0.2), nn.Linear(16, 3)), key
        )
        o = torch.optim.AdamW(m.parameters(), lr=0.01)
        s = torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5)
        return m, o, s

    def train(m, o, s, steps):
        out = []
        for i in range(steps):
            idx = torch.randperm(32)[:8]
            loss = F.cross_entropy(m(X[idx]), Y[idx])
            o.zero_grad()
            loss.backward()
            o.step()
            s.step()
            out.append(loss.item())
        return out

    torch.manual_seed(7)
    m, o, s = make("a")
    full = train(m, o, s, 6)

    torch.manual_seed(7)
    m, o, s = make("b")
    first = train(m, o, s, 3)
    args = argparse.Namespace(epochs=6, lr=0.01)
    buf = io.BytesIO()
    torch.save(
        {
            "args": args,
            "model": m.state_dict(),
            "opt": o.state_dict(),
            "sched": s.state_dict(),
            "rng": torch.get_rng_state(),
        },
        buf,
    )
    buf.seek(0)
    with torch.serialization.safe_globals([argparse.Namespace]):
        ck = torch.load(buf, weights_only=True)
    m2, o2, s2 = make("c")
    m2.load_state_dict(ck["model"])
    o2.load_state_dict(ck["opt"])
    s2.load_state_dict(ck["sched"])
    torch.set_rng_state(ck["rng"])
    second = train(m2, o2, s2, 3)
    return [full, first + second, ck["args"].epochs, s2.get_last_lr(), o2.param_groups[0]["lr"]]


def ppo_gae(torch, ctx):
    """PPO with GAE advantages, clipped policy and value losses, minibatches by randperm."""
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions

    class AC(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 32), nn.Tanh())
            self.pi = nn.Linear(32, 3)
            self.v = nn.Linear(32, 1)

        def forward(self, s):
            h = self.body(s)
            return self.pi(h), self.v(h).squeeze(-1)

    net = ctx.init(AC())
    opt = torch.optim.Adam(net.parameters(), lr=3e-3, eps=1e-5)
    rng = np.random.default_rng(0)
    T = 16
    states = ctx.t(rng.normal(size=(T, 4)).astype(np.float32))
    rewards = ctx.t(rng.normal(size=T).astype(np.float32))
    dones = ctx.t((rng.random(T) < 0.1).astype(np.float32))
    with torch.no_grad():
        logits, values = net(states)
        dist = D.Categorical(logits=logits)
        actions = dist.sample()
        old_logp = dist.log_prob(actions)
    gamma, lam = 0.99, 0.95
    adv = torch.zeros(T)
    last = 0.0
    for t in reversed(range(T)):
        next_v = values[t + 1] if t + 1 < T else torch.tensor(0.0)
        delta = rewards[t] + gamma * next_v * (1 - dones[t]) - values[t]
        last = delta + gamma * lam * (1 - dones[t]) * last
        adv[t] = last
    returns = adv + values
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    stats = []
    for epoch in range(3):
        perm = torch.randperm(T)
        for mb in perm.split(8):
            logits, v = net(states[mb])
            dist = D.Categorical(logits=logits)
            logp = dist.log_prob(actions[mb])
            ratio = (logp - old_logp[mb]).exp()
            s1 = ratio * adv[mb]
            s2 = torch.clamp(ratio, 0.8, 1.2) * adv[mb]
            pl = -torch.min(s1, s2).mean()
            v_clip = values[mb] + (v - values[mb]).clamp(-0.2, 0.2)
            vl = 0.5 * torch.max((v - returns[mb]) ** 2, (v_clip - returns[mb]) ** 2).mean()
            ent = dist.entropy().mean()
            loss = pl + 0.5 * vl - 0.01 * ent
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 0.5)
            opt.step()
            approx_kl = ((ratio - 1) - (logp - old_logp[mb])).mean()
            clipfrac = ((ratio - 1).abs() > 0.2).float().mean()
            stats.append([loss.item(), approx_kl.item(), clipfrac.item()])
    return [actions, adv, returns, stats]


def double_dqn(torch, ctx):
    """Double DQN with a target network, Huber loss, gather, polyak averaging in no_grad."""
    nn, F = torch.nn, torch.nn.functional
    q = ctx.init(nn.Sequential(nn.Linear(5, 32), nn.ReLU(), nn.Linear(32, 4)))
    target = ctx.init(nn.Sequential(nn.Linear(5, 32), nn.ReLU(), nn.Linear(32, 4)), "target")
    target.load_state_dict(q.state_dict())
    for p in target.parameters():
        p.requires_grad_(False)
    opt = torch.optim.RMSprop(q.parameters(), lr=1e-3, alpha=0.95, centered=True)
    rng = np.random.default_rng(2)
    s = ctx.t(rng.normal(size=(16, 5)).astype(np.float32))
    a = ctx.t(rng.integers(0, 4, 16))
    r = ctx.t(rng.normal(size=16).astype(np.float32))
    s2 = ctx.t(rng.normal(size=(16, 5)).astype(np.float32))
    done = ctx.t(rng.random(16) < 0.2)

    @ctx.fn
    def step(s, a, r, s2, done):
        qsa = q(s).gather(1, a.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            best = q(s2).argmax(dim=1, keepdim=True)
            nxt = target(s2).gather(1, best).squeeze(1)
            y = r + 0.99 * nxt * (~done).float()
        loss = F.smooth_l1_loss(qsa, y)
        opt.zero_grad()
        loss.backward()
        for p in q.parameters():
            p.grad.data.clamp_(-1, 1)
        opt.step()
        with torch.no_grad():
            for pt, p in zip(target.parameters(), q.parameters()):
                pt.mul_(0.9).add_(p, alpha=0.1)
        return loss.detach()

    losses = [step(s, a, r, s2, done) for _ in range(4)]
    eps = 0.1
    greedy = q(s).argmax(1)
    return [losses, target.state_dict(), greedy]


def iwae(torch, ctx):
    """An importance-weighted autoencoder bound with logsumexp over K samples."""
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(8, 2 * 3)
            self.dec = nn.Sequential(nn.Linear(3, 16), nn.Softplus(), nn.Linear(16, 8))

        def forward(self, x, K):
            mu, logvar = self.enc(x).chunk(2, dim=-1)
            std = (0.5 * logvar).exp()
            qz = D.Normal(mu, std)
            z = qz.rsample((K,))  # K, B, 3
            logits = self.dec(z)
            px = D.Bernoulli(logits=logits)
            pz = D.Normal(torch.zeros_like(z), torch.ones_like(z))
            logw = (
                px.log_prob(x.expand_as(logits)).sum(-1)
                + pz.log_prob(z).sum(-1)
                - qz.log_prob(z).sum(-1)
            )
            bound = torch.logsumexp(logw, dim=0) - math.log(K)
            return -bound.mean(), logw

    m = ctx.init(Model())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(4)
    x = ctx.t((rng.random((6, 8)) < 0.5).astype(np.float32))
    out = []

    @ctx.fn
    def step():
        loss, logw = m(x, 5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        w = F.softmax(logw, dim=0)
        ess = 1.0 / (w**2).sum(0)
        return [loss.detach(), ess.detach()]

    for _ in range(3):
        out.append(step())
    return out


def planar_flow(torch, ctx):
    """Planar normalizing flows with the invertibility fix, fitting a 2-D density by KL."""
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions

    class Planar(nn.Module):
        def __init__(self):
            super().__init__()
            self.u = nn.Parameter(torch.randn(2) * 0.1)
            self.w = nn.Parameter(torch.randn(2) * 0.1)
            self.b = nn.Parameter(torch.zeros(1))

        def forward(self, z):
            wu = self.w @ self.u
            u_hat = self.u + (F.softplus(wu) - 1 - wu) * self.w / (self.w.norm() ** 2 + 1e-8)
            lin = z @ self.w + self.b
            f = z + u_hat * torch.tanh(lin).unsqueeze(-1)
            psi = (1 - torch.tanh(lin) ** 2).unsqueeze(-1) * self.w
            logdet = torch.log((1 + psi @ u_hat).abs() + 1e-8)
            return f, logdet

    flows = ctx.init(nn.ModuleList([Planar() for _ in range(4)]))
    opt = torch.optim.Adam(flows.parameters(), lr=1e-2)
    base = D.MultivariateNormal(torch.zeros(2), torch.eye(2))
    eps = ctx.t(np.random.default_rng(5).normal(size=(64, 2)).astype(np.float32))

    def target_logp(z):
        z1, z2 = z[:, 0], z[:, 1]
        return -0.5 * ((z.norm(dim=1) - 2) / 0.4) ** 2 + torch.logsumexp(
            torch.stack([-0.5 * ((z1 - 2) / 0.6) ** 2, -0.5 * ((z1 + 2) / 0.6) ** 2]), 0
        )

    losses = []
    for _ in range(5):
        z = eps
        logq = base.log_prob(z)
        for f in flows:
            z, ld = f(z)
            logq = logq - ld
        loss = (logq - target_logp(z)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return [losses, z.detach()]


def kmeans_pp(torch, ctx):
    """k-means++ seeding with multinomial, then Lloyd steps with cdist, argmin, index_add_,
    bincount."""
    rng = np.random.default_rng(6)
    X = ctx.t(
        np.concatenate(
            [rng.normal(loc=c, scale=0.3, size=(20, 2)) for c in ((0, 0), (3, 3), (0, 3))]
        ).astype(np.float32)
    )
    k = 3
    g = torch.Generator().manual_seed(11)
    first = torch.randint(0, X.shape[0], (1,), generator=g)
    centers = X[first]
    for _ in range(k - 1):
        d2 = torch.cdist(X, centers).min(dim=1).values ** 2
        nxt = torch.multinomial(d2 / d2.sum(), 1, generator=g)
        centers = torch.cat([centers, X[nxt]], 0)
    history = []
    for _ in range(5):
        assign = torch.cdist(X, centers).argmin(dim=1)
        counts = torch.bincount(assign, minlength=k).float()
        sums = torch.zeros(k, 2).index_add_(0, assign, X)
        centers = sums / counts.clamp(min=1).unsqueeze(1)
        inertia = ((X - centers[assign]) ** 2).sum()
        history.append(inertia.item())
    order = centers[:, 0].argsort()
    return [centers[order], history, counts[order]]


def param_groups_freeze(torch, ctx):
    """Per-group learning rates, add_param_group, freezing with requires_grad_(False) midway,
    LambdaLR per group, named_parameters filters."""
    nn, F = torch.nn, torch.nn.functional
    model = ctx.init(
        nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    )
    backbone = [p for n, p in model.named_parameters() if n.startswith("0.")]
    mid = [p for n, p in model.named_parameters() if n.startswith("2.")]
    head = list(model[4].parameters())
    opt = torch.optim.SGD([{"params": backbone, "lr": 0.01}, {"params": mid}], lr=0.1, momentum=0.9)
    opt.add_param_group({"params": head, "lr": 0.5, "weight_decay": 1e-3})
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, [lambda e: 0.5**e, lambda e: 1.0, lambda e: 1 / (1 + e)]
    )
    rng = np.random.default_rng(7)
    x = ctx.t(rng.normal(size=(10, 4)).astype(np.float32))
    y = ctx.t(rng.normal(size=(10, 2)).astype(np.float32))
    out = []
    for step in range(5):
        if step == 2:
            for p in backbone:
                p.requires_grad_(False)
        loss = F.mse_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        out.append([loss.item(), [g["lr"] for g in opt.param_groups], backbone[0].grad is None])
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return [out, trainable, model.state_dict(), len(opt.state)]


def containers_surgery(torch, ctx):
    """Sequential slicing/insert/append/del, ModuleDict, ParameterList/Dict, buffers with
    persistent=False, get_submodule, named_modules, apply, state_dict keys."""
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.seq = nn.Sequential(
                nn.Linear(3, 6), nn.ReLU(), nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 2)
            )
            self.heads = nn.ModuleDict({"a": nn.Linear(2, 1), "b": nn.Linear(2, 3)})
            self.scales = nn.ParameterList([nn.Parameter(torch.ones(2)) for _ in range(2)])
            self.extra = nn.ParameterDict({"bias": nn.Parameter(torch.zeros(1))})
            self.register_buffer("step", torch.zeros((), dtype=torch.long))
            self.register_buffer("cache", torch.zeros(2), persistent=False)

        def forward(self, x, head):
            h = self.seq(x) * self.scales[0] * self.scales[-1]
            self.step += 1
            self.cache = h.detach().mean(0)
            return self.heads[head](h) + self.extra["bias"]

    net = ctx.init(Net())
    x = ctx.t(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    keys = list(net.state_dict().keys())
    front = net.seq[:2]
    tail_len = len(net.seq[2:])
    sub = net.get_submodule("seq.2")
    names = [n for n, _ in net.named_modules()]
    outs = [net(x, "a"), net(x, "b")]
    # surgery: swap an activation, insert and drop layers
    net.seq[1] = nn.GELU()
    net.seq.insert(4, nn.Tanh())
    net.seq.append(nn.Identity())
    del net.seq[6]
    counts = {"linear": 0}

    def count(m):
        if isinstance(m, nn.Linear):
            counts["linear"] += 1

    net.apply(count)
    net.heads.update({"c": nn.Identity()})
    outs.append(net(x, "c"))
    buffers = {n: b for n, b in net.named_buffers()}
    return [
        keys,
        type(front).__name__,
        len(front),
        tail_len,
        tuple(sub.weight.shape),
        names,
        outs,
        [type(m).__name__ for m in net.seq],
        counts,
        sorted(buffers),
        net.step,
        sorted(net.state_dict().keys()),
        len(list(net.parameters())),
    ]


PROGRAMS = [
    graph_walk,
    error_fallbacks,
    memory_sharing,
    resume_safe_globals,
    ppo_gae,
    double_dqn,
    iwae,
    planar_flow,
    kmeans_pp,
    param_groups_freeze,
    containers_surgery,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


# the programs that mark steps for ember.function (the others run as in test_eager)
CAPTURED = [p for p in PROGRAMS if "@ctx.fn" in inspect.getsource(p)]


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
