"""torch.compile'd attention with sequence lengths that vary between calls (dyn57), run on
PyTorch (its eager backend) and on ember (automatic dynamic shapes): rotary embeddings from
``torch.arange(T)``, a causal mask from ``T``, heads split by ``view``/``reshape`` and merged
by ``transpose(1, 2).contiguous().view(B, T, C)``; one symbolic trace serves every length."""

import numpy as np

from .harness import check_program

# ruff: noqa: N806


def _traces(compiled) -> tuple[int, int, bool]:
    c = compiled.__dict__["forward"].compiled
    auto = c.automatic
    return (
        c.function.stats.traces,
        sum(f.stats.traces for f in auto.functions.values()),
        auto.failed,
    )


def rotary_causal_attention(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Attention(nn.Module):
        def __init__(self, d=32, h=4):
            super().__init__()
            self.h, self.dh = h, d // h
            self.qkv = nn.Linear(d, 3 * d, bias=False)
            self.o = nn.Linear(d, d)
            inv = 1.0 / (10000 ** (torch.arange(0, self.dh, 2).float() / self.dh))
            self.register_buffer("inv_freq", inv, persistent=False)

        def rope(self, x):
            t = torch.arange(x.shape[-2], dtype=torch.float32)
            freqs = torch.einsum("i,j->ij", t, self.inv_freq)
            emb = torch.cat([freqs, freqs], dim=-1)
            cos, sin = emb.cos()[None, None], emb.sin()[None, None]
            x1, x2 = x[..., : self.dh // 2], x[..., self.dh // 2 :]
            return x * cos + torch.cat([-x2, x1], dim=-1) * sin

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(x).split(C, dim=-1)
            q = q.reshape(B, T, self.h, self.dh).transpose(1, 2)
            k = k.view(B, T, self.h, self.dh).transpose(1, 2)
            v = v.view(B, T, self.h, self.dh).permute(0, 2, 1, 3)
            q, k = self.rope(q), self.rope(k)
            att = torch.einsum("bhid,bhjd->bhij", q, k) / self.dh**0.5
            mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
            att = att.masked_fill(~mask, float("-inf")).softmax(-1)
            # (a transpose's contiguous() copy, viewed: its layout decided at the call's sizes)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o(y + sdpa.transpose(1, 2).reshape(B, T, C))

    model = ctx.init(Attention())
    model.compile(**({"backend": "eager"} if ctx.is_torch else {}))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rng = np.random.default_rng(7)
    out = []
    for B, T in [(2, 8), (2, 13), (2, 21), (3, 8), (2, 17), (5, 3)]:
        x = ctx.t(rng.standard_normal((B, T, 32)).astype(np.float32))
        y = model(x)
        loss = y.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out += [y, loss]
    if not ctx.is_torch:
        # the first shape, T symbolic, then B too: no trace per length, no static fallback
        assert _traces(model) == (1, 2, False), _traces(model)
    return out, [p.detach() for p in model.parameters()]


def test_rotary_causal_attention():
    check_program(rotary_causal_attention)
