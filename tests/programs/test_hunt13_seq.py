"""Sequence and attention programs: weight-normed layers through nn.utils.parametrizations
(removed after training), a bidirectional LSTM over pack_padded_sequence(enforce_sorted=False)
with pad_packed_sequence(total_length) and the pack/unpack/pad/unpad helpers,
nn.MultiheadAttention's mask forms (float and bool causal masks, is_causal, bool and float
key_padding_mask, per-head 3-D masks, add_zero_attn with add_bias_kv, unbatched input), an
nn.Transformer seq2seq with causal masks and greedy decoding, CTC loss variants (reductions,
concatenated targets, another blank, zero_infinity, unbatched), LambdaLR/MultiStepLR with
param groups, add_param_group and state_dict round trips.
"""

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741


def wn_sn_train(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    P = nn.utils.parametrizations

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.a = P.weight_norm(nn.Linear(4, 6), dim=0)
            s.b = P.weight_norm(nn.Conv1d(6, 3, 3, padding=1), name="weight", dim=None)
            s.c = nn.Linear(3, 2)

        def forward(s, x):
            h = torch.tanh(s.a(x))  # (B, L, 6)
            h = s.b(h.transpose(1, 2)).mean(-1)
            return s.c(h)

    torch.manual_seed(0)
    m = Net()
    keys = sorted(m.state_dict())
    m = ctx.init(m)
    opt = torch.optim.Adam(m.parameters(), lr=0.01)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((3, 5, 4)).astype(np.float32))
    y = ctx.t(np.array([0, 1, 1]))

    def step(x, y):
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    losses = [step(x, y) for _ in range(3)]
    g = m.a.parametrizations.weight.original0
    v = m.a.parametrizations.weight.original1
    w_before = m.a.weight.detach().clone()
    nn.utils.parametrize.remove_parametrizations(m.a, "weight")
    return [
        losses,
        keys,
        g,
        v,
        w_before,
        m.a.weight,
        sorted(m.state_dict()),
        nn.utils.parametrize.is_parametrized(m.b),
        nn.utils.parametrize.is_parametrized(m.a),
    ]


def packed_unsorted(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    R = nn.utils.rnn

    class Enc(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(12, 5, padding_idx=0)
            s.rnn = nn.LSTM(5, 4, num_layers=2, bidirectional=True, batch_first=True)
            s.head = nn.Linear(8, 3)

        def forward(s, ids, lens):
            e = s.emb(ids)
            packed = R.pack_padded_sequence(e, lens, batch_first=True, enforce_sorted=False)
            out, (h, c) = s.rnn(packed)
            padded, out_lens = R.pad_packed_sequence(out, batch_first=True, total_length=7)
            last = torch.cat([h[-2], h[-1]], dim=1)
            return s.head(last), padded, out_lens, packed.sorted_indices, packed.unsorted_indices

    m = ctx.init(Enc())
    opt = torch.optim.SGD(m.parameters(), lr=0.2)
    rng = np.random.default_rng(1)
    lens_np = np.array([3, 6, 2, 5])
    ids_np = np.zeros((4, 6), np.int64)
    for i, n in enumerate(lens_np):
        ids_np[i, :n] = rng.integers(1, 12, n)
    ids, lens = ctx.t(ids_np), ctx.t(lens_np)
    y = ctx.t(np.array([0, 2, 1, 0]))
    res = []
    for _ in range(2):
        logits, padded, ol, si, ui = m(ids, lens)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        res.append([loss, padded, ol, si, ui])
    seqs = [torch.arange(1.0, n + 1) for n in (2, 4, 1)]
    ps = R.pack_sequence(seqs, enforce_sorted=False)
    back = R.unpack_sequence(ps)
    padded = R.pad_sequence(seqs, batch_first=False, padding_value=-1)
    unp = R.unpad_sequence(padded, torch.tensor([2, 4, 1]))
    return [res, ps.data, ps.batch_sizes, back, padded, unp]


def mha_masks(torch, ctx):
    nn = torch.nn
    rng = np.random.default_rng(2)
    torch.manual_seed(0)
    mha = ctx.init(nn.MultiheadAttention(8, 4, dropout=0.0, batch_first=True), "mha")
    mha2 = ctx.init(nn.MultiheadAttention(8, 2, add_zero_attn=True, add_bias_kv=True), "mha2")
    x = ctx.t(rng.standard_normal((2, 5, 8)).astype(np.float32))
    mem = ctx.t(rng.standard_normal((2, 6, 8)).astype(np.float32))
    causal = nn.Transformer.generate_square_subsequent_mask(5)
    bool_causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    kpm_bool = ctx.t(np.array([[False] * 6, [False] * 4 + [True] * 2]))
    kpm_float = torch.zeros(2, 6).masked_fill(kpm_bool, float("-inf"))
    out = {}
    out["causal_f"] = mha(x, x, x, attn_mask=causal, need_weights=False)[0]
    out["causal_b"] = mha(x, x, x, attn_mask=bool_causal)
    out["causal_flag"] = mha(x, x, x, attn_mask=causal, is_causal=True)[0]
    out["cross_b"] = mha(x, mem, mem, key_padding_mask=kpm_bool, average_attn_weights=False)
    out["cross_f"] = mha(x, mem, mem, key_padding_mask=kpm_float)
    m3 = torch.zeros(2 * 4, 5, 6)
    m3[:, :, 0] = -1.0
    out["mask3d"] = mha(x, mem, mem, attn_mask=m3)
    xs = x.transpose(0, 1)
    out["zero_attn"] = mha2(
        xs, xs, xs, key_padding_mask=ctx.t(np.array([[False] * 4 + [True], [False] * 5]))
    )
    y, w = mha(x, x, x, attn_mask=bool_causal)
    (y.sum() + w.pow(2).sum()).backward()
    out["g"] = mha.in_proj_weight.grad
    mha.eval()
    with torch.no_grad():
        out["eval"] = mha(
            x,
            x,
            x,
            key_padding_mask=ctx.t(np.array([[False] * 5, [False] * 3 + [True] * 2])),
            need_weights=False,
        )[0]
    out["unbatched"] = mha(x[0], mem[0], mem[0])
    return out


def transformer_decode(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Seq2Seq(nn.Module):
        def __init__(s, V=10, d=16):
            super().__init__()
            s.emb = nn.Embedding(V, d)
            s.pos = nn.Parameter(torch.randn(1, 12, d) * 0.1)
            s.tf = nn.Transformer(
                d, 2, 1, 2, 32, dropout=0.0, batch_first=True, norm_first=True, activation="gelu"
            )
            s.out = nn.Linear(d, V)

        def forward(s, src, tgt, src_pad):
            S, T = src.shape[1], tgt.shape[1]
            mask = s.tf.generate_square_subsequent_mask(T)
            h = s.tf(
                s.emb(src) + s.pos[:, :S],
                s.emb(tgt) + s.pos[:, :T],
                tgt_mask=mask,
                src_key_padding_mask=src_pad,
                memory_key_padding_mask=src_pad,
                tgt_is_causal=True,
            )
            return s.out(h)

    m = ctx.init(Seq2Seq())
    # (SGD: the self-attention key biases get gradients that are zero in exact arithmetic)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=0.01)
    rng = np.random.default_rng(3)
    src = ctx.t(rng.integers(2, 10, (3, 6)))
    src_pad = ctx.t(np.array([[False] * 6, [False] * 4 + [True] * 2, [False] * 5 + [True]]))
    tgt = ctx.t(np.concatenate([np.ones((3, 1), np.int64), rng.integers(2, 10, (3, 4))], 1))

    def step(src, tgt, src_pad):
        logits = m(src, tgt[:, :-1], src_pad)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    losses = [step(src, tgt, src_pad) for _ in range(3)]
    m.eval()
    ys = torch.ones(3, 1, dtype=torch.long)
    with torch.no_grad():
        for _ in range(4):
            nxt = m(src, ys, src_pad)[:, -1].argmax(-1, keepdim=True)
            ys = torch.cat([ys, nxt], 1)
    return [losses, ys]


def ctc_variants(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(4)
    T, N, C = 12, 3, 6
    lp = ctx.t(rng.standard_normal((T, N, C)).astype(np.float32), requires_grad=True)
    tg = ctx.t(rng.integers(1, C, (N, 4)))
    il = ctx.t(np.array([12, 10, 8]))
    tl = ctx.t(np.array([4, 3, 2]))
    out = {}
    logp = lp.log_softmax(2)
    out["mean"] = nn.CTCLoss()(logp, tg, il, tl)
    out["sum"] = nn.CTCLoss(reduction="sum")(logp, tg, il, tl)
    out["none"] = nn.CTCLoss(reduction="none")(logp, tg, il, tl)
    flat = torch.cat([tg[0, :4], tg[1, :3], tg[2, :2]])
    out["flat"] = F.ctc_loss(logp, flat, (12, 10, 8), (4, 3, 2))
    tg_b = tg.clone()
    tg_b[tg_b == 5] = 1
    out["blank5"] = F.ctc_loss(logp, tg_b, il, tl, blank=5)
    short = ctx.t(np.array([12, 2, 8]))
    out["inf"] = F.ctc_loss(logp, tg, short, tl, reduction="none")
    out["zero_inf"] = F.ctc_loss(logp, tg, short, tl, reduction="none", zero_infinity=True)
    (out["mean"] + out["sum"] * 0.1 + out["zero_inf"].sum() + out["blank5"]).backward()
    out["g"] = lp.grad
    out["unbatched"] = F.ctc_loss(logp[:, 0], tg[0], torch.tensor(12), torch.tensor(4))
    return out


def sched_state(torch, ctx):
    nn = torch.nn
    S = torch.optim.lr_scheduler
    m = ctx.init(nn.Linear(3, 2))
    body = [p for n, p in m.named_parameters() if n == "weight"]
    head = [p for n, p in m.named_parameters() if n == "bias"]
    opt = torch.optim.SGD([{"params": body}, {"params": head, "lr": 0.5}], lr=0.1, momentum=0.9)
    sched = S.LambdaLR(opt, lr_lambda=[lambda e: 0.9**e, lambda e: 1.0 / (e + 1)])
    ms = S.MultiStepLR(opt, milestones=[2, 4], gamma=0.5)
    rng = np.random.default_rng(5)
    x = ctx.t(rng.standard_normal((4, 3)).astype(np.float32))
    lrs = []
    for _i in range(3):
        opt.zero_grad()
        m(x).pow(2).sum().backward()
        opt.step()
        sched.step()
        ms.step()
        lrs.append([g["lr"] for g in opt.param_groups])
    sd_opt = opt.state_dict()
    sd_ms = ms.state_dict()
    extra = nn.Parameter(torch.ones(2))
    opt.add_param_group({"params": [extra], "lr": 0.01, "momentum": 0.0})
    (extra * 2).sum().backward()
    opt.step()
    opt2 = torch.optim.SGD([{"params": body}, {"params": head, "lr": 0.5}], lr=0.1, momentum=0.9)
    opt2.load_state_dict(sd_opt)
    ms2 = S.MultiStepLR(opt2, milestones=[2, 4], gamma=0.5)
    ms2.load_state_dict(sd_ms)
    for _ in range(3):
        opt2.step()
        ms2.step()
        lrs.append([g["lr"] for g in opt2.param_groups])
    return [
        lrs,
        extra,
        ms2.get_last_lr(),
        sd_ms["milestones"] if isinstance(sd_ms["milestones"], dict) else 0,
        sd_ms["last_epoch"],
        len(opt.param_groups),
        sd_opt["param_groups"][1]["params"],
        sorted(sd_opt["param_groups"][0].keys()),
        opt2.state[body[0]]["momentum_buffer"],
        m.weight,
    ]


PROGRAMS = [wn_sn_train, packed_unsorted, mha_masks, transformer_decode, ctc_variants, sched_state]
CAPTURED = [wn_sn_train, transformer_decode]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
