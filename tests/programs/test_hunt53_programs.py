"""Programs of hunt53, each run on PyTorch and on ember: a word2vec skip-gram with negative
sampling (sparse embeddings, SparseAdam); a segmentation step with focal and dice losses
(one_hot, permute); label-smoothed, class-weighted cross-entropy with ignore_index on 3-D
logits; a scheduler chain (SequentialLR, OneCycleLR, CosineAnnealingWarmRestarts,
ReduceLROnPlateau) saved and resumed mid-run; a data pipeline (IterableDataset sharded by
get_worker_info, WeightedRandomSampler, BatchSampler, random_split, ConcatDataset, a
collate_fn of dicts); hooks with kwargs, full backward pre-hooks, tensor hooks that change
gradients and state_dict hooks; torch.func jacrev/jacfwd/hessian/vmap on a small energy model;
a Swin-style shifted-window attention with a relative position bias table; a VQ-VAE with a
straight-through estimator and EMA codebook; RealNVP with checkerboard masks; a dilated
causal TCN under weight_norm and spectral_norm parametrizations; a training checkpoint with
RNG states resumed to the same continuation.
"""

import inspect
import io

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408


def skipgram(torch, ctx):
    """Skip-gram with negative sampling: two sparse nn.Embedding tables, negatives drawn by
    torch.multinomial from unigram^0.75, bmm scores, logsigmoid loss, SparseAdam."""
    nn, F = torch.nn, torch.nn.functional
    vocab, dim = 20, 8

    class SGNS(nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = nn.Embedding(vocab, dim, sparse=True)
            self.out = nn.Embedding(vocab, dim, sparse=True)

        def forward(self, center, context, negatives):
            v = self.inp(center)  # (B, D)
            u = self.out(context)  # (B, D)
            n = self.out(negatives)  # (B, K, D)
            pos = F.logsigmoid((v * u).sum(-1))
            neg = F.logsigmoid(-torch.bmm(n, v.unsqueeze(-1)).squeeze(-1)).sum(-1)
            return -(pos + neg).mean()

    model = ctx.init(SGNS())
    opt = torch.optim.SparseAdam(list(model.parameters()), lr=0.05)
    counts = torch.arange(1, vocab + 1, dtype=torch.float32)
    probs = counts.pow(0.75)
    probs = probs / probs.sum()
    rng = np.random.default_rng(0)
    losses = []
    g = torch.Generator().manual_seed(5)
    for step in range(4):
        center = ctx.t(rng.integers(0, vocab, 16))
        context = ctx.t(rng.integers(0, vocab, 16))
        negatives = torch.multinomial(probs, 16 * 5, replacement=True, generator=g).view(16, 5)
        opt.zero_grad()
        loss = model(center, context, negatives)
        loss.backward()
        assert model.inp.weight.grad.is_sparse
        opt.step()
        losses.append(loss)
    sim = F.cosine_similarity(model.inp.weight[:1], model.inp.weight[1:])
    return [losses, negatives, model.state_dict(), sim, torch.topk(sim, 3).indices]


def segmentation_losses(torch, ctx):
    """A tiny segmentation net trained on focal + soft dice losses: one_hot of the target
    mask permuted to (N, C, H, W), log_softmax / gather for the focal term, an ignore mask."""
    nn, F = torch.nn, torch.nn.functional
    C = 3
    net = ctx.init(
        nn.Sequential(
            nn.Conv2d(2, 8, 3, padding=1, bias=False),  # (a bias before BN: Adam on noise)
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.Conv2d(8, C, 1),
        )
    )
    opt = torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=0.01)
    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((2, 2, 6, 6)).astype(np.float32))
    target = ctx.t(rng.integers(0, C, (2, 6, 6)))
    valid = ctx.t(rng.random((2, 6, 6)) > 0.2)

    def focal(logits, y, gamma=2.0, alpha=0.25):
        logp = F.log_softmax(logits, 1)
        logp_t = logp.gather(1, y.unsqueeze(1)).squeeze(1)
        p_t = logp_t.exp()
        loss = -alpha * (1 - p_t) ** gamma * logp_t
        return (loss * valid).sum() / valid.sum().clamp(min=1)

    def dice(logits, y, eps=1.0):
        probs = logits.softmax(1)
        onehot = F.one_hot(y, C).permute(0, 3, 1, 2).float()
        m = valid.unsqueeze(1).float()
        inter = (probs * onehot * m).sum((0, 2, 3))
        union = (probs * m).sum((0, 2, 3)) + (onehot * m).sum((0, 2, 3))
        return 1 - ((2 * inter + eps) / (union + eps)).mean()

    @ctx.fn
    def step(x, target):
        logits = net(x)
        loss = focal(logits, target) + dice(logits, target)
        loss.backward()
        return loss, logits.argmax(1)

    out = []
    for _ in range(3):
        opt.zero_grad()
        loss, pred = step(x, target)
        opt.step()
        out += [loss, pred]
    iou = []
    for c in range(C):
        inter = ((pred == c) & (target == c)).sum()
        union = ((pred == c) | (target == c)).sum()
        iou.append((inter.float() / union.clamp(min=1)).item())
    return out + [iou, net.state_dict()]


def smoothed_weighted_ce(torch, ctx):
    """CrossEntropyLoss with label_smoothing, class weights and ignore_index on (N, C, T)
    logits, each reduction, and probabilities as targets; gradients of all of them."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(2)
    logits = ctx.t(rng.standard_normal((3, 5, 7)).astype(np.float32), requires_grad=True)
    target = rng.integers(0, 5, (3, 7))
    target[0, :2] = -100
    target[2, 5] = 2
    target = ctx.t(target)
    weight = ctx.t(np.array([1.0, 2.0, 0.5, 1.5, 1.0], np.float32))
    out = []
    for reduction in ("mean", "sum", "none"):
        crit = nn.CrossEntropyLoss(
            weight=weight, ignore_index=-100, label_smoothing=0.1, reduction=reduction
        )
        loss = crit(logits, target)
        out.append(loss)
        (g,) = torch.autograd.grad(loss.sum(), logits)
        out.append(g)
    soft = F.softmax(ctx.t(rng.standard_normal((3, 5, 7)).astype(np.float32)), 1)
    loss = F.cross_entropy(logits, soft, weight=weight, label_smoothing=0.2)
    out.append(loss)
    out.append(torch.autograd.grad(loss, logits)[0])
    loss = F.nll_loss(F.log_softmax(logits, 1), target.clamp(min=0), weight=weight, ignore_index=2)
    out.append(loss)
    return out


def scheduler_chain(torch, ctx):
    """SequentialLR of LinearLR warmup then CosineAnnealingWarmRestarts; OneCycleLR with
    cycle_momentum on SGD; ReduceLROnPlateau; each saved mid-run (model, optimizer and
    scheduler state_dicts through torch.save/torch.load) and resumed in fresh objects."""
    nn = torch.nn
    out = []

    made = []

    def make():
        made.append(1)
        model = ctx.init(nn.Linear(4, 2), f"lin{len(made)}")
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        return model, opt

    rng = np.random.default_rng(3)
    X = ctx.t(rng.standard_normal((8, 4)).astype(np.float32))
    Y = ctx.t(rng.standard_normal((8, 2)).astype(np.float32))

    def train(model, opt, sched, steps, plateau=False):
        lrs = []
        for _ in range(steps):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(X), Y)
            loss.backward()
            opt.step()
            if plateau:
                sched.step(round(loss.item(), 2) if len(lrs) < 2 else 1.0)
            else:
                sched.step()
            lrs.append(opt.param_groups[0]["lr"])
        return lrs

    kinds = {
        "sequential": lambda opt: torch.optim.lr_scheduler.SequentialLR(
            opt,
            [
                torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=3),
                torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(
                    opt, T_0=3, T_mult=2, eta_min=1e-3
                ),
            ],
            milestones=[3],
        ),
        "onecycle": lambda opt: torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=0.5, total_steps=12, pct_start=0.25, anneal_strategy="cos"
        ),
        "plateau": lambda opt: torch.optim.lr_scheduler.ReduceLROnPlateau(
            opt, mode="min", factor=0.5, patience=1, threshold=0.01, cooldown=1
        ),
    }
    for name, make_sched in kinds.items():
        model, opt = make()
        sched = make_sched(opt)
        plateau = name == "plateau"
        lrs = train(model, opt, sched, 5, plateau)
        buf = io.BytesIO()
        torch.save({"m": model.state_dict(), "o": opt.state_dict(), "s": sched.state_dict()}, buf)
        buf.seek(0)
        ckpt = torch.load(buf, weights_only=False)
        model2, opt2 = make()
        sched2 = make_sched(opt2)
        model2.load_state_dict(ckpt["m"])
        opt2.load_state_dict(ckpt["o"])
        sched2.load_state_dict(ckpt["s"])
        lrs += train(model2, opt2, sched2, 6, plateau)
        out += [
            name,
            [round(v, 8) for v in lrs],
            model2.weight,
            opt2.param_groups[0].get("momentum"),
        ]
        out.append(sorted(k for k in ckpt["s"] if not k.startswith("_")))
    return out


def data_pipeline(torch, ctx):
    """torch.utils.data: an IterableDataset sharded across workers with get_worker_info
    (num_workers 0 and 2), WeightedRandomSampler, BatchSampler over a SequentialSampler,
    random_split with a generator, ConcatDataset and Subset, a collate_fn building dicts."""
    data = torch.utils.data

    class Stream(data.IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            info = data.get_worker_info()
            start, step = (0, 1) if info is None else (info.id, info.num_workers)
            for i in range(start, self.n, step):
                yield torch.tensor([i, i * i])

    out = []
    for workers in (0, 2):
        loader = data.DataLoader(Stream(7), batch_size=2, num_workers=workers)
        out.append(sorted(tuple(r) for b in loader for r in b.tolist()))

    class Squares(data.Dataset):
        def __len__(self):
            return 10

        def __getitem__(self, i):
            return {"x": torch.tensor([float(i)]), "y": i * i}

    ds = Squares()
    g = torch.Generator().manual_seed(0)
    train, val = data.random_split(ds, [0.7, 0.3], generator=g)
    out.append([train.indices, val.indices])
    both = data.ConcatDataset([train, data.Subset(ds, [0, 1])])
    out.append([len(both), both[len(train)]["y"], both.cumulative_sizes])
    weights = [0.1 * (i + 1) for i in range(len(both))]
    sampler = data.WeightedRandomSampler(
        weights, num_samples=6, replacement=True, generator=torch.Generator().manual_seed(1)
    )
    out.append(list(sampler))

    def collate(items):
        return {
            "x": torch.stack([it["x"] for it in items]),
            "y": torch.tensor([it["y"] for it in items]),
        }

    loader = data.DataLoader(both, batch_size=3, sampler=sampler, collate_fn=collate)
    out.append([(b["x"], b["y"]) for b in loader])
    bs = data.BatchSampler(data.SequentialSampler(range(7)), batch_size=3, drop_last=False)
    out.append(list(bs))
    loader = data.DataLoader(
        ds,
        batch_sampler=data.BatchSampler(
            data.RandomSampler(ds, generator=torch.Generator().manual_seed(2)), 4, True
        ),
    )
    out.append([(b["x"].squeeze(-1), b["y"]) for b in loader])
    out.append(data.default_collate([(1, 2.0, "a"), (3, 4.0, "b")]))
    return out


def hooks_everywhere(torch, ctx):
    """register_forward_pre_hook(with_kwargs=True) rewriting kwargs, forward hooks with
    kwargs, full backward pre-hooks scaling grad_output, full backward hooks, a tensor hook
    changing a gradient, register_state_dict_pre_hook / _register_state_dict_hook and
    register_load_state_dict_post_hook; removing handles."""
    nn = torch.nn
    log = []

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x, scale=1.0):
            return self.lin(x) * scale

    m = ctx.init(Block())

    def pre(mod, args, kwargs):
        log.append(("pre", sorted(kwargs)))
        return args, {**kwargs, "scale": 2.0}

    def fwd(mod, args, kwargs, output):
        log.append(("fwd", kwargs["scale"]))
        return output + 1

    def bpre(mod, grad_output):
        log.append(("bpre", tuple(grad_output[0].shape)))
        return (grad_output[0] * 3,)

    def bwd(mod, grad_input, grad_output):
        log.append(("bwd", len(grad_input)))

    h1 = m.register_forward_pre_hook(pre, with_kwargs=True)
    h2 = m.register_forward_hook(fwd, with_kwargs=True)
    h3 = m.register_full_backward_pre_hook(bpre)
    h4 = m.register_full_backward_hook(bwd)
    x = ctx.t(np.arange(6.0, dtype=np.float32).reshape(2, 3), requires_grad=True)
    y = m(x, scale=0.5)
    th = y.register_hook(lambda g: g.clamp(max=0.5))
    y.sum().backward()
    grads = [x.grad.clone(), m.lin.weight.grad.clone()]
    for h in (h1, h2, h3, h4, th):
        h.remove()
    x.grad = None
    m.zero_grad()
    y2 = m(x, scale=0.5)
    y2.sum().backward()
    grads += [x.grad, m.lin.weight.grad]

    def sd_pre(mod, prefix, keep_vars):
        log.append(("sd_pre", prefix))

    m.register_state_dict_pre_hook(sd_pre)
    sd = m.state_dict()

    def load_post(mod, incompatible):
        log.append(
            ("load_post", list(incompatible.missing_keys), list(incompatible.unexpected_keys))
        )

    m.register_load_state_dict_post_hook(load_post)
    sd = {k: v * 0 for k, v in sd.items()}
    sd["extra"] = torch.zeros(1)
    result = m.load_state_dict(sd, strict=False)
    log.append(("result", list(result.unexpected_keys)))
    return [y, y2, grads, log, m.state_dict()]


def func_energy(torch, ctx):
    """A small energy model differentiated with torch.func: grad of the energy in x, jacrev
    and jacfwd of the force, hessian, vmap over a batch with in_dims (0, None), and
    functional_call on a swapped parameter dict; a Langevin step with no_grad."""
    nn = torch.nn
    functional_call, grad, vmap = torch.func.functional_call, torch.func.grad, torch.func.vmap
    jacrev, jacfwd, hessian = torch.func.jacrev, torch.func.jacfwd, torch.func.hessian

    model = ctx.init(nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1)))
    params = {k: v.detach() for k, v in model.named_parameters()}

    def energy(p, x):
        return functional_call(model, p, (x,)).squeeze(-1).sum()

    x = ctx.t(np.array([0.3, -0.7], np.float32))
    force = grad(energy, argnums=1)(params, x)
    jr = jacrev(grad(energy, argnums=1), argnums=1)(params, x)
    jf = jacfwd(grad(energy, argnums=1), argnums=1)(params, x)
    h = hessian(energy, argnums=1)(params, x)
    batch = ctx.t(np.random.default_rng(4).standard_normal((5, 2)).astype(np.float32))
    per = vmap(grad(energy, argnums=1), in_dims=(None, 0))(params, batch)
    pgrad = grad(energy)(params, x)
    scaled = {k: v * 0.5 for k, v in params.items()}
    e2 = vmap(energy, in_dims=(None, 0))(scaled, batch)
    g = torch.Generator().manual_seed(7)
    xs = batch.clone()
    for _ in range(3):
        f = vmap(grad(energy, argnums=1), in_dims=(None, 0))(params, xs)
        with torch.no_grad():
            xs = xs - 0.1 * f + 0.05 * torch.randn(xs.shape, generator=g)
    return [force, jr, jf, h, per, pgrad, e2, xs]


def swin_block(torch, ctx):
    """Swin-style shifted-window attention: torch.roll, window partition/reverse by view and
    permute, a relative position bias table indexed by a registered buffer, the shifted
    window mask by masked_fill, trained two steps (eager and captured)."""
    nn, F = torch.nn, torch.nn.functional
    W, D, H = 2, 8, 2

    class WindowAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(D, 3 * D)
            self.proj = nn.Linear(D, D)
            self.table = nn.Parameter(torch.zeros((2 * W - 1) ** 2, H))
            nn.init.trunc_normal_(self.table, std=0.02)
            coords = torch.stack(
                torch.meshgrid(torch.arange(W), torch.arange(W), indexing="ij")
            ).flatten(1)
            rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()
            rel[:, :, 0] += W - 1
            rel[:, :, 1] += W - 1
            rel[:, :, 0] *= 2 * W - 1
            self.register_buffer("index", rel.sum(-1), persistent=False)

        def forward(self, x, mask=None):
            B, N, _ = x.shape
            q, k, v = self.qkv(x).reshape(B, N, 3, H, D // H).permute(2, 0, 3, 1, 4).unbind(0)
            attn = (q * (D // H) ** -0.5) @ k.transpose(-2, -1)
            bias = self.table[self.index.view(-1)].view(N, N, H).permute(2, 0, 1)
            attn = attn + bias.unsqueeze(0)
            if mask is not None:
                nw = mask.shape[0]
                attn = attn.view(B // nw, nw, H, N, N) + mask.unsqueeze(1).unsqueeze(0)
                attn = attn.view(-1, H, N, N)
            attn = attn.softmax(-1)
            return self.proj((attn @ v).transpose(1, 2).reshape(B, N, D))

    def partition(x):
        B, Hh, Ww, C = x.shape
        x = x.view(B, Hh // W, W, Ww // W, W, C)
        return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, W * W, C)

    def reverse(w, Hh, Ww):
        B = w.shape[0] // (Hh * Ww // W // W)
        x = w.view(B, Hh // W, Ww // W, W, W, -1)
        return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, Hh, Ww, -1)

    torch.manual_seed(0)
    attn = WindowAttention()
    ctx.init(attn)
    norm = ctx.init(nn.LayerNorm(D), "norm")
    Hh = Ww = 4
    s = W // 2
    img = torch.zeros(1, Hh, Ww, 1)
    cnt = 0
    for hs in (slice(0, -W), slice(-W, -s), slice(-s, None)):
        for ws in (slice(0, -W), slice(-W, -s), slice(-s, None)):
            img[:, hs, ws, :] = cnt
            cnt += 1
    mw = partition(img).squeeze(-1)
    mask = (
        (mw.unsqueeze(1) - mw.unsqueeze(2))
        .masked_fill(lambda_ne := (mw.unsqueeze(1) - mw.unsqueeze(2)) != 0, -100.0)
        .masked_fill(~lambda_ne, 0.0)
    )
    params = list(attn.parameters()) + list(norm.parameters())
    opt = torch.optim.Adam(params, lr=1e-2)
    x = ctx.t(np.random.default_rng(5).standard_normal((2, Hh, Ww, D)).astype(np.float32))

    @ctx.fn
    def step(x):
        h = norm(x)
        h = torch.roll(h, shifts=(-s, -s), dims=(1, 2))
        h = reverse(attn(partition(h), mask), Hh, Ww)
        h = torch.roll(h, shifts=(s, s), dims=(1, 2))
        y = x + h
        loss = (y**2).mean()
        loss.backward()
        return loss, y

    out = []
    for _ in range(2):
        opt.zero_grad()
        loss, y = step(x)
        opt.step()
        out += [loss, y]
    return out + [mask, attn.table.grad]


def vqvae(torch, ctx):
    """VQ-VAE: encoder, nearest codebook entry by torch.cdist and argmin, the straight-through
    estimator x + (q - x).detach(), commitment loss, EMA codebook updates by in-place ops
    under no_grad (index_add_, mul_, add_), perplexity from bincount."""
    nn, F = torch.nn, torch.nn.functional
    K, D = 6, 4
    enc = ctx.init(nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, D)), "enc")
    dec = ctx.init(nn.Sequential(nn.Linear(D, 16), nn.ReLU(), nn.Linear(16, 5)), "dec")
    rng = np.random.default_rng(6)
    codebook = ctx.t(rng.standard_normal((K, D)).astype(np.float32))
    ema_count = torch.ones(K)
    ema_sum = codebook.clone()
    opt = torch.optim.Adam(list(enc.parameters()) + list(dec.parameters()), lr=3e-3)
    X = ctx.t(rng.standard_normal((24, 5)).astype(np.float32))
    out = []
    for step in range(3):
        z = enc(X)
        d = torch.cdist(z, codebook)
        codes = d.argmin(1)
        q = codebook[codes]
        zq = z + (q - z).detach()
        recon = dec(zq)
        loss = F.mse_loss(recon, X) + 0.25 * F.mse_loss(z, q.detach())
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            onehot = F.one_hot(codes, K).float()
            ema_count.mul_(0.9).add_(onehot.sum(0), alpha=0.1)
            ema_sum.mul_(0.9).index_add_(0, codes, z.detach() * 0.1)
            n = ema_count.sum()
            count = (ema_count + 1e-5) / (n + K * 1e-5) * n
            codebook.copy_(ema_sum / count.unsqueeze(1))
        usage = torch.bincount(codes, minlength=K).float() / codes.numel()
        perplexity = torch.exp(-(usage * torch.log(usage + 1e-10)).sum())
        out += [loss, codes, perplexity]
    return out + [codebook, ema_count, enc.state_dict()]


def realnvp_checkerboard(torch, ctx):
    """RealNVP on 2-D points with alternating masks: coupling layers with tanh-scaled s and t,
    the log-determinant as a sum, the base log-prob by torch.distributions, the inverse pass
    recovering the input, and sampling under a generator."""
    nn = torch.nn
    D = 4

    class Coupling(nn.Module):
        def __init__(self, mask):
            super().__init__()
            self.register_buffer("mask", mask)
            self.s = nn.Sequential(nn.Linear(D, 16), nn.ReLU(), nn.Linear(16, D), nn.Tanh())
            self.t = nn.Sequential(nn.Linear(D, 16), nn.ReLU(), nn.Linear(16, D))

        def forward(self, x):
            xm = x * self.mask
            s = self.s(xm) * (1 - self.mask)
            t = self.t(xm) * (1 - self.mask)
            return xm + (1 - self.mask) * (x * torch.exp(s) + t), s.sum(-1)

        def inverse(self, y):
            ym = y * self.mask
            s = self.s(ym) * (1 - self.mask)
            t = self.t(ym) * (1 - self.mask)
            return ym + (1 - self.mask) * ((y - t) * torch.exp(-s))

    masks = [torch.tensor([1.0, 0.0, 1.0, 0.0]), torch.tensor([0.0, 1.0, 0.0, 1.0])] * 2
    flow = ctx.init(nn.ModuleList([Coupling(m) for m in masks]))
    base = torch.distributions.MultivariateNormal(torch.zeros(D), torch.eye(D))
    opt = torch.optim.Adam(flow.parameters(), lr=1e-2)
    scale = np.array([1, 2, 0.5, 1], np.float32)
    X = ctx.t(np.random.default_rng(7).standard_normal((32, D)).astype(np.float32) * scale + 1)

    def log_prob(x):
        logdet = torch.zeros(x.shape[0])
        for layer in flow:
            x, ld = layer(x)
            logdet = logdet + ld
        return base.log_prob(x) + logdet, x

    out = []
    for _ in range(3):
        lp, z = log_prob(X)
        loss = -lp.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append(loss)
    with torch.no_grad():
        _, z = log_prob(X)
        back = z
        for layer in reversed(flow):
            back = layer.inverse(back)
        g = torch.Generator().manual_seed(3)
        samples = torch.randn(5, D, generator=g)
        for layer in reversed(flow):
            samples = layer.inverse(samples)
    return out + [z, back, samples]


def tcn_parametrized(torch, ctx):
    """A temporal convolution network: dilated causal Conv1d (left padding by F.pad), residual
    blocks, parametrizations.weight_norm on the convolutions and spectral_norm on the head,
    trained with the parametrized weights' original0/original1 in the optimizer."""
    nn, F = torch.nn, torch.nn.functional
    P = nn.utils.parametrizations

    class Block(nn.Module):
        def __init__(self, cin, cout, dilation):
            super().__init__()
            self.pad = 2 * dilation
            self.conv = P.weight_norm(nn.Conv1d(cin, cout, 3, dilation=dilation))
            self.down = nn.Conv1d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x):
            y = F.relu(self.conv(F.pad(x, (self.pad, 0))))
            return F.relu(y + self.down(x))

    class TCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.Sequential(Block(2, 6, 1), Block(6, 6, 2), Block(6, 6, 4))
            self.head = P.spectral_norm(nn.Linear(6, 1))

        def forward(self, x):
            return self.head(self.blocks(x)[:, :, -1])

    torch.manual_seed(0)
    model = TCN()
    ctx.init(model)
    names = sorted(k for k, _ in model.named_parameters())
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(8)
    x = ctx.t(rng.standard_normal((4, 2, 12)).astype(np.float32))
    y = ctx.t(rng.standard_normal((4, 1)).astype(np.float32))
    out = [names]
    model.train()
    for _ in range(3):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        out.append(loss)
    model.eval()
    with torch.no_grad():
        out.append(model(x))
        out.append(model.blocks[0].conv.weight)
    out.append(sorted(model.state_dict()))
    return out


def resume_with_rng(torch, ctx):
    """A training checkpoint with the model, optimizer, scheduler and the RNG state
    (torch.get_rng_state / set_rng_state, a Generator's get_state), resumed into fresh objects:
    the continuation (dropout masks, shuffled batches) equals the uninterrupted run."""
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(9)
    X = ctx.t(rng.standard_normal((16, 6)).astype(np.float32))
    Y = ctx.t(rng.integers(0, 3, 16))

    made = []

    def make():
        made.append(1)
        layers = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Dropout(0.3), nn.Linear(12, 3))
        model = ctx.init(layers, f"model{len(made)}")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        sched = torch.optim.lr_scheduler.StepLR(opt, 2, 0.5)
        return model, opt, sched

    def run(model, opt, sched, gen, steps):
        losses = []
        for _ in range(steps):
            perm = torch.randperm(16, generator=gen)[:8]
            opt.zero_grad()
            loss = F.cross_entropy(model(X[perm]), Y[perm])
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss)
        return losses

    torch.manual_seed(11)
    gen = torch.Generator().manual_seed(12)
    model, opt, sched = make()
    straight = run(model, opt, sched, gen, 6)
    final = model.state_dict()

    torch.manual_seed(11)
    gen = torch.Generator().manual_seed(12)
    model, opt, sched = make()
    first = run(model, opt, sched, gen, 3)
    buf = io.BytesIO()
    torch.save(
        {
            "model": model.state_dict(),
            "opt": opt.state_dict(),
            "sched": sched.state_dict(),
            "rng": torch.get_rng_state(),
            "gen": gen.get_state(),
        },
        buf,
    )
    torch.manual_seed(999)  # (the state in between is lost)
    buf.seek(0)
    ckpt = torch.load(buf)
    model, opt, sched = make()
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
    sched.load_state_dict(ckpt["sched"])
    torch.set_rng_state(ckpt["rng"])
    gen = torch.Generator()
    gen.set_state(ckpt["gen"])
    rest = run(model, opt, sched, gen, 3)
    same = all(torch.equal(a, b) for a, b in zip(final.values(), model.state_dict().values()))
    return [
        straight,
        first + rest,
        same,
        ckpt["rng"].dtype,
        ckpt["rng"].shape,
        opt.state_dict()["state"][0]["step"],
    ]


PROGRAMS = [
    skipgram,
    segmentation_losses,
    smoothed_weighted_ce,
    scheduler_chain,
    data_pipeline,
    hooks_everywhere,
    func_energy,
    swin_block,
    vqvae,
    realnvp_checkerboard,
    tcn_parametrized,
    resume_with_rng,
]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


CAPTURED = [p for p in PROGRAMS if "@ctx.fn" in inspect.getsource(p)]


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
