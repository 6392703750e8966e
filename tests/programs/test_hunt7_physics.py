"""Scientific and 3-D programs as users write them: a physics-informed network with second
derivatives (a Poisson residual through autograd.grad with create_graph), NeRF's volume
rendering (positional encoding, cumprod transmittance, searchsorted importance sampling),
PointNet with a T-Net and its orthogonality regularizer, neural style transfer optimizing the
image itself, and a Mamba-style selective scan.
"""

import math

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741


def pinn(torch, ctx):
    nn = torch.nn

    class PINN(nn.Module):
        def __init__(s):
            super().__init__()
            s.net = nn.Sequential(
                nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1)
            )

        def forward(s, xy):
            return s.net(xy)

    m = ctx.init(PINN())
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    interior = ctx.t(rng.uniform(0, 1, (32, 2)).astype(np.float32))
    t = rng.uniform(0, 1, 8).astype(np.float32)
    bnd = np.concatenate(
        [
            np.stack([t, 0 * t], 1),
            np.stack([t, 0 * t + 1], 1),
            np.stack([0 * t, t], 1),
            np.stack([0 * t + 1, t], 1),
        ]
    )
    boundary = ctx.t(bnd)

    def source(xy):
        return -2 * math.pi**2 * torch.sin(math.pi * xy[:, 0:1]) * torch.sin(math.pi * xy[:, 1:2])

    def laplacian(u, xy):
        grads = torch.autograd.grad(u, xy, grad_outputs=torch.ones_like(u), create_graph=True)[0]
        lap = 0
        for i in range(xy.shape[1]):
            g2 = torch.autograd.grad(grads[:, i].sum(), xy, create_graph=True)[0]
            lap = lap + g2[:, i : i + 1]
        return lap, grads

    def step(interior, boundary):
        xy = interior.clone().requires_grad_(True)
        u = m(xy)
        lap, grads = laplacian(u, xy)
        res = lap - source(xy)
        loss_pde = (res**2).mean()
        loss_bc = m(boundary).pow(2).mean()
        loss = loss_pde + 10.0 * loss_bc
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss_pde.detach(), loss_bc.detach(), grads.norm(dim=1).mean().detach()

    step = ctx.fn(step)
    out = [step(interior, boundary) for _ in range(3)]
    # the final solution's gradient field, eagerly
    xy = interior.clone().requires_grad_()
    u = m(xy)
    (du,) = torch.autograd.grad(u.sum(), xy)
    return {"out": out, "du": du, "w": m.net[0].weight}


def nerf(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def posenc(x, n_freqs):
        freqs = 2.0 ** torch.arange(n_freqs, dtype=x.dtype)
        xb = x[..., None, :] * freqs[:, None] * math.pi
        enc = torch.cat([torch.sin(xb), torch.cos(xb)], dim=-1).flatten(-2)
        return torch.cat([x, enc], dim=-1)

    class TinyNeRF(nn.Module):
        def __init__(s, nf=4):
            super().__init__()
            s.nf = nf
            d = 3 + 3 * 2 * nf
            s.trunk = nn.Sequential(nn.Linear(d, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
            s.sigma = nn.Linear(32, 1)
            s.rgb = nn.Sequential(nn.Linear(32 + 3, 16), nn.ReLU(), nn.Linear(16, 3))

        def forward(s, pts, dirs):
            h = s.trunk(posenc(pts, s.nf))
            sigma = F.softplus(s.sigma(h)).squeeze(-1)
            d = dirs[:, None, :].expand(pts.shape)
            rgb = torch.sigmoid(s.rgb(torch.cat([h, d], -1)))
            return rgb, sigma

    def render(rgb, sigma, z):
        deltas = torch.cat([z[..., 1:] - z[..., :-1], torch.full_like(z[..., :1], 1e10)], -1)
        alpha = 1.0 - torch.exp(-sigma * deltas)
        trans = torch.cumprod(
            torch.cat([torch.ones_like(alpha[..., :1]), 1.0 - alpha + 1e-10], -1), -1
        )[..., :-1]
        weights = alpha * trans
        color = (weights[..., None] * rgb).sum(-2)
        depth = (weights * z).sum(-1)
        return color, depth, weights

    def sample_pdf(bins, weights, u):
        weights = weights + 1e-5
        pdf = weights / weights.sum(-1, keepdim=True)
        cdf = torch.cumsum(pdf, -1)
        cdf = torch.cat([torch.zeros_like(cdf[..., :1]), cdf], -1)
        inds = torch.searchsorted(cdf.contiguous(), u.contiguous(), right=True)
        below = torch.clamp(inds - 1, min=0)
        above = torch.clamp(inds, max=cdf.shape[-1] - 1)
        g = torch.stack([below, above], -1)
        shape = [*g.shape[:-1], cdf.shape[-1]]
        cdf_g = torch.gather(cdf.unsqueeze(-2).expand(shape), -1, g)
        bins_g = torch.gather(bins.unsqueeze(-2).expand(shape), -1, g)
        denom = cdf_g[..., 1] - cdf_g[..., 0]
        denom = torch.where(denom < 1e-5, torch.ones_like(denom), denom)
        t = (u - cdf_g[..., 0]) / denom
        return bins_g[..., 0] + t * (bins_g[..., 1] - bins_g[..., 0])

    m = ctx.init(TinyNeRF())
    opt = torch.optim.Adam(m.parameters(), lr=5e-4)
    rng = np.random.default_rng(1)
    R, S = 6, 8
    rays_o = ctx.t(rng.standard_normal((R, 3)).astype(np.float32) * 0.1)
    d = rng.standard_normal((R, 3)).astype(np.float32)
    rays_d = ctx.t(d / np.linalg.norm(d, axis=1, keepdims=True))
    target = ctx.t(rng.uniform(0, 1, (R, 3)).astype(np.float32))
    u = ctx.t(np.sort(rng.uniform(0, 1, (R, 6)).astype(np.float32), -1))

    def step(rays_o, rays_d, target, u):
        z = torch.linspace(2.0, 6.0, S).expand(R, S)
        pts = rays_o[:, None, :] + rays_d[:, None, :] * z[..., None]
        rgb, sigma = m(pts, rays_d)
        color, depth, w = render(rgb, sigma, z)
        mids = 0.5 * (z[..., 1:] + z[..., :-1])
        z_fine = sample_pdf(mids, w[..., 1:-1].detach(), u)
        z_all, _ = torch.sort(torch.cat([z, z_fine], -1), -1)
        pts2 = rays_o[:, None, :] + rays_d[:, None, :] * z_all[..., None]
        rgb2, sigma2 = m(pts2, rays_d)
        color2, depth2, _ = render(rgb2, sigma2, z_all)
        loss = F.mse_loss(color, target) + F.mse_loss(color2, target)
        psnr = -10.0 * torch.log10(F.mse_loss(color2, target))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, psnr, depth2, z_fine

    step = ctx.fn(step)
    out = [step(rays_o, rays_d, target, u) for _ in range(3)]
    return {"out": out}


def pointnet(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class TNet(nn.Module):
        def __init__(s, k):
            super().__init__()
            s.k = k
            s.conv = nn.Sequential(
                nn.Conv1d(k, 16, 1, bias=False),
                nn.BatchNorm1d(16),
                nn.ReLU(),
                nn.Conv1d(16, 32, 1, bias=False),
                nn.BatchNorm1d(32),
                nn.ReLU(),
            )
            s.fc = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, k * k))
            nn.init.zeros_(s.fc[-1].weight)
            nn.init.zeros_(s.fc[-1].bias)

        def forward(s, x):
            b = x.size(0)
            h = torch.max(s.conv(x), 2, keepdim=True)[0].view(-1, 32)
            iden = torch.eye(s.k, dtype=x.dtype).view(1, s.k * s.k).repeat(b, 1)
            return (s.fc(h) + iden).view(-1, s.k, s.k)

    class PointNet(nn.Module):
        def __init__(s, classes=4):
            super().__init__()
            s.t3 = TNet(3)
            s.conv1 = nn.Conv1d(3, 16, 1, bias=False)  # (a bias before BatchNorm: noise)
            s.bn1 = nn.BatchNorm1d(16)
            s.t16 = TNet(16)
            s.conv2 = nn.Conv1d(16, 32, 1, bias=False)
            s.bn2 = nn.BatchNorm1d(32)
            s.head = nn.Sequential(
                nn.Linear(32, 16),
                nn.LayerNorm(16),
                nn.ReLU(),
                nn.Dropout(p=0.0),
                nn.Linear(16, classes),
            )

        def forward(s, x):
            n = x.size(2)
            t = s.t3(x)
            x = torch.bmm(x.transpose(2, 1), t).transpose(2, 1)
            x = F.relu(s.bn1(s.conv1(x)))
            tf = s.t16(x)
            x = torch.bmm(x.transpose(2, 1), tf).transpose(2, 1)
            x = s.bn2(s.conv2(x))
            x = nn.MaxPool1d(n)(x).flatten(1)
            return F.log_softmax(s.head(x), dim=1), tf

    def ortho_reg(tf):
        d = tf.size(1)
        I = torch.eye(d)[None, :, :]
        return torch.mean(torch.norm(torch.bmm(tf, tf.transpose(2, 1)) - I, dim=(1, 2)))

    m = ctx.init(PointNet())
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, betas=(0.9, 0.999))
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    rng = np.random.default_rng(2)
    pts = ctx.t(rng.standard_normal((5, 3, 20)).astype(np.float32))
    y = ctx.t(rng.integers(0, 4, 5))

    def step(pts, y):
        m.train()
        out, tf = m(pts)
        loss = F.nll_loss(out, y) + 0.001 * ortho_reg(tf)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, out.argmax(1)

    step = ctx.fn(step)
    res = []
    for _ in range(3):
        res.append(step(pts, y))
        sched.step()
    m.eval()
    with torch.no_grad():
        out, _ = m(pts)
    return {
        "res": res,
        "eval": out,
        "lr": sched.get_last_lr(),
        "rm": m.bn2.running_mean,
        "nb": m.bn1.num_batches_tracked,
    }


def style_transfer(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Features(nn.Module):
        def __init__(s):
            super().__init__()
            s.layers = nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=1),
                nn.ReLU(inplace=True),
                nn.Conv2d(8, 8, 3, padding=1),
                nn.ReLU(inplace=True),
                nn.MaxPool2d(2),
                nn.Conv2d(8, 16, 3, padding=1),
                nn.ReLU(inplace=True),
            )
            s.taps = {1: "relu1_1", 3: "relu1_2", 6: "relu2_1"}

        def forward(s, x):
            feats = {}
            for i, layer in enumerate(s.layers):
                x = layer(x)
                if i in s.taps:
                    feats[s.taps[i]] = x
            return feats

    def gram(f):
        b, c, h, w = f.size()
        f = f.view(b, c, h * w)
        return torch.bmm(f, f.transpose(1, 2)).div(c * h * w)

    net = ctx.init(Features())
    net.eval()
    for p in net.parameters():
        p.requires_grad_(False)
    rng = np.random.default_rng(3)
    content = ctx.t(rng.uniform(0, 1, (1, 3, 12, 12)).astype(np.float32))
    style = ctx.t(rng.uniform(0, 1, (1, 3, 12, 12)).astype(np.float32))
    mean = torch.tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)

    def norm(img):
        return (img - mean) / std

    c_feats = {k: v.detach() for k, v in net(norm(content)).items()}
    s_grams = {k: gram(v).detach() for k, v in net(norm(style)).items()}
    img = content.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([img], lr=0.5, max_iter=4)
    losses = []

    def closure():
        with torch.no_grad():
            img.clamp_(0, 1)
        opt.zero_grad()
        feats = net(norm(img))
        c_loss = F.mse_loss(feats["relu1_2"], c_feats["relu1_2"])
        s_loss = sum(F.mse_loss(gram(feats[k]), s_grams[k]) for k in s_grams)
        tv = (img[..., 1:, :] - img[..., :-1, :]).abs().mean() + (
            img[..., :, 1:] - img[..., :, :-1]
        ).abs().mean()
        loss = c_loss + 1e3 * s_loss + 0.1 * tv
        loss.backward()
        losses.append(loss.item())
        return loss

    for _ in range(2):
        opt.step(closure)
    # and the Adam variant on a second image, a step captured
    img2 = content.clone().requires_grad_()
    opt2 = torch.optim.Adam([img2], lr=0.02)

    def astep():
        feats = net(norm(img2))
        loss = sum(F.mse_loss(gram(feats[k]), s_grams[k]) for k in s_grams) * 100
        opt2.zero_grad()
        loss.backward()
        opt2.step()
        with torch.no_grad():
            img2.clamp_(0, 1)
        return loss

    astep = ctx.fn(astep)
    l2 = [astep() for _ in range(3)]
    return {"losses": losses, "img": img.detach(), "l2": l2, "img2": img2.detach()}


def selective_scan(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class MambaBlock(nn.Module):
        def __init__(s, d_model=8, d_state=4, expand=2, d_conv=3):
            super().__init__()
            d_inner = expand * d_model
            s.d_inner, s.d_state = d_inner, d_state
            s.in_proj = nn.Linear(d_model, 2 * d_inner, bias=False)
            s.conv1d = nn.Conv1d(d_inner, d_inner, d_conv, groups=d_inner, padding=d_conv - 1)
            s.x_proj = nn.Linear(d_inner, 1 + 2 * d_state, bias=False)
            s.dt_proj = nn.Linear(1, d_inner)
            A = torch.arange(1, d_state + 1, dtype=torch.float32).repeat(d_inner, 1)
            s.A_log = nn.Parameter(torch.log(A))
            s.D = nn.Parameter(torch.ones(d_inner))
            s.out_proj = nn.Linear(d_inner, d_model, bias=False)
            s.norm = nn.RMSNorm(d_model)

        def ssm(s, x):
            A = -torch.exp(s.A_log.float())
            dbc = s.x_proj(x)
            delta, B, C = dbc.split([1, s.d_state, s.d_state], dim=-1)
            delta = F.softplus(s.dt_proj(delta))
            dA = torch.exp(torch.einsum("bld,dn->bldn", delta, A))
            dBx = torch.einsum("bld,bln,bld->bldn", delta, B, x)
            h = torch.zeros(x.size(0), s.d_inner, s.d_state)
            ys = []
            for t in range(x.size(1)):
                h = dA[:, t] * h + dBx[:, t]
                ys.append(torch.einsum("bdn,bn->bd", h, C[:, t]))
            y = torch.stack(ys, dim=1)
            return y + x * s.D

        def forward(s, x):
            L = x.shape[1]
            xz = s.in_proj(s.norm(x))
            xi, z = xz.chunk(2, dim=-1)
            xi = s.conv1d(xi.transpose(1, 2))[..., :L].transpose(1, 2)
            xi = F.silu(xi)
            y = s.ssm(xi) * F.silu(z)
            return x + s.out_proj(y)

    def parallel_decay(delta_a):
        # the scan's cumulative decay in closed form (segsum) for comparison
        cs = torch.cumsum(delta_a, dim=1)
        return torch.exp(cs[:, :, None] - cs[:, None, :]).tril()

    m = ctx.init(nn.Sequential(MambaBlock(), MambaBlock()))
    head = ctx.init(nn.Linear(8, 5), "head")
    opt = torch.optim.AdamW([*m.parameters(), *head.parameters()], lr=1e-3, weight_decay=0.01)
    rng = np.random.default_rng(4)
    x = ctx.t(rng.standard_normal((3, 7, 8)).astype(np.float32))
    y = ctx.t(rng.integers(0, 5, (3, 7)))

    def step(x, y):
        logits = head(m(x))
        loss = F.cross_entropy(logits.reshape(-1, 5), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        return loss, gn

    step = ctx.fn(step)
    out = [step(x, y) for _ in range(3)]
    dec = parallel_decay(-F.softplus(x[..., 0]))
    return {"out": out, "dec": dec, "A": m[0].A_log, "D": m[1].D}


PROGRAMS = [pinn, nerf, pointnet, style_transfer, selective_scan]
CAPTURED = PROGRAMS


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
