"""Modern vision architectures as whole PyTorch programs: a DDPM step and sampler with a small
UNet, ConvNeXt and Swin blocks.
"""

import math

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def ddpm(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def timestep_embedding(t, dim):
        half = dim // 2
        freqs = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
        args = t[:, None].float() * freqs[None]
        return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

    class ResBlock(nn.Module):
        def __init__(s, cin, cout, tdim):
            super().__init__()
            s.n1 = nn.GroupNorm(2, cin)
            s.c1 = nn.Conv2d(cin, cout, 3, padding=1)
            s.t = nn.Linear(tdim, cout)
            s.n2 = nn.GroupNorm(2, cout)
            s.c2 = nn.Conv2d(cout, cout, 3, padding=1)
            s.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(s, x, temb):
            h = s.c1(F.silu(s.n1(x)))
            h = h + s.t(F.silu(temb))[:, :, None, None]
            h = s.c2(F.silu(s.n2(h)))
            return h + s.skip(x)

    class UNet(nn.Module):
        def __init__(s, ch=8, tdim=16):
            super().__init__()
            s.tdim = tdim
            s.tmlp = nn.Sequential(nn.Linear(tdim, tdim), nn.SiLU(), nn.Linear(tdim, tdim))
            s.inc = nn.Conv2d(1, ch, 3, padding=1)
            s.d1 = ResBlock(ch, ch, tdim)
            s.down = nn.Conv2d(ch, ch, 3, stride=2, padding=1)
            s.mid = ResBlock(ch, 2 * ch, tdim)
            s.up = nn.ConvTranspose2d(2 * ch, ch, 4, stride=2, padding=1)
            s.u1 = ResBlock(2 * ch, ch, tdim)
            s.out = nn.Sequential(nn.GroupNorm(2, ch), nn.SiLU(), nn.Conv2d(ch, 1, 3, padding=1))

        def forward(s, x, t):
            temb = s.tmlp(timestep_embedding(t, s.tdim))
            h0 = s.d1(s.inc(x), temb)
            h = s.mid(s.down(h0), temb)
            h = s.up(h)
            h = s.u1(torch.cat([h, h0], dim=1), temb)
            return s.out(h)

    class Diffusion(nn.Module):
        def __init__(s, T=20):
            super().__init__()
            s.T = T
            betas = torch.linspace(1e-4, 0.2, T)
            alphas = 1.0 - betas
            abar = torch.cumprod(alphas, dim=0)
            s.register_buffer("betas", betas)
            s.register_buffer("alphas", alphas)
            s.register_buffer("sqrt_abar", abar.sqrt())
            s.register_buffer("sqrt_1m_abar", (1 - abar).sqrt())
            s.register_buffer("abar_prev", F.pad(abar[:-1], (1, 0), value=1.0))
            s.net = UNet()

        def q_sample(s, x0, t, noise):
            a = s.sqrt_abar.gather(0, t).view(-1, 1, 1, 1)
            b = s.sqrt_1m_abar[t].reshape(-1, 1, 1, 1)
            return a * x0 + b * noise

        def loss(s, x0, t, noise):
            return F.mse_loss(s.net(s.q_sample(x0, t, noise), t), noise)

    model = ctx.init(Diffusion())
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    rng = np.random.default_rng(0)
    x0 = ctx.t(rng.standard_normal((4, 1, 8, 8)).astype(np.float32))

    def train_step(x0, t, noise):
        opt.zero_grad(set_to_none=True)
        loss = model.loss(x0, t, noise)
        loss.backward()
        gn = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss, gn

    train_step = ctx.fn(train_step)
    losses = []
    for _ in range(2):
        t = ctx.t(rng.integers(0, model.T, 4))
        noise = ctx.t(rng.standard_normal((4, 1, 8, 8)).astype(np.float32))
        loss, gn = train_step(x0, t, noise)
        losses.append(loss.item())
        losses.append(gn.item())

    model.eval()
    zs = [ctx.t(rng.standard_normal((2, 1, 8, 8)).astype(np.float32)) for _ in range(4)]

    @torch.no_grad()
    def sample(x, steps):
        for i, tt in enumerate(reversed(range(model.T - steps, model.T))):
            t = torch.full((x.shape[0],), tt, dtype=torch.long)
            eps = model.net(x, t)
            a, ab, b = model.alphas[tt], model.sqrt_1m_abar[tt], model.betas[tt]
            mean = (x - b / ab * eps) / a.sqrt()
            var = b * (1 - model.abar_prev[tt]) / (1 - model.sqrt_abar[tt] ** 2)
            x = mean + var.clamp(min=1e-20).sqrt() * zs[i] if tt > 0 else mean
        return x.clamp(-3, 3)

    out = sample(zs[-1], 3)
    return {"l": losses, "sample": out, "buf": model.abar_prev, "grad_none": model.betas.grad}


def convnext_swin(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class DropPath(nn.Module):
        def __init__(s, p):
            super().__init__()
            s.p = p

        def forward(s, x):
            if s.p == 0.0 or not s.training:
                return x
            keep = 1 - s.p
            mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
            return x * mask / keep

    class ConvNeXtBlock(nn.Module):
        def __init__(s, dim, dp=0.0):
            super().__init__()
            s.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
            s.norm = nn.LayerNorm(dim, eps=1e-6)
            s.pw1 = nn.Linear(dim, 4 * dim)
            s.pw2 = nn.Linear(4 * dim, dim)
            s.gamma = nn.Parameter(1e-1 * torch.ones(dim))
            s.drop = DropPath(dp)

        def forward(s, x):
            h = s.dw(x).permute(0, 2, 3, 1)
            h = s.pw2(F.gelu(s.pw1(s.norm(h))))
            h = (s.gamma * h).permute(0, 3, 1, 2)
            return x + s.drop(h)

    def window_partition(x, w):
        B, H, W, C = x.shape
        x = x.view(B, H // w, w, W // w, w, C)
        return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, w * w, C)

    def window_reverse(win, w, H, W):
        B = int(win.shape[0] / (H * W / w / w))
        x = win.view(B, H // w, W // w, w, w, -1)
        return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)

    class SwinBlock(nn.Module):
        def __init__(s, dim, heads, w, shift):
            super().__init__()
            s.w, s.shift, s.heads = w, shift, heads
            s.n1 = nn.LayerNorm(dim)
            s.qkv = nn.Linear(dim, 3 * dim)
            s.proj = nn.Linear(dim, dim)
            s.bias = nn.Parameter(torch.zeros((2 * w - 1) ** 2, heads))
            coords = torch.stack(torch.meshgrid(torch.arange(w), torch.arange(w), indexing="ij"))
            flat = torch.flatten(coords, 1)
            rel = (flat[:, :, None] - flat[:, None, :]).permute(1, 2, 0).contiguous()
            rel[:, :, 0] += w - 1
            rel[:, :, 1] += w - 1
            rel[:, :, 0] *= 2 * w - 1
            s.register_buffer("rel_index", rel.sum(-1), persistent=False)
            s.n2 = nn.LayerNorm(dim)
            s.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

        def forward(s, x):
            B, H, W, C = x.shape
            h = s.n1(x)
            if s.shift:
                h = torch.roll(h, shifts=(-s.shift, -s.shift), dims=(1, 2))
            win = window_partition(h, s.w)
            n = win.shape[1]
            qkv = s.qkv(win).reshape(-1, n, 3, s.heads, C // s.heads).permute(2, 0, 3, 1, 4)
            q, k, v = qkv.unbind(0)
            att = (q * (C // s.heads) ** -0.5) @ k.transpose(-2, -1)
            rb = s.bias[s.rel_index.view(-1)].view(n, n, -1).permute(2, 0, 1)
            att = (att + rb.unsqueeze(0)).softmax(dim=-1)
            o = (att @ v).transpose(1, 2).reshape(-1, n, C)
            h = window_reverse(s.proj(o), s.w, H, W)
            if s.shift:
                h = torch.roll(h, shifts=(s.shift, s.shift), dims=(1, 2))
            x = x + h
            return x + s.mlp(s.n2(x))

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.stem = nn.Conv2d(3, 8, 2, stride=2)
            s.blocks = nn.Sequential(ConvNeXtBlock(8), ConvNeXtBlock(8, dp=0.0))
            s.swin = nn.ModuleList([SwinBlock(8, 2, 2, 0), SwinBlock(8, 2, 2, 1)])
            s.head = nn.Linear(8, 5)

        def forward(s, x):
            x = s.blocks(s.stem(x)).permute(0, 2, 3, 1)
            for b in s.swin:
                x = b(x)
            return s.head(x.mean(dim=(1, 2)))

    m = ctx.init(Net())
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((2, 3, 8, 8)).astype(np.float32))
    y = ctx.t(np.array([1, 4]))

    def step(x, y):
        out = m(x)
        loss = F.cross_entropy(out, y, label_smoothing=0.1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, out.argmax(-1)

    step = ctx.fn(step)
    res = []
    for _ in range(3):
        loss, pred = step(x, y)
        res += [loss.item(), pred]
    # DropPath in training draws from the generator: compare only its statistics
    dp = DropPath(0.5)
    ones = torch.ones(400, 3)
    kept = (dp(ones)[:, 0] > 0).float().mean().item()
    return {
        "l": res,
        "gamma": m.blocks[0].gamma.grad,
        "idx": m.swin[0].rel_index,
        "sd": sorted(m.state_dict()),
        "kept": abs(kept - 0.5) < 0.15,
    }


PROGRAMS = [ddpm, convnext_swin]
CAPTURED = [ddpm, convnext_swin]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
