"""More programs as users write them: a VQ-VAE whose codebook follows exponential moving
averages (one_hot, index_add_, straight-through), a DDIM sampler with classifier-free guidance
and an EMA model from swa_utils, a spiking network trained with a surrogate gradient, few-shot
prototypical networks (cdist), a ConvLSTM predicting frames.
"""

import math

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741


def vqvae_ema(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class EMAQuantizer(nn.Module):
        def __init__(s, K=6, D=4, decay=0.9, eps=1e-5):
            super().__init__()
            s.K, s.decay, s.eps = K, decay, eps
            s.register_buffer("embed", torch.randn(K, D))
            s.register_buffer("cluster_size", torch.zeros(K))
            s.register_buffer("embed_avg", s.embed.clone())

        def forward(s, z):
            flat = z.permute(0, 2, 3, 1).reshape(-1, z.shape[1])
            d = (
                flat.pow(2).sum(1, keepdim=True)
                - 2 * flat @ s.embed.t()
                + s.embed.pow(2).sum(1)[None]
            )
            idx = d.argmin(1)
            onehot = F.one_hot(idx, s.K).type(flat.dtype)
            q = s.embed[idx].view(z.shape[0], z.shape[2], z.shape[3], -1).permute(0, 3, 1, 2)
            if s.training:
                with torch.no_grad():
                    s.cluster_size.mul_(s.decay).add_(onehot.sum(0), alpha=1 - s.decay)
                    sums = torch.zeros_like(s.embed_avg).index_add_(0, idx, flat)
                    s.embed_avg.mul_(s.decay).add_(sums, alpha=1 - s.decay)
                    n = s.cluster_size.sum()
                    size = (s.cluster_size + s.eps) / (n + s.K * s.eps) * n
                    s.embed.copy_(s.embed_avg / size.unsqueeze(1))
            commit = F.mse_loss(z, q.detach())
            q = z + (q - z).detach()
            avg = onehot.mean(0)
            perplexity = torch.exp(-torch.sum(avg * torch.log(avg + 1e-10)))
            return q, commit, perplexity, idx

    enc = ctx.init(nn.Conv2d(1, 4, 4, 2, 1), "enc")
    vq = ctx.init(EMAQuantizer(), "vq")
    dec = ctx.init(nn.ConvTranspose2d(4, 1, 4, 2, 1), "dec")
    opt = torch.optim.Adam([*enc.parameters(), *dec.parameters()], lr=2e-3)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.random((3, 1, 6, 6)).astype(np.float32))

    def step(x):
        q, commit, ppl, idx = vq(enc(x))
        rec = torch.sigmoid(dec(q))
        loss = F.binary_cross_entropy(rec, x) + 0.25 * commit
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, ppl, idx

    out = [step(x) for _ in range(3)]
    return {"out": out, "embed": vq.embed, "size": vq.cluster_size, "w": enc.weight}


def ddim_cfg(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    swa = torch.optim.swa_utils

    def cosine_alphas_cumprod(T, s=0.008):
        t = torch.linspace(0, T, T + 1, dtype=torch.float64) / T
        f = torch.cos((t + s) / (1 + s) * math.pi / 2) ** 2
        ac = f / f[0]
        betas = (1 - ac[1:] / ac[:-1]).clamp(max=0.999)
        return torch.cumprod(1 - betas, 0).float()

    def timestep_embedding(t, dim, max_period=10000):
        half = dim // 2
        freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32) / half)
        args = t[:, None].float() * freqs[None]
        return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

    class Denoiser(nn.Module):
        def __init__(s, d=6, ncls=3):
            super().__init__()
            s.cls = nn.Embedding(ncls + 1, 8)  # the last row: no class (dropped condition)
            s.t = nn.Sequential(nn.Linear(8, 8), nn.SiLU(), nn.Linear(8, 8))
            s.net = nn.Sequential(nn.Linear(d + 8, 32), nn.SiLU(), nn.Linear(32, d))

        def forward(s, x, t, c):
            emb = s.t(timestep_embedding(t, 8)) + s.cls(c)
            return s.net(torch.cat([x, emb], -1))

    T = 20
    ac = cosine_alphas_cumprod(T)
    m = ctx.init(Denoiser())
    ema = swa.AveragedModel(m, multi_avg_fn=swa.get_ema_multi_avg_fn(0.9))
    opt = torch.optim.AdamW(m.parameters(), lr=2e-3)
    rng = np.random.default_rng(1)
    x0 = ctx.t(rng.standard_normal((5, 6)).astype(np.float32))
    c = ctx.t(np.array([0, 1, 2, 1, 0]))
    ts = [ctx.t(rng.integers(0, T, 5)) for _ in range(3)]
    noises = [ctx.t(rng.standard_normal((5, 6)).astype(np.float32)) for _ in range(3)]
    drop = ctx.t(np.array([False, True, False, False, True]))

    def step(x0, t, noise, c, drop):
        a = ac[t].view(-1, 1)
        xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
        c = torch.where(drop, torch.full_like(c, 3), c)
        loss = F.mse_loss(m(xt, t, c), noise)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    losses = []
    for i in range(3):
        losses.append(step(x0, ts[i], noises[i], c, drop))
        ema.update_parameters(m)

    @torch.no_grad()
    def ddim_sample(model, x, c, steps=(19, 12, 6, 0), w=2.0, eta=0.0):
        for i, t in enumerate(steps):
            tt = torch.full((x.shape[0],), t, dtype=torch.long)
            eps_c = model(x, tt, c)
            eps_u = model(x, tt, torch.full_like(c, 3))
            eps = eps_u + w * (eps_c - eps_u)
            a = ac[t]
            a_prev = ac[steps[i + 1]] if i + 1 < len(steps) else torch.tensor(1.0)
            x0_pred = (x - (1 - a).sqrt() * eps) / a.sqrt()
            x0_pred = x0_pred.clamp(-3, 3)
            sigma = eta * ((1 - a_prev) / (1 - a) * (1 - a / a_prev)).sqrt()
            x = a_prev.sqrt() * x0_pred + (1 - a_prev - sigma**2).sqrt() * eps
        return x

    xT = ctx.t(rng.standard_normal((5, 6)).astype(np.float32))
    sample = ddim_sample(ema.module, xT, c)
    return {
        "l": losses,
        "ac": ac,
        "s": sample,
        "n": ema.n_averaged,
        "ema": ema.module.net[0].weight,
    }


def spiking(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class SpikeFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx_, v):
            ctx_.save_for_backward(v)
            return (v > 0).float()

        @staticmethod
        def backward(ctx_, g):
            (v,) = ctx_.saved_tensors
            return g / (1 + 10 * v.abs()) ** 2  # fast sigmoid surrogate

    spike = SpikeFn.apply

    class LIF(nn.Module):
        def __init__(s, nin, nout, beta=0.8, thr=1.0):
            super().__init__()
            s.fc = nn.Linear(nin, nout)
            s.beta, s.thr = beta, thr

        def forward(s, x_seq):
            mem = torch.zeros(x_seq.shape[1], s.fc.out_features)
            spikes = []
            for x in x_seq.unbind(0):
                mem = s.beta * mem + s.fc(x)
                spk = spike(mem - s.thr)
                mem = mem - spk * s.thr  # soft reset
                spikes.append(spk)
            return torch.stack(spikes), mem

    l1 = ctx.init(LIF(5, 8), "l1")
    l2 = ctx.init(LIF(8, 3), "l2")
    opt = torch.optim.Adam([*l1.parameters(), *l2.parameters()], lr=5e-3)
    rng = np.random.default_rng(2)
    x = ctx.t((rng.random((6, 4, 5)) < 0.4).astype(np.float32) * 3.0)  # rate-coded input
    y = ctx.t(np.array([0, 2, 1, 2]))

    def step(x, y):
        s1, _ = l1(x)
        s2, mem = l2(s1)
        counts = s2.sum(0)
        loss = F.cross_entropy(counts + 0.1 * mem, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, counts, s1.mean()

    step = ctx.fn(step)
    out = [step(x, y) for _ in range(3)]
    return {"out": out, "w": l1.fc.weight}


def protonet(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    enc = ctx.init(
        nn.Sequential(
            nn.Conv2d(1, 4, 3, padding=1, bias=False),  # (BatchNorm follows: a bias's
            nn.BatchNorm2d(4),  # gradient is zero, Adam would scale its rounding noise)
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(16, 8, bias=False),  # (distances ignore a shift: no bias)
        )
    )
    opt = torch.optim.Adam(enc.parameters(), lr=1e-3)
    rng = np.random.default_rng(3)
    n_way, k_shot, n_query = 3, 2, 2
    support = ctx.t(rng.standard_normal((n_way * k_shot, 1, 4, 4)).astype(np.float32))
    query = ctx.t(rng.standard_normal((n_way * n_query, 1, 4, 4)).astype(np.float32))
    q_lab = torch.arange(n_way).repeat_interleave(n_query)

    def step(support, query):
        z = enc(torch.cat([support, query]))
        zs, zq = z[: n_way * k_shot], z[n_way * k_shot :]
        protos = zs.view(n_way, k_shot, -1).mean(1)
        dists = torch.cdist(zq, protos) ** 2
        logp = F.log_softmax(-dists, dim=1)
        loss = F.nll_loss(logp, q_lab)
        acc = (logp.argmax(1) == q_lab).float().mean()
        # a cosine-similarity variant's logits, for comparison
        cos = F.cosine_similarity(zq[:, None], protos[None], dim=-1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, acc, cos

    step = ctx.fn(step)
    out = [step(support, query) for _ in range(3)]
    enc.eval()
    with torch.no_grad():
        e = enc(query)
        pd = torch.cdist(e, e, p=1.0)
        sq = torch.pdist(e)
    return {"out": out, "pd": pd, "pdist": sq}


def convlstm(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class ConvLSTMCell(nn.Module):
        def __init__(s, cin, hid, k=3):
            super().__init__()
            s.hid = hid
            s.conv = nn.Conv2d(cin + hid, 4 * hid, k, padding=k // 2)

        def forward(s, x, state):
            h, c = state
            gates = s.conv(torch.cat([x, h], dim=1))
            i, f, o, g = torch.split(gates, s.hid, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            return h, c

    class Predictor(nn.Module):
        def __init__(s):
            super().__init__()
            s.cell = ConvLSTMCell(1, 4)
            s.out = nn.Conv2d(4, 1, 1)

        def forward(s, frames, future):
            B, T, C, H, W = frames.shape
            h = frames.new_zeros(B, 4, H, W)
            c = torch.zeros_like(h)
            for t in range(T):
                h, c = s.cell(frames[:, t], (h, c))
            preds = []
            x = frames[:, -1]
            for _ in range(future):
                h, c = s.cell(x, (h, c))
                x = torch.sigmoid(s.out(h))
                preds.append(x)
            return torch.stack(preds, 1)

    m = ctx.init(Predictor())
    opt = torch.optim.RMSprop(m.parameters(), lr=1e-3)
    rng = np.random.default_rng(4)
    seq = ctx.t(rng.random((2, 5, 1, 5, 5)).astype(np.float32))

    def step(seq):
        pred = m(seq[:, :3], 2)
        loss = F.mse_loss(pred, seq[:, 3:]) + 0.1 * F.l1_loss(pred, seq[:, 3:])
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(m.parameters(), 0.5)
        opt.step()
        return loss, pred

    step = ctx.fn(step)
    out = [step(seq) for _ in range(2)]
    return {"out": out, "w": m.cell.conv.weight}


PROGRAMS = [vqvae_ema, ddim_cfg, spiking, protonet, convlstm]
CAPTURED = [ddim_cfg, spiking, protonet, convlstm]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
