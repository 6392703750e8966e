"""Structured prediction and autograd tooling as whole PyTorch programs: a BiLSTM-CRF tagger
(forward algorithm with logsumexp, Viterbi decoding with backpointers), torch.autograd.functional
with checkpoint_sequential and grad-mode decorators, and a recommender with EmbeddingBag,
ModuleDict/ParameterDict, pos_weight and bfloat16 autocast.
"""

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def bilstm_crf(torch, ctx):
    nn = torch.nn
    START, STOP, T = 3, 4, 5  # 3 real tags

    class CRFTagger(nn.Module):
        def __init__(s, V=10, E=6, H=4):
            super().__init__()
            s.emb = nn.Embedding(V, E)
            s.lstm = nn.LSTM(E, H, batch_first=True, bidirectional=True)
            s.proj = nn.Linear(2 * H, T)
            trans = torch.randn(T, T) * 0.1
            trans[START, :] = -1e4  # nothing goes to START
            trans[:, STOP] = -1e4  # nothing leaves STOP
            s.transitions = nn.Parameter(trans)  # transitions[to, from]

        def emissions(s, x):
            h, _ = s.lstm(s.emb(x))
            return s.proj(h)

        def log_partition(s, feats, mask):
            B, L, _ = feats.shape
            alpha = torch.full((B, T), -1e4)
            alpha[:, START] = 0.0
            for t in range(L):
                scores = alpha.unsqueeze(1) + s.transitions.unsqueeze(0) + feats[:, t, :, None]
                nxt = torch.logsumexp(scores, dim=2)
                m = mask[:, t].unsqueeze(1)
                alpha = torch.where(m, nxt, alpha)
            return torch.logsumexp(alpha + s.transitions[STOP].unsqueeze(0), dim=1)

        def gold_score(s, feats, tags, mask):
            B, L, _ = feats.shape
            start = torch.full((B, 1), START, dtype=torch.long)
            prev = torch.cat([start, tags[:, :-1]], 1)
            emit = feats.gather(2, tags.unsqueeze(2)).squeeze(2)
            trans = s.transitions[tags, prev]
            score = ((emit + trans) * mask).sum(1)
            last = tags.gather(1, (mask.sum(1).long() - 1).unsqueeze(1)).squeeze(1)
            return score + s.transitions[STOP, last]

        def nll(s, x, tags, mask):
            feats = s.emissions(x)
            return (s.log_partition(feats, mask) - s.gold_score(feats, tags, mask.float())).mean()

        def viterbi(s, x, mask):
            feats = s.emissions(x)
            B, L, _ = feats.shape
            score = torch.full((B, T), -1e4)
            score[:, START] = 0.0
            back = []
            for t in range(L):
                cand = score.unsqueeze(1) + s.transitions.unsqueeze(0)
                best, idx = cand.max(dim=2)
                nxt = best + feats[:, t]
                m = mask[:, t].unsqueeze(1)
                score = torch.where(m, nxt, score)
                back.append(torch.where(m, idx, torch.arange(T).expand(B, T)))
            score = score + s.transitions[STOP]
            best_score, best_last = score.max(1)
            path = [best_last]
            for idx in reversed(back[1:]):
                path.append(idx.gather(1, path[-1].unsqueeze(1)).squeeze(1))
            path.reverse()
            return best_score, torch.stack(path, 1)

    m = ctx.init(CRFTagger())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(26)
    lens = np.array([6, 4, 5])
    x = ctx.t(rng.integers(0, 10, (3, 6)))
    tags_np = rng.integers(0, 3, (3, 6))
    mask_np = np.arange(6)[None] < lens[:, None]
    tags = ctx.t(np.where(mask_np, tags_np, 0))
    mask = ctx.t(mask_np)

    def step(x, tags, mask):
        loss = m.nll(x, tags, mask)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_value_(m.parameters(), 5.0)
        opt.step()
        return loss

    step = ctx.fn(step)
    res = [step(x, tags, mask).item() for _ in range(3)]
    with torch.no_grad():
        best, path = m.viterbi(x, mask)
    return {"l": res, "best": best, "path": path * mask, "trans": m.transitions}


def autograd_tools(torch, ctx):
    nn = torch.nn
    AF = torch.autograd.functional
    checkpoint = torch.utils.checkpoint.checkpoint
    checkpoint_sequential = torch.utils.checkpoint.checkpoint_sequential

    net = ctx.init(
        nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 2))
    )
    rng = np.random.default_rng(27)
    x = ctx.t(rng.standard_normal((4, 3)).astype(np.float32))

    def f(z):
        return net(z).pow(2).sum(-1)

    J = AF.jacobian(f, x[:2])
    H = AF.hessian(lambda z: net(z).sum(), x[0])
    out, vjp = AF.vjp(f, x, torch.ones(4))
    _, jvp = AF.jvp(lambda z: net(z), x, torch.ones_like(x))
    _, hvp = AF.hvp(lambda z: net(z).pow(2).sum(), x[0], torch.ones(3))
    _, vhp = AF.vhp(lambda z: net(z).pow(2).sum(), x[0], torch.ones(3))

    xr = x.clone().requires_grad_(True)
    h = net[0](xr)
    h.retain_grad()
    y = checkpoint_sequential(net, 2, xr, use_reentrant=False)
    y2 = checkpoint(lambda a: net[2](torch.tanh(a)), h, use_reentrant=False)
    (y.sum() + y2.pow(2).mean()).backward()

    @torch.no_grad()
    def evaluate(z):
        with torch.enable_grad():
            inner = z.clone().requires_grad_(True)
            g = torch.autograd.grad(net(inner).sum(), inner)[0]
        return net(z), g, torch.is_grad_enabled()

    ev, g_inside, mode = evaluate(x)
    with torch.set_grad_enabled(False):
        off = net(x).requires_grad
    torch.set_grad_enabled(True)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def step(x):
        loss = checkpoint(net, x, use_reentrant=False).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    res = [step(x).item() for _ in range(3)]
    return {
        "J": J,
        "H": H,
        "vjp": [out, vjp],
        "jvp": jvp,
        "hvp": hvp,
        "vhp": vhp,
        "xg": xr.grad,
        "hg": h.grad,
        "ev": [ev, g_inside, mode, off],
        "l": res,
    }


def recommender(torch, ctx):
    nn = torch.nn

    class NCF(nn.Module):
        def __init__(s, users=8, items=12, d=4):
            super().__init__()
            s.emb = nn.ModuleDict({"user": nn.Embedding(users, d), "item": nn.Embedding(items, d)})
            s.hist = nn.EmbeddingBag(items, d, mode="mean")
            s.tags = nn.EmbeddingBag(6, d, mode="sum")
            s.bias = nn.ParameterDict({"user": nn.Parameter(torch.zeros(users))})
            s.mlp = nn.Sequential(nn.Linear(4 * d, 8), nn.ReLU(), nn.Linear(8, 1))
            s.scales = nn.ParameterList([nn.Parameter(torch.ones(1)) for _ in range(2)])

        def forward(s, u, i, hist, offsets, tag_idx, tag_off, tag_w):
            eu, ei = s.emb["user"](u), s.emb["item"](i)
            eh = s.hist(hist, offsets)
            et = s.tags(tag_idx, tag_off, per_sample_weights=tag_w)
            gmf = (eu * ei).sum(-1, keepdim=True) * s.scales[0]
            deep = s.mlp(torch.cat([eu, ei, eh, et], -1)) * s.scales[1]
            return (gmf + deep).squeeze(-1) + s.bias["user"][u]

    m = ctx.init(NCF())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(28)
    B = 5
    u, i = ctx.t(rng.integers(0, 8, B)), ctx.t(rng.integers(0, 12, B))
    hist = ctx.t(rng.integers(0, 12, 11))
    offsets = ctx.t(np.array([0, 2, 5, 6, 9]))
    tag_idx = ctx.t(rng.integers(0, 6, 8))
    tag_off = ctx.t(np.array([0, 1, 3, 3, 6]))
    tag_w = ctx.t(rng.random(8).astype(np.float32))
    y = ctx.t((rng.random(B) < 0.3).astype(np.float32))
    crit = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([2.5]))

    def step(u, i, hist, offsets, tag_idx, tag_off, tag_w, y):
        logits = m(u, i, hist, offsets, tag_idx, tag_off, tag_w)
        loss = crit(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    res = [step(u, i, hist, offsets, tag_idx, tag_off, tag_w, y).item() for _ in range(3)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        lo = m(u, i, hist, offsets, tag_idx, tag_off, tag_w)
    with torch.no_grad():
        scores = m.emb["user"].weight @ m.emb["item"].weight.T
        top = scores.topk(3, dim=1).indices
    return {
        "l": res,
        "dtype": lo.dtype,
        "lo": lo.float(),
        "top": top,
        "keys": sorted(m.state_dict()),
    }


PROGRAMS = [bilstm_crf, autograd_tools, recommender]
CAPTURED = [bilstm_crf, autograd_tools, recommender]
TOLERANCES = {recommender: dict(atol=2e-2, rtol=2e-2)}  # (bfloat16 outputs)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, **TOLERANCES.get(program, {}))


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True, **TOLERANCES.get(program, {}))
