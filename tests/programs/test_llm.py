"""A LLaMA-style decoder as a whole PyTorch program: RMSNorm, rotary embeddings in the complex
and the cos/sin forms, SwiGLU, grouped-query attention, scaled_dot_product_attention with
is_causal and attn_mask, a KV-cache generation loop with top-k/top-p sampling.
"""

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def llama(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class RMSNorm(nn.Module):
        def __init__(s, d, eps=1e-6):
            super().__init__()
            s.eps = eps
            s.weight = nn.Parameter(torch.ones(d))

        def forward(s, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + s.eps) * s.weight

    def precompute_freqs_cis(dim, end, theta=10000.0):
        freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
        t = torch.arange(end, dtype=torch.float32)
        freqs = torch.outer(t, freqs)
        return torch.polar(torch.ones_like(freqs), freqs)

    def apply_rotary_complex(x, fc):
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        out = torch.view_as_real(xc * fc[None, :, None, :]).flatten(3)
        return out.type_as(x)

    def rotate_half(x):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    def apply_rotary_cos_sin(x, cos, sin):
        return x * cos + rotate_half(x) * sin

    class Attention(nn.Module):
        def __init__(s, d, nh, nkv, complex_rope):
            super().__init__()
            s.nh, s.nkv, s.hd = nh, nkv, d // nh
            s.wq = nn.Linear(d, nh * s.hd, bias=False)
            s.wk = nn.Linear(d, nkv * s.hd, bias=False)
            s.wv = nn.Linear(d, nkv * s.hd, bias=False)
            s.wo = nn.Linear(nh * s.hd, d, bias=False)
            s.complex_rope = complex_rope

        def forward(s, x, pos, rope, cache=None):
            B, L, _ = x.shape
            q = s.wq(x).view(B, L, s.nh, s.hd)
            k = s.wk(x).view(B, L, s.nkv, s.hd)
            v = s.wv(x).view(B, L, s.nkv, s.hd)
            if s.complex_rope:
                fc = rope[0][pos : pos + L]
                q, k = apply_rotary_complex(q, fc), apply_rotary_complex(k, fc)
            else:
                cos = rope[1][pos : pos + L][None, :, None, :]
                sin = rope[2][pos : pos + L][None, :, None, :]
                q, k = apply_rotary_cos_sin(q, cos, sin), apply_rotary_cos_sin(k, cos, sin)
            if cache is not None:
                if "k" in cache:
                    k = torch.cat([cache["k"], k], dim=1)
                    v = torch.cat([cache["v"], v], dim=1)
                cache["k"], cache["v"] = k, v
            rep = s.nh // s.nkv
            k = k.repeat_interleave(rep, dim=2)
            v = torch.repeat_interleave(v, repeats=rep, dim=2)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            if cache is None:
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            elif L > 1:
                S = k.shape[2]
                mask = torch.ones(L, S, dtype=torch.bool).tril(diagonal=S - L)
                o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
            else:
                o = F.scaled_dot_product_attention(q, k, v)
            return s.wo(o.transpose(1, 2).reshape(B, L, -1))

    class Block(nn.Module):
        def __init__(s, d, nh, nkv, complex_rope):
            super().__init__()
            s.attn_norm = RMSNorm(d)
            s.attn = Attention(d, nh, nkv, complex_rope)
            s.ffn_norm = RMSNorm(d)
            s.w1 = nn.Linear(d, 2 * d, bias=False)
            s.w3 = nn.Linear(d, 2 * d, bias=False)
            s.w2 = nn.Linear(2 * d, d, bias=False)

        def forward(s, x, pos, rope, cache=None):
            x = x + s.attn(s.attn_norm(x), pos, rope, cache)
            h = s.ffn_norm(x)
            return x + s.w2(F.silu(s.w1(h)) * s.w3(h))

    class LM(nn.Module):
        def __init__(s, V=24, d=16, nh=4, nkv=2, L=2, maxlen=16):
            super().__init__()
            s.emb = nn.Embedding(V, d)
            s.layers = nn.ModuleList([Block(d, nh, nkv, i % 2 == 0) for i in range(L)])
            s.norm = RMSNorm(d)
            s.out = nn.Linear(d, V, bias=False)
            hd = d // nh
            fc = precompute_freqs_cis(hd, maxlen)
            ang = torch.cat([fc.angle(), fc.angle()], dim=-1)
            s.rope = (fc, ang.cos(), ang.sin())

        def forward(s, idx, pos=0, caches=None):
            h = s.emb(idx)
            for i, layer in enumerate(s.layers):
                h = layer(h, pos, s.rope, None if caches is None else caches[i])
            return s.out(s.norm(h))

    m = ctx.init(LM())
    opt = torch.optim.AdamW(m.parameters(), lr=3e-3, betas=(0.9, 0.95))
    rng = np.random.default_rng(2)
    data = ctx.t(rng.integers(0, 24, (3, 9)))

    def step(batch):
        logits = m(batch[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    losses = [step(data).item() for _ in range(3)]

    m.eval()
    gen = torch.Generator().manual_seed(0)

    @torch.no_grad()
    def generate(prompt, n, top_k=5, top_p=0.9, temp=0.8):
        caches = [{} for _ in m.layers]
        logits = m(prompt, 0, caches)[:, -1]
        out, greedy, pos = [], [], prompt.shape[1]
        for _ in range(n):
            greedy.append(logits.argmax(-1))
            logits = logits / temp
            v, _ = torch.topk(logits, top_k)
            logits[logits < v[:, [-1]]] = -float("inf")
            probs = F.softmax(logits, dim=-1)
            sp, si = torch.sort(probs, descending=True)
            cum = sp.cumsum(-1)
            sp[cum - sp > top_p] = 0.0
            sp.div_(sp.sum(dim=-1, keepdim=True))
            nxt = torch.gather(si, -1, torch.multinomial(sp, 1, generator=gen))
            out.append(nxt)
            # the libraries' generators differ: continue with the greedy token
            logits = m(greedy[-1][:, None], pos, caches)[:, -1]
            pos += 1
        return torch.cat(out, 1), torch.stack(greedy, 1), caches[0]["k"].shape

    sampled, greedy, kshape = generate(data[:, :4], 5)
    # a full pass with the cache over the same tokens agrees with the uncached one
    full = m(data[:, :6])
    caches = [{} for _ in m.layers]
    part = torch.cat([m(data[:, :4], 0, caches), m(data[:, 4:6], 4, caches)], 1)
    ok = bool(((sampled >= 0) & (sampled < 24)).all())
    return {
        "l": losses,
        "greedy": greedy,
        "valid": ok,
        "kshape": list(kshape),
        "full": full,
        "part": part,
    }


PROGRAMS = [llama]
CAPTURED = [llama]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
