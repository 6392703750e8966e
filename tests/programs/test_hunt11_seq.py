"""Long-sequence programs as users write them: RetNet's retention in its parallel, recurrent and
chunked forms (equal), RWKV's time mixing with exponential decay, Hyena's long convolution by
rfft/irfft, Longformer's sliding-window attention through unfold and as_strided, Reformer's LSH
bucketing (random rotations, argsort, gather and scatter back).
"""

import math

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741


def retnet(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Retention(nn.Module):
        def __init__(s, d=4, heads=2):
            super().__init__()
            s.h, s.dk = heads, d // heads
            s.qkv = nn.Linear(d, 3 * d, bias=False)
            s.gn = nn.GroupNorm(heads, d)
            s.gamma = 1 - torch.exp(torch.linspace(math.log(1 / 32), math.log(1 / 512), heads))

        def _xpos(s, x):
            T = x.shape[-2]
            theta = 10000 ** (-torch.arange(0, s.dk, 2).float() / s.dk)
            ang = torch.arange(T).float()[:, None] * theta[None]
            sin, cos = ang.sin().repeat_interleave(2, -1), ang.cos().repeat_interleave(2, -1)
            x2 = torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)
            return x * cos + x2 * sin

        def split(s, x):
            B, T, _ = x.shape
            q, k, v = s.qkv(x).view(B, T, 3, s.h, s.dk).permute(2, 0, 3, 1, 4).unbind(0)
            return s._xpos(q), s._xpos(k) / math.sqrt(s.dk), v

        def parallel(s, x):
            q, k, v = s.split(x)
            T = x.shape[1]
            n = torch.arange(T)
            decay = s.gamma.log()[:, None, None] * (n[:, None] - n[None, :]).float()
            D = torch.where(n[:, None] >= n[None, :], decay.exp(), torch.zeros(()))
            ret = (q @ k.transpose(-1, -2)) * D
            return s.out(ret @ v)

        def recurrent(s, x):
            q, k, v = s.split(x)
            B, H, T, dk = q.shape
            state = torch.zeros(B, H, dk, dk)
            outs = []
            for t in range(T):
                state = s.gamma.view(1, H, 1, 1) * state + k[:, :, t, :, None] * v[:, :, t, None, :]
                outs.append(torch.einsum("bhd,bhde->bhe", q[:, :, t], state))
            return s.out(torch.stack(outs, 2))

        def chunked(s, x, C=2):
            q, k, v = s.split(x)
            B, H, T, dk = q.shape
            g = s.gamma.view(1, H, 1, 1)
            n = torch.arange(C)
            inner = torch.where(
                n[:, None] >= n[None, :], g ** (n[:, None] - n[None, :]).float(), torch.zeros(())
            )
            state = torch.zeros(B, H, dk, dk)
            outs = []
            for c0 in range(0, T, C):
                qc, kc, vc = q[:, :, c0 : c0 + C], k[:, :, c0 : c0 + C], v[:, :, c0 : c0 + C]
                o = ((qc @ kc.transpose(-1, -2)) * inner) @ vc
                o = o + (qc * g ** (n + 1).float().view(1, 1, C, 1)) @ state
                state = (
                    g**C * state
                    + (kc * g ** (C - 1 - n).float().view(1, 1, C, 1)).transpose(-1, -2) @ vc
                )
                outs.append(o)
            return s.out(torch.cat(outs, 2))

        def out(s, o):
            B, H, T, dk = o.shape
            o = o.permute(0, 2, 1, 3).reshape(B * T, H * dk)
            return s.gn(o).view(B, T, -1)

    m = ctx.init(Retention())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((2, 6, 4)).astype(np.float32))
    y = ctx.t(rng.standard_normal((2, 6, 4)).astype(np.float32))

    def step(x, y):
        p = m.parallel(x)
        loss = F.mse_loss(p, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, p

    step = ctx.fn(step)
    out = [step(x, y) for _ in range(2)]
    with torch.no_grad():
        p, r, c = m.parallel(x), m.recurrent(x), m.chunked(x)
    return {
        "out": out,
        "eq": [torch.allclose(p, r, atol=1e-5), torch.allclose(p, c, atol=1e-5)],
        "r": r,
    }


def rwkv(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class TimeMix(nn.Module):
        def __init__(s, d=4):
            super().__init__()
            s.time_decay = nn.Parameter(torch.linspace(-1, 0.5, d))
            s.time_first = nn.Parameter(torch.full((d,), math.log(0.3)))
            s.time_mix_k = nn.Parameter(torch.rand(1, 1, d))
            s.time_mix_v = nn.Parameter(torch.rand(1, 1, d))
            s.time_mix_r = nn.Parameter(torch.rand(1, 1, d))
            s.time_shift = nn.ZeroPad2d((0, 0, 1, -1))
            s.key, s.value, s.receptance = (nn.Linear(d, d, bias=False) for _ in range(3))
            s.output = nn.Linear(d, d, bias=False)
            s.ln = nn.LayerNorm(d)

        def forward(s, x):
            B, T, C = x.shape
            xx = s.time_shift(s.ln(x))
            xl = s.ln(x)
            k = s.key(xl * s.time_mix_k + xx * (1 - s.time_mix_k))
            v = s.value(xl * s.time_mix_v + xx * (1 - s.time_mix_v))
            r = torch.sigmoid(s.receptance(xl * s.time_mix_r + xx * (1 - s.time_mix_r)))
            w = -torch.exp(s.time_decay)
            u = s.time_first
            aa = torch.zeros(B, C)
            bb = torch.zeros(B, C)
            pp = torch.full((B, C), -1e38)
            ys = []
            for t in range(T):
                kk, vv = k[:, t], v[:, t]
                ww = u + kk
                p = torch.maximum(pp, ww)
                e1, e2 = torch.exp(pp - p), torch.exp(ww - p)
                ys.append((e1 * aa + e2 * vv) / (e1 * bb + e2))
                ww = pp + w
                p = torch.maximum(ww, kk)
                e1, e2 = torch.exp(ww - p), torch.exp(kk - p)
                aa = e1 * aa + e2 * vv
                bb = e1 * bb + e2
                pp = p
            wkv = torch.stack(ys, dim=1)
            return x + s.output(r * wkv)

    m = ctx.init(TimeMix())
    head = ctx.init(nn.Linear(4, 5), "head")
    opt = torch.optim.AdamW([*m.parameters(), *head.parameters()], lr=1e-2)
    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((2, 5, 4)).astype(np.float32))
    tgt = ctx.t(rng.integers(0, 5, (2, 5)))

    def step(x, tgt):
        logits = head(m(x))
        loss = F.cross_entropy(logits.view(-1, 5), tgt.view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    out = [step(x, tgt) for _ in range(2)]
    return {"out": out, "m": m.state_dict()}


def hyena(torch, ctx):
    nn = torch.nn

    def fftconv(u, k, D):
        seqlen = u.shape[-1]
        fft_size = 2 * seqlen
        k_f = torch.fft.rfft(k, n=fft_size) / fft_size
        u_f = torch.fft.rfft(u.to(dtype=k.dtype), n=fft_size)
        y = torch.fft.irfft(u_f * k_f, n=fft_size, norm="forward")[..., :seqlen]
        out = y + u * D.unsqueeze(-1)
        return out.to(dtype=u.dtype)

    class PositionalEmbedding(nn.Module):
        def __init__(s, emb_dim, seq_len):
            super().__init__()
            t = torch.linspace(0, 1, seq_len)[None, :, None]
            bands = (emb_dim - 1) // 2
            t_rescaled = torch.linspace(0, seq_len - 1, seq_len)[None, :, None]
            w = 2 * math.pi * t_rescaled / seq_len
            f = torch.linspace(1e-4, bands - 1, bands)[None, None]
            z = torch.exp(-1j * f * w)
            s.register_buffer("z", torch.cat([t, z.real, z.imag], dim=-1))

        def forward(s, L):
            return s.z[:, :L]

    class HyenaFilter(nn.Module):
        def __init__(s, d, L, order=8):
            super().__init__()
            s.pos = PositionalEmbedding(3, L)
            s.implicit = nn.Sequential(
                nn.Linear(3, order), nn.SiLU(), nn.Linear(order, d, bias=False)
            )
            s.bias = nn.Parameter(torch.randn(d))
            s.register_buffer("deltas", torch.linspace(0.3, 1.5, d)[None, None])

        def forward(s, x, L):
            z = s.pos(L)
            h = s.implicit(z) * torch.exp(-z[..., :1] * s.deltas.abs())
            return fftconv(x, h.transpose(1, 2)[0], s.bias)

    class HyenaOperator(nn.Module):
        def __init__(s, d=4, L=8):
            super().__init__()
            s.in_proj = nn.Linear(d, 3 * d)
            s.short = nn.Conv1d(3 * d, 3 * d, 3, padding=2, groups=3 * d)
            s.filt = HyenaFilter(d, L)
            s.out_proj = nn.Linear(d, d)

        def forward(s, u):
            L = u.size(-2)
            u = s.in_proj(u).transpose(1, 2)
            uc = s.short(u)[..., :L]
            x0, x1, v = uc.split(u.shape[1] // 3, dim=1)
            v = s.filt(v * x1, L)
            return s.out_proj((v * x0).transpose(1, 2))

    m = ctx.init(HyenaOperator())
    opt = torch.optim.Adam(m.parameters(), lr=5e-3)
    rng = np.random.default_rng(2)
    x = ctx.t(rng.standard_normal((2, 8, 4)).astype(np.float32))

    def step(x):
        y = m(x)
        loss = (y - x.flip(1)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, y

    out = [step(x) for _ in range(2)]
    return {"out": out, "m": m.state_dict(), "z": m.filt.pos.z}


def longformer(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    w = 2  # one-sided window

    def sliding_chunks_unfold(q, k, v):
        B, H, T, D = q.shape
        kp = F.pad(k, (0, 0, w, w))
        vp = F.pad(v, (0, 0, w, w))
        kw = kp.unfold(2, 2 * w + 1, 1)  # B H T D W
        vw = vp.unfold(2, 2 * w + 1, 1)
        scores = torch.einsum("bhtd,bhtdw->bhtw", q, kw) / math.sqrt(D)
        pos = torch.arange(T)[:, None] + torch.arange(-w, w + 1)[None]
        valid = (pos >= 0) & (pos < T)
        scores = scores.masked_fill(~valid, float("-inf"))
        p = scores.softmax(-1)
        return torch.einsum("bhtw,bhtdw->bhtd", p, vw), p

    def sliding_chunks_strided(q, k, v):
        B, H, T, D = q.shape
        kp = F.pad(k, (0, 0, w, w)).contiguous()
        st = kp.stride()
        kw = kp.as_strided((B, H, T, 2 * w + 1, D), (st[0], st[1], st[2], st[2], st[3]))
        return torch.einsum("bhtd,bhtwd->bhtw", q, kw) / math.sqrt(D)

    class Attn(nn.Module):
        def __init__(s, d=4, h=2):
            super().__init__()
            s.h = h
            s.qkv = nn.Linear(d, 3 * d)
            s.o = nn.Linear(d, d)

        def forward(s, x):
            B, T, C = x.shape
            q, k, v = s.qkv(x).view(B, T, 3, s.h, C // s.h).permute(2, 0, 3, 1, 4)
            o, p = sliding_chunks_unfold(q, k, v)
            return s.o(o.transpose(1, 2).reshape(B, T, C)), sliding_chunks_strided(q, k, v), p

    m = ctx.init(Attn())
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    rng = np.random.default_rng(3)
    x = ctx.t(rng.standard_normal((2, 7, 4)).astype(np.float32))

    def step(x):
        y, s2, p = m(x)
        loss = y.pow(2).mean() + 0.1 * s2.abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, p

    out = [step(x) for _ in range(2)]
    out2 = ctx.fn(step)(x)
    return {"out": out, "out2": out2, "m": m.state_dict()}


def reformer_lsh(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class LSHAttention(nn.Module):
        def __init__(s, n_buckets=4, bucket_size=2):
            super().__init__()
            s.n_buckets, s.bucket_size = n_buckets, bucket_size

        def hash_vectors(s, vecs, rotations):
            rotated = torch.einsum("btf,fh->bth", vecs, rotations)
            rotated = torch.cat([rotated, -rotated], dim=-1)
            return torch.argmax(rotated, dim=-1)

        def forward(s, qk, v, rotations):
            B, T, D = qk.shape
            buckets = s.hash_vectors(qk, rotations)
            ticker = torch.arange(T).unsqueeze(0).expand(B, T)
            buckets_and_t = T * buckets + ticker
            sbuckets_and_t, sticker = torch.sort(buckets_and_t, dim=-1)
            _, undo_sort = sticker.sort(dim=-1)
            st = sticker
            sqk = qk.gather(1, st.unsqueeze(-1).expand(-1, -1, D))
            sv = v.gather(1, st.unsqueeze(-1).expand(-1, -1, D))
            n_chunks = T // s.bucket_size
            bq = sqk.reshape(B, n_chunks, s.bucket_size, D)
            bk = F.normalize(bq, p=2, dim=-1)
            bv = sv.reshape(B, n_chunks, s.bucket_size, D)

            def look_one_back(x):
                x_extra = torch.cat([x[:, -1:, ...], x[:, :-1, ...]], dim=1)
                return torch.cat([x, x_extra], dim=2)

            bk, bv = look_one_back(bk), look_one_back(bv)
            bq_t = st.reshape(B, n_chunks, s.bucket_size)
            bkv_t = look_one_back(bq_t)
            dots = torch.einsum("bnie,bnje->bnij", bq, bk) * (D**-0.5)
            self_mask = bq_t[:, :, :, None] == bkv_t[:, :, None, :]
            dots = dots.masked_fill(self_mask, -1e5)
            lse = torch.logsumexp(dots, dim=-1, keepdim=True)
            p = torch.exp(dots - lse)
            bo = torch.einsum("bnij,bnje->bnie", p, bv)
            so = bo.reshape(B, T, D)
            out = torch.empty_like(so).scatter_(1, st.unsqueeze(-1).expand(-1, -1, D), so)
            assert torch.equal(out, so.gather(1, undo_sort.unsqueeze(-1).expand(-1, -1, D)))
            return out, buckets

    proj = ctx.init(nn.Linear(4, 8))
    attn = LSHAttention()
    opt = torch.optim.Adam(proj.parameters(), lr=1e-2)
    rng = np.random.default_rng(4)
    x = ctx.t(rng.standard_normal((2, 8, 4)).astype(np.float32))
    rot = ctx.t(rng.standard_normal((4, 2)).astype(np.float32))
    out = []
    for _ in range(2):
        qk, v = proj(x).chunk(2, dim=-1)
        o, b = attn(qk, v, rot)
        loss = (o - x).pow(2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append((loss, b))
    return {"out": out, "w": proj.weight}


PROGRAMS = [retnet, rwkv, hyena, longformer, reformer_lsh]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


def test_captured_retnet():
    check_program(retnet, capture=True)
