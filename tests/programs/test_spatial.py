"""Spatial and indexing programs: spatial transformers (2-D, and 3-D with flow warping),
unfold/fold, upsampling and padding,
boolean and advanced indexing, statistics and einsum.
"""

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806


def stn(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class STN(nn.Module):
        def __init__(s):
            super().__init__()
            s.loc = nn.Sequential(nn.Conv2d(1, 4, 3), nn.MaxPool2d(2, stride=2), nn.ReLU(True))
            s.fc = nn.Sequential(nn.Linear(4 * 3 * 3, 8), nn.ReLU(True), nn.Linear(8, 6))
            s.fc[2].weight.data.zero_()
            s.fc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

        def forward(s, x):
            xs = s.loc(x).view(-1, 36)
            theta = s.fc(xs).view(-1, 2, 3) + 0.1
            grid = F.affine_grid(theta, x.size(), align_corners=False)
            a = F.grid_sample(x, grid, align_corners=False)
            b = F.grid_sample(x, grid, mode="nearest", padding_mode="border", align_corners=True)
            c = F.grid_sample(
                x, grid, mode="bilinear", padding_mode="reflection", align_corners=False
            )
            d = F.grid_sample(x, grid, mode="bicubic", padding_mode="zeros", align_corners=True)
            return a, b, c, d

    m = ctx.init(STN())
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((2, 1, 8, 8)).astype(np.float32))
    outs = []

    def step(x):
        opt.zero_grad()
        a, b, c, d = m(x)
        loss = a.pow(2).mean() + c.abs().mean() + d.mean() + b.mean()
        loss.backward()
        opt.step()
        return loss, a, b, c, d

    step = ctx.fn(step)
    for _ in range(2):
        outs.append(step(x))
    return {"o": outs, "w": m.fc[2].weight}


def unfold_fold(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((2, 3, 6, 7)).astype(np.float32), requires_grad=True)
    w = ctx.t(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), requires_grad=True)

    def f(x, w):
        cols = F.unfold(x, kernel_size=3, padding=1, stride=(1, 2), dilation=1)
        out = (w.view(4, -1) @ cols).view(2, 4, 6, 4)
        ref = F.conv2d(x, w, padding=1, stride=(1, 2))
        patches = F.unfold(x, kernel_size=2, stride=2)
        back = F.fold(patches, output_size=(6, 7), kernel_size=2, stride=2)
        ov = F.fold(F.unfold(x, 3, padding=1), (6, 7), 3, padding=1)
        u = nn.Unfold(kernel_size=(2, 3), dilation=(2, 1))(x)
        ps = F.pixel_shuffle(F.conv2d(x, w.repeat(1, 1, 1, 1)[:4], padding=1), 2)
        pu = F.pixel_unshuffle(x[:, :, :6, :6], 2)
        s = out.sum() + back.pow(2).sum() + ov.mean() + u.std() + ps.sum() + (pu * 2).mean()
        s.backward()
        return out, ref, back, ov, u, ps, pu

    f = ctx.fn(f)
    res = f(x, w)
    return {"r": res, "gx": x.grad, "gw": w.grad}


def upsample_pad(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((1, 2, 4, 5)).astype(np.float32), requires_grad=True)
    v = ctx.t(rng.standard_normal((1, 2, 6)).astype(np.float32), requires_grad=True)
    z = ctx.t(rng.standard_normal((1, 1, 3, 4, 4)).astype(np.float32), requires_grad=True)
    outs = {}
    outs["up_n"] = nn.Upsample(scale_factor=2, mode="nearest")(x)
    outs["up_b"] = nn.Upsample(size=(7, 9), mode="bilinear", align_corners=True)(x)
    outs["up_b2"] = F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=False)
    outs["up_bc"] = F.interpolate(x, scale_factor=(2, 3), mode="bicubic", align_corners=False)
    outs["ne"] = F.interpolate(x, size=(3, 7), mode="nearest-exact")
    outs["area"] = F.interpolate(x, size=(2, 3), mode="area")
    outs["lin"] = F.interpolate(v, scale_factor=2.5, mode="linear", recompute_scale_factor=True)
    outs["tri"] = F.interpolate(z, scale_factor=2, mode="trilinear")
    outs["n3"] = F.interpolate(z, size=(2, 5, 3), mode="nearest")
    outs["n1"] = F.interpolate(v, size=4)
    outs["refl"] = F.pad(x, (2, 1, 1, 2), mode="reflect")
    outs["repl"] = F.pad(x, (2, 1, 1, 2), mode="replicate")
    outs["circ"] = F.pad(x, (2, 1, 1, 2), mode="circular")
    outs["const"] = F.pad(x, (1, 1, -1, 2), value=3.5)
    outs["p1"] = nn.ReflectionPad1d(2)(v)
    outs["p3"] = nn.ReplicationPad3d(1)(z)
    outs["zp"] = nn.ZeroPad2d((1, 0, 2, 0))(x)
    outs["cp"] = nn.CircularPad1d(3)(v)
    tot = sum(o.pow(2).sum() * (i + 1) for i, o in enumerate(outs.values()))
    tot.backward()
    outs["gx"] = x.grad
    outs["gv"] = v.grad
    outs["gz"] = z.grad
    return outs


def indexing_prog(torch, ctx):
    rng = np.random.default_rng(0)
    a = ctx.t(rng.standard_normal((5, 6)).astype(np.float32), requires_grad=True)

    def f(a):
        b = a * 1.0
        out = {}
        out["w1"] = torch.where(b > 0, b, 0.0)
        out["w2"] = torch.where(b > 0, 1.0, -1.0)
        out["w3"] = torch.where(b > 0.5, b, torch.zeros_like(b)).sum(0)
        m = b > 0.2
        c = b.clone()
        c[m] = 0.0
        out["c"] = c
        d = b.clone()
        d[~m] = b[~m] * 2
        out["d"] = d
        out["sel"] = b[m]
        r = torch.tensor([0, 2, 4])
        cidx = torch.tensor([[1], [3]])
        out["adv"] = b[r[None, :], cidx]
        out["adv2"] = b[[0, 1, 1], [2, 3, 3]]
        out["adv3"] = b[1:4, [0, 5]]
        out["adv4"] = b[torch.tensor([True, False, True, False, True])]
        e = b.clone()
        e[r, 1] += 5.0
        out["e"] = e
        g = b.clone()
        g[:, [1, 3]] = torch.tensor([7.0, 8.0])
        out["g"] = g
        h = b.clone()
        h[b < -0.5] *= 0.5
        out["h"] = h
        out["nz"] = (b > 0).nonzero()
        out["nz2"] = torch.nonzero(b > 0, as_tuple=True)[1]
        out["mf"] = b.masked_fill(b.abs() < 0.3, float("-inf")).softmax(-1)
        out["ms"] = torch.masked_select(b, m)
        out["ell"] = b[..., None, 2]
        out["none"] = b[None, :, None].shape
        k = b.clone()
        k[..., -1] = k[..., 0]
        out["k"] = k
        s = sum(
            v.sum()
            for v in out.values()
            if hasattr(v, "requires_grad") and v.dtype.is_floating_point and torch.isfinite(v).all()
        )
        s.backward()
        return out

    o = f(a)
    o["grad"] = a.grad
    return o


def stats_prog(torch, ctx):
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((6, 3)).astype(np.float32), requires_grad=True)
    y = ctx.t(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    out = {}
    d = torch.cdist(x, y)
    out["cd"] = d
    out["cd1"] = torch.cdist(x.unsqueeze(0), y.unsqueeze(0), p=1.0)
    out["cdinf"] = torch.cdist(x, y, p=float("inf"))
    bounds = torch.tensor([-1.0, 0.0, 0.5, 1.0])
    out["bk"] = torch.bucketize(x.detach(), bounds)
    out["bkr"] = torch.bucketize(x.detach(), bounds, right=True)
    out["ss"] = torch.searchsorted(bounds, x.detach().contiguous().view(-1)[:5])
    labels = torch.tensor([3, 1, 3, 2, 1, 1, 7])
    u, inv, cnt = torch.unique(labels, return_inverse=True, return_counts=True)
    out["u"] = u
    out["inv"] = inv
    out["cnt"] = cnt
    uc = torch.unique_consecutive(torch.tensor([1, 1, 2, 2, 3, 1, 1]), return_counts=True)
    out["uc"] = list(uc)
    u2 = torch.unique(torch.tensor([[1, 2], [1, 2], [0, 5]]), dim=0, return_inverse=True)
    out["u2"] = list(u2)
    out["hist"] = torch.histc(x.detach(), bins=5, min=-2, max=2)
    out["bc"] = torch.bincount(labels, weights=torch.arange(7, dtype=torch.float), minlength=9)
    out["e1"] = torch.einsum("ik,jk->ij", x, y)
    out["e2"] = torch.einsum("bi,bj->bij", x, x)
    out["e3"] = torch.einsum("ii->i", d[:4, :4])
    out["e4"] = torch.einsum("...k,k->...", x, y[0])
    out["e5"] = torch.einsum("ij,ij->", x[:4], y)
    out["e6"] = torch.einsum(x, [0, 1], y, [2, 1], [0, 2])
    out["e7"] = torch.einsum("b h i d, b h j d -> b h i j", x.view(1, 2, 3, 3), x.view(1, 2, 3, 3))
    out["q"] = torch.quantile(x, torch.tensor([0.25, 0.5, 0.9]), dim=0)
    out["med"] = x.median(dim=1).values
    out["nm"] = torch.nanmedian(x)
    out["mode"] = torch.mode(labels).values
    out["cov"] = torch.cov(x.t())
    out["cc"] = torch.corrcoef(x.t())
    out["kth"] = torch.kthvalue(x, 2, dim=0).values
    tot = sum(
        v.float().sum() for k, v in out.items() if hasattr(v, "requires_grad") and v.requires_grad
    )
    tot.backward()
    out["gx"] = x.grad
    out["gy"] = y.grad
    return out


def dtypes_prog(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    m = ctx.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)))
    m = m.double()
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((5, 4)))
    out = {}
    out["dbl"] = m(x)
    out["dt"] = str(m[0].weight.dtype).replace("ember", "torch")
    m.to(torch.float32)
    xf = x.float()
    out["f"] = m(xf)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = m(xf)
        out["ac_dt"] = str(y.dtype).replace("ember", "torch")
        out["ac_loss_dt"] = str(F.mse_loss(y, torch.zeros_like(y)).dtype).replace("ember", "torch")
        out["ac_sm"] = str(torch.softmax(y, -1).dtype).replace("ember", "torch")
    out["ac"] = y.float()
    h = m.half()
    out["half"] = h(xf.half()).float()
    out["mix"] = (torch.ones(3, dtype=torch.int32) * 2.5).dtype == torch.float32
    out["mix2"] = str(
        (torch.ones(3, dtype=torch.int64) + torch.ones(3, dtype=torch.uint8)).dtype
    ).replace("ember", "torch")
    out["mix3"] = str(
        (torch.ones(3, dtype=torch.float16) + torch.ones(3, dtype=torch.bfloat16)).dtype
    ).replace("ember", "torch")
    out["mix4"] = str((torch.tensor(3) / 2).dtype).replace("ember", "torch")
    out["mix5"] = str((torch.tensor([1, 2]) // 2.0).dtype).replace("ember", "torch")
    out["mix6"] = str(torch.tensor([True]).sum().dtype).replace("ember", "torch")
    out["mix7"] = str(torch.arange(5).float().mean().dtype).replace("ember", "torch")
    out["mix8"] = str(torch.tensor([1.0], dtype=torch.float64).to(torch.int32).dtype).replace(
        "ember", "torch"
    )
    out["mix9"] = str(torch.zeros(2, dtype=torch.bfloat16).new_ones(3).dtype).replace(
        "ember", "torch"
    )
    out["mix10"] = str(torch.full((2,), 7).dtype).replace("ember", "torch")
    out["mix11"] = str(torch.full((2,), True).dtype).replace("ember", "torch")
    out["mix12"] = str(torch.tensor(2.5, dtype=torch.float64).item().__class__)
    out["mix13"] = str(
        (torch.ones(2, dtype=torch.float16) * torch.tensor(2.0, dtype=torch.float64)).dtype
    ).replace("ember", "torch")
    out["mix14"] = str(torch.randint(0, 5, (3,)).dtype).replace("ember", "torch")
    out["mix15"] = str(torch.get_default_dtype()).replace("ember", "torch")
    out["mix16"] = str(torch.tensor([1, 2], dtype=torch.int8).sum().dtype).replace("ember", "torch")
    out["mix17"] = str(torch.tensor([1, 2], dtype=torch.int8).cumsum(0).dtype).replace(
        "ember", "torch"
    )
    out["mix18"] = str(torch.tensor([1.5]).type(torch.LongTensor).dtype).replace("ember", "torch")
    return out


def eval_loop(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    TD, DL = torch.utils.data.TensorDataset, torch.utils.data.DataLoader
    m = ctx.init(
        nn.Sequential(
            nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 3)
        )
    )
    rng = np.random.default_rng(0)
    X = ctx.t(rng.standard_normal((23, 4)).astype(np.float32))
    Y = ctx.t(rng.integers(0, 3, 23))
    dl = DL(TD(X, Y), batch_size=5, shuffle=False, drop_last=False)
    m.eval()
    correct = 0
    total = 0
    losses = []
    with torch.no_grad():
        for xb, yb in dl:
            out = m(xb)
            losses.append(F.cross_entropy(out, yb, reduction="sum").item())
            pred = out.argmax(dim=1)
            correct += (pred == yb).sum().item()
            total += yb.size(0)
            top2 = out.topk(2, dim=1).indices
            correct += top2.eq(yb.view(-1, 1).expand_as(top2)).any(dim=1).float().sum().item()
    acc = 100.0 * correct / total
    with torch.inference_mode():
        probs = F.softmax(m(X), dim=1)
        conf, pred = probs.max(1)
    return {
        "acc": acc,
        "l": losses,
        "conf": conf,
        "pred": pred,
        "len": len(dl),
        "rg": probs.requires_grad,
    }


def stn_warp(torch, ctx):
    """A volumetric spatial transformer (theta (N, 3, 4), a 5-D affine grid, trilinear
    sampling with border padding) and optical-flow warping (a conv predicts the flow added to
    the identity grid, bilinear zeros and bicubic reflection sampling): three Adam steps."""
    nn, F = torch.nn, torch.nn.functional

    class Warp(nn.Module):
        def __init__(s):
            super().__init__()
            s.loc = nn.Sequential(nn.Conv3d(2, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool3d(1))
            s.fc = nn.Linear(4, 12)
            s.fc.weight.data.mul_(0.1)
            s.fc.bias.data.copy_(torch.eye(3, 4).flatten())
            s.flow = nn.Conv2d(3, 2, 3, padding=1)
            s.flow.weight.data.mul_(0.2)

        def forward(s, vol, img):
            theta = s.fc(s.loc(vol).flatten(1)).view(-1, 3, 4)
            grid = F.affine_grid(theta, (vol.shape[0], 2, 3, 5, 4), align_corners=False)
            v = F.grid_sample(vol, grid, padding_mode="border", align_corners=False)
            eye = torch.eye(2, 3).unsqueeze(0).expand(img.shape[0], 2, 3)
            base = F.affine_grid(eye, tuple(img.shape), align_corners=True)
            warp = base + s.flow(img).permute(0, 2, 3, 1).tanh() * 0.3
            a = F.grid_sample(img, warp, align_corners=True)
            b = F.grid_sample(img, warp, "bicubic", "reflection", align_corners=False)
            return v, a, b

    m = ctx.init(Warp())
    opt = torch.optim.Adam(m.parameters(), lr=0.05)
    rng = np.random.default_rng(1)
    vol = ctx.t(rng.standard_normal((2, 2, 4, 6, 5)).astype(np.float32))
    img = ctx.t(rng.standard_normal((2, 3, 6, 7)).astype(np.float32))

    def step(vol, img):
        opt.zero_grad()
        v, a, b = m(vol, img)
        loss = v.pow(2).mean() + (a - img).pow(2).mean() + b.abs().mean()
        loss.backward()
        opt.step()
        return loss, v, a, b

    step = ctx.fn(step)
    outs = [step(vol, img) for _ in range(3)]
    return {"o": outs, "fc": m.fc.weight, "flow": m.flow.weight, "loc": m.loc[0].weight}


PROGRAMS = [
    stn,
    stn_warp,
    unfold_fold,
    upsample_pad,
    indexing_prog,
    stats_prog,
    dtypes_prog,
    eval_loop,
]
CAPTURED = [stn, stn_warp, unfold_fold]


# bfloat16 and float16 results: one unit in the last place of 16-bit values near 0.2
ATOL = {dtypes_prog: 2e-3}


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, atol=ATOL.get(program, 1e-5))


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
