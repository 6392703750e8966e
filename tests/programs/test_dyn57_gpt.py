"""A nanoGPT-style model compiled with ``torch.compile`` (dyn57), run on PyTorch (its eager
backend) and on ember (automatic dynamic shapes): trained on batches of several lengths, then
generating greedily with a growing sequence. Its Python compares the length with the block
size (``assert t <= block_size``, the crop ``idx if idx.size(1) <= block_size else ...``) and
slices a causal-mask buffer by it (``bias[:, :, :T, :T]``): those comparisons become guards on
the symbolic length, so the length stays symbolic and a handful of traces serve every length."""

import math

import numpy as np

from .harness import check_program

# ruff: noqa: N806


def nano_gpt_train_and_generate(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    block_size, vocab, d, heads = 16, 23, 32, 4

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(d, 3 * d)
            self.c_proj = nn.Linear(d, d)
            mask = torch.tril(torch.ones(block_size, block_size))
            self.register_buffer("bias", mask.view(1, 1, block_size, block_size))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(d, dim=2)
            k = k.view(B, T, heads, C // heads).transpose(1, 2)
            q = q.view(B, T, heads, C // heads).transpose(1, 2)
            v = v.view(B, T, heads, C // heads).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(d), CausalSelfAttention()
            self.ln_2 = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block_size, d)
            self.h = nn.ModuleList([Block(), Block()])
            self.ln_f, self.lm_head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

        def forward(self, idx, targets=None):
            b, t = idx.size()
            assert t <= block_size, f"Cannot forward sequence of length {t}"
            pos = torch.arange(0, t, dtype=torch.long)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            if targets is None:
                return logits[:, [-1], :], None
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
            return logits, loss

    model = ctx.init(GPT())
    compiled = torch.compile(model, backend="eager") if ctx.is_torch else torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(0)
    losses = []
    for T in (12, 9, 16, 12, 5, 14):
        data = rng.integers(0, vocab, (3, T + 1))
        _, loss = compiled(ctx.t(data[:, :-1]), targets=ctx.t(data[:, 1:]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss)
    model.eval()
    idx = ctx.t(rng.integers(0, vocab, (2, 3)))
    with torch.no_grad():
        for _ in range(20):  # (lengths 3 to 22: cropped to the block size from 17 on)
            idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
            logits, _ = compiled(idx_cond)
            idx = torch.cat((idx, logits[:, -1, :].argmax(-1, keepdim=True)), dim=1)
    if not ctx.is_torch:
        c = compiled.__dict__["_compiled"]
        auto = c.automatic
        symbolic = sum(f.stats.traces for f in auto.functions.values())
        # training: the first length, then T symbolic; generation: the first eval shape, T
        # symbolic (plus a trace for T = 1, 0 and 1 being specialized: never here)
        assert not auto.failed and (c.function.stats.traces, symbolic) == (2, 2), (
            c.function.stats.traces,
            symbolic,
        )
    return losses, idx, [p.detach() for p in model.parameters()]


def test_nano_gpt_train_and_generate():
    check_program(nano_gpt_train_and_generate)
