"""torch.compile'd vision models on images whose sizes vary between calls, odd ones among them
(dyn57), run on PyTorch (its eager backend) and on ember (automatic dynamic shapes): the
milesial U-Net's up block (upsample, then ``F.pad`` by the size difference before the skip
concatenation) and Swin's window attention (padding H and W to a multiple of the window,
``(ws - H % ws) % ws``, then partitioning by ``view``/``permute``). An odd size breaks what the
first symbolic trace assumed of aligned sizes; the call must be traced again, not refused."""

import numpy as np

from .harness import check_program

# ruff: noqa: N806


def _compile(torch, ctx, model):
    return torch.compile(model, backend="eager") if ctx.is_torch else torch.compile(model)


def _traces(compiled) -> tuple[int, list, bool]:
    c = compiled.__dict__["_compiled"]
    auto = c.automatic
    return c.function.stats.traces, [f.stats.traces for f in auto.functions.values()], auto.failed


def unet_with_odd_images(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Up(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
            self.conv = nn.Conv2d(16, 8, 3, padding=1)

        def forward(self, x1, x2):
            x1 = self.up(x1)
            diffY = x2.size()[2] - x1.size()[2]
            diffX = x2.size()[3] - x1.size()[3]
            x1 = F.pad(x1, [diffX // 2, diffX - diffX // 2, diffY // 2, diffY - diffY // 2])
            return self.conv(torch.cat([x2, x1], dim=1))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.inc = nn.Conv2d(1, 8, 3, padding=1)
            self.down = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
            self.up = Up()
            self.out = nn.Conv2d(8, 2, 1)

        def forward(self, x):
            a = F.relu(self.inc(x))
            return self.out(self.up(self.down(a), a))

    model = ctx.init(UNet())
    compiled = _compile(torch, ctx, model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    losses = []
    for H, W in [(16, 16), (20, 24), (17, 23), (32, 18), (21, 21), (19, 26)]:
        x = ctx.t(rng.standard_normal((2, 1, H, W)).astype(np.float32))
        y = ctx.t(rng.integers(0, 2, (2, H, W)))
        loss = F.cross_entropy(compiled(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss)
    if not ctx.is_torch:
        static, symbolic, failed = _traces(compiled)
        assert static == 1 and not failed and sum(symbolic) <= 4, _traces(compiled)
    return losses, [p.detach() for p in model.parameters()]


def swin_windows_padded(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class WindowAttention(nn.Module):
        def __init__(self, ws=4):
            super().__init__()
            self.ws = ws
            self.norm = nn.LayerNorm(8)
            self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

        def forward(self, x):
            B, H, W, C = x.shape
            ws = self.ws
            x = self.norm(x)
            x = F.pad(x, (0, 0, 0, (ws - W % ws) % ws, 0, (ws - H % ws) % ws))
            Hp, Wp = x.shape[1], x.shape[2]
            w = x.view(B, Hp // ws, ws, Wp // ws, ws, C).permute(0, 1, 3, 2, 4, 5)
            w = w.reshape(-1, ws * ws, C)
            a, _ = self.attn(w, w, w, need_weights=False)
            a = a.view(B, Hp // ws, Wp // ws, ws, ws, C).permute(0, 1, 3, 2, 4, 5)
            return a.reshape(B, Hp, Wp, C)[:, :H, :W, :].contiguous()

    model = ctx.init(WindowAttention())
    compiled = _compile(torch, ctx, model)
    rng = np.random.default_rng(1)
    out = []
    for H, W in [(8, 8), (12, 8), (10, 14), (16, 12), (9, 13), (11, 6)]:
        x = ctx.t(rng.standard_normal((2, H, W, 8)).astype(np.float32), requires_grad=True)
        y = compiled(x)
        y.square().sum().backward()
        out += [y, x.grad]
    if not ctx.is_torch:
        static, symbolic, failed = _traces(compiled)
        assert static == 1 and not failed and sum(symbolic) <= 4, _traces(compiled)
    return out, model.attn.in_proj_weight.grad


def test_unet_with_odd_images():
    check_program(unet_with_odd_images)


def test_swin_windows_padded():
    check_program(swin_windows_padded)
