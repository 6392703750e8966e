"""Training machinery as users write it: CLIP's contrastive loss with a learned logit scale,
SimCLR's NT-Xent, knowledge distillation with a temperature, gradient accumulation under bfloat16
autocast with a GradScaler, OneCycleLR and warm restarts stepped by epoch fractions with their
state dicts, a mid-training checkpoint round trip through BytesIO, new-style custom autograd
Functions, module hooks with kwargs, metrics from bincount, policy gradients with
torch.distributions.
"""

import io

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741


def clip_contrastive(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class CLIP(nn.Module):
        def __init__(s):
            super().__init__()
            s.visual = nn.Sequential(
                nn.Conv2d(3, 4, 3, 2, 1), nn.GELU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()
            )
            s.vproj = nn.Parameter(torch.randn(4, 6) * 4**-0.5)
            s.tok = nn.Embedding(10, 6)
            s.tproj = nn.Linear(6, 6, bias=False)
            s.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))

        def encode_text(s, ids):
            h = s.tok(ids)
            eot = h[torch.arange(h.shape[0]), ids.argmax(dim=-1)]
            return s.tproj(eot)

        def forward(s, img, ids):
            im = s.visual(img) @ s.vproj
            tx = s.encode_text(ids)
            im = im / im.norm(dim=1, keepdim=True)
            tx = F.normalize(tx, dim=-1)
            scale = s.logit_scale.exp()
            logits_per_image = scale * im @ tx.t()
            return logits_per_image, logits_per_image.t()

    m = ctx.init(CLIP())
    opt = torch.optim.AdamW(m.parameters(), lr=5e-3, betas=(0.9, 0.98), eps=1e-6)
    rng = np.random.default_rng(0)
    img = ctx.t(rng.standard_normal((4, 3, 6, 6)).astype(np.float32))
    ids = ctx.t(np.array([[1, 3, 9, 0], [2, 9, 0, 0], [4, 5, 6, 9], [9, 0, 0, 0]]))

    def step(img, ids):
        li, lt = m(img, ids)
        labels = torch.arange(li.shape[0], dtype=torch.long)
        loss = (F.cross_entropy(li, labels) + F.cross_entropy(lt, labels)) / 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            m.logit_scale.clamp_(0, 4.6052)
        acc = (li.argmax(-1) == labels).float().mean()
        return loss, acc

    step = ctx.fn(step)
    out = [step(img, ids) for _ in range(3)]
    return {"out": out, "scale": m.logit_scale, "vp": m.vproj}


def simclr(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def nt_xent(z1, z2, tau=0.5):
        N = z1.shape[0]
        z = torch.cat([z1, z2], dim=0)
        sim = F.cosine_similarity(z.unsqueeze(1), z.unsqueeze(0), dim=2) / tau
        mask = torch.eye(2 * N, dtype=torch.bool)
        sim = sim.masked_fill(mask, -9e15)
        targets = torch.arange(2 * N)
        targets = (targets + N) % (2 * N)
        return F.cross_entropy(sim, targets)

    def info_nce(z1, z2, tau=0.2):
        z1, z2 = F.normalize(z1, dim=1), F.normalize(z2, dim=1)
        sim = torch.mm(z1, z2.T) / tau
        pos = torch.diag(sim)
        return (-pos + torch.logsumexp(sim, dim=1)).mean()

    enc = ctx.init(
        nn.Sequential(
            nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 16, bias=False)
        ),
        "enc",
    )
    proj = ctx.init(nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4)), "proj")
    opt = torch.optim.SGD([*enc.parameters(), *proj.parameters()], lr=0.3, momentum=0.9)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 8)).astype(np.float32)
    v1 = ctx.t(x + 0.1 * rng.standard_normal(x.shape).astype(np.float32))
    v2 = ctx.t(x * rng.uniform(0.8, 1.2, x.shape).astype(np.float32))

    def step(v1, v2):
        z1, z2 = proj(enc(v1)), proj(enc(v2))
        loss = nt_xent(z1, z2) + 0.5 * info_nce(z1, z2)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    losses = [step(v1, v2) for _ in range(3)]
    # linear evaluation on frozen features
    enc.eval()
    with torch.no_grad():
        feats = enc(v1)
    clf = ctx.init(nn.Linear(16, 2), "clf")
    o2 = torch.optim.LBFGS(clf.parameters(), lr=0.5, max_iter=5, history_size=3)
    y = ctx.t(np.array([0, 1, 0, 1, 1, 0]))

    def closure():
        o2.zero_grad()
        l = F.cross_entropy(clf(feats), y)
        l.backward()
        return l

    lin = [o2.step(closure) for _ in range(2)]
    return {"l": losses, "lin": lin, "w": clf.weight}


def distillation(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    teacher = ctx.init(
        nn.Sequential(nn.Linear(6, 24), nn.ReLU(), nn.Dropout(0.5), nn.Linear(24, 5)), "t"
    )
    student = ctx.init(nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 5)), "s")
    teacher.eval()
    teacher.requires_grad_(False)
    opt = torch.optim.Adam(student.parameters(), lr=1e-2)
    rng = np.random.default_rng(2)
    x = ctx.t(rng.standard_normal((8, 6)).astype(np.float32))
    y = ctx.t(rng.integers(0, 5, 8))
    T, alpha = 4.0, 0.7

    def step(x, y):
        with torch.no_grad():
            t_logits = teacher(x)
        s_logits = student(x)
        soft = F.kl_div(
            F.log_softmax(s_logits / T, dim=-1),
            F.log_softmax(t_logits / T, dim=-1),
            reduction="batchmean",
            log_target=True,
        ) * (T * T)
        soft2 = nn.KLDivLoss(reduction="batchmean")(
            F.log_softmax(s_logits / T, dim=1), F.softmax(t_logits / T, dim=1)
        )
        hard = F.cross_entropy(s_logits, y)
        loss = alpha * soft + (1 - alpha) * hard
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, soft2 * T * T - soft

    step = ctx.fn(step)
    out = [step(x, y) for _ in range(3)]
    grads = [p.grad is None for p in teacher.parameters()]
    return {"out": out, "g": grads, "w": student[0].weight}


def accum_amp(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    m = ctx.init(nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.GELU(), nn.Linear(16, 3)))
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, fused=False)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8, growth_interval=2)
    rng = np.random.default_rng(3)
    xs = [ctx.t(rng.standard_normal((4, 8)).astype(np.float32)) for _ in range(4)]
    ys = [ctx.t(rng.integers(0, 3, 4)) for _ in range(4)]
    accum = 2
    losses, norms, dtypes = [], [], []
    for i, (x, y) in enumerate(zip(xs, ys)):
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            out = m(x)
            loss = F.cross_entropy(out, y) / accum
        dtypes.append(out.dtype)
        scaler.scale(loss).backward()
        losses.append(loss.float())
        if (i + 1) % accum == 0:
            scaler.unscale_(opt)
            norms.append(torch.nn.utils.clip_grad_norm_(m.parameters(), max_norm=1.0))
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
    sd = scaler.state_dict()
    return {
        "l": losses,
        "n": norms,
        "dt": dtypes,
        "scale": float(scaler.get_scale()),
        "sd": {k: float(v) for k, v in sd.items() if k in ("scale", "_growth_tracker")},
        "w": m[0].weight,
    }


def schedulers(torch, ctx):
    nn = torch.nn
    m = ctx.init(nn.Linear(3, 2))
    rng = np.random.default_rng(4)
    x = ctx.t(rng.standard_normal((5, 3)).astype(np.float32))

    def train(opt, sched, epochs, iters, fractional):
        lrs, moms = [], []
        for ep in range(epochs):
            for i in range(iters):
                loss = m(x).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
                if fractional:
                    sched.step(ep + i / iters)
                else:
                    sched.step()
                lrs.append(opt.param_groups[0]["lr"])
                g = opt.param_groups[0]
                moms.append(g["betas"][0] if "betas" in g else g.get("momentum", 0.0))
        return lrs, moms

    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    oc = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=0.05, total_steps=8, pct_start=0.25, anneal_strategy="cos", div_factor=10
    )
    a = train(opt, oc, 2, 3, False)
    sd = oc.state_dict()
    opt2 = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    wr = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt2, T_0=1, T_mult=2, eta_min=1e-3)
    b = train(opt2, wr, 4, 2, True)
    opt3 = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    oc3 = torch.optim.lr_scheduler.OneCycleLR(
        opt3, max_lr=0.2, epochs=2, steps_per_epoch=3, three_phase=True, anneal_strategy="linear"
    )
    c = train(opt3, oc3, 2, 3, False)
    opt4 = torch.optim.SGD(m.parameters(), lr=0.1)
    ch = torch.optim.lr_scheduler.ChainedScheduler(
        [
            torch.optim.lr_scheduler.ConstantLR(opt4, factor=0.5, total_iters=2),
            torch.optim.lr_scheduler.ExponentialLR(opt4, gamma=0.9),
        ]
    )
    d = train(opt4, ch, 1, 4, False)
    opt5 = torch.optim.SGD(m.parameters(), lr=0.1)
    cyc = torch.optim.lr_scheduler.CyclicLR(
        opt5, base_lr=0.01, max_lr=0.1, step_size_up=2, mode="triangular2"
    )
    e = train(opt5, cyc, 1, 6, False)
    keys = sorted(k for k in sd if k in ("total_steps", "base_lrs", "last_epoch", "_last_lr"))
    return {
        "a": a,
        "b": b,
        "c": c,
        "d": d,
        "e": e,
        "keys": keys,
        "sd_step": sd["last_epoch"],
        "w": m.weight,
    }


def checkpoint_resume(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(s):
            super().__init__()
            s.fc1 = nn.Linear(4, 8)
            s.bn = nn.BatchNorm1d(8)
            s.fc2 = nn.Linear(8, 2)
            s.register_buffer("steps", torch.zeros((), dtype=torch.long))
            s.register_buffer("cache", torch.zeros(3), persistent=False)

        def forward(s, x):
            s.steps += 1
            return s.fc2(F.relu(s.bn(s.fc1(x))))

    rng = np.random.default_rng(5)
    data = [
        (ctx.t(rng.standard_normal((6, 4)).astype(np.float32)), ctx.t(rng.integers(0, 2, 6)))
        for _ in range(4)
    ]

    def make():
        torch.manual_seed(0)  # (the same initial weights in every make() on PyTorch)
        m = ctx.init(Net())
        o = torch.optim.Adam(
            [
                {"params": [m.fc1.weight, m.fc2.weight], "weight_decay": 1e-2},
                {"params": [m.fc1.bias, m.fc2.bias, *m.bn.parameters()], "lr": 3e-3},
            ],
            lr=1e-2,
        )
        s = torch.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.5)
        return m, o, s

    def run(m, o, s, batches):
        ls = []
        for x, y in batches:
            loss = F.cross_entropy(m(x), y)
            o.zero_grad()
            loss.backward()
            o.step()
            s.step()
            ls.append(loss.item())
        return ls

    m, o, s = make()
    full = run(m, o, s, data)
    m2, o2, s2 = make()
    first = run(m2, o2, s2, data[:2])
    buf = io.BytesIO()
    torch.save(
        {"model": m2.state_dict(), "optim": o2.state_dict(), "sched": s2.state_dict(), "ep": 2},
        buf,
    )
    buf.seek(0)
    ck = torch.load(buf, weights_only=True)
    m3, o3, s3 = make()
    m3.load_state_dict(ck["model"])
    o3.load_state_dict(ck["optim"])
    s3.load_state_dict(ck["sched"])
    rest = run(m3, o3, s3, data[2:])
    st = o3.state_dict()
    return {
        "full": full,
        "resumed": first + rest,
        "w": [m.fc1.weight, m3.fc1.weight],
        "keys": sorted(ck["model"].keys()),
        "steps": m3.steps,
        "groups": [g["lr"] for g in o3.param_groups],
        "state_ids": sorted(st["state"].keys()),
        "exp_avg": st["state"][4]["exp_avg"],
        "ep": ck["ep"],
    }


def custom_functions(torch, ctx):
    nn = torch.nn

    class ClampSTE(torch.autograd.Function):
        @staticmethod
        def forward(x, lo, hi):
            return x.clamp(lo, hi)

        @staticmethod
        def setup_context(ctx_, inputs, output):
            x, lo, hi = inputs
            ctx_.save_for_backward(x)
            ctx_.lo, ctx_.hi = lo, hi

        @staticmethod
        def backward(ctx_, g):
            (x,) = ctx_.saved_tensors
            inside = (x >= ctx_.lo) & (x <= ctx_.hi)
            return g * inside + 0.1 * g * ~inside, None, None

    class SortWithIndex(torch.autograd.Function):
        @staticmethod
        def forward(ctx_, x):
            vals, idx = x.sort(dim=-1)
            ctx_.mark_non_differentiable(idx)
            ctx_.save_for_backward(idx)
            return vals, idx

        @staticmethod
        @torch.autograd.function.once_differentiable
        def backward(ctx_, gv, gi):
            (idx,) = ctx_.saved_tensors
            return torch.zeros_like(gv).scatter_(-1, idx, gv)

    class SplitGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx_, a, b):
            ctx_.set_materialize_grads(False)
            return a * 2, b * 3

        @staticmethod
        def backward(ctx_, ga, gb):
            ra = None if ga is None else ga * 2
            rb = None if gb is None else gb * 3
            return ra, rb

    class Swish(torch.autograd.Function):
        @staticmethod
        def forward(ctx_, x, beta):
            ctx_.save_for_backward(x, beta)
            return x * torch.sigmoid(beta * x)

        @staticmethod
        def backward(ctx_, g):
            x, beta = ctx_.saved_tensors
            s = torch.sigmoid(beta * x)
            dx = s + x * beta * s * (1 - s)
            db = (x * x * s * (1 - s) * g).sum()
            return g * dx, db if ctx_.needs_input_grad[1] else None

    lin = ctx.init(nn.Linear(5, 5))
    beta = nn.Parameter(torch.tensor(1.5))
    opt = torch.optim.SGD([*lin.parameters(), beta], lr=0.1)
    rng = np.random.default_rng(6)
    x = ctx.t(rng.standard_normal((3, 5)).astype(np.float32))

    def step(x):
        h = ClampSTE.apply(lin(x), -0.5, 0.5)
        h = Swish.apply(h, beta)
        vals, idx = SortWithIndex.apply(h)
        a, b = SplitGrad.apply(vals, h)
        loss = (a * torch.linspace(0, 1, 5)).sum() + 0 * b.detach().sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, idx, idx.requires_grad, beta.grad

    step = ctx.fn(step)
    out = [step(x) for _ in range(2)]
    xg = x.clone().requires_grad_()
    ok = torch.autograd.gradcheck(
        lambda t: Swish.apply(t, torch.tensor(0.7, dtype=torch.float64)),
        (xg.double().detach().requires_grad_(),),
    )
    return {"out": out, "w": lin.weight, "beta": beta, "gc": ok}


def module_hooks(torch, ctx):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(s):
            super().__init__()
            s.fc = nn.Linear(4, 4)

        def forward(s, x, scale=1.0, *, shift=None):
            h = s.fc(x) * scale
            return h if shift is None else h + shift

    m = ctx.init(nn.Sequential(Block(), nn.ReLU(), Block()))
    log = []

    def pre(mod, args, kwargs):
        log.append(("pre", sorted(kwargs)))
        kwargs = dict(kwargs)
        kwargs["scale"] = 0.5
        return args, kwargs

    def post(mod, args, kwargs, out):
        log.append(("post", tuple(out.shape), kwargs.get("scale")))
        return out + 1.0

    def bpre(mod, grad_out):
        log.append(("bpre", len(grad_out)))
        return (grad_out[0] * 2,)

    def bfull(mod, grad_in, grad_out):
        log.append(("bfull", grad_in[0] is None, tuple(grad_out[0].shape)))

    h1 = m[0].register_forward_pre_hook(pre, with_kwargs=True)
    h2 = m[0].register_forward_hook(post, with_kwargs=True)
    h3 = m[2].register_full_backward_pre_hook(bpre)
    h4 = m[2].register_full_backward_hook(bfull)
    feats = {}
    h5 = m[1].register_forward_hook(lambda mod, i, o: feats.__setitem__("relu", o.detach()))
    rng = np.random.default_rng(7)
    x = ctx.t(rng.standard_normal((2, 4)).astype(np.float32), requires_grad=True)
    y = m[2](m[1](m[0](x, shift=torch.ones(4))))
    y.sum().backward()
    g1 = m[0].fc.weight.grad.clone()
    for h in (h1, h2, h3, h4, h5):
        h.remove()
    m.zero_grad()
    y2 = m(x)
    y2.sum().backward()
    return {"y": y, "g1": g1, "xg": x.grad, "log": log, "relu": feats["relu"], "y2": y2}


def metrics(torch, ctx):
    rng = np.random.default_rng(8)
    C = 4
    target = ctx.t(rng.integers(0, C, 50))
    logits = ctx.t(rng.standard_normal((50, C)).astype(np.float32))
    pred = logits.argmax(1)
    cm = torch.bincount(target * C + pred, minlength=C * C).reshape(C, C)
    tp = cm.diag()
    precision = tp / cm.sum(0).clamp(min=1)
    recall = tp / cm.sum(1).clamp(min=1)
    f1 = 2 * precision * recall / (precision + recall + 1e-12)
    iou = tp / (cm.sum(0) + cm.sum(1) - tp)
    _, top2 = logits.topk(2, 1, True, True)
    correct = top2.t().eq(target.view(1, -1).expand_as(top2.t()))
    top2_acc = correct[:2].reshape(-1).float().sum(0, keepdim=True).mul_(100.0 / 50)
    # binary AUROC from the ranks of the scores
    scores = torch.sigmoid(logits[:, 0])
    labels = (target == 0).long()
    order = torch.argsort(scores, descending=True)
    tps = torch.cumsum(labels[order], 0).float()
    fps = torch.cumsum(1 - labels[order], 0).float()
    tpr = torch.cat([torch.zeros(1), tps / tps[-1]])
    fpr = torch.cat([torch.zeros(1), fps / fps[-1]])
    auc = torch.trapezoid(tpr, fpr)
    vals, inv, counts = torch.unique(target, sorted=True, return_inverse=True, return_counts=True)
    hist = torch.histc(scores, bins=5, min=0.0, max=1.0)
    bal = torch.nan_to_num(recall, nan=0.0).mean()
    weights = 1.0 / torch.bincount(target).float()
    sample_w = weights[target]
    ece_bins = torch.bucketize(scores, torch.linspace(0, 1, 6)[1:-1])
    ece = torch.zeros(5).scatter_add_(0, ece_bins, (scores - labels.float()).abs())
    return {
        "cm": cm,
        "p": precision,
        "r": recall,
        "f1": f1,
        "iou": iou,
        "miou": iou.nanmean(),
        "top2": top2_acc,
        "auc": auc,
        "u": [vals, inv, counts],
        "hist": hist,
        "bal": bal,
        "sw": sample_w,
        "ece": ece,
        "cnt": torch.count_nonzero(cm, dim=0),
    }


def policy_gradient(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    D = torch.distributions

    class ActorCritic(nn.Module):
        def __init__(s):
            super().__init__()
            s.body = nn.Sequential(nn.Linear(4, 16), nn.Tanh())
            s.pi = nn.Linear(16, 3)
            s.mu = nn.Linear(16, 2)
            s.log_std = nn.Parameter(torch.zeros(2) - 0.5)
            s.v = nn.Linear(16, 1)

        def forward(s, obs):
            h = s.body(obs)
            cat = D.Categorical(logits=s.pi(h))
            base = D.Normal(s.mu(h), s.log_std.exp())
            squashed = D.TransformedDistribution(base, [D.transforms.TanhTransform(cache_size=1)])
            return cat, D.Independent(base, 1), squashed, s.v(h).squeeze(-1)

    m = ctx.init(ActorCritic())
    opt = torch.optim.Adam(m.parameters(), lr=3e-3)
    rng = np.random.default_rng(9)
    obs = ctx.t(rng.standard_normal((5, 4)).astype(np.float32))
    acts = ctx.t(rng.integers(0, 3, 5))
    cont = ctx.t(rng.uniform(-0.9, 0.9, (5, 2)).astype(np.float32))
    rewards = rng.standard_normal(5).astype(np.float32)
    dones = np.array([0, 0, 1, 0, 0], dtype=np.float32)
    gamma, lam = 0.99, 0.95

    def gae(rew, val, done, last):
        adv = torch.zeros_like(rew)
        g = 0.0
        for t in reversed(range(len(rew))):
            nv = last if t == len(rew) - 1 else val[t + 1]
            delta = rew[t] + gamma * nv * (1 - done[t]) - val[t]
            g = delta + gamma * lam * (1 - done[t]) * g
            adv[t] = g
        return adv

    def step(obs, acts, cont, rew, done):
        cat, ind, sq, v = m(obs)
        adv = gae(rew, v.detach(), done, torch.tensor(0.0))
        ret = adv + v.detach()
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        lp = cat.log_prob(acts) + ind.log_prob(cont) + sq.log_prob(cont).sum(-1)
        ent = cat.entropy().mean() + ind.entropy().mean()
        loss = -(lp * adv).mean() + 0.5 * F.mse_loss(v, ret) - 0.01 * ent
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        opt.step()
        return loss, lp

    step = ctx.fn(step)
    rew_t, done_t = ctx.t(rewards), ctx.t(dones)
    out = [step(obs, acts, cont, rew_t, done_t) for _ in range(3)]
    with torch.no_grad():
        cat, ind, sq, v = m(obs)
        p = D.Normal(torch.zeros(2), torch.ones(2))
        kl = D.kl_divergence(ind.base_dist, p).sum(-1)
        kl_cat = D.kl_divergence(cat, D.Categorical(probs=torch.full((3,), 1 / 3)))
        mvn = D.MultivariateNormal(
            torch.zeros(2), scale_tril=torch.tensor([[1.0, 0.0], [0.5, 0.8]])
        )
        lp_mvn = mvn.log_prob(cont)
        mode = cat.probs.argmax(-1)
    return {
        "out": out,
        "kl": kl,
        "klc": kl_cat,
        "mvn": lp_mvn,
        "ent": mvn.entropy(),
        "mode": mode,
        "mean": sq.base_dist.mean,
    }


PROGRAMS = [
    clip_contrastive,
    simclr,
    distillation,
    accum_amp,
    schedulers,
    checkpoint_resume,
    custom_functions,
    module_hooks,
    metrics,
    policy_gradient,
]
CAPTURED = [clip_contrastive, simclr, distillation, custom_functions, policy_gradient]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
