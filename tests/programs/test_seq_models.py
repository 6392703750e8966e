"""Sequence models as whole PyTorch programs: a BERT-style masked LM with padding masks, the full
nn.Transformer with greedy and beam-search decoding, a WaveNet with gated dilated causal
convolutions and parametrizations, a neural ODE integrated with a hand-written RK4 loop.
"""

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def bert_mlm(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    V, PAD, MASK, D = 30, 0, 1, 16

    class Layer(nn.Module):
        def __init__(s):
            super().__init__()
            s.mha = nn.MultiheadAttention(D, 4, dropout=0.0, batch_first=True)
            s.ln1 = nn.LayerNorm(D)
            s.ff = nn.Sequential(nn.Linear(D, 32), nn.GELU(approximate="tanh"), nn.Linear(32, D))
            s.ln2 = nn.LayerNorm(D)

        def forward(s, x, pad):
            a, w = s.mha(x, x, x, key_padding_mask=pad, need_weights=True)
            x = s.ln1(x + a)
            return s.ln2(x + s.ff(x)), w

    class Bert(nn.Module):
        def __init__(s):
            super().__init__()
            s.tok = nn.Embedding(V, D, padding_idx=PAD)
            s.pos = nn.Embedding(12, D)
            s.typ = nn.Embedding(2, D)
            s.ln = nn.LayerNorm(D)
            s.layers = nn.ModuleList([Layer(), Layer()])
            s.head = nn.Linear(D, V)
            s.head.weight = s.tok.weight
            s.cls = nn.Linear(D, 2)

        def forward(s, ids, types):
            pad = ids == PAD
            pos = torch.arange(ids.size(1)).unsqueeze(0).expand_as(ids)
            h = s.ln(s.tok(ids) + s.pos(pos) + s.typ(types))
            ws = []
            for layer in s.layers:
                h, w = layer(h, pad)
                ws.append(w)
            return s.head(h), s.cls(torch.tanh(h[:, 0])), ws

    m = ctx.init(Bert())
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, eps=1e-6)
    rng = np.random.default_rng(3)
    lens = [10, 7, 5]
    ids = np.zeros((3, 10), np.int64)
    for i, n in enumerate(lens):
        ids[i, :n] = rng.integers(2, V, n)
    types = (np.arange(10)[None] >= np.array([5, 4, 3])[:, None]).astype(np.int64)
    ids, types = ctx.t(ids), ctx.t(types)
    sel = ctx.t(rng.random((3, 10)) < 0.3)
    nsp = ctx.t(np.array([0, 1, 1]))

    def step(ids, types, sel, nsp):
        labels = ids.masked_fill(~sel | (ids == PAD), -100)
        inp = torch.where(sel & (ids != PAD), torch.full_like(ids, MASK), ids)
        logits, cls, ws = m(inp, types)
        mlm = F.cross_entropy(logits.view(-1, V), labels.view(-1), ignore_index=-100)
        loss = mlm + F.cross_entropy(cls, nsp)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, ws[-1]

    step = ctx.fn(step)
    res = []
    for _ in range(3):
        loss, w = step(ids, types, sel, nsp)
        res.append(loss.item())
    m.eval()
    with torch.no_grad():
        logits, _, ws = m(ids, types)
        mha = m.layers[0].mha
        x = m.tok(ids)
        _, per_head = mha(x, x, x, key_padding_mask=ids == PAD, average_attn_weights=False)
        fmask = torch.zeros(3, 10).masked_fill(ids == PAD, float("-inf"))
        o2, _ = mha(x, x, x, key_padding_mask=fmask, need_weights=False)
    return {"l": res, "w": w, "logits": logits, "ph": per_head, "o2": o2}


def transformer_beam(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    V, D, BOS, EOS = 12, 16, 1, 2

    class Seq2Seq(nn.Module):
        def __init__(s):
            super().__init__()
            s.src_emb = nn.Embedding(V, D)
            s.tgt_emb = nn.Embedding(V, D)
            s.tf = nn.Transformer(
                d_model=D,
                nhead=2,
                num_encoder_layers=1,
                num_decoder_layers=2,
                dim_feedforward=24,
                dropout=0.0,
                batch_first=True,
                norm_first=True,
            )
            s.gen = nn.Linear(D, V)

        def encode(s, src, src_pad):
            return s.tf.encoder(s.src_emb(src) * D**0.5, src_key_padding_mask=src_pad)

        def decode(s, tgt, mem, src_pad):
            mask = nn.Transformer.generate_square_subsequent_mask(tgt.size(1))
            h = s.tf.decoder(s.tgt_emb(tgt), mem, tgt_mask=mask, memory_key_padding_mask=src_pad)
            return s.gen(h)

        def forward(s, src, tgt, src_pad):
            return s.decode(tgt, s.encode(src, src_pad), src_pad)

    m = ctx.init(Seq2Seq())
    # (SGD: the attention's key bias has a zero gradient in exact arithmetic, rounding noise
    # that Adam would scale up to full steps, different on each library and executor)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(4)
    src = rng.integers(3, V, (4, 6))
    src[2, 4:] = 0
    tgt = np.concatenate([np.full((4, 1), BOS), src[:, ::-1], np.full((4, 1), EOS)], 1)
    src, tgt = ctx.t(src), ctx.t(tgt)
    src_pad = src == 0

    def step(src, tgt, src_pad):
        logits = m(src, tgt[:, :-1], src_pad)
        loss = F.cross_entropy(logits.reshape(-1, V), tgt[:, 1:].reshape(-1), ignore_index=0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    losses = [step(src, tgt, src_pad).item() for _ in range(4)]
    m.eval()

    @torch.no_grad()
    def greedy(src, src_pad, n=5):
        mem = m.encode(src, src_pad)
        ys = torch.full((src.size(0), 1), BOS, dtype=torch.long)
        for _ in range(n):
            nxt = m.decode(ys, mem, src_pad)[:, -1].argmax(-1, keepdim=True)
            ys = torch.cat([ys, nxt], dim=1)
        return ys

    @torch.no_grad()
    def beam(src1, k=3, n=4):
        pad = src1 == 0
        mem = m.encode(src1, pad)
        beams = [(0.0, [BOS])]
        for _ in range(n):
            cands = []
            for score, seq in beams:
                if seq[-1] == EOS:
                    cands.append((score, seq))
                    continue
                ys = torch.tensor([seq])
                lp = F.log_softmax(m.decode(ys, mem, pad)[0, -1], dim=-1)
                top = lp.topk(k)
                for v, i in zip(top.values.tolist(), top.indices.tolist()):
                    cands.append((score + v, seq + [i]))
            beams = sorted(cands, key=lambda c: -c[0])[:k]
        return [b[1] for b in beams], [round(b[0], 3) for b in beams]

    return {
        "l": losses,
        "greedy": greedy(src, src_pad),
        "beam": beam(src[:1]),
        "mask": nn.Transformer.generate_square_subsequent_mask(4),
    }


def wavenet(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    P = nn.utils.parametrizations

    class CausalConv1d(nn.Conv1d):
        def __init__(s, cin, cout, k, dilation=1):
            super().__init__(cin, cout, k, dilation=dilation)
            s.left = (k - 1) * dilation

        def forward(s, x):
            return super().forward(F.pad(x, (s.left, 0)))

    class Residual(nn.Module):
        def __init__(s, ch, skip, d):
            super().__init__()
            s.filt = P.weight_norm(CausalConv1d(ch, ch, 2, d))
            s.gate = P.weight_norm(CausalConv1d(ch, ch, 2, d), dim=0)
            s.res = nn.Conv1d(ch, ch, 1)
            s.skip = P.spectral_norm(nn.Conv1d(ch, skip, 1))

        def forward(s, x):
            h = torch.tanh(s.filt(x)) * torch.sigmoid(s.gate(x))
            return x + s.res(h), s.skip(h)

    class WaveNet(nn.Module):
        def __init__(s, q=8, ch=6, skip=5):
            super().__init__()
            s.emb = nn.Embedding(q, ch)
            s.blocks = nn.ModuleList([Residual(ch, skip, 2**i) for i in range(3)])
            s.out = nn.Sequential(
                nn.ReLU(), nn.Conv1d(skip, skip, 1), nn.ReLU(), nn.Conv1d(skip, q, 1)
            )

        def forward(s, x):
            h = s.emb(x).transpose(1, 2)
            skips = 0
            for b in s.blocks:
                h, sk = b(h)
                skips = skips + sk
            return s.out(skips)

    m = ctx.init(WaveNet())
    opt = torch.optim.RMSprop(m.parameters(), lr=1e-2, alpha=0.9)
    rng = np.random.default_rng(5)
    # mu-law quantized sine
    t = np.linspace(0, 4 * np.pi, 17)
    wav = np.sin(t[None] + rng.random((3, 1))).astype(np.float32)
    mu = 7
    mul = np.sign(wav) * np.log1p(mu * np.abs(wav)) / np.log1p(mu)
    q = ctx.t(((mul + 1) / 2 * mu + 0.5).astype(np.int64))

    def step(q):
        logits = m(q[:, :-1])
        loss = F.cross_entropy(logits, q[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    losses = [step(q).item() for _ in range(2)]
    m.eval()
    with torch.no_grad():
        seq = q[:, :4]
        for _ in range(4):
            seq = torch.cat([seq, m(seq)[:, :, -1:].argmax(1)], 1)
        w = m.blocks[0].filt.weight
        g = m.blocks[0].filt.parametrizations.weight.original0
    return {
        "l": losses,
        "gen": seq,
        "w": w,
        "g": g,
        "keys": sorted(m.state_dict()),
    }


def neural_ode(torch, ctx):
    nn = torch.nn

    class ODEFunc(nn.Module):
        def __init__(s):
            super().__init__()
            s.net = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 2))
            s.nfe = 0

        def forward(s, t, y):
            s.nfe += 1
            tt = torch.ones_like(y[:, :1]) * t
            return s.net(torch.cat([y, tt], dim=-1))

    def rk4(f, y0, ts):
        ys = [y0]
        y = y0
        for i in range(len(ts) - 1):
            t0, dt = ts[i], ts[i + 1] - ts[i]
            k1 = f(t0, y)
            k2 = f(t0 + dt / 2, y + dt * k1 / 2)
            k3 = f(t0 + dt / 2, y + dt * k2 / 2)
            k4 = f(t0 + dt, y + dt * k3)
            y = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            ys.append(y)
        return torch.stack(ys)

    f = ctx.init(ODEFunc())
    opt = torch.optim.Adam(f.parameters(), lr=1e-2)
    ts = torch.linspace(0.0, 1.0, 6)
    rng = np.random.default_rng(6)
    y0 = ctx.t(rng.standard_normal((4, 2)).astype(np.float32))
    A = torch.tensor([[-0.1, 2.0], [-2.0, -0.1]], dtype=torch.float64)
    true = [y0]
    for i in range(5):
        step_map = torch.linalg.matrix_exp(A * (ts[i + 1] - ts[i]).double())
        true.append(true[-1] @ step_map.T.float())
    target = torch.stack(true)

    def step(y0, target):
        pred = rk4(f, y0, ts.tolist())
        loss = (pred - target).abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    losses = [step(y0, target).item() for _ in range(3)]
    # sensitivities of the final state with respect to the initial one
    y0r = y0.clone().requires_grad_(True)
    yT = rk4(f, y0r, ts.tolist())[-1]
    (g,) = torch.autograd.grad(yT.sum(), y0r)
    return {"l": losses, "target": target, "g": g, "nfe_pos": f.nfe > 0}


PROGRAMS = [bert_mlm, transformer_beam, wavenet, neural_ode]
CAPTURED = [bert_mlm, transformer_beam, wavenet, neural_ode]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
