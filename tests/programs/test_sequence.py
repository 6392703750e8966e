"""Sequence models as whole PyTorch programs: seq2seq with attention, a packed char-LSTM, CTC,
nn.Transformer with masks, a pointer network.
"""

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def seq2seq(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    V, H = 12, 16

    class Enc(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(V, H, padding_idx=0)
            s.gru = nn.GRU(H, H, batch_first=True, bidirectional=True)
            s.fc = nn.Linear(2 * H, H)

        def forward(s, x):
            o, h = s.gru(s.emb(x))
            h = torch.tanh(s.fc(torch.cat((h[-2], h[-1]), dim=1)))
            return o, h

    class Attn(nn.Module):
        def __init__(s):
            super().__init__()
            s.attn = nn.Linear(3 * H, H)
            s.v = nn.Linear(H, 1, bias=False)

        def forward(s, hidden, enc):
            L = enc.shape[1]
            hidden = hidden.unsqueeze(1).repeat(1, L, 1)
            energy = torch.tanh(s.attn(torch.cat((hidden, enc), dim=2)))
            return F.softmax(s.v(energy).squeeze(2), dim=1)

    class Dec(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(V, H)
            s.attn = Attn()
            s.rnn = nn.GRU(3 * H, H, batch_first=True)
            s.out = nn.Linear(4 * H, V)

        def forward(s, inp, hidden, enc):
            e = s.emb(inp.unsqueeze(1))
            a = s.attn(hidden, enc).unsqueeze(1)
            w = torch.bmm(a, enc)
            o, h = s.rnn(torch.cat((e, w), dim=2), hidden.unsqueeze(0))
            pred = s.out(torch.cat((o.squeeze(1), w.squeeze(1), e.squeeze(1)), dim=1))
            return pred, h.squeeze(0)

    enc, dec = ctx.init(Enc(), "e"), ctx.init(Dec(), "d")
    params = list(enc.parameters()) + list(dec.parameters())
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    rng = np.random.default_rng(0)
    src = ctx.t(rng.integers(1, V, (3, 5)))
    trg = ctx.t(rng.integers(1, V, (3, 4)))
    tf = [True, False, True]

    def step(src, trg):
        opt.zero_grad()
        o, h = enc(src)
        inp = trg[:, 0]
        outs = []
        for t in range(1, trg.shape[1]):
            p, h = dec(inp, h, o)
            outs.append(p)
            top1 = p.argmax(1)
            inp = trg[:, t] if tf[t - 1] else top1
        outs = torch.stack(outs, dim=1)
        loss = F.cross_entropy(outs.reshape(-1, V), trg[:, 1:].reshape(-1), ignore_index=0)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss

    step = ctx.fn(step)
    return {"l": [step(src, trg).item() for _ in range(3)], "w": dec.out.weight}


def charrnn_packed(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    from_ = torch.nn.utils.rnn

    class M(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(10, 8, padding_idx=0)
            s.lstm = nn.LSTM(8, 12, num_layers=2, batch_first=True)
            s.fc = nn.Linear(12, 10)

        def forward(s, x, lengths):
            e = s.emb(x)
            packed = from_.pack_padded_sequence(e, lengths, batch_first=True, enforce_sorted=False)
            out, (h, c) = s.lstm(packed)
            out, lens = from_.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
            return s.fc(out), h, lens

    m = ctx.init(M())
    opt = torch.optim.RMSprop(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    lengths = [5, 3, 6, 2]
    x = np.zeros((4, 6), np.int64)
    for i, L in enumerate(lengths):
        x[i, :L] = rng.integers(1, 10, L)
    y = np.roll(x, -1, axis=1)
    X, Y = ctx.t(x), ctx.t(y)
    Ls = torch.tensor(lengths)
    res = []

    def step(X, Y, Ls):
        opt.zero_grad()
        logits, h, lens = m(X, Ls)
        loss = F.cross_entropy(logits.transpose(1, 2), Y, ignore_index=0)
        loss.backward()
        opt.step()
        return loss, h, lens

    step = ctx.fn(step)
    for _ in range(3):
        loss, h, lens = step(X, Y, Ls)
        res.append(loss.item())
    return {"l": res, "h": h, "lens": lens}


def ctc(torch, ctx):
    nn, _F = torch.nn, torch.nn.functional
    m = ctx.init(nn.Sequential(nn.Conv1d(4, 8, 3, padding=1), nn.ReLU(), nn.Conv1d(8, 6, 1)))
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    crit = nn.CTCLoss(blank=0, zero_infinity=True)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((3, 4, 12)).astype(np.float32))
    targets = ctx.t(rng.integers(1, 6, (3, 5)))
    il = torch.tensor([12, 10, 11])
    tl = torch.tensor([5, 3, 4])
    res = []

    def step(x, targets):
        opt.zero_grad()
        lp = m(x).permute(2, 0, 1).log_softmax(2)
        loss = crit(lp, targets, il, tl)
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    for _ in range(3):
        res.append(step(x, targets).item())
    return {"l": res, "w": m[0].weight}


def transformer(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class M(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(11, 16)
            s.pos = nn.Parameter(torch.randn(1, 10, 16) * 0.02)
            s.tf = nn.Transformer(
                d_model=16,
                nhead=4,
                num_encoder_layers=2,
                num_decoder_layers=2,
                dim_feedforward=32,
                dropout=0.0,
                batch_first=True,
            )
            s.out = nn.Linear(16, 11)

        def forward(s, src, tgt, src_pad, tgt_pad):
            S, T = src.shape[1], tgt.shape[1]
            mask = nn.Transformer.generate_square_subsequent_mask(T)
            h = s.tf(
                s.emb(src) + s.pos[:, :S],
                s.emb(tgt) + s.pos[:, :T],
                tgt_mask=mask,
                src_key_padding_mask=src_pad,
                tgt_key_padding_mask=tgt_pad,
                memory_key_padding_mask=src_pad,
            )
            return s.out(h)

    m = ctx.init(M())
    # (SGD: the key projection's bias has a gradient of zero up to rounding, which Adam would
    # turn into steps of either sign)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(0)
    src = rng.integers(1, 11, (2, 7))
    src[1, 5:] = 0
    tgt = rng.integers(1, 11, (2, 6))
    tgt[0, 4:] = 0
    S, T = ctx.t(src), ctx.t(tgt)
    res = []

    def step(S, T):
        opt.zero_grad()
        logits = m(S, T[:, :-1], S == 0, T[:, :-1] == 0)
        loss = F.cross_entropy(
            logits.reshape(-1, 11), T[:, 1:].reshape(-1), ignore_index=0, label_smoothing=0.1
        )
        loss.backward()
        opt.step()
        return loss, logits

    step = ctx.fn(step)
    for _ in range(3):
        loss, lg = step(S, T)
        res.append(loss.item())
    m.eval()
    with torch.no_grad():
        ev = m(S, T[:, :-1], S == 0, T[:, :-1] == 0)
    return {"l": res, "logits": lg, "eval": ev}


def pointer(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Ptr(nn.Module):
        def __init__(s, H=8):
            super().__init__()
            s.enc = nn.LSTM(2, H, batch_first=True)
            s.dec = nn.LSTMCell(2, H)
            s.W1 = nn.Linear(H, H, bias=False)
            s.W2 = nn.Linear(H, H, bias=False)
            s.v = nn.Linear(H, 1, bias=False)
            s.start = nn.Parameter(torch.zeros(2))

        def forward(s, pts, tgt):
            B, L, _ = pts.shape
            enc, (h, c) = s.enc(pts)
            h, c = h[0], c[0]
            inp = s.start.unsqueeze(0).expand(B, -1)
            mask = torch.zeros(B, L, dtype=torch.bool)
            logps = []
            for t in range(L):
                h, c = s.dec(inp, (h, c))
                u = s.v(torch.tanh(s.W1(enc) + s.W2(h).unsqueeze(1))).squeeze(-1)
                u = u.masked_fill(mask, float("-inf"))
                lp = F.log_softmax(u, dim=-1)
                logps.append(lp)
                idx = tgt[:, t]
                mask = mask.scatter(1, idx.unsqueeze(1), True)
                inp = pts[torch.arange(B), idx]
            return torch.stack(logps, 1)

    m = ctx.init(Ptr())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(0)
    pts = ctx.t(rng.random((3, 5, 2)).astype(np.float32))
    tgt = ctx.t(np.argsort(rng.random((3, 5)), axis=1))

    def step(pts, tgt):
        opt.zero_grad()
        lp = m(pts, tgt)
        loss = F.nll_loss(lp.reshape(-1, 5), tgt.reshape(-1))
        loss.backward()
        opt.step()
        return loss, lp.argmax(-1)

    step = ctx.fn(step)
    return {"r": [step(pts, tgt) for _ in range(3)]}


PROGRAMS = [seq2seq, charrnn_packed, ctc, transformer, pointer]
CAPTURED = [seq2seq, ctc, transformer, pointer]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
