"""torch.nn.functional and library programs: pooling with ceil_mode/divisor_override/unpooling,
padding modes, circular/reflect convolutions and grouped transposed ones, the activation
modules, interpolate's modes (nearest-exact, bicubic, antialias, area, trilinear) and
grid_sample over every mode and padding, nn.Module's API (buffers, apply, deepcopy,
load_state_dict(strict=False), dtype moves), DataLoader collation of dicts, namedtuples and
NumPy values with samplers and datasets, and torch.autograd's API.
"""

import collections
import copy

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741


def pool_pad_conv(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(10)
    x = ctx.t(rng.standard_normal((2, 3, 9, 8)).astype(np.float32), requires_grad=True)
    out = {}
    out["avg_ceil"] = F.avg_pool2d(
        x, 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False
    )
    out["avg_div"] = F.avg_pool2d(x, 2, divisor_override=3)
    y, idx = F.max_pool2d(x, 2, stride=2, return_indices=True, ceil_mode=True)
    out["mp"] = y
    out["unpool"] = F.max_unpool2d(y, idx, 2, stride=2, output_size=x.shape[-2:])
    out["mp_dil"] = F.max_pool1d(x.flatten(2), 3, stride=2, dilation=2)
    out["amax"] = F.adaptive_max_pool2d(x, (4, 3), return_indices=True)
    out["aavg"] = F.adaptive_avg_pool2d(x, (5, None))
    out["lp"] = F.lp_pool2d(x.abs() + 0.1, 2.0, 3, stride=2)
    for mode in ["reflect", "replicate", "circular", "constant"]:
        out["pad_" + mode] = F.pad(x, (1, 2, 2, 0), mode=mode)
    out["pad1d"] = F.pad(x[:, :, 0], (3, 1), mode="reflect")
    out["pad_neg"] = F.pad(x, (-1, 1, 0, -2))
    circ = nn.Conv2d(3, 4, 3, padding=1, padding_mode="circular")
    refl = nn.Conv2d(3, 4, (3, 2), padding="same", padding_mode="reflect", dilation=(1, 2))
    grp = nn.ConvTranspose2d(3, 6, 3, stride=2, padding=1, output_padding=1, groups=3, dilation=1)
    c1 = nn.Conv1d(3, 2, 5, padding="same", dilation=2, bias=False)
    mods = ctx.init(nn.ModuleList([circ, refl, grp, c1]))
    out["circ"] = mods[0](x)
    out["refl"] = mods[1](x)
    out["tr"] = mods[2](x)
    out["tr_size"] = mods[2](x, output_size=[17, 15])
    out["c1"] = mods[3](x[:, :, 1])
    out["pd"] = F.pdist(x[0, 0])
    out["pwd"] = F.pairwise_distance(x[0, 0], x[0, 1], p=1.5, keepdim=True)
    out["cos"] = F.cosine_similarity(x[0, :, :1], x[0, :, 1:], dim=0)
    out["lrn"] = F.local_response_norm(x, 3)
    out["inorm"] = nn.InstanceNorm2d(3, affine=True, track_running_stats=True)(x)
    out["fold"] = F.fold(
        F.unfold(x, (2, 3), dilation=(2, 1), padding=1, stride=(1, 2)),
        (9, 8),
        (2, 3),
        dilation=(2, 1),
        padding=1,
        stride=(1, 2),
    )
    out["ps"] = F.pixel_unshuffle(F.pixel_shuffle(x[:, :, :8, :8].repeat(1, 4, 1, 1), 2), 2)
    out["cs"] = F.channel_shuffle(x.repeat(1, 2, 1, 1), 3)
    tot = sum((v[0] if isinstance(v, tuple) else v).float().pow(2).mean() for v in out.values())
    tot.backward()
    out["g"] = x.grad
    out["gw"] = [p.grad for p in mods.parameters()]
    return out


def activations_zoo(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(11)
    x = ctx.t(rng.standard_normal((4, 6)).astype(np.float32) * 3, requires_grad=True)
    acts = [
        nn.ELU(alpha=0.5),
        nn.SELU(),
        nn.CELU(1.3),
        nn.GELU(approximate="tanh"),
        nn.GELU(),
        nn.Hardtanh(-2, 1.5),
        nn.ReLU6(),
        nn.LeakyReLU(0.2),
        nn.Softplus(beta=2, threshold=5),
        nn.Mish(),
        nn.Hardswish(),
        nn.Hardsigmoid(),
        nn.SiLU(),
        nn.LogSigmoid(),
        nn.Softsign(),
        nn.Tanhshrink(),
        nn.Softshrink(0.7),
        nn.Hardshrink(0.7),
        nn.Threshold(0.5, -1.0),
        nn.Softmin(dim=1),
        nn.LogSoftmax(dim=0),
        nn.Softmax2d(),
        nn.GLU(dim=1),
        nn.RReLU(),
        nn.PReLU(num_parameters=6, init=0.1),
        nn.CELU(),
        nn.Sigmoid(),
    ]
    net = nn.ModuleList(acts)
    net.eval()
    out = []
    for a in net:
        inp = x.view(1, 4, 6, 1) if isinstance(a, nn.Softmax2d) else x
        out.append(a(inp))
    total = sum(o.sum() for o in out)
    total.backward()
    out.append(x.grad)
    out.append(F.rrelu(x, training=False))
    out.append(F.hardtanh(x, min_val=-0.5, max_val=0.5))
    out.append(F.normalize(x, p=1, dim=0))
    out.append(F.one_hot(torch.tensor([0, 3, 1]), num_classes=5))
    out.append(F.softplus(x, beta=0.5))
    out.append(F.elu(x.detach().clone(), inplace=True))
    out.append(F.relu_(x.detach().clone()))
    y = x.detach().clone()
    F.leaky_relu_(y, 0.3)
    out.append(y)
    out.append(F.rms_norm(x, (6,), eps=1e-5))
    out.append(nn.RMSNorm(6, elementwise_affine=True)(x))
    out.append([type(a).__name__ for a in net])
    return out


def resample_warp(torch, ctx):
    F = torch.nn.functional
    rng = np.random.default_rng(12)
    img = ctx.t(rng.standard_normal((2, 3, 7, 9)).astype(np.float32), requires_grad=True)
    out = {}
    out["ne"] = F.interpolate(img, scale_factor=1.7, mode="nearest-exact")
    out["nearest_down"] = F.interpolate(img, size=(4, 5), mode="nearest")
    out["bicubic"] = F.interpolate(img, size=(11, 6), mode="bicubic", align_corners=True)
    out["bicubic_aa"] = F.interpolate(img, size=(4, 5), mode="bicubic", antialias=True)
    out["bilinear_aa"] = F.interpolate(img, scale_factor=0.5, mode="bilinear", antialias=True)
    out["area"] = F.interpolate(img, size=(3, 4), mode="area")
    out["lin1d"] = F.interpolate(img[:, :, 0], size=13, mode="linear", align_corners=True)
    out["ne1d"] = F.interpolate(img[:, :, 0], scale_factor=0.6, mode="nearest-exact")
    vol = img.unsqueeze(2).expand(2, 3, 3, 7, 9)
    out["tri"] = F.interpolate(
        vol, scale_factor=(1.5, 0.5, 0.8), mode="trilinear", align_corners=False
    )
    out["up"] = torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)(img)
    theta = ctx.t(
        np.array(
            [[[0.9, 0.1, 0.05], [-0.1, 1.1, 0.0]], [[1.0, 0.0, 0.2], [0.0, 0.8, -0.1]]], np.float32
        ),
        requires_grad=True,
    )
    for ac in [True, False]:
        grid = F.affine_grid(theta, (2, 3, 5, 6), align_corners=ac)
        for mode in ["bilinear", "nearest", "bicubic"]:
            for pm in ["zeros", "border", "reflection"]:
                out[f"gs_{mode}_{pm}_{ac}"] = F.grid_sample(
                    img, grid * 1.3, mode=mode, padding_mode=pm, align_corners=ac
                )
    tot = sum(v.pow(2).mean() for v in out.values())
    tot.backward()
    out["g"] = img.grad
    out["gt"] = theta.grad
    return out


def module_api(torch, ctx):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(s):
            super().__init__()
            s.lin = nn.Linear(4, 4)
            s.bn = nn.BatchNorm1d(4)
            s.register_buffer("steps", torch.zeros((), dtype=torch.long))
            s.register_buffer("cache", torch.zeros(4), persistent=False)

        def forward(s, x):
            if s.training:
                s.steps += 1
            s.cache = x.mean(0).detach()
            return torch.relu(s.bn(s.lin(x)))

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.blocks = nn.Sequential(Block(), Block())
            s.head = nn.Linear(4, 2)

        def forward(s, x):
            return s.head(s.blocks(x))

    net = ctx.init(Net())
    out = []
    out.append([n for n, _ in net.named_buffers()])
    out.append([n for n, _ in net.named_children()])
    out.append(sorted(net.state_dict().keys()))
    out.append(type(net.get_submodule("blocks.1.bn")).__name__)
    out.append(net.get_parameter("blocks.0.lin.bias"))
    out.append(net.get_buffer("blocks.1.steps"))

    def init_fn(m):
        if isinstance(m, nn.Linear):
            nn.init.constant_(m.bias, 0.1)

    net.apply(init_fn)
    rng = np.random.default_rng(14)
    x = ctx.t(rng.standard_normal((5, 4)).astype(np.float32))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad(set_to_none=True)
        net(x).sum().backward()
        opt.step()
    out.append(net.blocks[0].steps)
    out.append(net.blocks[1].cache)
    clone = copy.deepcopy(net)
    clone.head = nn.Identity()
    out.append(clone(x).shape)
    net.blocks[0].requires_grad_(False)
    out.append([p.requires_grad for p in net.parameters()])
    net.eval()
    out.append([m.training for m in net.modules()])
    y = net(x)
    out.append(y)
    sd = net.state_dict()
    net2 = Net()
    res = net2.load_state_dict(
        {k: v for k, v in sd.items() if not k.startswith("head")}, strict=False
    )
    out.append([sorted(res.missing_keys), sorted(res.unexpected_keys)])
    net2.add_module("extra", nn.Tanh())
    net2.register_module("extra2", nn.ReLU())
    del net2.extra
    out.append([n for n, _ in net2.named_children()])
    out.append(net.blocks[0].lin.weight.grad is None)
    sd_pref = net.blocks.state_dict(prefix="pre.")
    out.append(sorted(sd_pref.keys()))
    out.append(net.double().head.weight.dtype)
    out.append(net.float().head(x))
    out.append(sum(p.numel() for p in net.parameters() if p.requires_grad))
    out.append(len(list(net.modules())))
    out.append(repr(nn.Linear(2, 3, bias=False)))
    out.append(repr(nn.Conv2d(1, 2, 3, stride=2)))
    return out


def loader_zoo(torch, ctx):
    D = torch.utils.data
    Pt = collections.namedtuple("Pt", ["x", "y"])

    class DictDS(D.Dataset):
        def __len__(s):
            return 7

        def __getitem__(s, i):
            return {
                "feat": torch.full((2,), float(i)),
                "label": i % 3,
                "meta": {"id": i, "w": float(i) / 2},
                "np": np.array([i, i + 1]),
                "pt": Pt(torch.tensor(i), i * 1.5),
            }

    ds = DictDS()
    out = []
    for b in D.DataLoader(ds, batch_size=3):
        out.append(
            [
                b["feat"],
                b["label"],
                b["meta"]["id"],
                b["meta"]["w"],
                b["np"],
                b["pt"].x,
                b["pt"].y,
                type(b["pt"]).__name__,
            ]
        )
    bs = D.BatchSampler(D.SequentialSampler(range(10)), batch_size=4, drop_last=False)
    out.append(list(bs))
    out.append(len(D.BatchSampler(range(10), 4, drop_last=True)))
    dl = D.DataLoader(ds, batch_sampler=[[0, 2], [5, 1, 3]])
    out.append([b["label"] for b in dl])
    sub = D.SubsetRandomSampler([1, 4, 6], generator=torch.Generator().manual_seed(0))
    out.append(sorted(list(sub)))
    dl2 = D.DataLoader(ds, batch_size=2, sampler=D.SequentialSampler(ds), drop_last=True)
    out.append([len(dl2), [b["label"] for b in dl2]])
    out.append(D.default_collate([(1, torch.tensor([1.0])), (2, torch.tensor([2.0]))]))
    out.append(D.default_collate([np.float32(1.5), np.float32(2.0)]))
    out.append(D.default_collate(["a", "b"]))
    xs = torch.arange(12.0).reshape(6, 2)
    st = D.StackDataset(xs, torch.arange(6))
    out.append(st[2])
    st2 = D.StackDataset(a=xs, b=torch.arange(6))
    out.append(st2[3])

    class Gen(D.IterableDataset):
        def __init__(s, lo, hi):
            s.lo, s.hi = lo, hi

        def __iter__(s):
            return iter(range(s.lo, s.hi))

    ch = D.ChainDataset([Gen(0, 3), Gen(10, 12)])
    out.append(list(ch))
    out.append([b for b in D.DataLoader(Gen(0, 5), batch_size=None)])
    tds = D.TensorDataset(xs, torch.arange(6))
    tr, va, te = D.random_split(tds, [3, 2, 1], generator=torch.Generator().manual_seed(1))
    out.append([len(tr), len(va), len(te), sorted(tr.indices + va.indices + te.indices)])
    out.append(
        next(
            iter(
                D.DataLoader(
                    tds,
                    batch_size=4,
                    shuffle=False,
                    collate_fn=lambda b: torch.stack([x for x, _ in b]),
                )
            )
        )
    )
    rs = D.RandomSampler(
        tds, replacement=True, num_samples=9, generator=torch.Generator().manual_seed(2)
    )
    out.append([len(list(rs)), all(0 <= i < 6 for i in rs)])
    return out


def autograd_api(torch, ctx):
    rng = np.random.default_rng(15)
    w = ctx.t(rng.standard_normal((3, 3)).astype(np.float32), requires_grad=True)
    b = ctx.t(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    unused = torch.ones(2, requires_grad=True)
    x = ctx.t(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    out = {}
    y = torch.tanh(x @ w + b)
    gw, gb, gu = torch.autograd.grad(y.sum(), [w, b, unused], allow_unused=True, retain_graph=True)
    out["g"] = [gw, gb, gu is None]
    gm = torch.autograd.grad(
        y.sum(), [w, unused], allow_unused=True, materialize_grads=True, retain_graph=True
    )
    out["gm"] = list(gm)
    (gx,) = torch.autograd.grad(y, x, grad_outputs=torch.ones_like(y) * 0.5, create_graph=True)
    pen = gx.pow(2).sum()
    pen.backward(retain_graph=True)
    out["double"] = [w.grad.clone(), b.grad.clone()]
    w.grad = None
    y.backward(torch.full_like(y, 2.0), inputs=[w])
    out["inputs"] = [w.grad, b.grad.clone()]
    out["jac"] = torch.autograd.functional.jacobian(
        lambda v: torch.tanh(v @ w.detach()), x.detach()[0], vectorize=True
    )
    out["hess"] = torch.autograd.functional.hessian(lambda v: (v.sin() * v).sum(), x.detach()[0])
    out["vhp"] = torch.autograd.functional.vhp(lambda v: (v**3).sum(), x.detach()[0], torch.ones(3))
    out["hvp"] = torch.autograd.functional.hvp(lambda v: (v**3).sum(), x.detach()[0], torch.ones(3))
    out["jvp"] = torch.autograd.functional.jvp(lambda v: v.exp(), x.detach()[0], torch.ones(3))
    z = x.detach().requires_grad_()
    h = z.register_hook(lambda g: g * 3)
    (z**2).sum().backward()
    h.remove()
    out["hooked"] = z.grad
    q = torch.ones(3, requires_grad=True)
    r = q * 2
    r.retain_grad()
    (r * r).sum().backward()
    out["retain"] = [r.grad, q.grad, r.is_leaf, q.is_leaf, r.requires_grad]
    with torch.no_grad():
        nz = q * 2
    with torch.enable_grad():
        ez = q * 2
    with torch.inference_mode():
        iz = q * 3
    out["modes"] = [nz.requires_grad, ez.requires_grad, iz.requires_grad, torch.is_grad_enabled()]
    torch.set_grad_enabled(False)
    sz = q * 2
    torch.set_grad_enabled(True)
    out["set"] = sz.requires_grad

    @torch.no_grad()
    def deco(v):
        return v * 2

    out["deco"] = deco(q).requires_grad
    out["detach"] = [q.detach().requires_grad, q.detach_().is_leaf if False else True]
    return out


PROGRAMS = [pool_pad_conv, activations_zoo, resample_warp, module_api, loader_zoo, autograd_api]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)
