"""Set- and token-level vision programs: a masked autoencoder (random masking by argsort,
gather and unshuffle), DETR-style set prediction with Hungarian matching (scipy on costs from
the model) and generalized IoU, slot attention, and a graph attention network whose edge
softmax runs on scatter_reduce.
"""

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741, B007


def mae(torch, ctx):
    nn = torch.nn

    def patchify(imgs, p):
        B, C, H, W = imgs.shape
        x = imgs.reshape(B, C, H // p, p, W // p, p)
        x = torch.einsum("nchpwq->nhwpqc", x)
        return x.reshape(B, (H // p) * (W // p), p * p * C)

    class MAE(nn.Module):
        def __init__(s, p=2, dim=16, n=16):
            super().__init__()
            s.p = p
            s.embed = nn.Linear(p * p * 3, dim)
            s.pos = nn.Parameter(torch.zeros(1, n, dim))
            nn.init.trunc_normal_(s.pos, std=0.02)
            s.enc = nn.TransformerEncoder(
                nn.TransformerEncoderLayer(
                    dim, 2, 32, dropout=0.0, batch_first=True, norm_first=True
                ),
                1,
                enable_nested_tensor=False,
            )
            s.mask_token = nn.Parameter(torch.zeros(1, 1, dim))
            s.dec = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, p * p * 3))

        def forward(s, imgs, noise, ratio=0.5):
            x = s.embed(patchify(imgs, s.p)) + s.pos
            B, N, D = x.shape
            keep = int(N * (1 - ratio))
            ids_shuffle = torch.argsort(noise, dim=1)
            ids_restore = torch.argsort(ids_shuffle, dim=1)
            ids_keep = ids_shuffle[:, :keep]
            x = torch.gather(x, 1, ids_keep.unsqueeze(-1).repeat(1, 1, D))
            mask = torch.ones(B, N)
            mask[:, :keep] = 0
            mask = torch.gather(mask, 1, ids_restore)
            lat = s.enc(x)
            tokens = torch.cat([lat, s.mask_token.repeat(B, N - keep, 1)], 1)
            tokens = torch.gather(tokens, 1, ids_restore.unsqueeze(-1).expand(-1, -1, D))
            pred = s.dec(tokens + s.pos)
            target = patchify(imgs, s.p)
            mean, var = target.mean(-1, keepdim=True), target.var(-1, keepdim=True)
            target = (target - mean) / (var + 1e-6) ** 0.5
            loss = ((pred - target) ** 2).mean(-1)
            return (loss * mask).sum() / mask.sum(), mask

    m = ctx.init(MAE())
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.95))
    rng = np.random.default_rng(0)
    imgs = ctx.t(rng.standard_normal((2, 3, 8, 8)).astype(np.float32))
    noises = [ctx.t(rng.uniform(size=(2, 16)).astype(np.float32)) for _ in range(3)]

    def step(imgs, noise):
        loss, mask = m(imgs, noise)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, mask

    step = ctx.fn(step)
    out = [step(imgs, n) for n in noises]
    return {"out": out, "pos": m.pos}


def detr_matching(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    from scipy.optimize import linear_sum_assignment

    def box_cxcywh_to_xyxy(b):
        cx, cy, w, h = b.unbind(-1)
        return torch.stack([cx - 0.5 * w, cy - 0.5 * h, cx + 0.5 * w, cy + 0.5 * h], -1)

    def giou(a, b):
        area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
        area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
        lt = torch.max(a[:, None, :2], b[None, :, :2])
        rb = torch.min(a[:, None, 2:], b[None, :, 2:])
        wh = (rb - lt).clamp(min=0)
        inter = wh[..., 0] * wh[..., 1]
        union = area_a[:, None] + area_b[None] - inter
        iou = inter / union
        lt2 = torch.min(a[:, None, :2], b[None, :, :2])
        rb2 = torch.max(a[:, None, 2:], b[None, :, 2:])
        area_c = (rb2 - lt2).clamp(min=0).prod(-1)
        return iou - (area_c - union) / area_c

    class Head(nn.Module):
        def __init__(s, n_queries=5, classes=3, d=16):
            super().__init__()
            s.queries = nn.Embedding(n_queries, d)
            s.proj = nn.Linear(8, d)
            s.attn = nn.MultiheadAttention(d, 2, batch_first=True, bias=False)
            s.cls = nn.Linear(d, classes + 1)
            s.box = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 4))

        def forward(s, feats):
            mem = s.proj(feats)
            q = s.queries.weight.unsqueeze(0).expand(feats.size(0), -1, -1)
            h, _ = s.attn(q, mem, mem)
            return s.cls(h), s.box(h).sigmoid()

    m = ctx.init(Head())
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    rng = np.random.default_rng(1)
    feats = ctx.t(rng.standard_normal((2, 6, 8)).astype(np.float32))
    targets = [
        {
            "labels": ctx.t(np.array([0, 2])),
            "boxes": ctx.t(np.array([[0.3, 0.3, 0.2, 0.2], [0.7, 0.6, 0.3, 0.4]], np.float32)),
        },
        {
            "labels": ctx.t(np.array([1, 1, 0])),
            "boxes": ctx.t(
                np.array(
                    [[0.5, 0.5, 0.4, 0.4], [0.2, 0.8, 0.1, 0.2], [0.8, 0.2, 0.2, 0.1]], np.float32
                )
            ),
        },
    ]
    empty_weight = torch.ones(4)
    empty_weight[-1] = 0.1

    @torch.no_grad()
    def match(logits, boxes):
        indices = []
        for b, t in enumerate(targets):
            prob = logits[b].softmax(-1)
            cost = (
                -prob[:, t["labels"]]
                + 5 * torch.cdist(boxes[b], t["boxes"], p=1)
                - 2 * giou(box_cxcywh_to_xyxy(boxes[b]), box_cxcywh_to_xyxy(t["boxes"]))
            )
            i, j = linear_sum_assignment(cost.numpy())
            indices.append(
                (torch.as_tensor(i, dtype=torch.int64), torch.as_tensor(j, dtype=torch.int64))
            )
        return indices

    def loss_fn(feats, src_b, src_q, tgt_labels, tgt_boxes):
        logits, boxes = m(feats)
        classes = torch.full(logits.shape[:2], 3, dtype=torch.int64)
        classes[src_b, src_q] = tgt_labels
        l_cls = F.cross_entropy(logits.transpose(1, 2), classes, weight=empty_weight)
        pb = boxes[src_b, src_q]
        l_box = F.l1_loss(pb, tgt_boxes, reduction="sum") / len(tgt_boxes)
        l_giou = 1 - torch.diag(giou(box_cxcywh_to_xyxy(pb), box_cxcywh_to_xyxy(tgt_boxes)))
        loss = l_cls + 5 * l_box + 2 * l_giou.mean()
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(m.parameters(), 0.1)
        opt.step()
        return loss, l_cls

    loss_fn = ctx.fn(loss_fn)
    out, matches = [], []
    for _ in range(3):
        with torch.no_grad():
            logits, boxes = m(feats)
        idx = match(logits, boxes)
        matches.append([[i.tolist(), j.tolist()] for i, j in idx])
        src_b = torch.cat([torch.full_like(i, b) for b, (i, _) in enumerate(idx)])
        src_q = torch.cat([i for i, _ in idx])
        tl = torch.cat([t["labels"][j] for t, (_, j) in zip(targets, idx)])
        tb = torch.cat([t["boxes"][j] for t, (_, j) in zip(targets, idx)])
        out.append(loss_fn(feats, src_b, src_q, tl, tb))
    return {"out": out, "matches": matches}


def slot_attention(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class SlotAttention(nn.Module):
        def __init__(s, num_slots=3, dim=8, iters=3, eps=1e-8):
            super().__init__()
            s.num_slots, s.iters, s.eps = num_slots, iters, eps
            s.scale = dim**-0.5
            s.slots_mu = nn.Parameter(torch.randn(1, 1, dim) * 0.1)
            s.to_q, s.to_k, s.to_v = (nn.Linear(dim, dim, bias=False) for _ in range(3))
            s.gru = nn.GRUCell(dim, dim)
            s.mlp = nn.Sequential(nn.Linear(dim, 16), nn.ReLU(inplace=True), nn.Linear(16, dim))
            s.norm_in, s.norm_slots, s.norm_mlp = (nn.LayerNorm(dim) for _ in range(3))

        def forward(s, inputs, init):
            b, n, d = inputs.shape
            slots = s.slots_mu + init
            inputs = s.norm_in(inputs)
            k, v = s.to_k(inputs), s.to_v(inputs)
            for _ in range(s.iters):
                prev = slots
                q = s.to_q(s.norm_slots(slots))
                dots = torch.einsum("bid,bjd->bij", q, k) * s.scale
                attn = dots.softmax(dim=1) + s.eps
                attn = attn / attn.sum(dim=-1, keepdim=True)
                updates = torch.einsum("bjd,bij->bid", v, attn)
                slots = s.gru(updates.reshape(-1, d), prev.reshape(-1, d)).reshape(b, -1, d)
                slots = slots + s.mlp(s.norm_mlp(slots))
            return slots, attn

    m = ctx.init(SlotAttention())
    dec = ctx.init(nn.Linear(8, 8), "dec")
    # norm_slots.bias's gradient is zero in exact arithmetic (it shifts every slot's query
    # alike, and the softmax over slots ignores that): float32 leaves noise of about 1e-10,
    # which Adam's default eps (1e-8) would scale into steps of lr / 100 of either sign, a
    # different sign for every kernel's rounding (tests/conftest.py compares each graph step
    # with the interpreter's). With eps 1e-6 such noise moves the parameter by 1e-8.
    opt = torch.optim.Adam([*m.parameters(), *dec.parameters()], lr=4e-4, eps=1e-6)
    rng = np.random.default_rng(2)
    x = ctx.t(rng.standard_normal((2, 10, 8)).astype(np.float32))
    init = ctx.t(rng.standard_normal((2, 3, 8)).astype(np.float32) * 0.1)

    def step(x, init):
        slots, attn = m(x, init)
        recon = torch.einsum("bij,bid->bjd", attn, dec(slots))
        loss = F.mse_loss(recon, x)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, attn.argmax(1)

    step = ctx.fn(step)
    out = [step(x, init) for _ in range(3)]
    return {"out": out, "mu": m.slots_mu}


def gat(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def edge_softmax(scores, dst, n):
        H = scores.size(1)
        idx = dst.unsqueeze(1).expand(-1, H)
        mx = torch.full((n, H), float("-inf")).scatter_reduce(
            0, idx, scores, "amax", include_self=True
        )
        e = (scores - mx[dst]).exp()
        den = torch.zeros(n, H).index_add(0, dst, e)
        return e / den[dst]

    class GATLayer(nn.Module):
        def __init__(s, fin, fout, heads, concat=True):
            super().__init__()
            s.h, s.fout, s.concat = heads, fout, concat
            s.W = nn.Linear(fin, heads * fout, bias=False)
            s.a_src = nn.Parameter(torch.empty(1, heads, fout))
            s.a_dst = nn.Parameter(torch.empty(1, heads, fout))
            nn.init.xavier_uniform_(s.a_src)
            nn.init.xavier_uniform_(s.a_dst)

        def forward(s, x, src, dst):
            n = x.size(0)
            h = s.W(x).view(n, s.h, s.fout)
            score = F.leaky_relu((h * s.a_src).sum(-1)[src] + (h * s.a_dst).sum(-1)[dst], 0.2)
            alpha = edge_softmax(score, dst, n)
            out = torch.zeros(n, s.h, s.fout).index_add_(0, dst, h[src] * alpha.unsqueeze(-1))
            return out.flatten(1) if s.concat else out.mean(1), alpha

    class GAT(nn.Module):
        def __init__(s):
            super().__init__()
            s.l1 = GATLayer(5, 4, 3)
            s.l2 = GATLayer(12, 3, 1, concat=False)

        def forward(s, x, src, dst):
            h, a1 = s.l1(x, src, dst)
            out, a2 = s.l2(F.elu(h), src, dst)
            return out, a1

    m = ctx.init(GAT())
    opt = torch.optim.Adam(m.parameters(), lr=5e-3, weight_decay=5e-4)
    rng = np.random.default_rng(3)
    n = 8
    edges = set()
    while len(edges) < 14:
        a, b = rng.integers(0, n, 2)
        if a != b:
            edges.add((int(a), int(b)))
    edges = sorted(edges | {(i, i) for i in range(n)})
    src = ctx.t(np.array([e[0] for e in edges]))
    dst = ctx.t(np.array([e[1] for e in edges]))
    x = ctx.t(rng.standard_normal((n, 5)).astype(np.float32))
    y = ctx.t(rng.integers(0, 3, n))
    train = ctx.t(np.array([1, 1, 0, 1, 1, 0, 1, 1], dtype=bool))

    def step(x, src, dst, y, train):
        out, alpha = m(x, src, dst)
        loss = F.cross_entropy(out[train], y[train])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, alpha

    out = [step(x, src, dst, y, train)]  # (a boolean mask index: eager, then captured below)

    def step2(x, src, dst, y, w):
        out, alpha = m(x, src, dst)
        loss = (F.cross_entropy(out, y, reduction="none") * w).sum() / w.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, alpha

    step2 = ctx.fn(step2)
    out += [step2(x, src, dst, y, train.float()) for _ in range(2)]
    return {"out": out, "a": m.l1.a_src}


PROGRAMS = [mae, detr_matching, slot_attention, gat]
CAPTURED = PROGRAMS


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
