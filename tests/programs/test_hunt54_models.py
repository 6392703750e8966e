"""Model programs of hunt54, each run on PyTorch and on ember (eagerly, and captured where a step
is marked): a DDPM step (sinusoidal timestep embeddings, GroupNorm+SiLU ResBlocks, spatial
self-attention, linspace/cumprod/gather noise schedule, EMA by torch._foreach_mul_/_foreach_add_
and lerp), a detection head (box IoU, anchor matching, smooth L1 + focal loss, batched NMS in
torch ops, RoIAlign by grid_sample), an audio pipeline (stft/istft, mel filterbank, log1p,
SpecAugment masks), message passing with index_add_/scatter_reduce/index_reduce_ and a sparse
adjacency, and Kipf's pygcn on sparse tensors (torch.sparse.FloatTensor, torch.spmm, torch.mv
PageRank, cat/stack of sparse tensors).
"""

import math

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def ddpm_foreach_ema(torch, ctx):
    """A DDPM training step: a float64 linspace beta schedule, cumprod and gather of alpha-bar,
    sinusoidal timestep embeddings, GroupNorm+SiLU ResBlocks with a time projection, spatial
    self-attention by einsum, AdamW; EMA copies updated by torch._foreach_mul_/_foreach_add_,
    lerp_ and _foreach_lerp_; three ancestral sampling steps with the model."""
    nn, F = torch.nn, torch.nn.functional
    T = 50
    betas = torch.linspace(1e-4, 0.02, T, dtype=torch.float64).float()
    alphas = 1.0 - betas
    abar = torch.cumprod(alphas, dim=0)

    def temb(t, dim=16):
        half = dim // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
        a = t.float()[:, None] * freqs[None]
        return torch.cat([a.sin(), a.cos()], dim=-1)

    class ResBlock(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.n1 = nn.GroupNorm(4, c)
            self.c1 = nn.Conv2d(c, c, 3, padding=1)
            self.t = nn.Linear(16, c)
            self.n2 = nn.GroupNorm(4, c)
            self.c2 = nn.Conv2d(c, c, 3, padding=1)

        def forward(self, x, e):
            h = self.c1(F.silu(self.n1(x)))
            h = h + self.t(F.silu(e))[:, :, None, None]
            h = self.c2(F.dropout(F.silu(self.n2(h)), 0.0, self.training))
            return x + h

    class Attn(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.norm = nn.GroupNorm(4, c)
            self.qkv = nn.Conv2d(c, 3 * c, 1)
            self.proj = nn.Conv2d(c, c, 1)

        def forward(self, x):
            B, C, H, W = x.shape
            q, k, v = self.qkv(self.norm(x)).reshape(B, 3, C, H * W).unbind(1)
            w = torch.einsum("bci,bcj->bij", q, k) * C**-0.5
            h = torch.einsum("bij,bcj->bci", w.softmax(-1), v).reshape(B, C, H, W)
            return x + self.proj(h)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Conv2d(1, 8, 3, padding=1)
            self.r1 = ResBlock(8)
            self.a = Attn(8)
            self.r2 = ResBlock(8)
            self.out = nn.Conv2d(8, 1, 3, padding=1)

        def forward(self, x, t):
            e = temb(t)
            return self.out(self.r2(self.a(self.r1(self.inp(x), e)), e))

    net = ctx.init(Net())
    ema = [p.detach().clone() for p in net.parameters()]
    ema2 = [p.detach().clone() for p in net.parameters()]
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)

    def step(x0, t, noise):
        a = abar.gather(0, t).view(-1, 1, 1, 1)
        xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
        loss = F.mse_loss(net(xt, t), noise)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    losses = []
    for i in range(3):
        x0 = ctx.t(rng.standard_normal((4, 1, 8, 8)).astype(np.float32))
        t = ctx.t(rng.integers(0, T, 4))
        noise = ctx.t(rng.standard_normal((4, 1, 8, 8)).astype(np.float32))
        losses.append(step(x0, t, noise).detach())
        with torch.no_grad():
            params = [p.detach() for p in net.parameters()]
            torch._foreach_mul_(ema, 0.9)
            torch._foreach_add_(ema, params, alpha=0.1)
            for e2, p in zip(ema2, params):
                e2.lerp_(p, 0.1)
            torch._foreach_lerp_(ema2, params, 0.05)
    # sampling step with the EMA model
    with torch.no_grad():
        x = ctx.t(rng.standard_normal((2, 1, 8, 8)).astype(np.float32))
        for t in reversed(range(T - 3, T)):
            tt = torch.full((2,), t, dtype=torch.long)
            eps = net(x, tt)
            x = (x - betas[t] / (1 - abar[t]).sqrt() * eps) / alphas[t].sqrt()
            x = x + betas[t].sqrt() * ctx.t(rng.standard_normal((2, 1, 8, 8)).astype(np.float32))
    return [losses, ema[:4], ema2[:4], x, abar[::10]]


def detection_head(torch, ctx):
    """A RetinaNet-style head: box IoU, anchor matching by max/argmax over the IoU matrix (each
    ground truth forced onto its best anchor), box deltas with smooth L1 and Huber losses,
    sigmoid focal loss on valid anchors, RoIAlign by grid_sample over sampled bin centres,
    and a (batched) NMS written with argsort and an IoU matrix."""
    F = torch.nn.functional

    def box_iou(a, b):
        area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
        area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
        lt = torch.max(a[:, None, :2], b[None, :, :2])
        rb = torch.min(a[:, None, 2:], b[None, :, 2:])
        wh = (rb - lt).clamp(min=0)
        inter = wh[..., 0] * wh[..., 1]
        return inter / (area_a[:, None] + area_b[None] - inter)

    def nms(boxes, scores, thr):
        order = scores.argsort(descending=True)
        keep = []
        suppressed = torch.zeros(len(boxes), dtype=torch.bool)
        iou = box_iou(boxes, boxes)
        for i in order.tolist():
            if suppressed[i]:
                continue
            keep.append(i)
            suppressed |= iou[i] > thr
        return torch.tensor(keep, dtype=torch.long)

    def batched_nms(boxes, scores, idxs, thr):
        offsets = idxs.to(boxes) * (boxes.max() + 1)
        return nms(boxes + offsets[:, None], scores, thr)

    rng = np.random.default_rng(0)
    xy = rng.uniform(0, 50, (12, 2))
    wh = rng.uniform(5, 20, (12, 2))
    anchors = ctx.t(np.concatenate([xy, xy + wh], 1).astype(np.float32))
    gxy = rng.uniform(0, 50, (3, 2))
    gwh = rng.uniform(5, 20, (3, 2))
    gt = ctx.t(np.concatenate([gxy, gxy + gwh], 1).astype(np.float32))
    gt_cls = ctx.t(np.array([1, 2, 0]))
    head = ctx.init(torch.nn.Linear(4, 4 + 3))
    feats = ctx.t(rng.standard_normal((12, 4)).astype(np.float32))
    out = head(feats)
    deltas, cls_logits = out[:, :4], out[:, 4:]
    iou = box_iou(anchors, gt)
    best_iou, best_gt = iou.max(dim=1)
    gt_best_anchor = iou.argmax(dim=0)
    best_gt[gt_best_anchor] = torch.arange(3)
    best_iou[gt_best_anchor] = 1.0
    pos = best_iou >= 0.3
    neg = best_iou < 0.1
    matched = gt[best_gt]
    aw = anchors[:, 2] - anchors[:, 0]
    ah = anchors[:, 3] - anchors[:, 1]
    acx = anchors[:, 0] + 0.5 * aw
    acy = anchors[:, 1] + 0.5 * ah
    mw = matched[:, 2] - matched[:, 0]
    mh = matched[:, 3] - matched[:, 1]
    tgt = torch.stack(
        [
            (matched[:, 0] + 0.5 * mw - acx) / aw,
            (matched[:, 1] + 0.5 * mh - acy) / ah,
            torch.log(mw / aw),
            torch.log(mh / ah),
        ],
        1,
    )
    reg = F.smooth_l1_loss(deltas[pos], tgt[pos], beta=1 / 9, reduction="sum") / pos.sum().clamp(
        min=1
    )
    reg2 = F.huber_loss(deltas[pos], tgt[pos], delta=0.5)
    cls_t = torch.zeros_like(cls_logits)
    cls_t[pos, gt_cls[best_gt[pos]]] = 1.0
    valid = pos | neg
    p = cls_logits.sigmoid()
    ce = F.binary_cross_entropy_with_logits(cls_logits, cls_t, reduction="none")
    p_t = p * cls_t + (1 - p) * (1 - cls_t)
    a_t = 0.25 * cls_t + 0.75 * (1 - cls_t)
    focal = (a_t * ce * (1 - p_t) ** 2)[valid].sum() / pos.sum().clamp(min=1)
    loss = reg + focal + reg2
    loss.backward()
    # RoIAlign via grid_sample
    fmap = ctx.t(rng.standard_normal((1, 3, 16, 16)).astype(np.float32)).requires_grad_()
    rois = anchors[:5] / 4.0
    S = 4
    steps = (torch.arange(S, dtype=torch.float32) + 0.5) / S
    x = rois[:, 0, None] + steps[None] * (rois[:, 2] - rois[:, 0])[:, None]
    y = rois[:, 1, None] + steps[None] * (rois[:, 3] - rois[:, 1])[:, None]
    gx = x / 16 * 2 - 1
    gy = y / 16 * 2 - 1
    grid = torch.stack(torch.broadcast_tensors(gx[:, None, :], gy[:, :, None]), dim=-1)
    pooled = F.grid_sample(
        fmap.expand(5, -1, -1, -1), grid, mode="bilinear", align_corners=False, padding_mode="zeros"
    )
    pooled.pow(2).sum().backward()
    scores = cls_logits.detach().sigmoid().max(1).values
    keep = batched_nms(anchors, scores, cls_logits.detach().argmax(1), 0.3)
    keep2 = nms(anchors, scores, 0.5)
    return [loss, reg, focal, head.weight.grad, pooled, fmap.grad, keep, keep2, best_gt, pos]


def audio_pipeline(torch, ctx):
    """An audio front end: stft/istft with Hann and Hamming windows (center, reflect padding,
    normalized, win_length shorter than n_fft), a mel filterbank built from linspace and
    applied by matmul, log1p, SpecAugment time and frequency masks from arange comparisons
    with a Generator, a Conv1d on top."""
    F = torch.nn.functional
    sr, n_fft, hop = 8000, 64, 16
    rng = np.random.default_rng(0)
    wav = ctx.t(rng.standard_normal((2, 800)).astype(np.float32))
    win = torch.hann_window(n_fft)
    spec = torch.stft(
        wav,
        n_fft,
        hop_length=hop,
        win_length=n_fft,
        window=win,
        center=True,
        pad_mode="reflect",
        return_complex=True,
    )
    rec = torch.istft(spec, n_fft, hop_length=hop, window=win, length=800)
    spec2 = torch.stft(
        wav,
        32,
        hop_length=8,
        window=torch.hamming_window(24),
        win_length=24,
        center=False,
        onesided=True,
        normalized=True,
        return_complex=True,
    )
    power = spec.abs().pow(2)
    n_mels = 10

    def hz_to_mel(f):
        return 2595.0 * math.log10(1.0 + f / 700.0)

    mels = torch.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2), n_mels + 2)
    hz = 700.0 * (10 ** (mels / 2595.0) - 1.0)
    freqs = torch.linspace(0, sr / 2, n_fft // 2 + 1)
    lower = (freqs[None, :] - hz[:-2, None]) / (hz[1:-1] - hz[:-2])[:, None]
    upper = (hz[2:, None] - freqs[None, :]) / (hz[2:] - hz[1:-1])[:, None]
    fb = torch.clamp(torch.minimum(lower, upper), min=0.0)
    mel = torch.matmul(fb, power)
    logmel = torch.log1p(mel)
    # SpecAugment
    T = logmel.shape[-1]
    g = torch.Generator().manual_seed(0)
    t0 = torch.randint(0, T - 5, (2, 1), generator=g)
    tw = torch.randint(1, 5, (2, 1), generator=g)
    ar = torch.arange(T)[None]
    tmask = (ar >= t0) & (ar < t0 + tw)
    f0 = torch.randint(0, n_mels - 3, (2, 1), generator=g)
    fr = torch.arange(n_mels)[None]
    fmask = (fr >= f0) & (fr < f0 + 2)
    aug = logmel.masked_fill(tmask[:, None, :], 0.0).masked_fill(fmask[:, :, None], logmel.mean())
    conv = ctx.init(torch.nn.Conv1d(n_mels, 4, 3))
    out = conv(aug)
    out.mean().backward()
    db = 10 * torch.log10(torch.clamp(power, min=1e-10))
    return [
        spec,
        rec,
        spec2,
        logmel,
        aug,
        out,
        conv.weight.grad,
        db.amax(),
        torch.view_as_real(spec)[..., 1].sum(),
        torch.angle(spec)[0, :3, :3],
    ]


def gnn_scatter(torch, ctx):
    """Message passing on an edge list: degree normalisation by index_add_ and bincount,
    neighbour aggregation by index_add, scatter_reduce (amax, mean, amin, prod; include_self
    both ways) and a sparse_coo_tensor product, graph readout by index_reduce_ and
    scatter_reduce, cross-entropy backward."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(0)
    N, E = 7, 18
    ei = ctx.t(rng.integers(0, N, (2, E)))
    x = ctx.t(rng.standard_normal((N, 5)).astype(np.float32))
    lin = ctx.init(nn.Linear(5, 6))
    lin2 = ctx.init(nn.Linear(6, 3), "l2")
    src, dst = ei
    deg = torch.zeros(N).index_add_(0, dst, torch.ones(E))
    deg2 = torch.bincount(dst, minlength=N).float()
    norm = deg.clamp(min=1).pow(-0.5)
    h = lin(x)
    msg = h[src] * (norm[src] * norm[dst])[:, None]
    agg_sum = torch.zeros(N, 6).index_add(0, dst, msg)
    agg_max = torch.zeros(N, 6).scatter_reduce(
        0, dst[:, None].expand(-1, 6), msg, reduce="amax", include_self=False
    )
    agg_mean = torch.zeros(N, 6).scatter_reduce(
        0, dst[:, None].expand(-1, 6), msg, reduce="mean", include_self=False
    )
    agg_min = torch.full((N, 6), 5.0).scatter_reduce(
        0, dst[:, None].expand(-1, 6), msg, reduce="amin", include_self=True
    )
    agg_prod = torch.ones(N, 6).scatter_reduce(
        0, dst[:, None].expand(-1, 6), msg, reduce="prod", include_self=False
    )
    adj = torch.sparse_coo_tensor(torch.stack([dst, src]), norm[src] * norm[dst], (N, N)).coalesce()
    agg_sp = torch.sparse.mm(adj, h)
    agg_sp2 = adj @ h
    hh = F.relu(agg_sum + agg_max + agg_mean + agg_sp + agg_min * 0.1 + agg_prod * 0.01)
    out = lin2(hh)
    # graph-level readout with segment ids
    batch = ctx.t(np.array([0, 0, 0, 1, 1, 1, 1]))
    pooled = torch.zeros(2, 3).index_reduce_(0, batch, out, "mean", include_self=False)
    pooled_max = torch.zeros(2, 3).scatter_reduce(
        0, batch[:, None].expand(-1, 3), out, "amax", include_self=False
    )
    loss = F.cross_entropy(pooled + pooled_max, ctx.t(np.array([1, 2])))
    loss.backward()
    return [
        deg,
        deg2,
        agg_max,
        agg_mean,
        agg_min,
        agg_prod,
        agg_sp,
        agg_sp2,
        adj.indices(),
        adj.values(),
        pooled,
        loss,
        lin.weight.grad,
        lin2.bias.grad,
    ]


def pygcn(torch, ctx):
    """Kipf's pygcn: a row-normalised sparse adjacency built with torch.sparse.FloatTensor,
    GraphConvolution layers with torch.spmm, a sparse adjacency power-iteration (PageRank by
    torch.mv) and a batch of two graphs joined by torch.cat / torch.stack of sparse tensors."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(0)
    N, E_ = 10, 24
    src = rng.integers(0, N, E_)
    dst = rng.integers(0, N, E_)
    rows = np.concatenate([src, dst, np.arange(N)])
    cols = np.concatenate([dst, src, np.arange(N)])
    vals = np.ones(len(rows), np.float32)
    deg = np.bincount(rows, weights=vals, minlength=N).astype(np.float32)
    vals = vals / deg[rows]
    indices = torch.from_numpy(np.vstack((rows, cols)).astype(np.int64))
    values = torch.from_numpy(vals)
    adj = torch.sparse.FloatTensor(indices, values, torch.Size([N, N])).coalesce()

    class GraphConvolution(nn.Module):
        def __init__(self, in_features, out_features):
            super().__init__()
            self.weight = nn.Parameter(torch.FloatTensor(in_features, out_features))
            self.bias = nn.Parameter(torch.FloatTensor(out_features))
            stdv = 1.0 / math.sqrt(self.weight.size(1))
            self.weight.data.uniform_(-stdv, stdv)
            self.bias.data.uniform_(-stdv, stdv)

        def forward(self, input, adj):
            support = torch.mm(input, self.weight)
            output = torch.spmm(adj, support)
            return output + self.bias

    class GCN(nn.Module):
        def __init__(self, nfeat, nhid, nclass, dropout):
            super().__init__()
            self.gc1 = GraphConvolution(nfeat, nhid)
            self.gc2 = GraphConvolution(nhid, nclass)
            self.dropout = dropout

        def forward(self, x, adj):
            x = F.relu(self.gc1(x, adj))
            x = F.dropout(x, self.dropout, training=self.training)
            x = self.gc2(x, adj)
            return F.log_softmax(x, dim=1)

    model = ctx.init(GCN(6, 8, 3, 0.5))
    feats = ctx.t(rng.standard_normal((N, 6)).astype(np.float32))
    labels = ctx.t(rng.integers(0, 3, N))
    idx_train = torch.LongTensor(range(6))
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    step_fn = ctx.fn(lambda x, a: model(x, a))
    losses = []
    torch.manual_seed(0)
    for epoch in range(4):
        model.train()
        opt.zero_grad()
        output = step_fn(feats, adj)
        loss = F.nll_loss(output[idx_train], labels[idx_train])
        acc = output[idx_train].max(1)[1].type_as(labels[idx_train]).eq(
            labels[idx_train]
        ).double().sum() / len(idx_train)
        loss.backward()
        opt.step()
        losses.append([loss, acc])
    model.eval()
    out = model(feats, adj)
    # PageRank on the transposed normalised adjacency
    pr = torch.full((N,), 1.0 / N)
    at = adj.t()
    for _ in range(20):
        pr = 0.15 / N + 0.85 * torch.mv(at, pr)
    pr2 = 0.15 / N + 0.85 * (pr @ adj)
    # batch of two graphs: block-diagonal by cat of offset sparse tensors, and a stack
    a2 = adj * 2.0
    big = torch.cat(
        [
            torch.cat(
                [
                    adj,
                    torch.sparse_coo_tensor(
                        torch.zeros(2, 0, dtype=torch.long), torch.zeros(0), (N, N)
                    ),
                ],
                1,
            ),
            torch.cat(
                [
                    torch.sparse_coo_tensor(
                        torch.zeros(2, 0, dtype=torch.long), torch.zeros(0), (N, N)
                    ),
                    a2,
                ],
                1,
            ),
        ],
        0,
    )
    bx = torch.cat([feats, feats.flip(0)])
    prop = torch.sparse.mm(big, bx)
    st = torch.stack([adj, a2])
    uni = [
        adj.abs().to_dense(),
        adj.sqrt().to_dense(),
        adj.pow(2).to_dense(),
        (-adj).to_dense(),
        adj.clone().coalesce().values(),
    ]
    deg_sp = torch.sparse.sum(adj, dim=1).to_dense()
    return [
        losses,
        out,
        pr,
        pr2,
        prop,
        st.to_dense(),
        st.shape,
        big.shape,
        uni,
        deg_sp,
        model.gc1.weight.grad,
    ]


PROGRAMS = [ddpm_foreach_ema, detection_head, audio_pipeline, gnn_scatter, pygcn]
CAPTURED = [pygcn]
TOLERANCES = {}


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, **TOLERANCES.get(program.__name__, {}))


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True, **TOLERANCES.get(program.__name__, {}))
