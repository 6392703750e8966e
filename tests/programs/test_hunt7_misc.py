"""More whole programs: per-sample gradients from module hooks (Opacus-style), a learning-rate
range test that restores deep copies, a multi-resolution STFT loss, a SchNet-style molecular
network with scatter pooling, LoRA injected into a frozen model and merged, elastic weight
consolidation, quantization-aware training with fake quantization, a TextCNN on frozen
pretrained embeddings.
"""

import copy
import math

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741, B007


def per_sample_hooks(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    m = ctx.init(nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3)))
    acts, grads = {}, {}

    def fwd_hook(mod, inp, out):
        acts[mod] = inp[0].detach()

    def bwd_hook(mod, grad_in, grad_out):
        grads[mod] = grad_out[0].detach()

    handles = []
    for layer in m:
        if isinstance(layer, nn.Linear):
            handles.append(layer.register_forward_hook(fwd_hook))
            handles.append(layer.register_full_backward_hook(bwd_hook))
    rng = np.random.default_rng(0)
    x = ctx.t(rng.standard_normal((5, 4)).astype(np.float32))
    y = ctx.t(rng.integers(0, 3, 5))
    loss = F.cross_entropy(m(x), y, reduction="sum")
    loss.backward()
    per_sample = {}
    for i, layer in enumerate(m):
        if isinstance(layer, nn.Linear):
            gw = torch.einsum("ni,nj->nij", grads[layer], acts[layer])
            per_sample[i] = (gw, grads[layer])
    # DP-SGD style: clip each example's gradient, sum, add nothing (deterministic)
    norms = torch.sqrt(
        sum((gw.flatten(1) ** 2).sum(1) + (gb**2).sum(1) for gw, gb in per_sample.values())
    )
    factor = (1.0 / norms).clamp(max=1.0)
    clipped = {
        i: (torch.einsum("n,nij->ij", factor, gw), torch.einsum("n,ni->i", factor, gb))
        for i, (gw, gb) in per_sample.items()
    }
    for h in handles:
        h.remove()
    total = [m[0].weight.grad, per_sample[0][0].sum(0)]
    return {
        "norms": norms,
        "clipped": [list(v) for v in clipped.values()],
        "total": total,
        "hooks_left": len(m[0]._forward_hooks) + len(m[0]._backward_hooks),
    }


def lr_finder(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    m = ctx.init(nn.Sequential(nn.Linear(3, 10), nn.LeakyReLU(0.2), nn.Linear(10, 1)))
    opt = torch.optim.SGD(m.parameters(), lr=1e-4, momentum=0.9)
    saved_model = copy.deepcopy(m.state_dict())
    saved_opt = copy.deepcopy(opt.state_dict())
    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((16, 3)).astype(np.float32))
    y = ctx.t(rng.standard_normal((16, 1)).astype(np.float32))
    gamma = (1.0 / 1e-4) ** (1 / 7)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=gamma)

    def step(x, y):
        loss = F.mse_loss(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    lrs, losses, best, smoothed = [], [], float("inf"), 0.0
    for i in range(8):
        loss = step(x, y).item()
        smoothed = 0.7 * smoothed + 0.3 * loss
        debiased = smoothed / (1 - 0.7 ** (i + 1))
        lrs.append(sched.get_last_lr()[0])
        losses.append(debiased)
        best = min(best, debiased)
        if debiased > 4 * best:
            break
        sched.step()
    m.load_state_dict(saved_model)
    opt.load_state_dict(saved_opt)
    twin = copy.deepcopy(m)
    twin[0].weight.data.mul_(2)
    return {
        "lrs": lrs,
        "losses": losses,
        "restored": m[0].weight,
        "opt_lr": opt.param_groups[0]["lr"],
        "twin": twin[0].weight,
        "state": len(opt.state),
    }


def multires_stft(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def stft_mag(x, n_fft, hop, win):
        window = torch.hann_window(win) if win % 2 == 0 else torch.hamming_window(win)
        spec = torch.stft(
            x,
            n_fft,
            hop_length=hop,
            win_length=win,
            window=window,
            return_complex=True,
            center=True,
            pad_mode="reflect",
        )
        return torch.clamp(spec.real**2 + spec.imag**2, min=1e-7).sqrt()

    def mr_stft_loss(pred, target):
        sc, mag = 0.0, 0.0
        for n_fft, hop, win in [(32, 8, 32), (16, 4, 15), (64, 16, 48)]:
            p, t = stft_mag(pred, n_fft, hop, win), stft_mag(target, n_fft, hop, win)
            sc = (
                sc
                + torch.linalg.norm(t - p, ord="fro", dim=(-2, -1)).mean()
                / torch.linalg.norm(t, ord="fro", dim=(-2, -1)).mean()
            )
            mag = mag + F.l1_loss(torch.log(p), torch.log(t))
        return sc / 3, mag / 3

    class Gen(nn.Module):
        def __init__(s):
            super().__init__()
            s.net = nn.Sequential(
                nn.Conv1d(1, 8, 7, padding=3),
                nn.Tanh(),
                nn.Conv1d(8, 8, 5, padding=4, dilation=2),
                nn.Tanh(),
                nn.Conv1d(8, 1, 3, padding=1),
            )

        def forward(s, x):
            return s.net(x.unsqueeze(1)).squeeze(1)

    m = ctx.init(Gen())
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    rng = np.random.default_rng(2)
    t = np.arange(128) / 128
    clean = np.stack([np.sin(2 * np.pi * f * t) for f in (5, 11)]).astype(np.float32)
    noisy = clean + 0.3 * rng.standard_normal(clean.shape).astype(np.float32)
    clean, noisy = ctx.t(clean), ctx.t(noisy)

    def step(noisy, clean):
        out = m(noisy)
        sc, mag = mr_stft_loss(out, clean)
        loss = sc + mag + F.l1_loss(out, clean)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return sc, mag

    step = ctx.fn(step)
    out = [step(noisy, clean) for _ in range(3)]
    rec = torch.istft(
        torch.stft(clean, 32, 8, window=torch.hann_window(32), return_complex=True),
        32,
        8,
        window=torch.hann_window(32),
        length=128,
    )
    return {"out": out, "rec": rec}


def schnet(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class RBF(nn.Module):
        def __init__(s, n=8, cutoff=3.0):
            super().__init__()
            s.register_buffer("centers", torch.linspace(0, cutoff, n))
            s.gamma = 10.0 / cutoff
            s.cutoff = cutoff

        def forward(s, d):
            env = 0.5 * (torch.cos(d * math.pi / s.cutoff) + 1.0) * (d < s.cutoff).float()
            return torch.exp(-s.gamma * (d[:, None] - s.centers) ** 2) * env[:, None]

    class Interaction(nn.Module):
        def __init__(s, h, n_rbf):
            super().__init__()
            s.filt = nn.Sequential(nn.Linear(n_rbf, h), nn.Softplus(), nn.Linear(h, h))
            s.lin1 = nn.Linear(h, h, bias=False)
            s.lin2 = nn.Sequential(nn.Linear(h, h), nn.Softplus(), nn.Linear(h, h))

        def forward(s, x, src, dst, rbf):
            msg = s.lin1(x)[src] * s.filt(rbf)
            agg = torch.zeros_like(x).index_add_(0, dst, msg)
            return x + s.lin2(agg)

    class SchNet(nn.Module):
        def __init__(s, h=12):
            super().__init__()
            s.emb = nn.Embedding(5, h)
            s.rbf = RBF()
            s.blocks = nn.ModuleList([Interaction(h, 8) for _ in range(2)])
            s.out = nn.Sequential(nn.Linear(h, h // 2), nn.Softplus(), nn.Linear(h // 2, 1))

        def forward(s, z, pos, batch, src, dst, n_mol):
            d = (pos[src] - pos[dst]).norm(dim=-1)
            rbf = s.rbf(d)
            x = s.emb(z)
            for b in s.blocks:
                x = b(x, src, dst, rbf)
            e = s.out(x).squeeze(-1)
            return torch.zeros(n_mol).scatter_add(0, batch, e)

    m = ctx.init(SchNet())
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    rng = np.random.default_rng(3)
    z = ctx.t(rng.integers(0, 5, 9))
    pos_np = rng.standard_normal((9, 3)).astype(np.float32)
    batch = ctx.t(np.array([0, 0, 0, 1, 1, 1, 1, 2, 2]))
    energy = ctx.t(rng.standard_normal(3).astype(np.float32))

    def edges(batch):  # (the graph's size depends on the data: built outside the step)
        n = batch.size(0)
        src, dst = torch.triu_indices(n, n, 1)
        same = batch[src] == batch[dst]
        src, dst = src[same], dst[same]
        return torch.cat([src, dst]), torch.cat([dst, src])

    src, dst = edges(batch)

    def step(z, pos, batch, energy):
        pos = pos.requires_grad_()
        e = m(z, pos, batch, src, dst, 3)
        (forces,) = torch.autograd.grad(-e.sum(), pos, create_graph=True)
        loss = F.mse_loss(e, energy) + 0.1 * forces.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, forces.detach()

    step = ctx.fn(step)
    out = [step(z, ctx.t(pos_np), batch, energy) for _ in range(3)]
    return {"out": out}


def lora(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class LoRALinear(nn.Module):
        def __init__(s, base, r=2, alpha=4.0):
            super().__init__()
            s.base = base
            s.A = nn.Parameter(torch.zeros(r, base.in_features))
            s.B = nn.Parameter(torch.zeros(base.out_features, r))
            s.scale = alpha / r
            with torch.no_grad():
                s.A.copy_(torch.linspace(-0.5, 0.5, r * base.in_features).view(r, -1))

        def forward(s, x):
            return s.base(x) + (x @ s.A.T @ s.B.T) * s.scale

        def merge(s):
            merged = nn.Linear(s.base.in_features, s.base.out_features)
            with torch.no_grad():
                merged.weight.copy_(s.base.weight + s.scale * s.B @ s.A)
                merged.bias.copy_(s.base.bias)
            return merged

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.enc = nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Linear(8, 8))
            s.cls = nn.Linear(8, 3)

        def forward(s, x):
            return s.cls(F.gelu(s.enc(x)))

    m = ctx.init(Net())
    for p in m.parameters():
        p.requires_grad_(False)

    def inject(module):
        for name, child in module.named_children():
            if isinstance(child, nn.Linear) and name != "cls":
                setattr(module, name, LoRALinear(child))
            else:
                inject(child)

    inject(m)
    m.cls.weight.requires_grad_(True)
    trainable = [n for n, p in m.named_parameters() if p.requires_grad]
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-2)
    rng = np.random.default_rng(4)
    x = ctx.t(rng.standard_normal((8, 6)).astype(np.float32))
    y = ctx.t(rng.integers(0, 3, 8))

    def step(x, y):
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    out = [step(x, y) for _ in range(3)]
    with torch.no_grad():
        before = m(x)
        for i, layer in enumerate(m.enc):
            if isinstance(layer, LoRALinear):
                m.enc[i] = layer.merge()
        after = m(x)
    return {
        "out": out,
        "trainable": trainable,
        "before": before,
        "after": after,
        "keys": sorted(m.state_dict()),
    }


def ewc(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    m = ctx.init(nn.Sequential(nn.Linear(4, 12), nn.ReLU(), nn.Linear(12, 2)))
    rng = np.random.default_rng(5)
    xa = ctx.t(rng.standard_normal((20, 4)).astype(np.float32))
    ya = ctx.t(rng.integers(0, 2, 20))
    xb = ctx.t(rng.standard_normal((20, 4)).astype(np.float32) + 1)
    yb = ctx.t(rng.integers(0, 2, 20))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(m(xa), ya).backward()
        opt.step()
    # diagonal Fisher from per-example squared gradients
    fisher = {n: torch.zeros_like(p) for n, p in m.named_parameters()}
    for i in range(0, 20, 4):
        m.zero_grad()
        logp = F.log_softmax(m(xa[i : i + 4]), 1)
        F.nll_loss(logp, logp.argmax(1)).backward()
        for n, p in m.named_parameters():
            fisher[n] += p.grad.detach() ** 2 / 5
    anchor = {n: p.detach().clone() for n, p in m.named_parameters()}
    lam = 50.0

    def step(xb, yb):
        task = F.cross_entropy(m(xb), yb)
        penalty = sum((fisher[n] * (p - anchor[n]) ** 2).sum() for n, p in m.named_parameters())
        loss = task + lam / 2 * penalty
        opt.zero_grad()
        loss.backward()
        opt.step()
        return task, penalty

    step = ctx.fn(step)
    out = [step(xb, yb) for _ in range(3)]
    with torch.no_grad():
        acc_a = (m(xa).argmax(1) == ya).float().mean()
    return {"out": out, "fisher": fisher, "acc_a": acc_a}


def qat(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class FakeQuant(nn.Module):
        def __init__(s, bits=8, momentum=0.1):
            super().__init__()
            s.qmax = 2 ** (bits - 1) - 1
            s.momentum = momentum
            s.register_buffer("amax", torch.tensor(0.0))
            s.register_buffer("initialized", torch.tensor(False))

        def forward(s, x):
            if s.training:
                cur = x.detach().abs().max()
                new = torch.where(s.initialized, (1 - s.momentum) * s.amax + s.momentum * cur, cur)
                s.amax.copy_(new)
                s.initialized.fill_(True)
            scale = (s.amax / s.qmax).clamp(min=1e-8)
            zero = torch.zeros((), dtype=torch.int32)
            return torch.fake_quantize_per_tensor_affine(x, scale, zero, -s.qmax - 1, s.qmax)

    class QLinear(nn.Linear):
        def forward(s, x):
            w = s.weight
            scale = w.detach().abs().amax(1) / 127
            wq = torch.fake_quantize_per_channel_affine(
                w, scale, torch.zeros(w.size(0), dtype=torch.int32), 0, -128, 127
            )
            # straight-through rounding for the bias
            b = s.bias + (torch.round(s.bias * 64) / 64 - s.bias).detach()
            return F.linear(x, wq, b)

    m = ctx.init(nn.Sequential(FakeQuant(), QLinear(5, 8), nn.ReLU6(), FakeQuant(), QLinear(8, 2)))
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    rng = np.random.default_rng(6)
    x = ctx.t(rng.standard_normal((10, 5)).astype(np.float32))
    y = ctx.t(rng.standard_normal((10, 2)).astype(np.float32))

    def step(x, y):
        loss = F.mse_loss(m(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    out = [step(x, y) for _ in range(3)]
    m.eval()
    with torch.no_grad():
        ev = m(x)
    return {"out": out, "ev": ev, "amax": [m[0].amax, m[3].amax], "w": m[1].weight}


def textcnn(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(7)
    vectors = ctx.t(rng.standard_normal((30, 8)).astype(np.float32))

    class TextCNN(nn.Module):
        def __init__(s):
            super().__init__()
            s.static = nn.Embedding.from_pretrained(vectors, freeze=True, padding_idx=0)
            s.tuned = nn.Embedding.from_pretrained(vectors.clone(), freeze=False)
            s.convs = nn.ModuleList([nn.Conv1d(16, 6, k) for k in (2, 3, 4)])
            s.drop = nn.Dropout(0.0)
            s.fc = nn.Linear(18, 4)

        def forward(s, ids):
            e = torch.cat([s.static(ids), s.tuned(ids)], -1).transpose(1, 2)
            pooled = [F.max_pool1d(F.relu(c(e)), c(e).size(2)).squeeze(2) for c in s.convs]
            return s.fc(s.drop(torch.cat(pooled, 1)))

    m = ctx.init(TextCNN())
    opt = torch.optim.Adadelta(filter(lambda p: p.requires_grad, m.parameters()), lr=1.0)
    ids = ctx.t(rng.integers(0, 30, (5, 9)))
    y = ctx.t(rng.integers(0, 4, 5))

    def step(ids, y):
        loss = F.cross_entropy(m(ids), y)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(m.parameters(), 3.0)
        opt.step()
        with torch.no_grad():  # max-norm constraint on the classifier's rows
            w = m.fc.weight
            w.copy_(torch.renorm(w, p=2, dim=0, maxnorm=1.0))
        return loss

    step = ctx.fn(step)
    out = [step(ids, y) for _ in range(3)]
    return {
        "out": out,
        "static_same": torch.equal(m.static.weight, vectors),
        "tuned": m.tuned.weight,
        "fc": m.fc.weight,
    }


PROGRAMS = [per_sample_hooks, lr_finder, multires_stft, schnet, lora, ewc, qat, textcnn]
CAPTURED = [lr_finder, multires_stft, schnet, lora, ewc, qat, textcnn]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
