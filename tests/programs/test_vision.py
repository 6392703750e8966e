"""Vision models as whole PyTorch programs: a ViT, a U-Net with a Dice loss, a ResNet with in-place
residuals and kaiming init, sinusoidal encodings with MultiheadAttention (kdim, vdim, masks), a
TCN with weight_norm.
"""

import math

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def vit(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class ViT(nn.Module):
        def __init__(s, d=16):
            super().__init__()
            s.patch = nn.Conv2d(3, d, 4, 4)
            s.cls = nn.Parameter(torch.zeros(1, 1, d))
            s.pos = nn.Parameter(torch.randn(1, 5, d) * 0.02)
            layer = nn.TransformerEncoderLayer(
                d, 4, 32, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
            )
            s.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            s.norm = nn.LayerNorm(d)
            s.head = nn.Linear(d, 3)

        def forward(s, x):
            x = s.patch(x).flatten(2).transpose(1, 2)
            x = torch.cat([s.cls.expand(x.shape[0], -1, -1), x], dim=1) + s.pos
            x = s.enc(x)
            return s.head(s.norm(x[:, 0]))

    m = ctx.init(ViT())
    # (SGD: the key projection's bias has a gradient of zero up to rounding, which Adam would
    # turn into steps of either sign)
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, weight_decay=0.05)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((2, 3, 8, 8)).astype(np.float32))
    y = ctx.t(np.array([0, 2]))

    def step(x, y):
        opt.zero_grad()
        out = m(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        return loss, out

    step = ctx.fn(step)
    return {"r": [step(x, y) for _ in range(2)]}


def unet(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def block(i, o):
        return nn.Sequential(
            nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True)
        )

    class UNet(nn.Module):
        def __init__(s):
            super().__init__()
            s.d1 = block(1, 4)
            s.d2 = block(4, 8)
            s.pool = nn.MaxPool2d(2)
            s.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
            s.u1 = block(8, 4)
            s.out = nn.Conv2d(4, 1, 1)
            s.up2 = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)

        def forward(s, x):
            a = s.d1(x)
            b = s.d2(s.pool(a))
            u = s.up(b) + s.up2(b)[:, :4]
            return s.out(s.u1(torch.cat([u, a], dim=1)))

    m = ctx.init(UNet())
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((2, 1, 8, 8)).astype(np.float32))
    y = ctx.t((rng.random((2, 1, 8, 8)) > 0.5).astype(np.float32))

    def dice(logits, t, eps=1.0):
        p = torch.sigmoid(logits)
        inter = (p * t).sum(dim=(2, 3))
        den = p.sum(dim=(2, 3)) + t.sum(dim=(2, 3))
        return 1 - ((2 * inter + eps) / (den + eps)).mean()

    def step(x, y):
        opt.zero_grad()
        lg = m(x)
        loss = F.binary_cross_entropy_with_logits(lg, y) + dice(lg, y)
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    res = [step(x, y).item() for _ in range(2)]
    m.eval()
    with torch.no_grad():
        pred = (torch.sigmoid(m(x)) > 0.5).float()
    return {"l": res, "pred": pred, "rm": m.d1[1].running_mean, "nb": m.d1[1].num_batches_tracked}


def resnet(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Basic(nn.Module):
        def __init__(s, i, o, stride):
            super().__init__()
            s.c1 = nn.Conv2d(i, o, 3, stride, 1, bias=False)
            s.b1 = nn.BatchNorm2d(o)
            s.relu = nn.ReLU(inplace=True)
            s.c2 = nn.Conv2d(o, o, 3, 1, 1, bias=False)
            s.b2 = nn.BatchNorm2d(o)
            s.down = (
                nn.Sequential(nn.Conv2d(i, o, 1, stride, bias=False), nn.BatchNorm2d(o))
                if stride != 1 or i != o
                else None
            )

        def forward(s, x):
            idt = x
            out = s.relu(s.b1(s.c1(x)))
            out = s.b2(s.c2(out))
            if s.down is not None:
                idt = s.down(x)
            out += idt
            return s.relu(out)

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.stem = nn.Sequential(
                nn.Conv2d(3, 4, 3, 1, 1, bias=False), nn.BatchNorm2d(4), nn.ReLU(inplace=True)
            )
            s.layer = nn.Sequential(Basic(4, 4, 1), Basic(4, 8, 2))
            s.pool = nn.AdaptiveAvgPool2d((1, 1))
            s.fc = nn.Linear(8, 5)
            for mod in s.modules():
                if isinstance(mod, nn.Conv2d):
                    nn.init.kaiming_normal_(mod.weight, mode="fan_out", nonlinearity="relu")
                elif isinstance(mod, nn.BatchNorm2d):
                    nn.init.constant_(mod.weight, 1)
                    nn.init.constant_(mod.bias, 0)

        def forward(s, x):
            return s.fc(torch.flatten(s.pool(s.layer(s.stem(x))), 1))

    m = ctx.init(Net())
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4, nesterov=True)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[1], gamma=0.1)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((4, 3, 8, 8)).astype(np.float32))
    y = ctx.t(rng.integers(0, 5, 4))

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    res = []
    for _ in range(3):
        res.append(step(x, y).item())
        sched.step()
    m.eval()
    with torch.no_grad():
        ev = m(x)
    return {"l": res, "ev": ev, "bn": dict(m.layer[1].down[1].state_dict())}


def posenc_mha(torch, ctx):
    nn = torch.nn

    class PE(nn.Module):
        def __init__(s, d, L=20):
            super().__init__()
            pe = torch.zeros(L, d)
            pos = torch.arange(0, L, dtype=torch.float).unsqueeze(1)
            div = torch.exp(torch.arange(0, d, 2).float() * (-math.log(10000.0) / d))
            pe[:, 0::2] = torch.sin(pos * div)
            pe[:, 1::2] = torch.cos(pos * div)
            s.register_buffer("pe", pe.unsqueeze(0), persistent=False)

        def forward(s, x):
            return x + s.pe[:, : x.size(1)]

    class M(nn.Module):
        def __init__(s):
            super().__init__()
            s.pe = PE(8)
            s.mha = nn.MultiheadAttention(8, 2, batch_first=True, kdim=6, vdim=5)
            s.q = nn.Linear(8, 8)

        def forward(s, x, kv, vv, mask, kpm):
            h = s.pe(x)
            out, w = s.mha(
                s.q(h),
                kv,
                vv,
                attn_mask=mask,
                key_padding_mask=kpm,
                need_weights=True,
                average_attn_weights=False,
            )
            out2, w2 = s.mha(h, kv, vv, key_padding_mask=kpm)
            return out + out2, w, w2

    m = ctx.init(M())
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((2, 4, 8)).astype(np.float32))
    kv = ctx.t(rng.standard_normal((2, 5, 6)).astype(np.float32))
    vv = ctx.t(rng.standard_normal((2, 5, 5)).astype(np.float32))
    mask = ctx.t(np.triu(np.full((4, 5), -1e9, np.float32), 2))
    kpm = ctx.t(np.array([[False] * 5, [False, False, False, True, True]]))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)

    def step(x, kv, vv, mask, kpm):
        opt.zero_grad()
        o, w, w2 = m(x, kv, vv, mask, kpm)
        loss = o.pow(2).mean()
        loss.backward()
        opt.step()
        return loss, w, w2

    step = ctx.fn(step)
    r = [step(x, kv, vv, mask, kpm) for _ in range(2)]
    return {"r": r, "pe": m.pe.pe, "sd": sorted(m.state_dict().keys())}


def tcn(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Chomp(nn.Module):
        def __init__(s, n):
            super().__init__()
            s.n = n

        def forward(s, x):
            return x[:, :, : -s.n].contiguous()

    class TB(nn.Module):
        def __init__(s, i, o, k, d):
            super().__init__()
            p = (k - 1) * d
            s.net = nn.Sequential(
                nn.utils.weight_norm(nn.Conv1d(i, o, k, padding=p, dilation=d)),
                Chomp(p),
                nn.ReLU(),
                nn.utils.weight_norm(nn.Conv1d(o, o, k, padding=p, dilation=d)),
                Chomp(p),
                nn.ReLU(),
            )
            s.down = nn.Conv1d(i, o, 1) if i != o else None

        def forward(s, x):
            r = x if s.down is None else s.down(x)
            return F.relu(s.net(x) + r)

    m = nn.Sequential(TB(2, 4, 3, 1), TB(4, 4, 3, 2))
    m = ctx.init(m)
    head = ctx.init(nn.Linear(4, 1), "h")
    opt = torch.optim.Adam(list(m.parameters()) + list(head.parameters()), lr=1e-2)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((3, 2, 12)).astype(np.float32))
    y = ctx.t(rng.standard_normal((3, 1)).astype(np.float32))
    windows = x.unfold(2, 4, 2)

    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(head(m(x)[:, :, -1]), y)
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    res = [step(x, y).item() for _ in range(3)]
    # causal conv with left pad
    c = F.conv1d(F.pad(x, (2, 0)), torch.ones(1, 2, 3) / 6)
    return {"l": res, "w": windows, "c": c, "keys": sorted(m.state_dict().keys())}


PROGRAMS = [vit, unet, resnet, posenc_mha, tcn]
CAPTURED = [vit, unet, resnet, posenc_mha, tcn]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
