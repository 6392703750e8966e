"""Model programs as users write them: DLRM (EmbeddingBag tables, pairwise dot interaction
through triu_indices), a YOLO-style loss (grid offsets, BCEWithLogits with pos_weight, CIoU),
SIREN (sine activations and its custom init, gradients of the output by the input), a
deformable convolution through grid_sample, an ensemble through torch.func.stack_module_state,
functional_call and vmap, scaled_dot_product_attention with a boolean mask, is_causal and GQA.
"""

import copy
import math

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741


def dlrm(torch, ctx):
    nn = torch.nn

    class DLRM(nn.Module):
        def __init__(s, sizes=(7, 5, 6), d=4):
            super().__init__()
            s.emb_l = nn.ModuleList(
                [nn.EmbeddingBag(n, d, mode="sum", sparse=False) for n in sizes]
            )
            s.bot_l = nn.Sequential(nn.Linear(3, 6), nn.ReLU(), nn.Linear(6, d), nn.ReLU())
            n_f = len(sizes) + 1
            s.register_buffer("li", torch.triu_indices(n_f, n_f, offset=1)[0])
            s.register_buffer("lj", torch.triu_indices(n_f, n_f, offset=1)[1])
            s.top_l = nn.Sequential(
                nn.Linear(d + n_f * (n_f - 1) // 2, 4), nn.ReLU(), nn.Linear(4, 1)
            )

        def interact(s, x, ly):
            B, d = x.shape
            T = torch.cat([x] + ly, dim=1).view((B, -1, d))
            Z = torch.bmm(T, torch.transpose(T, 1, 2))
            Zflat = Z[:, s.li, s.lj]
            return torch.cat([x, Zflat], dim=1)

        def forward(s, dense_x, lS_o, lS_i):
            x = s.bot_l(dense_x)
            ly = [emb(idx, off) for emb, idx, off in zip(s.emb_l, lS_i, lS_o)]
            return s.top_l(s.interact(x, ly)).squeeze(-1)

    m = ctx.init(DLRM())
    opt = torch.optim.Adagrad(m.parameters(), lr=0.05)
    rng = np.random.default_rng(0)
    dense = ctx.t(rng.standard_normal((3, 3)).astype(np.float32))
    idx = [ctx.t(rng.integers(0, n, 6)) for n in (7, 5, 6)]
    offs = [ctx.t(np.array([0, 2, 3])), ctx.t(np.array([0, 1, 4])), ctx.t(np.array([0, 0, 5]))]
    y = ctx.t(np.array([1.0, 0.0, 1.0], np.float32))
    loss_fn = nn.BCEWithLogitsLoss()

    def step(dense, idx, offs, y):
        p = m(dense, offs, idx)
        loss = loss_fn(p, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, torch.sigmoid(p)

    out = [step(dense, idx, offs, y) for _ in range(2)]
    out2 = ctx.fn(step)(dense, idx, offs, y)
    return {"out": out, "out2": out2, "m": m.state_dict()}


def yolo_loss(torch, ctx):
    nn = torch.nn

    def bbox_ciou(b1, b2, eps=1e-7):
        (x1, y1, w1, h1), (x2, y2, w2, h2) = b1.chunk(4, -1), b2.chunk(4, -1)
        b1_x1, b1_x2, b1_y1, b1_y2 = x1 - w1 / 2, x1 + w1 / 2, y1 - h1 / 2, y1 + h1 / 2
        b2_x1, b2_x2, b2_y1, b2_y2 = x2 - w2 / 2, x2 + w2 / 2, y2 - h2 / 2, y2 + h2 / 2
        inter = (torch.min(b1_x2, b2_x2) - torch.max(b1_x1, b2_x1)).clamp(0) * (
            torch.min(b1_y2, b2_y2) - torch.max(b1_y1, b2_y1)
        ).clamp(0)
        union = w1 * h1 + w2 * h2 - inter + eps
        iou = inter / union
        cw = b1_x2.maximum(b2_x2) - b1_x1.minimum(b2_x1)
        ch = b1_y2.maximum(b2_y2) - b1_y1.minimum(b2_y1)
        c2 = cw.pow(2) + ch.pow(2) + eps
        rho2 = ((b2_x1 + b2_x2 - b1_x1 - b1_x2).pow(2) + (b2_y1 + b2_y2 - b1_y1 - b1_y2).pow(2)) / 4
        v = (4 / math.pi**2) * (torch.atan(w2 / h2) - torch.atan(w1 / h1)).pow(2)
        with torch.no_grad():
            alpha = v / (v - iou + (1 + eps))
        return (iou - (rho2 / c2 + v * alpha)).squeeze(-1)

    head = ctx.init(nn.Conv2d(3, 3 * (5 + 2), 1))
    anchors = torch.tensor([[1.0, 1.5], [2.0, 1.0], [1.5, 2.5]])
    BCEcls = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([1.5]))
    BCEobj = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([0.8]))
    opt = torch.optim.SGD(head.parameters(), lr=0.01, momentum=0.937, nesterov=True)
    rng = np.random.default_rng(1)
    feat = ctx.t(rng.standard_normal((2, 3, 4, 4)).astype(np.float32))
    # targets: image, class, x, y, w, h (grid units)
    targets = ctx.t(
        np.array(
            [[0, 1, 1.3, 2.6, 1.2, 1.6], [1, 0, 3.2, 0.4, 2.1, 0.9], [1, 1, 0.7, 0.2, 1.4, 2.2]],
            np.float32,
        )
    )

    def step(feat, targets):
        p = head(feat)
        bs, _, ny, nx = p.shape
        p = p.view(bs, 3, 7, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
        r = targets[:, None, 4:6] / anchors[None]
        j = torch.max(r, 1 / r).max(2)[0] < 4.0
        t = targets[:, None].expand(-1, 3, -1)[j]
        a = torch.arange(3).view(1, 3).expand(targets.shape[0], 3)[j]
        b, c = t[:, :2].long().T
        gxy = t[:, 2:4]
        gij = gxy.long()
        gi, gj = gij.T
        ps = p[b, a, gj.clamp_(0, ny - 1), gi.clamp_(0, nx - 1)]
        pxy = ps[:, :2].sigmoid() * 2 - 0.5
        pwh = (ps[:, 2:4].sigmoid() * 2) ** 2 * anchors[a]
        pbox = torch.cat((pxy, pwh), 1)
        iou = bbox_ciou(pbox, torch.cat((gxy - gij, t[:, 4:6]), 1))
        lbox = (1.0 - iou).mean()
        tobj = torch.zeros(p.shape[:4])
        tobj[b, a, gj, gi] = iou.detach().clamp(0).type(tobj.dtype)
        tcls = torch.full_like(ps[:, 5:], 0.0)
        tcls[range(len(t)), c] = 1.0
        lcls = BCEcls(ps[:, 5:], tcls)
        lobj = BCEobj(p[..., 4], tobj)
        loss = (0.05 * lbox + 1.0 * lobj + 0.5 * lcls) * bs
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, torch.stack((lbox, lobj, lcls)).detach()

    out = [step(feat, targets) for _ in range(3)]
    return {"out": out, "m": head.state_dict()}


def siren(torch, ctx):
    nn = torch.nn

    class SineLayer(nn.Module):
        def __init__(s, i, o, is_first=False, omega_0=30.0):
            super().__init__()
            s.omega_0, s.linear = omega_0, nn.Linear(i, o)
            with torch.no_grad():
                bound = 1 / i if is_first else math.sqrt(6 / i) / omega_0
                s.linear.weight.uniform_(-bound, bound)

        def forward(s, x):
            return torch.sin(s.omega_0 * s.linear(x))

    net = ctx.init(nn.Sequential(SineLayer(2, 8, is_first=True), SineLayer(8, 8), nn.Linear(8, 1)))
    opt = torch.optim.Adam(net.parameters(), lr=1e-4)
    g = np.linspace(-1, 1, 5, dtype=np.float32)
    coords_np = np.stack(np.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    img = ctx.t(np.sin(3 * coords_np[:, :1]) * np.cos(2 * coords_np[:, 1:]))
    out = []
    for _ in range(2):
        coords = ctx.t(coords_np).requires_grad_(True)
        y = net(coords)
        grad = torch.autograd.grad(y, [coords], grad_outputs=torch.ones_like(y), create_graph=True)[
            0
        ]
        lap = 0
        for i in range(2):
            lap = lap + torch.autograd.grad(grad[:, i].sum(), coords, create_graph=True)[0][:, i]
        loss = ((y - img) ** 2).mean() + 1e-4 * grad.norm(dim=-1).mean() + 1e-6 * lap.abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append((loss, grad))
    return {"out": out, "m": net.state_dict()}


def deformable_conv(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class DeformConv(nn.Module):
        def __init__(s, cin=2, cout=3, k=3):
            super().__init__()
            s.k = k
            s.offset = nn.Conv2d(cin, 2 * k * k, 3, padding=1)
            nn.init.zeros_(s.offset.weight)
            nn.init.uniform_(s.offset.bias, -0.5, 0.5)
            s.weight = nn.Parameter(torch.randn(cout, cin * k * k) * 0.2)

        def forward(s, x):
            B, C, H, W = x.shape
            k = s.k
            off = s.offset(x).view(B, k * k, 2, H, W)
            ys, xs = torch.meshgrid(
                torch.arange(H, dtype=x.dtype), torch.arange(W, dtype=x.dtype), indexing="ij"
            )
            ky, kx = torch.meshgrid(
                torch.arange(k) - k // 2, torch.arange(k) - k // 2, indexing="ij"
            )
            py = ys[None, None] + ky.reshape(1, -1, 1, 1) + off[:, :, 0]
            px = xs[None, None] + kx.reshape(1, -1, 1, 1) + off[:, :, 1]
            grid = torch.stack((2 * px / (W - 1) - 1, 2 * py / (H - 1) - 1), dim=-1)
            grid = grid.view(B, k * k * H, W, 2)
            sampled = F.grid_sample(
                x, grid, mode="bilinear", padding_mode="zeros", align_corners=True
            )
            sampled = sampled.view(B, C, k * k, H, W).reshape(B, C * k * k, H * W)
            return torch.einsum("oc,bcl->bol", s.weight, sampled).view(B, -1, H, W)

    m = ctx.init(DeformConv())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(2)
    x = ctx.t(rng.standard_normal((2, 2, 5, 5)).astype(np.float32))
    y = ctx.t(rng.standard_normal((2, 3, 5, 5)).astype(np.float32))

    def step(x, y):
        loss = F.smooth_l1_loss(m(x), y, beta=0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    out = [step(x, y) for _ in range(2)]
    return {"out": out, "m": m.state_dict()}


def func_ensemble(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    from_func = torch.func

    models = [
        ctx.init(nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2)), f"m{i}")
        for i in range(3)
    ]
    params, buffers = from_func.stack_module_state(models)
    base = copy.deepcopy(models[0])  # (the tutorial moves it to "meta": ember has no meta device)

    def fmodel(params, buffers, x):
        return from_func.functional_call(base, (params, buffers), (x,))

    rng = np.random.default_rng(3)
    x = ctx.t(rng.standard_normal((4, 3)).astype(np.float32))
    y = ctx.t(rng.integers(0, 2, 4))
    same = torch.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, x)
    xs = ctx.t(rng.standard_normal((3, 4, 3)).astype(np.float32))
    diff = torch.vmap(fmodel)(params, buffers, xs)

    def loss_fn(params, buffers, x, y):
        return F.cross_entropy(fmodel(params, buffers, x), y)

    grads = torch.vmap(from_func.grad(loss_fn), in_dims=(0, 0, None, None))(params, buffers, x, y)
    opt = torch.optim.SGD(list(params.values()), lr=0.1)
    for _ in range(2):
        loss = torch.vmap(loss_fn, in_dims=(0, 0, None, None))(params, buffers, x, y).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {"same": same, "diff": diff, "grads": grads, "params": dict(params), "loss": loss}


def sdpa_variants(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class GQA(nn.Module):
        def __init__(s, d=8, hq=4, hkv=2):
            super().__init__()
            s.hq, s.hkv, s.dh = hq, hkv, d // hq
            s.q = nn.Linear(d, hq * s.dh, bias=False)
            s.kv = nn.Linear(d, 2 * hkv * s.dh, bias=False)
            s.o = nn.Linear(d, d, bias=False)

        def forward(s, x, pad_mask=None, causal=False, p=0.0):
            B, T, _ = x.shape
            q = s.q(x).view(B, T, s.hq, s.dh).transpose(1, 2)
            k, v = s.kv(x).view(B, T, 2, s.hkv, s.dh).permute(2, 0, 3, 1, 4)
            if pad_mask is not None:
                mask = pad_mask[:, None, None, :] & torch.ones(T, T, dtype=torch.bool).tril()
                o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
            else:
                o = F.scaled_dot_product_attention(
                    q, k, v, is_causal=causal, dropout_p=p, enable_gqa=True, scale=0.3
                )
            ref_k = k.repeat_interleave(s.hq // s.hkv, dim=1)
            return s.o(o.transpose(1, 2).reshape(B, T, -1)), ref_k

    m = ctx.init(GQA())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    rng = np.random.default_rng(4)
    x = ctx.t(rng.standard_normal((2, 5, 8)).astype(np.float32))
    pad = ctx.t(np.array([[True] * 5, [True] * 3 + [False] * 2]))

    def step(x, pad):
        y1, _ = m(x, pad_mask=pad)
        y2, _ = m(x, causal=True)
        loss = (y1 - y2).pow(2).mean() + y1[:, :3].abs().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, y1

    out = [step(x, pad) for _ in range(2)]
    out.append(ctx.fn(step)(x, pad))
    # dropout: zero-probability and eval give the deterministic result
    y0, _ = m(x, p=0.0)
    torch.manual_seed(0)
    yd, _ = m(x, p=0.5)
    changed = not torch.allclose(yd, y0)
    return {"out": out, "y0": y0, "changed": changed}


PROGRAMS = [dlrm, yolo_loss, siren, deformable_conv, func_ensemble, sdpa_variants]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


def test_captured_deformable_conv():
    check_program(deformable_conv, capture=True)
