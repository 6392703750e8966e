"""Graph networks, mixture of experts and reinforcement learning as whole PyTorch programs."""

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def gnn(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(0)
    N, E = 7, 16
    ei = ctx.t(rng.integers(0, N, (2, E)))
    x = ctx.t(rng.standard_normal((N, 5)).astype(np.float32))
    batch = ctx.t(np.array([0, 0, 0, 1, 1, 1, 1]))
    y = ctx.t(np.array([1, 0]))

    class MP(nn.Module):
        def __init__(s, i, o):
            super().__init__()
            s.lin = nn.Linear(i, o)
            s.msg = nn.Linear(2 * i, o)

        def forward(s, x, ei):
            src, dst = ei[0], ei[1]
            m = F.relu(s.msg(torch.cat([x[src], x[dst]], dim=-1)))
            agg = torch.zeros(x.size(0), m.size(1), dtype=m.dtype).index_add_(0, dst, m)
            deg = torch.zeros(x.size(0)).scatter_add_(
                0, dst, torch.ones_like(dst, dtype=torch.float)
            )
            agg = agg / deg.clamp(min=1).unsqueeze(-1)
            mx = torch.zeros(x.size(0), m.size(1)).scatter_reduce(
                0, dst.unsqueeze(-1).expand_as(m), m, reduce="amax", include_self=False
            )
            return s.lin(x) + agg + mx

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.c1 = MP(5, 8)
            s.c2 = MP(8, 8)
            s.head = nn.Linear(8, 2)

        def forward(s, x, ei, batch):
            h = F.elu(s.c1(x, ei))
            h = s.c2(h, ei)
            pooled = torch.zeros(2, h.size(1)).index_reduce_(
                0, batch, h, "mean", include_self=False
            )
            return s.head(pooled)

    m = ctx.init(Net())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2, weight_decay=1e-4)

    def step(x, ei, batch, y):
        opt.zero_grad()
        out = m(x, ei, batch)
        loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        return loss, out

    step = ctx.fn(step)
    res = [step(x, ei, batch, y)[0].item() for _ in range(3)]
    return {"l": res, "p": dict(m.state_dict())}


def moe(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class MoE(nn.Module):
        def __init__(s, d=8, E=4, k=2):
            super().__init__()
            s.k = k
            s.gate = nn.Linear(d, E, bias=False)
            s.experts = nn.ModuleList(
                [nn.Sequential(nn.Linear(d, 16), nn.GELU(), nn.Linear(16, d)) for _ in range(E)]
            )

        def forward(s, x):
            B, T, D = x.shape
            x = x.view(-1, D)
            logits = s.gate(x)
            probs = F.softmax(logits, dim=-1, dtype=torch.float)
            w, idx = torch.topk(probs, s.k, dim=-1)
            w = w / w.sum(dim=-1, keepdim=True)
            out = torch.zeros_like(x)
            mask = F.one_hot(idx, num_classes=len(s.experts)).permute(2, 1, 0)
            for e, expert in enumerate(s.experts):
                slot, tok = torch.where(mask[e])
                if tok.numel() == 0:
                    continue
                y = expert(x[tok]) * w[tok, slot, None]
                out.index_add_(0, tok, y.to(x.dtype))
            # load-balancing loss
            frac = mask.float().sum(dim=(1, 2)) / x.shape[0]
            aux = (frac * probs.mean(0)).sum() * len(s.experts)
            return out.view(B, T, D), aux

    m = ctx.init(MoE())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((2, 5, 8)).astype(np.float32))
    res = []
    for _ in range(3):
        opt.zero_grad()
        y, aux = m(x)
        loss = y.pow(2).mean() + 0.01 * aux
        loss.backward()
        opt.step()
        res.append(loss.item())
    # gather/scatter variant
    probs = torch.softmax(m.gate(x.view(-1, 8)), -1)
    vals, idx = probs.topk(2, dim=1, largest=True, sorted=True)
    dense = torch.zeros_like(probs).scatter(1, idx, vals)
    g = probs.gather(1, idx)
    return {"l": res, "dense": dense, "g": g}


def reinforce(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    Categorical = torch.distributions.Categorical
    pol = ctx.init(nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3)))
    opt = torch.optim.Adam(pol.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    states = ctx.t(rng.standard_normal((10, 4)).astype(np.float32))
    actions = ctx.t(rng.integers(0, 3, 10))
    rewards = rng.standard_normal(10).tolist()
    gamma = 0.99
    res = []
    for _ in range(3):
        R = 0
        returns = []
        for r in rewards[::-1]:
            R = r + gamma * R
            returns.insert(0, R)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + 1e-8)
        dist = Categorical(logits=pol(states))
        logp = dist.log_prob(actions)
        loss = -(logp * returns).sum() - 0.01 * dist.entropy().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.append(loss.item())
    d2 = Categorical(probs=F.softmax(pol(states), -1))
    return {"l": res, "ent": d2.entropy(), "lp": d2.log_prob(actions), "probs": d2.probs}


def dqn(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    import copy

    q = ctx.init(nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2)))
    tgt = copy.deepcopy(q)
    tgt.load_state_dict(q.state_dict())
    tgt.eval()
    for p in tgt.parameters():
        p.requires_grad_(False)
    opt = torch.optim.RMSprop(q.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    s = ctx.t(rng.standard_normal((8, 4)).astype(np.float32))
    s2 = ctx.t(rng.standard_normal((8, 4)).astype(np.float32))
    a = ctx.t(rng.integers(0, 2, (8,)))
    r = ctx.t(rng.standard_normal(8).astype(np.float32))
    done = ctx.t(np.array([0, 0, 1, 0, 0, 1, 0, 0], bool))
    res = []

    def step(s, a, r, s2, done):
        qsa = q(s).gather(1, a.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            nxt = tgt(s2).max(1)[0]
            nxt[done] = 0.0
            y = r + 0.99 * nxt
        loss = F.smooth_l1_loss(qsa, y)
        opt.zero_grad()
        loss.backward()
        for p in q.parameters():
            p.grad.data.clamp_(-1, 1)
        opt.step()
        return loss

    step = ctx.fn(step)
    for i in range(4):
        res.append(step(s, a, r, s2, done).item())
        if i == 1:
            tgt.load_state_dict(q.state_dict())
    # soft update
    with torch.no_grad():
        for tp, p in zip(tgt.parameters(), q.parameters()):
            tp.data.copy_(0.005 * p.data + 0.995 * tp.data)
    return {"l": res, "t": dict(tgt.state_dict())}


PROGRAMS = [gnn, moe, reinforce, dqn]
CAPTURED = [gnn, dqn]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
