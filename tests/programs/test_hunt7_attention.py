"""Attention and token-mixing models as users write them: a GRU seq2seq with Bahdanau
attention and teacher forcing, MLP-Mixer, Performer-style linear attention with random
features, ALiBi attention with padding and causal masks, a Set Transformer (induced set
attention, pooling by multihead attention), FiLM-conditioned convolutions.
"""

import math

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741


def seq2seq_bahdanau(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Encoder(nn.Module):
        def __init__(s, vocab, emb, hid):
            super().__init__()
            s.emb = nn.Embedding(vocab, emb, padding_idx=0)
            s.rnn = nn.GRU(emb, hid, batch_first=True, bidirectional=True)
            s.fc = nn.Linear(2 * hid, hid)

        def forward(s, src, lengths):
            e = s.emb(src)
            packed = nn.utils.rnn.pack_padded_sequence(
                e, lengths, batch_first=True, enforce_sorted=False
            )
            out, h = s.rnn(packed)
            out, _ = nn.utils.rnn.pad_packed_sequence(
                out, batch_first=True, total_length=src.size(1)
            )
            h = torch.tanh(s.fc(torch.cat([h[-2], h[-1]], dim=1)))
            return out, h

    class Attention(nn.Module):
        def __init__(s, hid):
            super().__init__()
            s.W = nn.Linear(3 * hid, hid)
            s.v = nn.Linear(hid, 1, bias=False)

        def forward(s, h, enc, mask):
            L = enc.size(1)
            hr = h.unsqueeze(1).repeat(1, L, 1)
            energy = torch.tanh(s.W(torch.cat([hr, enc], dim=2)))
            scores = s.v(energy).squeeze(2).masked_fill(mask == 0, -1e10)
            return F.softmax(scores, dim=1)

    class Decoder(nn.Module):
        def __init__(s, vocab, emb, hid):
            super().__init__()
            s.emb = nn.Embedding(vocab, emb)
            s.attn = Attention(hid)
            s.rnn = nn.GRUCell(emb + 2 * hid, hid)
            s.out = nn.Linear(3 * hid + emb, vocab)

        def forward(s, tok, h, enc, mask):
            e = s.emb(tok)
            a = s.attn(h, enc, mask)
            ctxv = torch.bmm(a.unsqueeze(1), enc).squeeze(1)
            h = s.rnn(torch.cat([e, ctxv], 1), h)
            return s.out(torch.cat([h, ctxv, e], 1)), h, a

    V, E_, H = 12, 6, 8
    enc = ctx.init(Encoder(V, E_, H), "enc")
    dec = ctx.init(Decoder(V, E_, H), "dec")
    params = list(enc.parameters()) + list(dec.parameters())
    opt = torch.optim.Adam(params, lr=3e-3)
    rng = np.random.default_rng(0)
    lengths = np.array([5, 3, 4])
    src = np.zeros((3, 5), dtype=np.int64)
    for i, n in enumerate(lengths):
        src[i, :n] = rng.integers(1, V, n)
    src_t, len_t = ctx.t(src), ctx.t(lengths)
    trg = ctx.t(rng.integers(1, V, (3, 6)))
    force = [True, False, True, True, False]

    def step(src, lengths, trg):
        enc_out, h = enc(src, lengths)
        mask = src != 0
        tok = trg[:, 0]
        logits, attns = [], []
        for t in range(1, trg.size(1)):
            out, h, a = dec(tok, h, enc_out, mask)
            logits.append(out)
            attns.append(a)
            tok = trg[:, t] if force[t - 1] else out.argmax(1)
        logits = torch.stack(logits, 1)
        loss = F.cross_entropy(logits.reshape(-1, V), trg[:, 1:].reshape(-1), ignore_index=0)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, max_norm=1.0)
        opt.step()
        return loss, torch.stack(attns, 1)

    step = ctx.fn(step)
    out = [step(src_t, len_t, trg) for _ in range(3)]
    # greedy decoding, eval mode, no grad
    enc.eval()
    dec.eval()
    with torch.inference_mode():
        enc_out, h = enc(src_t, len_t)
        tok = torch.ones(3, dtype=torch.long)
        toks = []
        for _ in range(4):
            o, h, _ = dec(tok, h, enc_out, src_t != 0)
            tok = o.argmax(-1)
            toks.append(tok)
    return {"out": out, "greedy": torch.stack(toks, 1)}


def mlp_mixer(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class MixerBlock(nn.Module):
        def __init__(s, n_patches, dim, tok_hidden, ch_hidden):
            super().__init__()
            s.norm1 = nn.LayerNorm(dim)
            # (a bias here adds one number to all channels of a patch, which the LayerNorms
            # remove: its gradient is rounding noise that Adam would amplify)
            s.token_mlp = nn.Sequential(
                nn.Linear(n_patches, tok_hidden),
                nn.GELU(),
                nn.Linear(tok_hidden, n_patches, bias=False),
            )
            s.norm2 = nn.LayerNorm(dim)
            s.channel_mlp = nn.Sequential(
                nn.Linear(dim, ch_hidden),
                nn.GELU(approximate="tanh"),
                nn.Dropout(0.0),
                nn.Linear(ch_hidden, dim),
            )

        def forward(s, x):
            y = s.norm1(x).transpose(1, 2)
            x = x + s.token_mlp(y).transpose(1, 2)
            return x + s.channel_mlp(s.norm2(x))

    class Mixer(nn.Module):
        def __init__(s, patch=4, dim=16, depth=2, classes=5, img=8):
            super().__init__()
            n = (img // patch) ** 2
            s.stem = nn.Conv2d(3, dim, patch, patch)
            s.blocks = nn.Sequential(*[MixerBlock(n, dim, 8, 32) for _ in range(depth)])
            s.norm = nn.LayerNorm(dim)
            s.head = nn.Linear(dim, classes)

        def forward(s, x):
            x = s.stem(x).flatten(2).transpose(1, 2)
            x = s.norm(s.blocks(x))
            return s.head(x.mean(dim=1))

    m = ctx.init(Mixer())
    decay = [p for n, p in m.named_parameters() if p.ndim > 1]
    no_decay = [p for n, p in m.named_parameters() if p.ndim <= 1]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}],
        lr=1e-3,
    )
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=6, pct_start=0.3)
    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((4, 3, 8, 8)).astype(np.float32))
    y = ctx.t(rng.integers(0, 5, 4))

    def step(x, y):
        loss = F.cross_entropy(m(x), y, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    losses, lrs = [], []
    for _ in range(5):
        losses.append(step(x, y))
        sched.step()
        lrs.append(sched.get_last_lr())
    return {
        "l": losses,
        "lrs": lrs,
        "sd": dict(m.state_dict()),
        "mom": [g["betas"] for g in opt.param_groups],
    }


def performer(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def orthogonal_features(nb, d, rng):
        blocks = []
        for _ in range(math.ceil(nb / d)):
            q, _ = np.linalg.qr(rng.standard_normal((d, d)))
            blocks.append(q.T)
        W = np.concatenate(blocks)[:nb]
        norms = np.linalg.norm(rng.standard_normal((nb, d)), axis=1)
        return (W * norms[:, None]).astype(np.float32)

    def softmax_kernel(x, proj, is_query, eps=1e-4):
        d = x.shape[-1]
        x = x * d**-0.25
        xp = torch.einsum("bhnd,md->bhnm", x, proj)
        diag = (x**2).sum(-1, keepdim=True) / 2
        if is_query:
            stab = xp.amax(dim=-1, keepdim=True).detach()
        else:
            stab = xp.amax(dim=(-1, -2), keepdim=True).detach()
        return (torch.exp(xp - diag - stab) + eps) / math.sqrt(proj.shape[0])

    def linear_attention(q, k, v, causal):
        if not causal:
            kv = torch.einsum("bhnm,bhnd->bhmd", k, v)
            z = 1.0 / torch.einsum("bhnm,bhm->bhn", q, k.sum(2))
            return torch.einsum("bhnm,bhmd,bhn->bhnd", q, kv, z)
        kv = torch.einsum("bhnm,bhnd->bhnmd", k, v).cumsum(2)
        z = 1.0 / torch.einsum("bhnm,bhnm->bhn", q, k.cumsum(2))
        return torch.einsum("bhnm,bhnmd,bhn->bhnd", q, kv, z)

    class PerformerLayer(nn.Module):
        def __init__(s, dim, heads, proj, causal):
            super().__init__()
            s.h, s.causal = heads, causal
            s.qkv = nn.Linear(dim, 3 * dim)
            s.out = nn.Linear(dim, dim)
            s.register_buffer("proj", proj)
            s.ff = nn.Sequential(
                nn.LayerNorm(dim), nn.Linear(dim, 2 * dim), nn.SiLU(), nn.Linear(2 * dim, dim)
            )
            s.ln = nn.LayerNorm(dim)

        def forward(s, x):
            B, N, D = x.shape
            q, k, v = s.qkv(s.ln(x)).view(B, N, 3, s.h, D // s.h).permute(2, 0, 3, 1, 4)
            qp = softmax_kernel(q, s.proj, True)
            kp = softmax_kernel(k, s.proj, False)
            o = linear_attention(qp, kp, v, s.causal)
            x = x + s.out(o.transpose(1, 2).reshape(B, N, D))
            return x + s.ff(x)

    rng = np.random.default_rng(2)
    proj = ctx.t(orthogonal_features(6, 4, rng))
    m = ctx.init(
        nn.Sequential(
            PerformerLayer(8, 2, proj, False), PerformerLayer(8, 2, proj, True), nn.Linear(8, 1)
        )
    )
    opt = torch.optim.RAdam(m.parameters(), lr=2e-3)
    x = ctx.t(rng.standard_normal((2, 5, 8)).astype(np.float32))
    y = ctx.t(rng.standard_normal((2, 5, 1)).astype(np.float32))

    def step(x, y):
        loss = F.huber_loss(m(x), y, delta=0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    out = [step(x, y) for _ in range(3)]
    # the estimate against exact softmax attention
    q = k = x.view(2, 5, 2, 4).transpose(1, 2)
    approx = linear_attention(
        softmax_kernel(q, proj, True), softmax_kernel(k, proj, False), q, False
    )
    exact = F.scaled_dot_product_attention(q, k, q)
    return {"l": out, "approx": approx, "exact": exact, "p": m[0].qkv.weight}


def alibi_attention(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def alibi_slopes(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return torch.tensor([start * start**i for i in range(n)])

    class ALiBiBlock(nn.Module):
        def __init__(s, dim, heads):
            super().__init__()
            s.h = heads
            s.qkv = nn.Linear(dim, 3 * dim, bias=False)
            s.proj = nn.Linear(dim, dim)
            s.n1, s.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
            s.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
            s.register_buffer("slopes", alibi_slopes(heads).view(1, heads, 1, 1), persistent=False)

        def forward(s, x, pad_mask):
            B, T, C = x.shape
            q, k, v = s.qkv(s.n1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, s.h, C // s.h).transpose(1, 2) for t in (q, k, v))
            pos = torch.arange(T)
            rel = (pos[None, :] - pos[:, None]).float()
            bias = s.slopes * rel
            causal = torch.ones(T, T, dtype=torch.bool).triu(1)
            bias = bias.masked_fill(causal, float("-inf"))
            bias = bias.masked_fill(~pad_mask[:, None, None, :], float("-inf"))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1)) + bias
            att = torch.nan_to_num(att.softmax(-1), nan=0.0)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            y2 = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
            x = x + s.proj(y)
            return x + s.mlp(s.n2(x)), (y2.transpose(1, 2).reshape(B, T, C) - y).abs().max()

    blocks = ctx.init(nn.ModuleList([ALiBiBlock(8, 4), ALiBiBlock(8, 4)]))
    emb = ctx.init(nn.Embedding(10, 8), "emb")
    head = ctx.init(nn.Linear(8, 10), "head")
    params = [*blocks.parameters(), *emb.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3)
    rng = np.random.default_rng(3)
    ids = ctx.t(rng.integers(0, 10, (3, 6)))
    pad = ctx.t(np.array([[1] * 6, [1] * 4 + [0] * 2, [1] * 5 + [0]], dtype=bool))

    def step(ids, pad):
        x = emb(ids)
        diffs = []
        for b in blocks:
            x, d = b(x, pad)
            diffs.append(d)
        logits = head(x)[:, :-1]
        tgt = ids[:, 1:].masked_fill(~pad[:, 1:], -100)
        loss = F.cross_entropy(logits.transpose(1, 2), tgt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, torch.stack(diffs)

    step = ctx.fn(step)
    out = [step(ids, pad) for _ in range(3)]
    losses = [o[0] for o in out]
    diffs = torch.stack([o[1] for o in out])
    return {
        "l": losses,
        "diff_small": bool((diffs < 1e-5).all()),
        "slopes": blocks[0].slopes,
        "keys": sorted(blocks.state_dict()),
    }


def set_transformer(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class MAB(nn.Module):
        def __init__(s, dq, dk, dv, heads, ln=True):
            super().__init__()
            # (no biases: the key bias's gradient is zero, softmax ignores a shift)
            s.attn = nn.MultiheadAttention(
                dv, heads, batch_first=True, kdim=dk, vdim=dk, bias=False
            )
            s.fc_q = nn.Linear(dq, dv)
            s.ln0 = nn.LayerNorm(dv) if ln else nn.Identity()
            s.ln1 = nn.LayerNorm(dv) if ln else nn.Identity()
            s.ff = nn.Linear(dv, dv)

        def forward(s, Q, K, key_padding_mask=None):
            q = s.fc_q(Q)
            h, w = s.attn(
                q,
                K,
                K,
                key_padding_mask=key_padding_mask,
                need_weights=True,
                average_attn_weights=False,
            )
            h = s.ln0(q + h)
            return s.ln1(h + F.relu(s.ff(h))), w

    class ISAB(nn.Module):
        def __init__(s, din, dout, heads, m):
            super().__init__()
            s.I = nn.Parameter(torch.empty(1, m, dout))
            nn.init.xavier_uniform_(s.I)
            s.mab0 = MAB(dout, din, dout, heads)
            s.mab1 = MAB(din, dout, dout, heads)

        def forward(s, X, mask):
            H, _ = s.mab0(s.I.expand(X.size(0), -1, -1), X, key_padding_mask=mask)
            out, _ = s.mab1(X, H)
            return out

    class PMA(nn.Module):
        def __init__(s, dim, heads, k):
            super().__init__()
            s.S = nn.Parameter(torch.randn(1, k, dim) * 0.1)
            s.mab = MAB(dim, dim, dim, heads)

        def forward(s, X, mask):
            return s.mab(s.S.repeat(X.size(0), 1, 1), X, key_padding_mask=mask)

    class SetTransformer(nn.Module):
        def __init__(s):
            super().__init__()
            s.enc1 = ISAB(2, 8, 2, 3)
            s.enc2 = ISAB(8, 8, 2, 3)
            s.pma = PMA(8, 2, 1)
            s.dec = nn.Linear(8, 1)

        def forward(s, X, mask):
            h = s.enc2(s.enc1(X, mask), mask)
            pooled, w = s.pma(h, mask)
            return s.dec(pooled).squeeze(-1).squeeze(-1), w

    m = ctx.init(SetTransformer())
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    rng = np.random.default_rng(4)
    X = rng.standard_normal((4, 7, 2)).astype(np.float32)
    sizes = np.array([7, 5, 3, 6])
    mask = np.arange(7)[None, :] >= sizes[:, None]
    X[mask] = 0
    y = np.array([X[i, : sizes[i], 0].max() for i in range(4)], dtype=np.float32)
    X, mask, y = ctx.t(X), ctx.t(mask), ctx.t(y)

    def step(X, mask, y):
        pred, w = m(X, mask)
        loss = F.l1_loss(pred, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, w

    step = ctx.fn(step)
    out = [step(X, mask, y) for _ in range(3)]
    # permutation invariance
    perm = torch.tensor([3, 1, 0, 2, 4, 6, 5])
    with torch.no_grad():
        a, _ = m(X[:1, :], mask[:1])
        b, _ = m(X[:1, perm], mask[:1, perm])
    return {"out": out, "inv": (a - b).abs().max() < 1e-5, "a": a}


def film(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class FiLMBlock(nn.Module):
        def __init__(s, ch, cond_dim):
            super().__init__()
            s.conv = nn.Conv2d(ch, ch, 3, padding=1, bias=False)  # (BatchNorm follows)
            s.bn = nn.BatchNorm2d(ch, affine=False)
            s.film = nn.Linear(cond_dim, 2 * ch)

        def forward(s, x, c):
            gamma, beta = s.film(c).chunk(2, dim=-1)
            h = s.bn(s.conv(x))
            h = gamma[..., None, None] * h + beta[:, :, None, None]
            return x + F.relu(h)

    class CondLayerNorm(nn.Module):
        def __init__(s, dim, cond_dim):
            super().__init__()
            s.ln = nn.LayerNorm(dim, elementwise_affine=False)
            s.to_scale = nn.Linear(cond_dim, dim)
            s.to_shift = nn.Linear(cond_dim, dim)
            nn.init.zeros_(s.to_scale.weight)
            nn.init.ones_(s.to_scale.bias)

        def forward(s, x, c):
            return s.ln(x) * s.to_scale(c).unsqueeze(1) + s.to_shift(c).unsqueeze(1)

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.q_emb = nn.EmbeddingBag(20, 6, mode="mean")
            s.stem = nn.Conv2d(3, 8, 3, padding=1)
            s.blocks = nn.ModuleList([FiLMBlock(8, 6) for _ in range(2)])
            s.cln = CondLayerNorm(8, 6)
            s.head = nn.Linear(8, 4)

        def forward(s, img, q, offsets):
            c = s.q_emb(q, offsets)
            x = s.stem(img)
            for b in s.blocks:
                x = b(x, c)
            tokens = x.flatten(2).transpose(1, 2)
            tokens = s.cln(tokens, c)
            return s.head(tokens.max(dim=1).values)

    m = ctx.init(Net())
    opt = torch.optim.Adagrad(m.parameters(), lr=0.05, lr_decay=0.01)
    rng = np.random.default_rng(5)
    img = ctx.t(rng.standard_normal((3, 3, 6, 6)).astype(np.float32))
    q = ctx.t(rng.integers(0, 20, 9))
    offsets = ctx.t(np.array([0, 2, 6]))
    y = ctx.t(rng.integers(0, 4, 3))

    def step(img, q, offsets, y):
        out = m(img, q, offsets)
        loss = F.multi_margin_loss(out, y, margin=0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, out

    step = ctx.fn(step)
    out = [step(img, q, offsets, y) for _ in range(3)]
    return {"out": out, "sd": dict(m.state_dict())}


PROGRAMS = [seq2seq_bahdanau, mlp_mixer, performer, alibi_attention, set_transformer, film]
CAPTURED = PROGRAMS


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
