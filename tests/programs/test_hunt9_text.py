"""Text and sequence programs as users write them: T5's relative position buckets, a BART-style
encoder-decoder (shift_tokens_right, label smoothing with ignore_index, nn.Transformer pieces),
nn.MultiheadAttention with key_padding_mask and per-head weights, a pre-norm
nn.TransformerEncoder with padding masks in training and evaluation, an EmbeddingBag text
classifier with per-sample weights, a GRU tagger over pack_sequence, a Conformer-style
convolution module with CTC and greedy decoding.
"""

import math

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741


def t5_relative(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def relative_position_bucket(rel, bidirectional=True, num_buckets=8, max_distance=16):
        buckets = 0
        if bidirectional:
            num_buckets //= 2
            buckets += (rel > 0).to(torch.long) * num_buckets
            rel = torch.abs(rel)
        else:
            rel = -torch.min(rel, torch.zeros_like(rel))
        max_exact = num_buckets // 2
        is_small = rel < max_exact
        large = max_exact + (
            torch.log(rel.float() / max_exact)
            / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)
        ).to(torch.long)
        large = torch.min(large, torch.full_like(large, num_buckets - 1))
        buckets += torch.where(is_small, rel, large)
        return buckets

    class T5LayerNorm(nn.Module):
        def __init__(s, d, eps=1e-6):
            super().__init__()
            s.weight = nn.Parameter(torch.ones(d))
            s.eps = eps

        def forward(s, h):
            var = h.to(torch.float32).pow(2).mean(-1, keepdim=True)
            h = h * torch.rsqrt(var + s.eps)
            return s.weight * h

    class Attn(nn.Module):
        def __init__(s, d, nh, bidirectional, has_bias):
            super().__init__()
            s.nh, s.dh = nh, d // nh
            s.q = nn.Linear(d, d, bias=False)
            s.k = nn.Linear(d, d, bias=False)
            s.v = nn.Linear(d, d, bias=False)
            s.o = nn.Linear(d, d, bias=False)
            s.bidirectional = bidirectional
            if has_bias:
                s.relative_attention_bias = nn.Embedding(8, nh)

        def compute_bias(s, q_len, k_len):
            ctxp = torch.arange(q_len, dtype=torch.long)[:, None]
            memp = torch.arange(k_len, dtype=torch.long)[None, :]
            b = relative_position_bucket(memp - ctxp, s.bidirectional)
            values = s.relative_attention_bias(b)
            return values.permute([2, 0, 1]).unsqueeze(0)

        def forward(s, x, mask=None, bias=None):
            B, L, _ = x.shape

            def shape(t):
                return t.view(B, -1, s.nh, s.dh).transpose(1, 2)

            q, k, v = shape(s.q(x)), shape(s.k(x)), shape(s.v(x))
            scores = torch.matmul(q, k.transpose(3, 2))
            if bias is None:
                bias = s.compute_bias(L, L)
                if mask is not None:
                    bias = bias + mask
            scores += bias
            w = F.softmax(scores.float(), dim=-1).type_as(scores)
            out = torch.matmul(w, v).transpose(1, 2).contiguous().view(B, -1, s.nh * s.dh)
            return s.o(out), bias

    class Encoder(nn.Module):
        def __init__(s, V=20, d=16, nh=4, n=2, causal=False):
            super().__init__()
            s.emb = nn.Embedding(V, d)
            s.layers = nn.ModuleList([Attn(d, nh, not causal, has_bias=(i == 0)) for i in range(n)])
            s.norms = nn.ModuleList([T5LayerNorm(d) for _ in range(n)])
            s.final = T5LayerNorm(d)
            s.causal = causal

        def forward(s, ids, attention_mask):
            h = s.emb(ids)
            L = ids.shape[1]
            ext = attention_mask[:, None, None, :].to(h.dtype)
            if s.causal:
                ext = ext * torch.tril(torch.ones(L, L))[None, None]
            ext = (1.0 - ext) * torch.finfo(h.dtype).min
            bias = None
            for norm, layer in zip(s.norms, s.layers):
                a, bias = layer(norm(h), ext, bias)
                h = h + a
            return s.final(h)

    rel = torch.arange(-20, 21)
    buckets = [relative_position_bucket(rel), relative_position_bucket(rel, False, 8, 16)]
    enc = ctx.init(Encoder(), "enc")
    dec = ctx.init(Encoder(causal=True), "dec")
    head = ctx.init(nn.Linear(16, 20, bias=False), "head")
    params = [*enc.parameters(), *dec.parameters(), *head.parameters()]
    opt = torch.optim.Adafactor(params, lr=1e-2)
    rng = np.random.default_rng(0)
    ids = ctx.t(rng.integers(1, 20, (2, 7)))
    am = ctx.t(np.array([[1] * 7, [1] * 5 + [0] * 2]))

    def step(ids, am):
        h = enc(ids, am)
        g = dec(ids, am)
        logits = head((h + g) * (16**-0.5))
        loss = F.cross_entropy(logits.view(-1, 20), ids.masked_fill(am == 0, -100).view(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    losses = [step(ids, am) for _ in range(3)]
    return {"b": buckets, "l": losses, "bias": enc.layers[0].relative_attention_bias.weight}


def bart(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    PAD, EOS, V, D = 1, 2, 16, 12

    def shift_tokens_right(ids, pad, start):
        shifted = ids.new_zeros(ids.shape)
        shifted[:, 1:] = ids[:, :-1].clone()
        shifted[:, 0] = start
        shifted.masked_fill_(shifted == -100, pad)
        return shifted

    class LearnedPos(nn.Embedding):
        def __init__(s, n, d):
            s.offset = 2
            super().__init__(n + s.offset, d)

        def forward(s, ids, past=0):
            bsz, L = ids.shape[:2]
            pos = torch.arange(past, past + L, dtype=torch.long).expand(bsz, -1)
            return super().forward(pos + s.offset)

    class Bart(nn.Module):
        def __init__(s):
            super().__init__()
            s.shared = nn.Embedding(V, D, padding_idx=PAD)
            s.enc_pos = LearnedPos(16, D)
            s.dec_pos = LearnedPos(16, D)
            s.enc = nn.TransformerEncoder(
                nn.TransformerEncoderLayer(D, 2, 24, 0.0, activation="gelu", batch_first=True),
                1,
                enable_nested_tensor=False,
            )
            s.dec = nn.TransformerDecoder(
                nn.TransformerDecoderLayer(D, 2, 24, 0.0, activation=F.gelu, batch_first=True), 1
            )
            s.ln = nn.LayerNorm(D)
            s.register_buffer("final_logits_bias", torch.zeros((1, V)))

        def forward(s, src, labels):
            dec_in = shift_tokens_right(labels, PAD, EOS)
            smask = src.eq(PAD)
            e = s.ln(s.shared(src) * math.sqrt(D) + s.enc_pos(src))
            mem = s.enc(e, src_key_padding_mask=smask)
            L = dec_in.shape[1]
            causal = nn.Transformer.generate_square_subsequent_mask(L)
            d = s.shared(dec_in) * math.sqrt(D) + s.dec_pos(dec_in)
            out = s.dec(
                d,
                mem,
                tgt_mask=causal,
                tgt_is_causal=True,
                memory_key_padding_mask=smask,
                tgt_key_padding_mask=dec_in.eq(PAD),
            )
            return F.linear(out, s.shared.weight) + s.final_logits_bias

    m = ctx.init(Bart())
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, eps=1e-6)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 2))
    src = ctx.t(np.array([[0, 5, 6, 7, 2, 1], [0, 8, 9, 2, 1, 1]]))
    lab = ctx.t(np.array([[0, 4, 4, 5, 2], [0, 7, 2, -100, -100]]))

    def step(src, lab):
        logits = m(src, lab)
        loss = F.cross_entropy(
            logits.reshape(-1, V), lab.reshape(-1), ignore_index=-100, label_smoothing=0.1
        )
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        return loss

    step = ctx.fn(step)
    losses = []
    for _ in range(3):
        losses.append(step(src, lab))
        sched.step()
    m.eval()
    with torch.no_grad():
        logits = m(src, lab)
    shifted = shift_tokens_right(lab, PAD, EOS)
    return {"l": losses, "lg": logits, "sh": shifted, "lr": sched.get_last_lr()}


def mha_padding(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Pool(nn.Module):
        def __init__(s, d=8):
            super().__init__()
            s.mha = nn.MultiheadAttention(d, 2, batch_first=True, bias=True, add_bias_kv=True)
            s.cross = nn.MultiheadAttention(d, 2, kdim=6, vdim=5)
            s.q = nn.Parameter(torch.randn(1, 1, d))
            s.out = nn.Linear(d, 3)

        def forward(s, x, kv_k, kv_v, pad):
            h, w_heads = s.mha(
                x, x, x, key_padding_mask=pad, need_weights=True, average_attn_weights=False
            )
            B = x.shape[0]
            q = s.q.expand(B, -1, -1).transpose(0, 1)
            c, w_avg = s.cross(q, kv_k.transpose(0, 1), kv_v.transpose(0, 1))
            h = h.masked_fill(pad[..., None], 0.0)
            pooled = h.sum(1) / (~pad).sum(1, keepdim=True)
            return s.out(pooled + c.squeeze(0)), w_heads, w_avg

    m = ctx.init(Pool())
    # (SGD: the key biases' gradients are zero in exact arithmetic, softmax ignores a shift;
    # Adam would scale each side's rounding noise up to the learning rate)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((3, 5, 8)).astype(np.float32))
    kk = ctx.t(rng.standard_normal((3, 4, 6)).astype(np.float32))
    vv = ctx.t(rng.standard_normal((3, 4, 5)).astype(np.float32))
    lens = np.array([5, 3, 4])
    pad = ctx.t(np.arange(5)[None] >= lens[:, None])
    y = ctx.t(np.array([0, 2, 1]))

    def step(x, kk, vv, pad, y):
        logits, wh, wa = m(x, kk, vv, pad)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, wh, wa

    step = ctx.fn(step)
    out = [step(x, kk, vv, pad, y) for _ in range(2)]
    # a float mask and a boolean attn_mask together (PyTorch merges them)
    m.eval()
    fmask = torch.zeros(3, 5).masked_fill(pad, float("-inf"))
    am = torch.ones(5, 5, dtype=torch.bool).triu(1)
    with torch.no_grad():
        h1, w1 = m.mha(x, x, x, key_padding_mask=fmask, attn_mask=am.float() * -1e9)
        h2, _ = m.mha(x, x, x, key_padding_mask=pad, attn_mask=am)
    return {"out": out, "h1": h1, "w1": w1, "h2": h2}


def prenorm_encoder(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Cls(nn.Module):
        def __init__(s, V=30, d=16):
            super().__init__()
            s.emb = nn.Embedding(V, d, padding_idx=0)
            s.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
            s.pos = nn.Parameter(torch.randn(1, 9, d) * 0.02)
            layer = nn.TransformerEncoderLayer(
                d,
                4,
                32,
                dropout=0.1,
                activation="gelu",
                batch_first=True,
                norm_first=True,
                bias=False,  # (the key bias's gradient is zero: NAdam would scale its noise)
            )
            s.enc = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(d))
            s.head = nn.Linear(d, 2)

        def forward(s, ids):
            B, L = ids.shape
            pad = ids == 0
            h = torch.cat([s.cls.expand(B, -1, -1), s.emb(ids)], 1) + s.pos[:, : L + 1]
            pad = torch.cat([torch.zeros(B, 1, dtype=torch.bool), pad], 1)
            h = s.enc(h, src_key_padding_mask=pad)
            return s.head(h[:, 0])

    m = ctx.init(Cls())
    for mod in m.modules():
        if isinstance(mod, nn.Dropout):
            mod.p = 0.0
        elif isinstance(mod, nn.MultiheadAttention):
            mod.dropout = 0.0
    opt = torch.optim.NAdam(m.parameters(), lr=2e-3, decoupled_weight_decay=True, weight_decay=0.01)
    rng = np.random.default_rng(2)
    ids = rng.integers(1, 30, (4, 8))
    ids[1, 5:] = 0
    ids[3, 2:] = 0
    ids = ctx.t(ids)
    y = ctx.t(np.array([1, 0, 1, 0]))

    def step(ids, y):
        loss = F.cross_entropy(m(ids), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    losses = [step(ids, y) for _ in range(3)]
    m.eval()
    with torch.inference_mode():
        ev = m(ids)
        # padding positions must not change the result
        ids2 = ids.clone()
        ids2[3, 2:] = 0
        ev2 = m(ids2[:, :6])
    return {"l": losses, "ev": ev, "ev2": ev2}


def embbag_classifier(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class FastText(nn.Module):
        def __init__(s, V=40, d=8, ncls=3):
            super().__init__()
            s.bag = nn.EmbeddingBag(V, d, mode="sum", padding_idx=0)
            s.bag_mean = nn.EmbeddingBag(V, d, mode="mean")
            s.bag_max = nn.EmbeddingBag(V, d, mode="max")
            s.fc = nn.Linear(3 * d, ncls)
            s.bag.weight.data.uniform_(-0.5, 0.5)
            s.fc.bias.data.zero_()

        def forward(s, text, offsets, weights):
            a = s.bag(text, offsets, per_sample_weights=weights)
            b = s.bag_mean(text, offsets)
            c = s.bag_max(text, offsets)
            return s.fc(torch.cat([a, b, c], 1))

    m = ctx.init(FastText())
    opt = torch.optim.SGD(m.parameters(), lr=4.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.1)
    docs = [[3, 5, 7, 0, 9], [11, 2], [4, 4, 4, 8], [20, 21, 22]]
    labels = [0, 2, 1, 0]

    def collate(batch):
        text, offsets, ls = [], [0], []
        for toks, lab in batch:
            t = torch.tensor(toks, dtype=torch.int64)
            text.append(t)
            offsets.append(t.size(0))
            ls.append(lab)
        offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
        return torch.cat(text), offsets, torch.tensor(ls, dtype=torch.int64)

    text, offsets, y = collate(list(zip(docs, labels)))
    tf = torch.bincount(text, minlength=40).float()
    weights = 1.0 / torch.log1p(tf[text])

    def step(text, offsets, weights, y):
        logits = m(text, offsets, weights)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 0.1)
        opt.step()
        return loss, (logits.argmax(1) == y).sum().item()

    out = []
    for _ in range(3):
        out.append(step(text, offsets, weights, y))
        sched.step()
    # the 2-D input form (fixed-length bags, no offsets)
    two_d = m.bag_mean(torch.tensor([[1, 2, 3], [4, 5, 6]]))
    fb = nn.EmbeddingBag.from_pretrained(m.bag.weight.detach(), mode="sum", freeze=True)
    return {"out": out, "w": m.bag.weight, "2d": two_d, "fb": fb(text, offsets)}


def packed_gru_tagger(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    rnn = nn.utils.rnn

    class Tagger(nn.Module):
        def __init__(s, V=15, d=6, h=5, ntags=4):
            super().__init__()
            s.emb = nn.Embedding(V, d)
            s.gru = nn.GRU(d, h, num_layers=2, bidirectional=True)
            s.out = nn.Linear(2 * h, ntags)

        def forward(s, seqs):
            packed = rnn.pack_sequence([s.emb(x) for x in seqs], enforce_sorted=False)
            out, hn = s.gru(packed)
            scores = rnn.PackedSequence(
                s.out(out.data), out.batch_sizes, out.sorted_indices, out.unsorted_indices
            )
            padded, lens = rnn.pad_packed_sequence(scores, padding_value=-1.0)
            return padded, lens, hn

    m = ctx.init(Tagger())
    opt = torch.optim.Adagrad(m.parameters(), lr=0.1, lr_decay=0.01)
    rng = np.random.default_rng(3)
    lens = [3, 5, 2]
    seqs = [ctx.t(rng.integers(0, 15, n)) for n in lens]
    tags = [ctx.t(rng.integers(0, 4, n)) for n in lens]

    def step():
        padded, lens_t, hn = m(seqs)
        gold = rnn.pad_sequence(tags, padding_value=-100)
        loss = F.cross_entropy(padded.reshape(-1, 4), gold.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, padded, lens_t, hn

    out = [step() for _ in range(2)]
    packed = rnn.pack_sequence(tags, enforce_sorted=False)
    unpacked = rnn.unpack_sequence(packed)
    padded_b = rnn.pad_sequence(tags, batch_first=True, padding_side="left")
    return {
        "out": out,
        "bs": packed.batch_sizes,
        "si": packed.sorted_indices,
        "un": unpacked,
        "pl": padded_b,
    }


def conformer_ctc(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class ConvModule(nn.Module):
        def __init__(s, d, k=3):
            super().__init__()
            s.ln = nn.LayerNorm(d)
            s.pw1 = nn.Conv1d(d, 2 * d, 1)
            s.dw = nn.Conv1d(d, d, k, padding=k // 2, groups=d, bias=False)  # (BatchNorm follows)
            s.bn = nn.BatchNorm1d(d)
            s.pw2 = nn.Conv1d(d, d, 1)

        def forward(s, x):
            h = s.ln(x).transpose(1, 2)
            h = F.glu(s.pw1(h), dim=1)
            h = F.silu(s.bn(s.dw(h)))
            return x + s.pw2(h).transpose(1, 2)

    class FF(nn.Module):
        def __init__(s, d):
            super().__init__()
            s.net = nn.Sequential(
                nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d)
            )

        def forward(s, x):
            return x + 0.5 * s.net(x)

    class Model(nn.Module):
        def __init__(s, nfeat=6, d=8, nclass=5):
            super().__init__()
            s.sub = nn.Conv1d(nfeat, d, 3, stride=2, padding=1)
            s.ff1, s.conv, s.ff2 = FF(d), ConvModule(d), FF(d)
            s.ln = nn.LayerNorm(d)
            s.out = nn.Linear(d, nclass)

        def forward(s, feats, lens):
            h = s.sub(feats).transpose(1, 2)
            lens = torch.div(lens - 1, 2, rounding_mode="floor") + 1
            h = s.ln(s.ff2(s.conv(s.ff1(h))))
            return s.out(h).log_softmax(-1), lens

    m = ctx.init(Model())
    opt = torch.optim.Adam(m.parameters(), lr=2e-3, amsgrad=True)
    rng = np.random.default_rng(4)
    feats = ctx.t(rng.standard_normal((3, 6, 12)).astype(np.float32))
    flens = ctx.t(np.array([12, 10, 7]))
    targets = ctx.t(np.array([1, 2, 2, 3, 4, 1, 3, 2]))
    tlens = ctx.t(np.array([3, 2, 3]))
    ctc = nn.CTCLoss(blank=0, zero_infinity=True)

    def step(feats, flens):
        lp, olens = m(feats, flens)
        loss = ctc(lp.transpose(0, 1), targets, olens, tlens)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, lp, olens

    step = ctx.fn(step)
    out = [step(feats, flens) for _ in range(3)]
    lp, olens = out[-1][1], out[-1][2]
    hyps = []
    for b in range(lp.shape[0]):
        best = lp[b, : olens[b]].argmax(-1)
        best = torch.unique_consecutive(best)
        hyps.append(best[best != 0].tolist())
    # a padded 2-D target matrix and 'sum' reduction
    tpad = torch.zeros(3, 3, dtype=torch.long)
    tpad[0, :3] = targets[:3]
    tpad[1, :2] = targets[3:5]
    tpad[2, :3] = targets[5:]
    l2 = F.ctc_loss(lp.detach().transpose(0, 1), tpad, olens, tlens, reduction="sum")
    return {"out": out, "hyps": hyps, "l2": l2}


PROGRAMS = [
    t5_relative,
    bart,
    mha_padding,
    prenorm_encoder,
    embbag_classifier,
    packed_gru_tagger,
    conformer_ctc,
]
CAPTURED = [t5_relative, bart, mha_padding, prenorm_encoder, conformer_ctc]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
