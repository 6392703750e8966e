"""Model programs of hunt15: a Mixture-of-Experts layer with top-k routing and a load-balancing
loss, rotary embeddings with a KV cache decoding loop, a Perceiver cross-attention block, a
diffusion sampler with classifier-free guidance, and a graph attention network over scatter ops.
"""

import math

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007


def moe_topk(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class MoE(nn.Module):
        def __init__(self, d=8, n_exp=4, k=2, hidden=12):
            super().__init__()
            self.k, self.n_exp = k, n_exp
            self.gate = nn.Linear(d, n_exp, bias=False)
            self.experts = nn.ModuleList(
                nn.Sequential(nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, d))
                for _ in range(n_exp)
            )

        def forward(self, x):
            B, T, D = x.shape
            flat = x.reshape(-1, D)
            logits = self.gate(flat)
            probs = logits.softmax(dim=-1)
            topv, topi = torch.topk(probs, self.k, dim=-1)
            topv = topv / topv.sum(dim=-1, keepdim=True)
            out = torch.zeros_like(flat)
            for e, expert in enumerate(self.experts):
                tok, slot = torch.where(topi == e)
                if tok.numel() == 0:
                    continue
                y = expert(flat[tok]) * topv[tok, slot].unsqueeze(-1)
                out.index_add_(0, tok, y)
            # Switch-style load balancing: fraction routed x mean gate probability
            mask = F.one_hot(topi[:, 0], self.n_exp).float()
            frac = mask.mean(dim=0)
            aux = self.n_exp * (frac * probs.mean(dim=0)).sum()
            z = torch.logsumexp(logits, dim=-1).pow(2).mean()
            counts = torch.bincount(topi.flatten(), minlength=self.n_exp)
            return out.view(B, T, D), aux, z, counts

    model = ctx.init(MoE())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((2, 5, 8)).astype(np.float32))
    target = ctx.t(rng.standard_normal((2, 5, 8)).astype(np.float32))
    out = []
    for _ in range(3):
        y, aux, z, counts = model(x)
        loss = F.mse_loss(y, target) + 0.01 * aux + 1e-3 * z
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        out.append([loss, aux, counts])
    return [out, model.gate.weight, model.experts[1][0].weight.grad]


def rope_kv_cache(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def rope_tables(dim, n, base=10000.0):
        inv = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        t = torch.arange(n, dtype=torch.float32)
        freqs = torch.outer(t, inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
        return torch.cat((-x2, x1), dim=-1)

    class Block(nn.Module):
        def __init__(self, d=16, h=2, max_len=12):
            super().__init__()
            self.h, self.hd = h, d // h
            self.qkv = nn.Linear(d, 3 * d, bias=False)
            self.o = nn.Linear(d, d, bias=False)
            self.norm = nn.RMSNorm(d) if hasattr(nn, "RMSNorm") else nn.LayerNorm(d)
            cos, sin = rope_tables(self.hd, max_len)
            self.register_buffer("cos", cos, persistent=False)
            self.register_buffer("sin", sin, persistent=False)

        def forward(self, x, cache=None, pos=0):
            B, T, D = x.shape
            q, k, v = self.qkv(self.norm(x)).split(D, dim=-1)
            q, k, v = (t.view(B, T, self.h, self.hd).transpose(1, 2) for t in (q, k, v))
            cos, sin = self.cos[pos : pos + T], self.sin[pos : pos + T]
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            if cache is not None:
                k = torch.cat([cache[0], k], dim=2)
                v = torch.cat([cache[1], v], dim=2)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
            a = a.transpose(1, 2).contiguous().view(B, T, D)
            return x + self.o(a), (k, v)

    model = ctx.init(Block())
    model.eval()
    emb = ctx.init(nn.Embedding(10, 16), "emb")
    head = ctx.init(nn.Linear(16, 10), "head")
    prompt = ctx.t(np.array([[1, 4, 2], [3, 3, 7]]))
    with torch.inference_mode():
        h, cache = model(emb(prompt))
        full_logits = head(h)
        tok = full_logits[:, -1].argmax(-1, keepdim=True)
        generated = [tok]
        pos = prompt.shape[1]
        for _ in range(4):
            h, cache = model(emb(tok), cache, pos)
            pos += 1
            tok = head(h)[:, -1].argmax(-1, keepdim=True)
            generated.append(tok)
        seq = torch.cat([prompt] + generated, dim=1)
        # the cached decode equals a full causal pass over the same tokens
        h_full, _ = model(emb(seq[:, :-1]))
        ref = head(h_full)[:, -1]
    return [full_logits, seq, ref, cache[0].shape[2], h.is_inference()]


def perceiver(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class CrossBlock(nn.Module):
        def __init__(self, n_lat=4, d_lat=8, d_in=6, heads=2):
            super().__init__()
            self.latents = nn.Parameter(torch.zeros(n_lat, d_lat))
            self.ln_q, self.ln_kv = nn.LayerNorm(d_lat), nn.LayerNorm(d_in)
            self.cross = nn.MultiheadAttention(d_lat, heads, kdim=d_in, vdim=d_in, batch_first=True)
            self.self_attn = nn.TransformerEncoderLayer(
                d_lat, heads, 16, dropout=0.0, batch_first=True, norm_first=True
            )
            self.head = nn.Linear(d_lat, 3)

        def forward(self, x, pad):
            lat = self.latents.unsqueeze(0).expand(x.size(0), -1, -1)
            a, w = self.cross(
                self.ln_q(lat),
                self.ln_kv(x),
                self.ln_kv(x),
                key_padding_mask=pad,
                need_weights=True,
                average_attn_weights=False,
            )
            lat = lat + a
            lat = self.self_attn(lat)
            return self.head(lat.mean(1)), w

    model = CrossBlock()
    with torch.no_grad():
        model.latents.copy_(torch.linspace(-1, 1, 32).view(4, 8))
    model = ctx.init(model)
    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((3, 7, 6)).astype(np.float32))
    lengths = ctx.t(np.array([7, 4, 5]))
    pad = torch.arange(7)[None, :] >= lengths[:, None]
    y = ctx.t(np.array([0, 2, 1]))
    # (SGD: the key bias's gradient is zero but for rounding, which Adam would scale up to lr)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)

    def step(x, pad, y):
        logits, w = model(x, pad)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, w

    step = ctx.fn(step)
    out = [step(x, pad, y) for _ in range(3)]
    return [
        out,
        model.latents,
        model.cross.in_proj_weight is None,  # (kdim != embed_dim: separate projections)
        model.cross.k_proj_weight,
        model.cross.in_proj_bias.grad,
    ]


def diffusion_cfg(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def timestep_embedding(t, dim):
        half = dim // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
        args = t[:, None].float() * freqs[None]
        return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

    class Denoiser(nn.Module):
        def __init__(self, d=6, n_cls=3):
            super().__init__()
            self.cls = nn.Embedding(n_cls + 1, 8)  # last index = null class
            self.net = nn.Sequential(nn.Linear(d + 8 + 8, 32), nn.SiLU(), nn.Linear(32, d))

        def forward(self, x, t, c):
            h = torch.cat([x, timestep_embedding(t, 8), self.cls(c)], dim=-1)
            return self.net(h)

    T = 10
    betas = torch.linspace(1e-4, 0.2, T, dtype=torch.float64).float()
    alphas = 1.0 - betas
    abar = torch.cumprod(alphas, dim=0)
    model = ctx.init(Denoiser())
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(2)
    x0 = ctx.t(rng.standard_normal((8, 6)).astype(np.float32))
    c = ctx.t(rng.integers(0, 3, 8))
    drop = ctx.t(rng.random(8) < 0.3)
    c_in = torch.where(drop, torch.full_like(c, 3), c)
    t = ctx.t(rng.integers(0, T, 8))
    noise = ctx.t(rng.standard_normal((8, 6)).astype(np.float32))

    def train_step(x0, t, c_in, noise):
        a = abar.gather(0, t).view(-1, 1)
        xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
        loss = F.mse_loss(model(xt, t, c_in), noise)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    train_step = ctx.fn(train_step)
    losses = [train_step(x0, t, c_in, noise) for _ in range(2)]

    # DDPM ancestral sampling with guidance scale w
    w = 2.5
    x = ctx.t(rng.standard_normal((4, 6)).astype(np.float32))
    zs = ctx.t(rng.standard_normal((T, 4, 6)).astype(np.float32))
    cond = ctx.t(np.array([0, 1, 2, 1]))
    model.eval()
    with torch.no_grad():
        for i in reversed(range(T)):
            tt = torch.full((4,), i, dtype=torch.long)
            both = model(
                torch.cat([x, x]), torch.cat([tt, tt]), torch.cat([cond, torch.full_like(cond, 3)])
            )
            eps_c, eps_u = both.chunk(2)
            eps = eps_u + w * (eps_c - eps_u)
            mean = (x - betas[i] / (1 - abar[i]).sqrt() * eps) / alphas[i].sqrt()
            if i > 0:
                var = betas[i] * (1 - abar[i - 1]) / (1 - abar[i])
                x = mean + var.sqrt() * zs[i]
            else:
                x = mean
        x = x.clamp(-3, 3)
    return [losses, x, abar]


def gat_scatter(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class GATLayer(nn.Module):
        def __init__(self, din, dout, heads=2):
            super().__init__()
            self.h, self.d = heads, dout
            self.lin = nn.Linear(din, heads * dout, bias=False)
            self.a_src = nn.Parameter(torch.empty(1, heads, dout))
            self.a_dst = nn.Parameter(torch.empty(1, heads, dout))
            nn.init.xavier_uniform_(self.a_src)
            nn.init.xavier_uniform_(self.a_dst)

        def forward(self, x, edge_index):
            N = x.size(0)
            src, dst = edge_index
            h = self.lin(x).view(N, self.h, self.d)
            e = (h * self.a_src).sum(-1)[src] + (h * self.a_dst).sum(-1)[dst]
            e = F.leaky_relu(e, 0.2)
            # softmax over incoming edges per destination node
            emax = torch.full((N, self.h), float("-inf")).scatter_reduce(
                0, dst.unsqueeze(-1).expand_as(e), e, reduce="amax", include_self=True
            )
            ex = (e - emax[dst]).exp()
            denom = torch.zeros(N, self.h).index_add(0, dst, ex)
            alpha = ex / denom[dst]
            msg = h[src] * alpha.unsqueeze(-1)
            out = torch.zeros_like(h).scatter_add_(0, dst.view(-1, 1, 1).expand_as(msg), msg)
            return out.flatten(1), alpha

    torch.manual_seed(0)
    l1 = ctx.init(GATLayer(4, 5), "l1")
    l2 = ctx.init(GATLayer(10, 3, heads=1), "l2")
    rng = np.random.default_rng(3)
    N = 6
    x = ctx.t(rng.standard_normal((N, 4)).astype(np.float32))
    edges = np.array([[0, 1, 2, 3, 4, 5, 0, 2, 1], [1, 2, 3, 4, 5, 0, 3, 5, 4]])
    ei = ctx.t(edges)
    loops = torch.arange(N).repeat(2, 1)
    ei = torch.cat([ei, loops], dim=1)
    y = ctx.t(rng.integers(0, 3, N))
    train_mask = ctx.t(np.array([1, 1, 0, 1, 0, 1], dtype=bool))
    params = list(l1.parameters()) + list(l2.parameters())
    opt = torch.optim.Adam(params, lr=0.01, weight_decay=5e-4)
    out = []
    for _ in range(3):
        h, a1 = l1(x, ei)
        h = F.elu(h)
        logits, _ = l2(h, ei)
        loss = F.cross_entropy(logits[train_mask], y[train_mask])
        opt.zero_grad()
        loss.backward()
        opt.step()
        acc = (logits.argmax(1) == y).float().mean().item()
        out.append([loss, acc])
    deg = torch.bincount(ei[1], minlength=N)
    return [out, a1, deg, l1.a_src.grad]


PROGRAMS = [moe_topk, rope_kv_cache, perceiver, diffusion_cfg, gat_scatter]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", [perceiver, diffusion_cfg], ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
