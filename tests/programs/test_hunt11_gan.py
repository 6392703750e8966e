"""GAN programs as users write them: a CycleGAN/Pix2Pix step (ReflectionPad2d, InstanceNorm2d,
a PatchGAN, LSGAN losses, an image pool, an identity and a cycle loss, LambdaLR's linear decay)
and HiFi-GAN pieces (weight_norm and spectral_norm through nn.utils.parametrizations, a
transposed-convolution generator with residual dilated blocks, a multi-period discriminator's
reshapes, the feature-matching loss, remove_parametrizations for inference).
"""

import random

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741


def cyclegan(torch, ctx):
    nn = torch.nn

    class ResnetBlock(nn.Module):
        def __init__(s, dim):
            super().__init__()
            s.block = nn.Sequential(
                nn.ReflectionPad2d(1),
                nn.Conv2d(dim, dim, 3, bias=False),
                nn.InstanceNorm2d(dim),
                nn.ReLU(True),
                nn.ReflectionPad2d(1),
                nn.Conv2d(dim, dim, 3, bias=False),
                nn.InstanceNorm2d(dim),
            )

        def forward(s, x):
            return x + s.block(x)

    def generator():
        return nn.Sequential(
            nn.ReflectionPad2d(2),
            nn.Conv2d(2, 4, 5, bias=False),
            nn.InstanceNorm2d(4, affine=True),
            nn.ReLU(True),
            nn.Conv2d(4, 6, 3, stride=2, padding=1, bias=False),
            nn.InstanceNorm2d(6, track_running_stats=False),
            nn.ReLU(True),
            ResnetBlock(6),
            nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1, bias=False),
            nn.InstanceNorm2d(4),
            nn.ReLU(True),
            nn.ReflectionPad2d(2),
            nn.Conv2d(4, 2, 5),
            nn.Tanh(),
        )

    def patch_disc():
        return nn.Sequential(
            nn.Conv2d(2, 4, 4, 2, 1),
            nn.LeakyReLU(0.2, True),
            nn.Conv2d(4, 8, 4, 1, 1, bias=False),
            nn.InstanceNorm2d(8),
            nn.LeakyReLU(0.2, True),
            nn.Conv2d(8, 1, 4, 1, 1),
        )

    class ImagePool:
        def __init__(s, size):
            s.size, s.images = size, []

        def query(s, images):
            out = []
            for image in images:
                image = torch.unsqueeze(image.data, 0)
                if len(s.images) < s.size:
                    s.images.append(image)
                    out.append(image)
                elif random.uniform(0, 1) > 0.5:
                    rid = random.randint(0, s.size - 1)
                    tmp = s.images[rid].clone()
                    s.images[rid] = image
                    out.append(tmp)
                else:
                    out.append(image)
            return torch.cat(out, 0)

    G_AB, G_BA = ctx.init(generator(), "gab"), ctx.init(generator(), "gba")
    D_A, D_B = ctx.init(patch_disc(), "da"), ctx.init(patch_disc(), "db")
    import itertools

    opt_G = torch.optim.Adam(
        itertools.chain(G_AB.parameters(), G_BA.parameters()), lr=2e-3, betas=(0.5, 0.999)
    )
    opt_D = torch.optim.Adam(
        itertools.chain(D_A.parameters(), D_B.parameters()), lr=2e-3, betas=(0.5, 0.999)
    )
    n_epochs, decay_start = 4, 1
    rule = lambda ep: 1.0 - max(0, ep - decay_start) / float(n_epochs - decay_start + 1)  # noqa: E731
    sch = [torch.optim.lr_scheduler.LambdaLR(o, lr_lambda=rule) for o in (opt_G, opt_D)]
    mse, l1 = nn.MSELoss(), nn.L1Loss()
    pool_A, pool_B = ImagePool(3), ImagePool(3)
    random.seed(0)
    rng = np.random.default_rng(0)

    def set_requires_grad(nets, flag):
        for net in nets:
            for p in net.parameters():
                p.requires_grad = flag

    def gan_loss(pred, real):
        target = torch.tensor(1.0 if real else 0.0).expand_as(pred)
        return mse(pred, target)

    out = []
    for _ep in range(3):
        real_A = ctx.t(np.tanh(rng.standard_normal((2, 2, 8, 8))).astype(np.float32))
        real_B = ctx.t(np.tanh(rng.standard_normal((2, 2, 8, 8))).astype(np.float32))
        fake_B, fake_A = G_AB(real_A), G_BA(real_B)
        rec_A, rec_B = G_BA(fake_B), G_AB(fake_A)
        set_requires_grad([D_A, D_B], False)
        opt_G.zero_grad()
        idt = l1(G_AB(real_B), real_B) * 5 + l1(G_BA(real_A), real_A) * 5
        loss_G = gan_loss(D_B(fake_B), True) + gan_loss(D_A(fake_A), True)
        loss_G = loss_G + l1(rec_A, real_A) * 10 + l1(rec_B, real_B) * 10 + idt
        loss_G.backward()
        opt_G.step()
        set_requires_grad([D_A, D_B], True)
        opt_D.zero_grad()
        loss_D = 0
        for D, real, fake in (
            (D_B, real_B, pool_B.query(fake_B)),
            (D_A, real_A, pool_A.query(fake_A)),
        ):
            ld = (gan_loss(D(real), True) + gan_loss(D(fake.detach()), False)) * 0.5
            ld.backward()
            loss_D = loss_D + ld.item()
        opt_D.step()
        for s in sch:
            s.step()
        out.append((loss_G, loss_D, sch[0].get_last_lr()))
    return {"out": out, "gab": G_AB.state_dict(), "db": D_B.state_dict()}


def hifigan(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    wn = nn.utils.parametrizations.weight_norm
    sn = nn.utils.parametrizations.spectral_norm
    LRELU = 0.1

    def get_padding(k, d=1):
        return int((k * d - d) / 2)

    class ResBlock(nn.Module):
        def __init__(s, ch, k=3, dil=(1, 3)):
            super().__init__()
            s.convs = nn.ModuleList(
                [wn(nn.Conv1d(ch, ch, k, 1, dilation=d, padding=get_padding(k, d))) for d in dil]
            )

        def forward(s, x):
            for c in s.convs:
                xt = F.leaky_relu(x, LRELU)
                x = c(xt) + x
            return x

    class Generator(nn.Module):
        def __init__(s):
            super().__init__()
            s.pre = wn(nn.Conv1d(3, 8, 5, 1, padding=2))
            s.ups = nn.ModuleList(
                [
                    wn(nn.ConvTranspose1d(8, 4, 4, 2, padding=1)),
                    wn(nn.ConvTranspose1d(4, 2, 4, 2, padding=1)),
                ]
            )
            s.res = nn.ModuleList([ResBlock(4), ResBlock(2, dil=(1, 2))])
            s.post = wn(nn.Conv1d(2, 1, 5, 1, padding=2))

        def forward(s, x):
            x = s.pre(x)
            for up, rb in zip(s.ups, s.res):
                x = F.leaky_relu(x, LRELU)
                x = rb(up(x))
            x = F.leaky_relu(x)
            return torch.tanh(s.post(x))

    class DiscP(nn.Module):
        def __init__(s, period, use_sn=False):
            super().__init__()
            s.period = period
            norm = sn if use_sn else wn
            s.convs = nn.ModuleList(
                [
                    norm(nn.Conv2d(1, 4, (3, 1), (2, 1), padding=(1, 0))),
                    norm(nn.Conv2d(4, 4, (3, 1), 1, padding=(1, 0))),
                ]
            )
            s.post = norm(nn.Conv2d(4, 1, (3, 1), 1, padding=(1, 0)))

        def forward(s, x):
            fmap = []
            b, c, t = x.shape
            if t % s.period != 0:
                n_pad = s.period - (t % s.period)
                x = F.pad(x, (0, n_pad), "reflect")
                t = t + n_pad
            x = x.view(b, c, t // s.period, s.period)
            for l in s.convs:
                x = F.leaky_relu(l(x), LRELU)
                fmap.append(x)
            x = s.post(x)
            fmap.append(x)
            return torch.flatten(x, 1, -1), fmap

    class MPD(nn.Module):
        def __init__(s):
            super().__init__()
            s.discriminators = nn.ModuleList([DiscP(2), DiscP(3, use_sn=True)])

        def forward(s, y, y_hat):
            rs, gs, fr, fg = [], [], [], []
            for d in s.discriminators:
                a, b = d(y)
                c, e = d(y_hat)
                rs.append(a), fr.append(b), gs.append(c), fg.append(e)
            return rs, gs, fr, fg

    def feature_loss(fmap_r, fmap_g):
        loss = 0
        for dr, dg in zip(fmap_r, fmap_g):
            for rl, gl in zip(dr, dg):
                loss += torch.mean(torch.abs(rl - gl))
        return loss * 2

    def discriminator_loss(real, gen):
        loss = 0
        for dr, dg in zip(real, gen):
            loss += torch.mean((1 - dr) ** 2) + torch.mean(dg**2)
        return loss

    def generator_loss(outs):
        return sum(torch.mean((1 - dg) ** 2) for dg in outs)

    G, D = ctx.init(Generator(), "g"), MPD()
    ctx.init(D, "d")
    oG = torch.optim.AdamW(G.parameters(), 2e-3, betas=(0.8, 0.99))
    oD = torch.optim.AdamW(D.parameters(), 2e-3, betas=(0.8, 0.99))
    sG = torch.optim.lr_scheduler.ExponentialLR(oG, gamma=0.999)
    rng = np.random.default_rng(1)
    mel = ctx.t(rng.standard_normal((2, 3, 5)).astype(np.float32))
    y = ctx.t(np.sin(np.linspace(0, 6, 20)).reshape(1, 1, 20).repeat(2, 0).astype(np.float32))
    out = []
    for _ in range(2):
        y_g = G(mel)
        oD.zero_grad()
        rs, gs, _, _ = D(y, y_g.detach())
        loss_d = discriminator_loss(rs, gs)
        loss_d.backward()
        oD.step()
        oG.zero_grad()
        rs, gs, fr, fg = D(y, y_g)
        loss_g = generator_loss(gs) + feature_loss(fr, fg) + F.l1_loss(y_g, y) * 45
        loss_g.backward()
        oG.step()
        sG.step()
        out.append((loss_d, loss_g))
    D.eval()
    with torch.no_grad():
        score = D.discriminators[1](y)[0]
    for m in G.modules():
        if nn.utils.parametrize.is_parametrized(m):
            nn.utils.parametrize.remove_parametrizations(m, "weight")
    G.eval()
    with torch.no_grad():
        audio = G(mel)
    return {
        "out": out,
        "score": score,
        "audio": audio,
        "keys": sorted(G.state_dict()),
        "d": D.state_dict(),
    }


PROGRAMS = [cyclegan, hifigan]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)
