"""Signals and detection as whole PyTorch programs: a mel-spectrogram audio classifier (stft and
a hand-built mel filterbank), a detection head with box IoU, masked selection and a hand-written
NMS loop, a Perceiver with latent cross-attention.
"""

import math

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def mel_audio(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    sr, n_fft, hop, n_mels = 800, 64, 16, 10

    def hz_to_mel(f):
        return 2595.0 * math.log10(1.0 + f / 700.0)

    def mel_filterbank():
        mels = torch.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2), n_mels + 2)
        hz = 700.0 * (10 ** (mels / 2595.0) - 1.0)
        bins = torch.linspace(0, sr / 2, n_fft // 2 + 1)
        lower, center, upper = hz[:-2, None], hz[1:-1, None], hz[2:, None]
        up = (bins[None] - lower) / (center - lower)
        down = (upper - bins[None]) / (upper - center)
        return torch.clamp(torch.minimum(up, down), min=0.0)

    class MelSpec(nn.Module):
        def __init__(s):
            super().__init__()
            s.register_buffer("window", torch.hann_window(n_fft))
            s.register_buffer("fb", mel_filterbank())

        def forward(s, wav):
            spec = torch.stft(wav, n_fft, hop_length=hop, window=s.window, return_complex=True)
            power = spec.abs().pow(2)
            mel = torch.matmul(s.fb, power)
            return torch.log(mel + 1e-6)

    class Classifier(nn.Module):
        def __init__(s):
            super().__init__()
            s.mel = MelSpec()
            s.norm = nn.InstanceNorm1d(n_mels, affine=True)
            s.conv = nn.Sequential(
                nn.Conv1d(n_mels, 12, 3, padding=1, bias=False),  # (BatchNorm follows)
                nn.BatchNorm1d(12),
                nn.ELU(),
                nn.MaxPool1d(2),
                nn.Conv1d(12, 12, 3, padding="same"),
                nn.Mish(),
            )
            s.fc = nn.Linear(12, 3)

        def forward(s, wav):
            x = s.norm(s.mel(wav))
            x = s.conv(x)
            return s.fc(torch.amax(x, dim=-1) + x.mean(-1))

    m = ctx.init(Classifier())
    opt = torch.optim.Adam(m.parameters(), lr=3e-3)
    rng = np.random.default_rng(15)
    t = np.arange(256) / sr
    freqs = np.array([60.0, 150.0, 300.0])
    y_np = rng.integers(0, 3, 6)
    wav_np = np.sin(2 * np.pi * freqs[y_np][:, None] * t[None]) + 0.1 * rng.standard_normal(
        (6, 256)
    )
    wav, y = ctx.t(wav_np.astype(np.float32)), ctx.t(y_np)

    def step(wav, y):
        logits = m(wav)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, (logits.argmax(1) == y).float().mean()

    step = ctx.fn(step)
    res = []
    for _ in range(3):
        loss, acc = step(wav, y)
        res += [loss.item(), acc.item()]
    m.eval()
    with torch.no_grad():
        mel = m.mel(wav[:2])
        spec = torch.stft(wav[0], n_fft, hop, window=m.mel.window, return_complex=True)
        back = torch.istft(spec, n_fft, hop, window=m.mel.window, length=256)
    return {"l": res, "mel": mel, "fb": m.mel.fb, "back": back, "shape": list(spec.shape)}


def detection(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def box_area(b):
        return (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])

    def box_iou(a, b):
        lt = torch.max(a[:, None, :2], b[None, :, :2])
        rb = torch.min(a[:, None, 2:], b[None, :, 2:])
        wh = (rb - lt).clamp(min=0)
        inter = wh[..., 0] * wh[..., 1]
        return inter / (box_area(a)[:, None] + box_area(b)[None] - inter)

    def nms(boxes, scores, thr):
        order = scores.argsort(descending=True)
        keep = []
        while order.numel() > 0:
            i = order[0].item()
            keep.append(i)
            if order.numel() == 1:
                break
            ious = box_iou(boxes[i].unsqueeze(0), boxes[order[1:]])[0]
            order = order[1:][ious <= thr]
        return torch.tensor(keep, dtype=torch.long)

    def decode(anchors, deltas):
        wa, ha = anchors[:, 2] - anchors[:, 0], anchors[:, 3] - anchors[:, 1]
        cx, cy = anchors[:, 0] + 0.5 * wa, anchors[:, 1] + 0.5 * ha
        dx, dy, dw, dh = deltas.unbind(-1)
        dw, dh = dw.clamp(max=math.log(1000 / 16)), dh.clamp(max=math.log(1000 / 16))
        pcx, pcy = cx + dx * wa, cy + dy * ha
        pw, ph = wa * dw.exp(), ha * dh.exp()
        return torch.stack([pcx - pw / 2, pcy - ph / 2, pcx + pw / 2, pcy + ph / 2], -1)

    class Head(nn.Module):
        def __init__(s, A=3, C=2):
            super().__init__()
            s.A, s.C = A, C
            s.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
            s.cls = nn.Conv2d(8, A * C, 1)
            s.reg = nn.Conv2d(8, A * 4, 1)

        def forward(s, x):
            h = s.body(x)
            B = x.shape[0]
            cls = s.cls(h).permute(0, 2, 3, 1).reshape(B, -1, s.C)
            reg = s.reg(h).permute(0, 2, 3, 1).reshape(B, -1, 4)
            return cls, reg

    H = W = 4
    ys, xs = torch.meshgrid(torch.arange(H) * 8.0, torch.arange(W) * 8.0, indexing="ij")
    centers = torch.stack([xs, ys], -1).reshape(-1, 1, 2) + 4.0
    sizes = torch.tensor([[8.0, 8.0], [12.0, 6.0], [6.0, 12.0]])
    anchors = torch.cat([centers - sizes / 2, centers + sizes / 2], -1).reshape(-1, 4)

    m = ctx.init(Head())
    opt = torch.optim.SGD(m.parameters(), lr=0.02, momentum=0.9, weight_decay=1e-4)
    rng = np.random.default_rng(16)
    img = ctx.t(rng.standard_normal((2, 3, H * 8 // 8, W * 8 // 8)).astype(np.float32))
    gt = ctx.t(np.array([[[2.0, 2.0, 12.0, 10.0], [16.0, 14.0, 28.0, 30.0]]] * 2, np.float32))
    gt_cls = ctx.t(np.array([[0, 1], [1, 0]]))

    def assign(anchors, gt, gt_cls):
        iou = box_iou(anchors, gt)
        best, idx = iou.max(dim=1)
        labels = gt_cls[idx]
        labels = torch.where(best >= 0.3, labels, torch.full_like(labels, -1))
        force = iou.argmax(dim=0)
        labels[force] = gt_cls
        return labels, gt[idx]

    def step(img, gt, gt_cls):
        cls, reg = m(img)
        loss = 0.0
        for b in range(img.shape[0]):
            labels, matched = assign(anchors, gt[b], gt_cls[b])
            pos = labels >= 0
            target = F.one_hot(labels.clamp(min=0), 2).float() * pos[:, None]
            loss = loss + torchvision_focal(cls[b], target)
            wa = anchors[:, 2:] - anchors[:, :2]
            t_xy = ((matched[:, :2] + matched[:, 2:]) / 2 - (anchors[:, :2] + wa / 2)) / wa
            t_wh = torch.log((matched[:, 2:] - matched[:, :2]) / wa)
            tgt = torch.cat([t_xy, t_wh], -1)
            # boolean-mask selection has a data-dependent size: a captured step keeps the
            # shape and masks the per-anchor losses instead
            per = F.smooth_l1_loss(reg[b], tgt, beta=1 / 9, reduction="none").sum(-1)
            loss = loss + (per * pos).sum() / pos.sum().clamp(min=1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    def torchvision_focal(logits, target):
        p = logits.sigmoid()
        ce = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
        pt = p * target + (1 - p) * (1 - target)
        return (ce * (1 - pt) ** 2).sum() / max(1.0, 1.0)

    step = ctx.fn(step)
    losses = [step(img, gt, gt_cls).item() for _ in range(3)]
    with torch.no_grad():
        cls, reg = m(img)
        scores, labels = cls[0].sigmoid().max(-1)
        boxes = decode(anchors, reg[0])
        keep_mask = scores > 0.3
        cand = keep_mask.nonzero(as_tuple=True)[0]
        top = scores[cand].topk(min(10, cand.numel())).indices
        cand = cand[top]
        keep = nms(boxes[cand], scores[cand], 0.5)
        final = torch.index_select(cand, 0, keep)
        masked = torch.masked_select(scores, keep_mask)
        srt, si = torch.sort(scores, stable=True)
    return {
        "l": losses,
        "final": final,
        "boxes": boxes[final],
        "masked": masked,
        "si": si,
        "iou": box_iou(anchors[:4], anchors[:6]),
        "labels": labels[final],
    }


def perceiver(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class CrossAttend(nn.Module):
        def __init__(s, dq, dkv, heads=2, dh=4):
            super().__init__()
            s.h, s.dh = heads, dh
            s.nq, s.nkv = nn.LayerNorm(dq), nn.LayerNorm(dkv)
            s.q = nn.Linear(dq, heads * dh, bias=False)
            s.kv = nn.Linear(dkv, 2 * heads * dh, bias=False)
            s.o = nn.Linear(heads * dh, dq)

        def forward(s, lat, x, mask=None):
            B, N, _ = lat.shape
            q = s.q(s.nq(lat)).view(B, N, s.h, s.dh).transpose(1, 2)
            k, v = s.kv(s.nkv(x)).chunk(2, dim=-1)
            k = k.unflatten(-1, (s.h, s.dh)).transpose(1, 2)
            v = v.unflatten(-1, (s.h, s.dh)).transpose(1, 2)
            sim = torch.einsum("bhid,bhjd->bhij", q, k) * s.dh**-0.5
            if mask is not None:
                sim = sim.masked_fill(~mask[:, None, None, :], torch.finfo(sim.dtype).min)
            att = sim.softmax(dim=-1)
            o = torch.einsum("bhij,bhjd->bhid", att, v)
            return lat + s.o(o.transpose(1, 2).flatten(2))

    def fourier_features(pos, bands=3):
        freqs = torch.logspace(0.0, math.log10(4.0), bands)
        ang = pos[..., None] * freqs * math.pi
        return torch.cat([pos[..., None], ang.sin(), ang.cos()], -1)

    class Perceiver(nn.Module):
        def __init__(s, din=2, nlat=4, dlat=8):
            super().__init__()
            s.latents = nn.Parameter(torch.randn(nlat, dlat) * 0.02)
            dx = din + 7
            s.cross = CrossAttend(dlat, dx)
            s.self_attn = nn.TransformerEncoderLayer(
                dlat, 2, 16, dropout=0.0, batch_first=True, activation="gelu"
            )
            s.cross2 = CrossAttend(dlat, dx)
            s.out = nn.Linear(dlat, 3)

        def forward(s, x, mask):
            B, L, _ = x.shape
            pos = torch.linspace(-1, 1, L).expand(B, L)
            x = torch.cat([x, fourier_features(pos)], -1)
            lat = s.latents.unsqueeze(0).repeat(B, 1, 1)
            lat = s.cross(lat, x, mask)
            lat = s.self_attn(lat)
            lat = s.cross2(lat, x, mask)
            return s.out(lat.mean(1))

    m = ctx.init(Perceiver())
    opt = torch.optim.RAdam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(17)
    x = ctx.t(rng.standard_normal((3, 7, 2)).astype(np.float32))
    mask = ctx.t(np.arange(7)[None] < np.array([7, 5, 3])[:, None])
    y = ctx.t(np.array([0, 2, 1]))

    def step(x, mask, y):
        loss = F.cross_entropy(m(x, mask), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    res = [step(x, mask, y).item() for _ in range(2)]
    # padding must not matter: garbage in the masked tail gives the same output
    x2 = x.clone()
    x2[1, 5:] = 100.0
    with torch.no_grad():
        same = (m(x, mask) - m(x2, mask)).abs().max()
    return {"l": res, "lat": m.latents, "same": same.item() < 1e-4}


PROGRAMS = [mel_audio, detection, perceiver]
CAPTURED = [mel_audio, detection, perceiver]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
