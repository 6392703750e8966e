"""Programs of hunt59 on sequences, run on PyTorch and on ember: unsorted packed batches
through a two-layer bidirectional GRU and an LSTM with proj_size (PackedSequence's fields,
pad_packed_sequence with total_length, the last valid state gathered), CTC training of a
small acoustic model with zero_infinity and per-sample losses, nn.MultiheadAttention with
separate key/value sizes, padding and float attention masks and per-head weights, greedy and
KV-cached decoding of a tiny decoder-only transformer that must agree token for token, and
nn.Transformer with causal masks and memory key padding.
"""

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def packed_bigru(torch, ctx):
    """Variable-length batch (lengths 5, 2, 4, 3: not sorted) packed with
    enforce_sorted=False into a 2-layer bidirectional GRU; the PackedSequence's batch_sizes,
    sorted and unsorted indices, pad_packed_sequence with total_length 6, the final hidden
    states of both directions concatenated, a classifier trained one step; plus pad_sequence,
    pack_sequence and an LSTM with proj_size on the same packed input."""
    nn = torch.nn
    rnn = nn.utils.rnn
    gru = ctx.init(nn.GRU(3, 4, num_layers=2, bidirectional=True, batch_first=True), "gru")
    head = ctx.init(nn.Linear(8, 2), "head")
    lstm = ctx.init(nn.LSTM(3, 5, proj_size=2, batch_first=True), "lstm")
    opt = torch.optim.Adam(list(gru.parameters()) + list(head.parameters()), lr=0.01)
    rng = np.random.default_rng(0)
    lengths = [5, 2, 4, 3]
    seqs = [ctx.t(rng.standard_normal((n, 3)).astype(np.float32)) for n in lengths]
    padded = rnn.pad_sequence(seqs, batch_first=True)
    packed = rnn.pack_padded_sequence(padded, torch.tensor(lengths), batch_first=True, enforce_sorted=False)
    out, h = gru(packed)
    unpacked, lens = rnn.pad_packed_sequence(out, batch_first=True, total_length=6)
    final = torch.cat([h[-2], h[-1]], dim=1)
    y = ctx.t(np.array([0, 1, 1, 0]))
    loss = nn.functional.cross_entropy(head(final), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    idx = (lens - 1).view(-1, 1, 1).expand(-1, 1, 8)
    last = unpacked.gather(1, idx).squeeze(1)
    ps = rnn.pack_sequence(seqs, enforce_sorted=False)
    lo, (lh, lc) = lstm(ps)
    lo_pad, _ = rnn.pad_packed_sequence(lo, batch_first=True, padding_value=-1.0)
    return [
        packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices, packed.data,
        unpacked, lens, final, loss.detach(), gru.weight_hh_l1_reverse.grad, last,
        lo_pad, lh, lc, ps.batch_sizes,
    ]


def ctc_training(torch, ctx):
    """A convolutional front end and a bidirectional LSTM emitting log-probabilities
    (T, N, C) trained with CTC: targets concatenated 1-D with target_lengths, one input too
    short for its target (zero_infinity), reduction none and mean; two Adam steps; the
    greedy decode collapsed and blank-stripped in Python."""
    nn = torch.nn
    F = nn.functional

    class Acoustic(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(4, 6, 3, padding=1)
            self.rnn = nn.LSTM(6, 5, bidirectional=True)
            self.out = nn.Linear(10, 5)

        def forward(self, x):  # x: (N, C, T)
            h = F.relu(self.conv(x)).permute(2, 0, 1)
            h, _ = self.rnn(h)
            return self.out(h).log_softmax(-1)

    model = ctx.init(Acoustic(), "ac")
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((3, 4, 8)).astype(np.float32))
    targets = ctx.t(np.array([1, 2, 2, 3, 4, 1, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2]))
    target_lengths = ctx.t(np.array([3, 4, 9]))
    input_lengths = ctx.t(np.array([8, 6, 8]))
    def step(x, targets, input_lengths, target_lengths):
        lp = model(x)
        per = F.ctc_loss(lp, targets, input_lengths, target_lengths, blank=0, reduction="none", zero_infinity=True)
        loss = F.ctc_loss(lp, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=True)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return per.detach(), loss.detach()

    step = ctx.fn(step)
    out = []
    for _ in range(2):
        out += list(step(x, targets, input_lengths, target_lengths))
    best = model(x).argmax(-1).T.tolist()
    decoded = []
    for row in best:
        seq, prev = [], None
        for t in row:
            if t != prev and t != 0:
                seq.append(t)
            prev = t
        decoded.append(seq)
    ctc = nn.CTCLoss(blank=4, reduction="sum")
    lp2 = ctx.t(rng.standard_normal((6, 2, 5)).astype(np.float32)).log_softmax(2).requires_grad_()
    l2 = ctc(lp2, ctx.t(np.array([[0, 1, 1], [2, 3, 0]])), ctx.t(np.array([6, 5])), ctx.t(np.array([3, 2])))
    l2.backward()
    return out + [decoded, model.rnn.weight_ih_l0_reverse, l2.detach(), lp2.grad]


def mha_masks(torch, ctx):
    """nn.MultiheadAttention with kdim/vdim different from embed_dim, batch_first, a boolean
    key_padding_mask and a float attention mask, need_weights with average_attn_weights False
    (per-head maps) and True; a 3-D per-head boolean attn_mask; the same module without
    batch_first; gradients of the inputs."""
    nn = torch.nn
    mha = ctx.init(nn.MultiheadAttention(8, 2, kdim=5, vdim=3, batch_first=True, dropout=0.0), "mha")
    sa = ctx.init(nn.MultiheadAttention(8, 4, bias=False, add_bias_kv=True, add_zero_attn=True), "sa")
    rng = np.random.default_rng(2)
    q = ctx.t(rng.standard_normal((2, 4, 8)).astype(np.float32)).requires_grad_()
    k = ctx.t(rng.standard_normal((2, 6, 5)).astype(np.float32))
    v = ctx.t(rng.standard_normal((2, 6, 3)).astype(np.float32)).requires_grad_()
    kpm = ctx.t(np.array([[False] * 5 + [True], [False] * 3 + [True] * 3]))
    am = ctx.t(np.triu(np.full((4, 6), -1.5, dtype=np.float32), 3))
    o1, w1 = mha(q, k, v, key_padding_mask=kpm, attn_mask=am, need_weights=True, average_attn_weights=False)
    o2, w2 = mha(q, k, v, key_padding_mask=kpm, need_weights=True)
    o3, w3 = mha(q, k, v, need_weights=False)
    (o1.sum() + o2.pow(2).sum()).backward()
    x = ctx.t(rng.standard_normal((5, 2, 8)).astype(np.float32))
    m3 = ctx.t(rng.uniform(size=(2 * 4, 5, 5)) > 0.7)
    m3[..., 0] = False
    o4, w4 = sa(x, x, x, attn_mask=m3)
    return [o1, w1, o2, w2, o3, w3 is None, q.grad, v.grad, mha.in_proj_bias if mha.in_proj_bias is None else mha.q_proj_weight.shape, o4, w4]


def kv_cache_decoding(torch, ctx):
    """A decoder-only transformer (pre-norm, learned positions, tied embedding) decoding
    greedily two ways: recomputing the whole prefix each step with a causal mask, and with a
    per-layer key/value cache appended by torch.cat; both token lists and final logits must
    agree (with each other and with PyTorch). Top-k sampling with a seeded generator too."""
    nn = torch.nn
    F = nn.functional

    class Block(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.h = h
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

        def forward(self, x, cache=None):
            B, T, D = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
            q, k, v = (t.view(B, T, self.h, D // self.h).transpose(1, 2) for t in (q, k, v))
            if cache is not None:
                if "k" in cache:
                    k = torch.cat([cache["k"], k], dim=2)
                    v = torch.cat([cache["v"], v], dim=2)
                cache["k"], cache["v"] = k, v
            causal = cache is None or T > 1
            a = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            x = x + self.proj(a.transpose(1, 2).reshape(B, T, D))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self, vocab=11, d=8, h=2, n=2, ctxlen=16):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(ctxlen, d)
            self.blocks = nn.ModuleList(Block(d, h) for _ in range(n))
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)
            self.head.weight = self.tok.weight

        def forward(self, idx, caches=None, start=0):
            T = idx.shape[1]
            x = self.tok(idx) + self.pos(torch.arange(start, start + T))
            for i, b in enumerate(self.blocks):
                x = b(x, None if caches is None else caches[i])
            return self.head(self.ln(x))

    model = ctx.init(GPT(), "gpt").eval()
    prompt = ctx.t(np.array([[1, 5, 3], [2, 2, 7]]))
    with torch.no_grad():
        seq = prompt
        for _ in range(5):
            nxt = model(seq)[:, -1].argmax(-1, keepdim=True)
            seq = torch.cat([seq, nxt], 1)
        caches = [{} for _ in model.blocks]
        logits = model(prompt, caches)
        seq2 = prompt
        for _ in range(5):
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            seq2 = torch.cat([seq2, nxt], 1)
            logits = model(nxt, caches, start=seq2.shape[1] - 1)
        full = model(seq2)[:, -1]
        g = torch.Generator().manual_seed(7)
        s = prompt
        for _ in range(4):
            lg = model(s)[:, -1] / 0.8
            v, _ = lg.topk(3)
            lg = lg.masked_fill(lg < v[:, [-1]], float("-inf"))
            s = torch.cat([s, torch.multinomial(lg.softmax(-1), 1, generator=g)], 1)
    return [seq, seq2, torch.equal(seq, seq2), logits[:, -1], full, caches[0]["k"].shape[2], s]


def seq2seq_transformer(torch, ctx):
    """nn.Transformer (batch_first, norm_first, GELU, bias=False: the key projection bias has a
    zero gradient in exact arithmetic, noise that Adam would amplify) trained one step on a copy task with a
    causal target mask from generate_square_subsequent_mask, src and tgt key padding masks,
    memory_key_padding_mask, and tgt_is_causal; then greedy decoding in eval mode."""
    nn = torch.nn
    F = nn.functional
    tr = ctx.init(
        nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=2, dim_feedforward=16, dropout=0.0, activation="gelu", batch_first=True, norm_first=True, bias=False),
        "tr",
    )
    emb = ctx.init(nn.Embedding(7, 8), "emb")
    out_proj = ctx.init(nn.Linear(8, 7), "op")
    params = list(tr.parameters()) + list(emb.parameters()) + list(out_proj.parameters())
    # (eps 1e-6: the key projection's bias has a zero gradient in exact arithmetic, whose
    # rounding noise Adam with eps 1e-8 would step by up to lr either way)
    opt = torch.optim.AdamW(params, lr=1e-2, eps=1e-6)
    src = ctx.t(np.array([[3, 4, 5, 6, 0], [4, 5, 6, 0, 0]]))
    tgt_in = ctx.t(np.array([[1, 3, 4, 5, 6], [1, 4, 5, 6, 0]]))
    tgt_out = ctx.t(np.array([[3, 4, 5, 6, 2], [4, 5, 6, 2, 0]]))
    mask = nn.Transformer.generate_square_subsequent_mask(5)
    spm, tpm = src == 0, tgt_in == 0
    def step(src, tgt_in, tgt_out, spm, tpm):
        h = tr(emb(src), emb(tgt_in), tgt_mask=mask, src_key_padding_mask=spm, tgt_key_padding_mask=tpm, memory_key_padding_mask=spm, tgt_is_causal=True)
        loss = F.cross_entropy(out_proj(h).reshape(-1, 7), tgt_out.reshape(-1), ignore_index=0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    step = ctx.fn(step)
    losses = [step(src, tgt_in, tgt_out, spm, tpm) for _ in range(2)]
    tr.eval()
    with torch.no_grad():
        mem = tr.encoder(emb(src), src_key_padding_mask=spm)
        ys = torch.ones(2, 1, dtype=torch.long)
        for _ in range(4):
            m = nn.Transformer.generate_square_subsequent_mask(ys.shape[1])
            d = tr.decoder(emb(ys), mem, tgt_mask=m, memory_key_padding_mask=spm)
            ys = torch.cat([ys, out_proj(d[:, -1]).argmax(-1, keepdim=True)], 1)
    return [mask, losses, mem, ys, tr.decoder.layers[1].linear2.weight]


PROGRAMS = [packed_bigru, ctc_training, mha_masks, kv_cache_decoding, seq2seq_transformer]


CAPTURED = [ctc_training, seq2seq_transformer]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
