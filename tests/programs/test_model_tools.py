"""Model tooling as whole PyTorch programs: custom parametrizations (a pruning mask),
torch.nn.utils.prune, an optimizer zoo (two optimizers on one model, Rprop, ASGD, Adadelta,
maximize/amsgrad/foreach flags), an EfficientNet-style block with in-place activations and
squeeze-excitation, and a super-resolution net with PixelShuffle, TorchScript-decorated helpers
and torch.jit.trace.
"""

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def parametrize_masks(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    P = nn.utils.parametrize

    class Symmetric(nn.Module):
        def forward(s, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

    class UnitNorm(nn.Module):
        def forward(s, X):
            return X / X.norm(dim=1, keepdim=True)

    class Masked(nn.Module):  # magnitude pruning by hand: a fixed mask as a parametrization
        def __init__(s, mask):
            super().__init__()
            s.register_buffer("mask", mask)

        def forward(s, X):
            return X * s.mask

    net = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 4), nn.ReLU(), nn.Linear(4, 2))
    net = ctx.init(net)
    P.register_parametrization(net[0], "weight", Symmetric())
    P.register_parametrization(net[4], "weight", UnitNorm())
    w2 = net[2].weight.detach()
    k = int(round(0.25 * w2.numel()))
    idx = torch.topk(w2.abs().view(-1), k, largest=False).indices
    mask = torch.ones_like(w2)
    mask.view(-1)[idx] = 0
    P.register_parametrization(net[2], "weight", Masked(mask))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    rng = np.random.default_rng(21)
    x = ctx.t(rng.standard_normal((5, 6)).astype(np.float32))
    y = ctx.t(rng.integers(0, 2, 5))

    def step(x, y):
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    res = [step(x, y).item() for _ in range(3)]
    w0 = net[0].weight
    sym = bool((w0 == w0.T).all())
    names = sorted(n for n, _ in net.named_parameters())
    bufs = sorted(n for n, _ in net.named_buffers())
    with P.cached():
        cached = net[0].weight + net[0].weight
    P.remove_parametrizations(net[4], "weight", leave_parametrized=True)
    P.remove_parametrizations(net[2], "weight")
    return {
        "l": res,
        "sym": sym,
        "names": names,
        "bufs": bufs,
        "w2": net[2].weight,
        "zeros": int((net[2].weight == 0).sum()),
        "cached": cached,
        "w4": net[4].weight,
        "is_param": [P.is_parametrized(net[0]), P.is_parametrized(net[2])],
        "sd": sorted(net.state_dict()),
    }


def prune_prog(torch, ctx):
    import importlib

    nn, F = torch.nn, torch.nn.functional
    prune = importlib.import_module(f"{torch.__name__}.nn.utils.prune")  # import ...prune
    net = ctx.init(nn.Sequential(nn.Conv2d(2, 6, 3), nn.ReLU(), nn.Flatten(), nn.Linear(6 * 8, 3)))
    prune.l1_unstructured(net[0], name="weight", amount=0.3)
    prune.ln_structured(net[0], name="weight", amount=2, n=2, dim=0)  # a PruningContainer
    params = [(net[0], "bias"), (net[3], "weight")]
    prune.global_unstructured(params, pruning_method=prune.L1Unstructured, amount=0.25)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(25)
    x = ctx.t(rng.standard_normal((4, 2, 4, 6)).astype(np.float32))
    y = ctx.t(rng.integers(0, 3, 4))

    def step(x, y):
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    res = [step(x, y).item() for _ in range(3)]
    kept = float(net[0].weight_mask.sum())
    names = sorted(n for n, _ in net.named_parameters())
    bufs = sorted(n for n, _ in net.named_buffers())
    grad = net[0].weight_orig.grad
    for m, n in [(net[0], "weight"), (net[0], "bias"), (net[3], "weight")]:
        prune.remove(m, n)
    return {
        "l": res,
        "kept": kept,
        "names": names,
        "bufs": bufs,
        "grad": grad,
        "sd": dict(net.state_dict()),
        "pruned": prune.is_pruned(net),
    }


def optim_zoo(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(22)
    x = ctx.t(rng.integers(0, 12, (6, 3)))
    y = ctx.t(rng.standard_normal((6, 1)).astype(np.float32))
    out = {}

    def make(name):
        emb = ctx.init(nn.Embedding(12, 4), f"{name}.emb")
        lin = ctx.init(nn.Linear(4, 1), f"{name}.lin")
        return emb, lin

    def train(name, make_opts, steps=3, capture=True):
        emb, lin = make(name)
        opts = make_opts(emb, lin)

        def step(x, y):
            for o in opts:
                o.zero_grad()
            loss = F.mse_loss(lin(emb(x).mean(1)), y)
            loss.backward()
            for o in opts:
                o.step()
            return loss

        if capture:
            step = ctx.fn(step)
        out[name] = [step(x, y).item() for _ in range(steps)] + [emb.weight, lin.weight]

    train(
        "two_optimizers",
        lambda e, h: [
            torch.optim.SGD(list(e.parameters()), lr=0.5),
            torch.optim.Adam(h.parameters(), lr=0.05, amsgrad=True, foreach=False),
        ],
        capture=False,
    )

    def dense(e, h, o):
        return [o(list(e.parameters()) + list(h.parameters()))]

    train("rprop", lambda e, h: dense(e, h, lambda p: torch.optim.Rprop(p, lr=0.05)))
    train(
        "asgd",
        lambda e, h: dense(e, h, lambda p: torch.optim.ASGD(p, lr=0.05, t0=1, lambd=1e-3)),
    )
    train("adadelta", lambda e, h: dense(e, h, lambda p: torch.optim.Adadelta(p, lr=1.0)))
    train(
        "max",
        lambda e, h: dense(e, h, lambda p: torch.optim.Adam(p, lr=0.01, maximize=True)),
    )
    train(
        "sgd_nesterov_wd",
        lambda e, h: dense(
            e,
            h,
            lambda p: torch.optim.SGD(
                p, lr=0.05, momentum=0.8, dampening=0.0, nesterov=True, weight_decay=0.01
            ),
        ),
    )
    train(
        "adamw_amsgrad",
        lambda e, h: dense(
            e, h, lambda p: torch.optim.AdamW(p, lr=0.02, amsgrad=True, betas=(0.8, 0.9))
        ),
    )
    return out


def effnet(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class SE(nn.Module):
        def __init__(s, c, r=4):
            super().__init__()
            s.fc1 = nn.Conv2d(c, c // r, 1)
            s.fc2 = nn.Conv2d(c // r, c, 1)

        def forward(s, x):
            w = F.adaptive_avg_pool2d(x, 1)
            w = F.relu(s.fc1(w), inplace=True)
            return x * torch.sigmoid(s.fc2(w))

    class MBConv(nn.Module):
        def __init__(s, cin, cout, expand, stride):
            super().__init__()
            mid = cin * expand
            s.use_res = stride == 1 and cin == cout
            s.block = nn.Sequential(
                nn.Conv2d(cin, mid, 1, bias=False),
                nn.BatchNorm2d(mid, momentum=None),
                nn.SiLU(inplace=True),
                nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False),
                nn.BatchNorm2d(mid),
                nn.SiLU(inplace=True),
                SE(mid),
                nn.Conv2d(mid, cout, 1, bias=False),
                nn.BatchNorm2d(cout, track_running_stats=False),
            )

        def forward(s, x):
            out = s.block(x)
            if s.use_res:
                out += x
            return out

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.stem = nn.Sequential(
                nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6(inplace=True)
            )
            s.blocks = nn.Sequential(MBConv(8, 8, 2, 1), MBConv(8, 12, 2, 2))
            s.head = nn.Sequential(
                nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Dropout(p=0.0), nn.Linear(12, 3)
            )

        def forward(s, x):
            x = s.stem(x)
            x = s.blocks(x)
            return s.head(x)

    m = ctx.init(Net())
    m = m.to(memory_format=torch.channels_last)
    opt = torch.optim.RMSprop(m.parameters(), lr=1e-3, momentum=0.9, eps=1e-3)
    rng = np.random.default_rng(23)
    x = ctx.t(rng.standard_normal((4, 3, 8, 8)).astype(np.float32))
    x = x.contiguous(memory_format=torch.channels_last)
    y = ctx.t(np.array([0, 1, 2, 1]))

    def step(x, y):
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    res = [step(x, y).item() for _ in range(3)]
    m.eval()
    with torch.inference_mode():
        ev = m(x)
    t = torch.randn(3, 4).relu_()
    t2 = torch.full((2, 2), -1.0)
    F.leaky_relu_(t2, 0.2)
    nn.Hardtanh(-0.5, 0.5, inplace=True)(t2)
    bn = m.blocks[0].block[1]
    return {
        "l": res,
        "ev": ev,
        "rm": bn.running_mean,
        "nbt": bn.num_batches_tracked,
        "nostats": m.blocks[1].block[8].running_mean,
        "relu_ok": bool((t >= 0).all()),
        "t2": t2,
    }


def superres_jit(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    @torch.jit.script
    def psnr(a, b):
        mse = torch.mean((a - b) ** 2)
        return 10.0 * torch.log10(1.0 / mse)

    class ESPCN(nn.Module):
        def __init__(s, r=2):
            super().__init__()
            s.body = nn.Sequential(
                nn.Conv2d(1, 8, 5, padding=2),
                nn.Tanh(),
                nn.Conv2d(8, 4, 3, padding=1),
                nn.Tanh(),
                nn.Conv2d(4, r * r, 3, padding=1),
            )
            s.shuffle = nn.PixelShuffle(r)

        def forward(s, x):
            return torch.sigmoid(s.shuffle(s.body(x)))

    m = ctx.init(ESPCN())
    opt = torch.optim.Adam(m.parameters(), lr=2e-3)
    rng = np.random.default_rng(24)
    hr = ctx.t(rng.random((2, 1, 8, 8)).astype(np.float32))
    lr_img = F.interpolate(hr, scale_factor=0.5, mode="bilinear", align_corners=False)
    lr_img = F.avg_pool2d(hr, 2) * 0.5 + lr_img * 0.5

    def step(lr_img, hr):
        sr = m(lr_img)
        loss = F.l1_loss(sr, hr) + 0.1 * F.mse_loss(sr, hr)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, psnr(sr.detach(), hr)

    step = ctx.fn(step)
    res = [[v.item() for v in step(lr_img, hr)] for _ in range(3)]
    m.eval()
    traced = torch.jit.trace(m, lr_img)
    with torch.no_grad():
        out = traced(lr_img)
        un = F.pixel_unshuffle(out, 2)
        bicubic = F.interpolate(lr_img, size=(8, 8), mode="bicubic", align_corners=True)
    return {"l": res, "out": out, "un": un.shape[1], "bicubic": bicubic}


PROGRAMS = [parametrize_masks, prune_prog, optim_zoo, effnet, superres_jit]
CAPTURED = [parametrize_masks, prune_prog, optim_zoo, effnet, superres_jit]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
