"""Layer programs of hunt54, each run on PyTorch and on ember: nn.Transformer with causal and
padding masks (norm_first, batch_first), MultiheadAttention with kdim/vdim, bias_kv,
zero_attn, float and bool masks and per-head weights, scaled_dot_product_attention with
enable_gqa, RoPE through view_as_complex/polar, interpolate's modes, Unfold/Fold round trips,
lazy modules and rarer layers, packed sequences through a projected bidirectional LSTM and a
GRU, orthogonal parametrizations, Gumbel-softmax.
"""

import math

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def transformer_masks(torch, ctx):
    """nn.Transformer (norm_first, batch_first) with generate_square_subsequent_mask as float
    and bool masks, key padding masks for source, target and memory, tgt_is_causal; a
    TransformerDecoder of norm_first GELU layers with a final norm; the encoder in eval mode
    with padding and causal masks."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    model = nn.Transformer(
        d_model=16,
        nhead=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dim_feedforward=32,
        dropout=0.0,
        batch_first=True,
        norm_first=True,
    )
    ctx.init(model)
    rng = np.random.default_rng(0)
    src = ctx.t(rng.standard_normal((3, 7, 16)).astype(np.float32))
    tgt = ctx.t(rng.standard_normal((3, 5, 16)).astype(np.float32))
    tmask = nn.Transformer.generate_square_subsequent_mask(5)
    tmask_b = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    src_pad = ctx.t(np.array([[False] * 7, [False] * 5 + [True] * 2, [False] * 6 + [True]]))
    tgt_pad = ctx.t(np.array([[False] * 5, [False] * 4 + [True], [False] * 5]))
    out = model(
        src,
        tgt,
        tgt_mask=tmask,
        src_key_padding_mask=src_pad,
        tgt_key_padding_mask=tgt_pad,
        memory_key_padding_mask=src_pad,
        tgt_is_causal=True,
    )
    out2 = model(
        src, tgt, tgt_mask=tmask_b, src_key_padding_mask=src_pad, memory_key_padding_mask=src_pad
    )
    out.sum().backward()
    dec_layer = nn.TransformerDecoderLayer(
        16, 2, 32, dropout=0.0, batch_first=True, norm_first=True, activation="gelu"
    )
    ctx.init(dec_layer, "dec")
    dec = nn.TransformerDecoder(dec_layer, num_layers=2, norm=nn.LayerNorm(16))
    mem = model.encoder(src, src_key_padding_mask=src_pad)
    d = dec(tgt, mem, tgt_mask=tmask, memory_key_padding_mask=src_pad, tgt_is_causal=True)
    model.eval()
    with torch.no_grad():
        ev = model.encoder(src, src_key_padding_mask=src_pad)
        ev_mask = model.encoder(
            src, mask=nn.Transformer.generate_square_subsequent_mask(7), is_causal=True
        )
    return [
        out,
        out2,
        tmask,
        d,
        ev[0],
        ev[1, :5],
        ev_mask,
        model.encoder.layers[0].self_attn.in_proj_weight.grad,
        mem.shape,
    ]


def mha_variants(torch, ctx):
    """MultiheadAttention with kdim/vdim, add_bias_kv, add_zero_attn, key_padding_mask, per-
    head weights (average_attn_weights=False), float and 3-D bool attn_mask; a sequence-
    first one with a causal mask and is_causal, and a float key_padding_mask; gradients to
    the query and projections."""
    nn, F = torch.nn, torch.nn.functional
    mha = ctx.init(
        nn.MultiheadAttention(
            12, 3, kdim=5, vdim=7, batch_first=True, bias=True, add_bias_kv=True, add_zero_attn=True
        )
    )
    mha2 = ctx.init(nn.MultiheadAttention(12, 4, dropout=0.0), "m2")
    rng = np.random.default_rng(0)
    q = ctx.t(rng.standard_normal((2, 4, 12)).astype(np.float32)).requires_grad_()
    k = ctx.t(rng.standard_normal((2, 6, 5)).astype(np.float32))
    v = ctx.t(rng.standard_normal((2, 6, 7)).astype(np.float32))
    kpm = ctx.t(np.array([[False] * 6, [False] * 4 + [True] * 2]))
    fmask = ctx.t(rng.standard_normal((4, 6)).astype(np.float32))
    out, w = mha(q, k, v, key_padding_mask=kpm, need_weights=True, average_attn_weights=False)
    out_b, w_b = mha(q, k, v, attn_mask=fmask, need_weights=True)
    bmask = ctx.t(rng.uniform(size=(2 * 3, 4, 6)) > 0.8)
    out_c, _ = mha(q, k, v, attn_mask=bmask, key_padding_mask=kpm)
    x = q.transpose(0, 1)
    o2, w2 = mha2(
        x,
        x,
        x,
        attn_mask=nn.Transformer.generate_square_subsequent_mask(4),
        is_causal=True,
        need_weights=False,
    )
    o3, w3 = mha2(
        x, x, x, key_padding_mask=ctx.t(np.array([[0.0, 0, 0, -1e9], [0, 0, 0, 0]], np.float32))
    )
    (out.sum() + out_b.sum() + out_c.sum() + o2.sum() + o3.sum() + w.sum()).backward()
    return [
        out,
        w,
        out_b,
        w_b,
        out_c,
        o2,
        w2,
        o3,
        w3,
        q.grad,
        mha.bias_k.grad,
        mha.k_proj_weight.grad,
        mha.out_proj.weight.grad,
    ]


def sdpa_variants(torch, ctx):
    """scaled_dot_product_attention with enable_gqa (8 query heads over 2 key heads) causal and
    with a scale, a bool mask against repeat_interleave'd keys, a broadcast float mask,
    dropout_p=0, a causal self-attention; gradients to q, k, v."""
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    q = ctx.t(rng.standard_normal((2, 8, 5, 4)).astype(np.float32)).requires_grad_()
    k = ctx.t(rng.standard_normal((2, 2, 7, 4)).astype(np.float32)).requires_grad_()
    v = ctx.t(rng.standard_normal((2, 2, 7, 4)).astype(np.float32)).requires_grad_()
    a = F.scaled_dot_product_attention(q, k, v, enable_gqa=True, is_causal=True)
    b = F.scaled_dot_product_attention(q, k, v, enable_gqa=True, scale=0.3)
    m = ctx.t(rng.uniform(size=(5, 7)) > 0.3)
    c = F.scaled_dot_product_attention(
        q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1), attn_mask=m
    )
    fm = ctx.t(rng.standard_normal((2, 1, 5, 7)).astype(np.float32))
    d = F.scaled_dot_product_attention(q, k, v, attn_mask=fm, enable_gqa=True)
    torch.manual_seed(3)
    e = F.scaled_dot_product_attention(q[:, :2], k, v, dropout_p=0.0)
    sq = q[:, :, :5, :]
    f = F.scaled_dot_product_attention(sq, sq, sq, is_causal=True, scale=None)
    (a.sum() + b.pow(2).sum() + c.sum() + d.sum() + e.sum() + f.sum()).backward()
    return [a, b, c, d, e, f, q.grad, k.grad, v.grad]


def rope_complex(torch, ctx):
    """Rotary embeddings as in LLaMA: frequencies by outer, torch.polar, view_as_complex of the
    projected queries and keys, multiplication, view_as_real and flatten back (the
    projection captured); attention scores' gradient to both projections; complex
    conj/abs/angle/polar."""
    nn = torch.nn
    dim, T = 8, 6
    freqs = 1.0 / (10000 ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    t = torch.arange(T, dtype=torch.float32)
    freqs = torch.outer(t, freqs)
    cis = torch.polar(torch.ones_like(freqs), freqs)

    def apply_rotary(xq, xk, cis):
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        cis = cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
        xq_out = torch.view_as_real(xq_ * cis).flatten(3)
        xk_out = torch.view_as_real(xk_ * cis).flatten(3)
        return xq_out.type_as(xq), xk_out.type_as(xk)

    wq = ctx.init(nn.Linear(16, 16, bias=False), "q")
    wk = ctx.init(nn.Linear(16, 16, bias=False), "k")
    x = ctx.t(np.random.default_rng(0).standard_normal((2, T, 16)).astype(np.float32))
    f = ctx.fn(lambda x: apply_rotary(wq(x).view(2, T, 2, dim), wk(x).view(2, T, 2, dim), cis))
    q, k = f(x)
    scores = torch.einsum("bthd,bshd->bhts", q, k) / math.sqrt(dim)
    scores.softmax(-1).sum(-2).pow(2).sum().backward()
    c = torch.complex(torch.tensor([1.0, 2.0]), torch.tensor([0.5, -1.0]))
    return [
        cis.real,
        cis.imag,
        q,
        k,
        wq.weight.grad,
        wk.weight.grad,
        torch.view_as_real(c * c.conj()),
        c.abs(),
        c.angle(),
        torch.polar(c.abs(), c.angle()),
    ]


def interp_modes(torch, ctx):
    """F.interpolate: nearest-exact, area, bicubic and bilinear with antialias, bicubic
    align_corners, recompute_scale_factor both ways, fractional nearest, linear and area on
    1-D, trilinear, upsample_bilinear/nearest, nn.Upsample nearest-exact; adaptive pools;
    the input's gradient."""
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((2, 3, 7, 9)).astype(np.float32)).requires_grad_()
    outs = [
        F.interpolate(x, size=(4, 5), mode="nearest-exact"),
        F.interpolate(x, scale_factor=1.7, mode="nearest-exact"),
        F.interpolate(x, size=(3, 4), mode="area"),
        F.interpolate(x, size=(4, 5), mode="bicubic", antialias=True, align_corners=False),
        F.interpolate(x, size=(4, 5), mode="bilinear", antialias=True),
        F.interpolate(x, size=(11, 13), mode="bicubic", align_corners=True),
        F.interpolate(x, scale_factor=(1.5, 0.6), mode="bilinear", recompute_scale_factor=True),
        F.interpolate(x, scale_factor=(1.5, 0.6), mode="bilinear", recompute_scale_factor=False),
        F.interpolate(x, scale_factor=0.55, mode="nearest"),
        F.interpolate(x[:, :, 0], scale_factor=2.3, mode="linear", align_corners=False),
        F.interpolate(x[:, :, 0], size=4, mode="area"),
        F.interpolate(x.unsqueeze(2).expand(-1, -1, 3, -1, -1), size=(2, 5, 6), mode="trilinear"),
        F.interpolate(x, size=(14, 18), mode="bilinear", antialias=True, align_corners=True),
        F.upsample_bilinear(x, scale_factor=2),
        F.upsample_nearest(x, size=(8, 8)),
        torch.nn.Upsample(scale_factor=2.5, mode="nearest-exact")(x),
        F.adaptive_avg_pool2d(x, (3, 4)),
        F.adaptive_max_pool2d(x, (2, 5)),
    ]
    sum((o * (i + 1)).sum() for i, o in enumerate(outs)).backward()
    return [outs, x.grad]


def unfold_fold(torch, ctx):
    """nn.Unfold / nn.Fold with a rectangular kernel, dilation, padding and stride (the overlap
    count folded from ones), ViT patchify with F.unfold and back with F.fold, a sliding-
    window mean by Tensor.unfold twice; gradients."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(0)
    img = ctx.t(rng.standard_normal((2, 3, 8, 8)).astype(np.float32)).requires_grad_()
    unfold = nn.Unfold(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    patches = unfold(img)
    fold = nn.Fold(
        output_size=(8, 8), kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1)
    )
    back = fold(patches)
    ones = fold(unfold(torch.ones_like(img)))
    recon = back / ones
    # ViT style patchify via unfold and back
    p = F.unfold(img, 4, stride=4).transpose(1, 2)
    emb = ctx.init(nn.Linear(48, 10))(p)
    q = F.fold(p.transpose(1, 2), (8, 8), 4, stride=4)
    # sliding window mean via unfold on tensor
    win = img.unfold(2, 3, 1).unfold(3, 3, 1).mean((-1, -2))
    (recon.sum() + emb.pow(2).sum() + q.sum() + win.sum() + patches.std()).backward()
    return [patches, back, recon, q, win, img.grad, emb]


def lazy_and_rare_layers(torch, ctx):
    """LazyConv2d (padding='same', dilation, circular), LazyBatchNorm2d, LazyConvTranspose2d
    and LazyLinear materialised by a first call; Bilinear, unbatched
    LSTMCell/GRUCell/RNN/LSTM, ConvTranspose1d with output_size, MaxUnpool2d, LPPool2d,
    LocalResponseNorm, ChannelShuffle, RMSNorm, CircularPad2d, ZeroPad3d and the rarer
    activations."""
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.LazyConv2d(4, 3, padding="same", dilation=2, padding_mode="circular"),
        nn.LazyBatchNorm2d(),
        nn.ReLU(),
        nn.LazyConvTranspose2d(3, 3, stride=2, padding=1, output_padding=1, groups=1),
        nn.Flatten(),
        nn.LazyLinear(5),
    )
    x = torch.linspace(-1, 1, 2 * 2 * 6 * 6).view(2, 2, 6, 6)
    y0 = net(x)
    types = [type(m).__name__ for m in net]
    shapes = [list(p.shape) for p in net.parameters()]
    ctx.init(net)  # after materialising: copied from PyTorch
    y = net(x)
    y.sum().backward()
    rest = []
    bil = ctx.init(nn.Bilinear(3, 4, 2), "bil")
    rest.append(bil(torch.ones(5, 3), torch.linspace(0, 1, 20).view(5, 4)))
    cell = ctx.init(nn.LSTMCell(3, 4), "cell")
    h, c = cell(torch.ones(3))
    rest += [h, c]
    gcell = ctx.init(nn.GRUCell(3, 4), "gcell")
    rest.append(gcell(torch.ones(3), torch.zeros(4)))
    rnn = ctx.init(nn.RNN(3, 4, 2, nonlinearity="relu"), "rnn")
    o, hn = rnn(torch.ones(5, 3))
    rest += [o, hn]
    lstm = ctx.init(nn.LSTM(3, 4), "lstm")
    o2, (h2, c2) = lstm(torch.ones(5, 3))
    rest += [o2, h2]
    ct = ctx.init(nn.ConvTranspose1d(2, 3, 4, stride=3), "ct")
    rest.append(ct(torch.ones(1, 2, 5), output_size=[16]))
    pool = nn.MaxPool2d(2, return_indices=True)
    unpool = nn.MaxUnpool2d(2)
    p, idx = pool(x)
    rest += [unpool(p, idx, output_size=x.shape), idx]
    rest.append(nn.LPPool2d(2, 2)(x.abs()))
    rest.append(nn.LocalResponseNorm(2)(x))
    rest.append(nn.ChannelShuffle(2)(torch.arange(8.0).view(1, 4, 1, 2)))
    rest.append(nn.RMSNorm(6, eps=1e-5)(x))
    rest.append(nn.CircularPad2d((1, 0, 2, 1))(x))
    rest.append(nn.ZeroPad3d(1)(x.unsqueeze(0)).shape)
    rest.append(nn.Softmax2d()(x))
    rest.append(nn.Hardshrink(0.3)(x))
    rest.append(nn.Threshold(0.1, -5.0)(x))
    rest.append(nn.GLU(1)(x))
    rest.append(nn.Mish()(x))
    rest.append(nn.Softmin(1)(x))
    rest.append(nn.InstanceNorm2d(2, affine=True, track_running_stats=True)(x))
    rest.append(nn.PixelShuffle(2)(x[:, :1].repeat(1, 4, 1, 1)))
    rest.append(nn.PixelUnshuffle(2)(x))
    rest.append(nn.Conv3d(2, 2, (1, 3, 3), padding="same", padding_mode="reflect").weight.shape)
    rest.append(
        nn.Conv1d(2, 4, 3, padding="same", padding_mode="replicate", groups=2)(x[:, :, 0]).shape
    )
    rest.append(nn.CosineSimilarity(dim=1)(x, x.flip(1)))
    rest.append(nn.PairwiseDistance()(x[0, 0], x[1, 0]))
    rest.append(nn.Unflatten(1, (1, 2))(x).shape)
    rest.append(nn.Identity(54, unused="x")(x).shape)
    rest.append(nn.Hardtanh(-0.5, 0.5)(x))
    rest.append(nn.CELU(0.5)(x))
    rest.append(nn.SELU()(x))
    rest.append(nn.Tanhshrink()(x))
    rest.append(nn.Softshrink(0.2)(x))
    rest.append(nn.LogSigmoid()(x))
    rest.append(nn.Hardswish()(x))
    rest.append(nn.SiLU()(x))
    rest.append(nn.ReLU6()(x * 10))
    return [y0.shape, types, shapes, y, net[0].weight.grad, rest]


def packed_proj(torch, ctx):
    """pad_sequence (left padding), pack_padded_sequence with enforce_sorted=False through a
    two-layer bidirectional LSTM with proj_size, pad_packed_sequence with total_length,
    pack_sequence into a bidirectional GRU, unpad_sequence, unpack_sequence; gradients of
    the projection and reverse weights."""
    nn = torch.nn
    rnn_utils = nn.utils.rnn
    lstm = ctx.init(
        nn.LSTM(3, 6, num_layers=2, bidirectional=True, proj_size=4, batch_first=True), "lstm"
    )
    gru = ctx.init(nn.GRU(8, 5, bidirectional=True), "gru")
    rng = np.random.default_rng(0)
    lens = [4, 6, 2]
    seqs = [ctx.t(rng.standard_normal((l, 3)).astype(np.float32)) for l in lens]
    padded = rnn_utils.pad_sequence(seqs, batch_first=True)
    padded_left = rnn_utils.pad_sequence(
        seqs, batch_first=True, padding_side="left", padding_value=-1.0
    )
    packed = rnn_utils.pack_padded_sequence(
        padded, torch.tensor(lens), batch_first=True, enforce_sorted=False
    )
    out, (h, c) = lstm(packed)
    unpacked, out_lens = rnn_utils.pad_packed_sequence(out, batch_first=True, total_length=7)
    packed2 = rnn_utils.pack_sequence([u[:l] for u, l in zip(unpacked, lens)], enforce_sorted=False)
    out2, h2 = gru(packed2)
    up2, l2 = rnn_utils.pad_packed_sequence(out2, padding_value=0.5)
    unp = rnn_utils.unpad_sequence(up2, l2)
    unpk = rnn_utils.unpack_sequence(out2)
    loss = up2.sum() + h.pow(2).sum() + c.sum() + h2.sum()
    loss.backward()
    return [
        padded_left,
        out.data,
        out.batch_sizes,
        out.sorted_indices,
        out.unsorted_indices,
        unpacked,
        out_lens,
        h,
        c,
        up2,
        l2,
        unp,
        unpk,
        h2,
        lstm.weight_hr_l0.grad,
        lstm.weight_hh_l1_reverse.grad,
        gru.bias_ih_l0_reverse.grad,
    ]


def orthogonal_param(torch, ctx):
    """parametrizations.orthogonal with the matrix_exp, cayley and householder maps, with and
    without trivialization, trained by SGD; a rectangular one; spectral_norm and weight_norm
    parametrizations' keys; parametrize.cached and remove_parametrizations."""
    nn = torch.nn
    P = nn.utils.parametrizations
    results = []
    for i, omap in enumerate(["matrix_exp", "cayley", "householder"]):
        torch.manual_seed(i)
        lin = nn.Linear(4, 4)
        ctx.init(lin, f"l{i}")
        P.orthogonal(lin, orthogonal_map=omap, use_trivialization=(i != 1))
        W = lin.weight
        results.append(W @ W.T)
        opt = torch.optim.SGD(lin.parameters(), lr=0.1)
        x = torch.linspace(-1, 1, 8).view(2, 4)
        for _ in range(3):
            opt.zero_grad()
            loss = (lin(x) - 1).pow(2).sum()
            loss.backward()
            opt.step()
        results.append([loss, lin.weight, sorted(lin.state_dict().keys())])
    rect = nn.Linear(5, 3)
    ctx.init(rect, "rect")
    P.orthogonal(rect)
    results.append(rect.weight @ rect.weight.T)
    sn = P.spectral_norm(nn.Linear(4, 6), n_power_iterations=3)
    wn = P.weight_norm(nn.Linear(4, 6), dim=1)
    results.append(sorted(sn.state_dict().keys()) + sorted(wn.state_dict().keys()))
    with nn.utils.parametrize.cached():
        w1 = rect.weight
        w2 = rect.weight
        same = w1 is w2
    nn.utils.parametrize.remove_parametrizations(rect, "weight", leave_parametrized=True)
    results.append([same, type(rect.weight).__name__, nn.utils.parametrize.is_parametrized(rect)])
    return results


def gumbel_hard(torch, ctx):
    """F.gumbel_softmax with hard=True (straight-through one-hot) and soft along dim 0, and
    their gradients."""
    F = torch.nn.functional
    logits = torch.randn(4, 6, requires_grad=True)
    y = F.gumbel_softmax(logits, tau=0.5, hard=True)
    y2 = F.gumbel_softmax(logits, tau=2.0, hard=False, dim=0)
    w = torch.arange(6.0)
    (y * w).sum().backward()
    g1 = logits.grad.clone()
    logits.grad = None
    (y2**2).sum().backward()
    return [y, y2, g1, logits.grad]


PROGRAMS = [
    transformer_masks,
    mha_variants,
    sdpa_variants,
    rope_complex,
    interp_modes,
    unfold_fold,
    lazy_and_rare_layers,
    packed_proj,
    orthogonal_param,
    gumbel_hard,
]
CAPTURED = [rope_complex]
TOLERANCES = {}


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, **TOLERANCES.get(program.__name__, {}))


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True, **TOLERANCES.get(program.__name__, {}))
