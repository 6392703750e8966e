"""Training programs of hunt16: gradient accumulation with clip_grad_norm_ under a
SequentialLR(LinearLR, CosineAnnealingLR) and a three-phase OneCycleLR cycling Adam's beta1,
torch.utils.data with a user Sampler subclass, a BatchSampler and a padding collate_fn, a
weight-tied language model with a non-persistent buffer through a state_dict round trip and an
EMA of its weights, grad-mode mixes (no_grad, enable_grad, set_grad_enabled, inference_mode),
in-place ops on views inside a differentiated step, and index ops (scatter_add, index_add_,
gather, stable sorts, topk, cumsum) in a segment-pooling model.
"""

import io

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007


def accum_schedulers(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    sched = torch.optim.lr_scheduler
    model = ctx.init(nn.Sequential(nn.Linear(4, 8), nn.SiLU(), nn.Linear(8, 2)))
    opt = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.1)
    warm = sched.LinearLR(opt, start_factor=0.2, end_factor=1.0, total_iters=2)
    cos = sched.CosineAnnealingLR(opt, T_max=4, eta_min=1e-3)
    lr_sched = sched.SequentialLR(opt, [warm, cos], milestones=[2])
    rng = np.random.default_rng(7)
    xs = ctx.t(rng.standard_normal((6, 3, 4)).astype(np.float32))
    ys = ctx.t(rng.standard_normal((6, 3, 2)).astype(np.float32))
    accum = 3

    @ctx.fn
    def micro(x, y):
        loss = F.smooth_l1_loss(model(x), y, beta=0.5) / accum
        loss.backward()
        return loss

    @ctx.fn
    def update():
        norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.3, norm_type=2.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return norm

    out = []
    for i in range(6):
        loss = micro(xs[i], ys[i])
        if (i + 1) % accum == 0 or i == 5:
            out.append([loss, update(), lr_sched.get_last_lr()])
            lr_sched.step()
        else:
            out.append(loss)
    out.append(model[2].weight.clone())
    # a three-phase OneCycleLR cycling Adam's beta1 on its own optimizer
    p = nn.Parameter(torch.ones(3))
    opt2 = torch.optim.Adam([p], lr=0.1, betas=(0.9, 0.99))
    one = sched.OneCycleLR(
        opt2,
        max_lr=0.5,
        total_steps=8,
        pct_start=0.25,
        three_phase=True,
        anneal_strategy="linear",
        base_momentum=0.8,
        max_momentum=0.95,
    )
    trace = []
    for i in range(7):
        opt2.zero_grad()
        (p * p * (i + 1)).sum().backward()
        opt2.step()
        one.step()
        g = opt2.param_groups[0]
        trace.append([g["lr"], g["betas"][0]])
    sd = one.state_dict()
    return [out, trace, p, sd["last_epoch"], sd["total_steps"]]


def data_pipeline(torch, ctx):
    data = torch.utils.data
    nn, F = torch.nn, torch.nn.functional
    rng = np.random.default_rng(8)
    seqs = [rng.standard_normal((n, 3)).astype(np.float32) for n in [3, 1, 4, 2, 4, 3, 1]]
    labels = [0, 1, 1, 0, 1, 0, 1]

    class Seqs(data.Dataset):
        def __len__(self):
            return len(seqs)

        def __getitem__(self, i):
            return {"x": torch.tensor(seqs[i]), "y": labels[i], "idx": i}

    class BucketSampler(data.Sampler):
        """Indices sorted by length (longest first), so batches pad little."""

        def __init__(self, lengths):
            self.order = sorted(range(len(lengths)), key=lambda i: -lengths[i])

        def __iter__(self):
            return iter(self.order)

        def __len__(self):
            return len(self.order)

    def collate(batch):
        xs = [b["x"] for b in batch]
        lens = torch.tensor([len(x) for x in xs])
        return {
            "x": nn.utils.rnn.pad_sequence(xs, batch_first=True),
            "lens": lens,
            "y": torch.tensor([b["y"] for b in batch]),
            "idx": [b["idx"] for b in batch],
        }

    ds = Seqs()
    bs = data.BatchSampler(BucketSampler([len(s) for s in seqs]), batch_size=3, drop_last=False)
    loader = data.DataLoader(ds, batch_sampler=bs, collate_fn=collate)
    model = ctx.init(nn.Linear(3, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)

    @ctx.fn
    def step(x, lens, y):
        mask = (torch.arange(x.shape[1]).unsqueeze(0) < lens.unsqueeze(1)).unsqueeze(-1)
        pooled = (x * mask).sum(1) / lens.unsqueeze(1)
        loss = F.cross_entropy(model(pooled), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    out = []
    for epoch in range(2):
        for batch in loader:
            out.append([step(batch["x"], batch["lens"], batch["y"]), batch["idx"]])
    # default collation of dict samples, a Subset and a sequential sampler
    plain = data.DataLoader(
        data.Subset(
            data.TensorDataset(torch.arange(10.0).reshape(5, 2), torch.arange(5)), [4, 0, 2]
        ),
        batch_size=2,
    )
    plain_batches = [[a, b] for a, b in plain]
    dict_batch = data.default_collate(
        [{"a": 1.5, "b": torch.ones(2)}, {"a": 2.5, "b": torch.zeros(2)}]
    )
    return [out, len(loader), plain_batches, dict_batch, model.weight]


def tied_lm(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class LM(nn.Module):
        def __init__(self, V=7, d=6, T=5):
            super().__init__()
            self.emb = nn.Embedding(V, d)
            self.pos = nn.Parameter(torch.zeros(T, d))
            self.register_buffer("causal", torch.ones(T, T).tril().bool(), persistent=False)
            self.register_buffer("seen", torch.zeros(()))
            self.mix = nn.Linear(d, d)
            self.norm = nn.LayerNorm(d)
            self.out = nn.Linear(d, V, bias=False)
            self.out.weight = self.emb.weight  # tied

        def forward(self, idx):
            T = idx.shape[1]
            h = self.emb(idx) + self.pos[:T]
            att = (h @ h.transpose(1, 2)).masked_fill(~self.causal[:T, :T], float("-inf"))
            h = h + self.mix(att.softmax(-1) @ h)
            if self.training:
                self.seen += idx.shape[0]
            return self.out(self.norm(h))

    model = ctx.init(LM())
    ema = LM()
    ema.load_state_dict(model.state_dict())
    ema.requires_grad_(False)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(9)
    idx = ctx.t(rng.integers(0, 7, (3, 5)))

    @ctx.fn
    def step(idx):
        logits = model(idx[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), idx[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for pe, pm in zip(ema.parameters(), model.parameters()):
                pe.mul_(0.8).add_(pm, alpha=0.2)
        return loss

    losses = [step(idx) for _ in range(3)]
    sd = model.state_dict()
    keys = sorted(sd.keys())
    buf = io.BytesIO()
    torch.save(sd, buf)
    buf.seek(0)
    fresh = LM()
    res = fresh.load_state_dict(torch.load(buf))
    fresh.eval()
    model.eval()
    with torch.no_grad():
        same = torch.equal(fresh(idx), model(idx))
    return [
        losses,
        keys,
        len(list(model.parameters())),
        len(list(model.named_parameters(remove_duplicate=False))),
        fresh.out.weight is fresh.emb.weight,
        list(res.missing_keys),
        same,
        fresh.seen,
        ema.emb.weight,
        ema.out.weight,
        model.emb.weight.grad,
    ]


def grad_modes(torch, ctx):
    nn = torch.nn
    m = ctx.init(nn.Linear(3, 3))
    x = ctx.t(np.arange(6, dtype=np.float32).reshape(2, 3) / 5)

    @torch.no_grad()
    def frozen(x):
        return m(x)

    @ctx.fn
    def mixed(x):
        with torch.no_grad():
            a = m(x)
            with torch.enable_grad():
                b = m(a)  # grad on again: depends on m's weights, not on a's history
        with torch.set_grad_enabled(False):
            c = m(b)
        d = m(c) * b
        loss = d.sum()
        loss.backward()
        return a.requires_grad, b.requires_grad, c.requires_grad, d.requires_grad, loss

    r = mixed(x)
    g1 = m.weight.grad.clone()
    m.zero_grad()
    r2 = mixed(x * 2)
    out = [r, r2, g1, m.weight.grad, frozen(x).requires_grad]
    with torch.inference_mode():
        y = m(x)
        out += [y.requires_grad, torch.is_inference_mode_enabled(), torch.is_grad_enabled()]
        with torch.inference_mode(False):
            out.append(torch.is_inference_mode_enabled())
    out += [y.is_inference(), y * 2, torch.is_grad_enabled()]
    prev = torch.is_grad_enabled()
    torch.set_grad_enabled(False)
    z = m(x)
    torch.set_grad_enabled(prev)
    out += [z.requires_grad, m(x).requires_grad]
    return out


def inplace_views(torch, ctx):
    nn = torch.nn
    lin = ctx.init(nn.Linear(4, 4))
    opt = torch.optim.SGD(lin.parameters(), lr=0.1)
    rng = np.random.default_rng(10)
    x = ctx.t(rng.standard_normal((3, 4)).astype(np.float32))
    w = ctx.t(rng.standard_normal((3, 2)).astype(np.float32))

    @ctx.fn
    def step(x, w):
        h = lin(x)
        h[:, :2].mul_(2.0)  # in place on a slice of a non-leaf
        h.t()[3].add_(1.0)  # on a row of the transposed view: column 3
        h.narrow(1, 2, 1).copy_(h[:, :1] * w[:, 1:])
        v = h.view(-1)
        v[::5].neg_()
        h.unsqueeze(0)[0, 0].clamp_(min=-0.5, max=0.5)
        d = h[:, :3]
        d.diagonal().zero_()
        loss = (h * h).sum() + h.select(1, 3).exp().sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, h

    out = [step(x, w) for _ in range(2)]
    return [out, lin.weight, lin.bias, lin.weight.grad]


def segment_pooling(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    # a set of points per graph, pooled by segment ids: scatter_add, index_add_, gather
    enc = ctx.init(nn.Sequential(nn.Linear(3, 6), nn.Tanh()), "enc")
    head = ctx.init(nn.Linear(12, 1), "head")
    opt = torch.optim.Adam(list(enc.parameters()) + list(head.parameters()), lr=1e-2)
    rng = np.random.default_rng(11)
    pts = ctx.t(rng.standard_normal((9, 3)).astype(np.float32))
    seg = ctx.t(np.array([0, 0, 1, 2, 2, 2, 1, 3, 3]))
    target = ctx.t(np.array([[0.5], [-0.2], [1.0], [0.0]], dtype=np.float32))

    @ctx.fn
    def step(pts, seg, target):
        h = enc(pts)
        counts = torch.zeros(4).index_add_(0, seg, torch.ones(9))
        sums = torch.zeros(4, 6).scatter_add(0, seg.unsqueeze(1).expand(-1, 6), h)
        mean = sums / counts.unsqueeze(1)
        mx = torch.full((4, 6), float("-inf")).scatter_reduce(
            0, seg.unsqueeze(1).expand(-1, 6), h, reduce="amax", include_self=True
        )
        centred = h - mean.gather(0, seg.unsqueeze(1).expand(-1, 6))
        pred = head(torch.cat([mean, mx], 1))
        loss = F.mse_loss(pred, target) + 0.1 * centred.pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss, counts, pred

    hist = [step(pts, seg, target) for _ in range(3)]
    # ranking utilities on the scores
    with torch.no_grad():
        score = enc(pts).sum(1)
    keys = ctx.t(np.array([3, 1, 3, 2, 1, 3, 0, 2, 1]))
    s_val, s_idx = torch.sort(keys, descending=True, stable=True)
    top_v, top_i = torch.topk(score, 3, largest=False, sorted=True)
    order = torch.argsort(keys, stable=True)
    rank = torch.empty_like(order).scatter_(0, order, torch.arange(9))
    first = torch.cumsum(torch.ones_like(seg), 0) - 1
    pos_in_seg = (
        first
        - torch.zeros(4, dtype=torch.long).scatter_reduce(
            0, seg, first, reduce="amin", include_self=False
        )[seg]
    )
    masked = score.masked_fill(seg == 2, 0.0)
    picked = torch.where(score > 0, score, -score).gather(0, top_i)
    uniq, inv, cnt = torch.unique(seg, return_inverse=True, return_counts=True)
    return [
        hist,
        s_val,
        s_idx,
        top_v,
        top_i,
        order,
        rank,
        pos_in_seg,
        masked,
        picked,
        uniq,
        inv,
        cnt,
        torch.bincount(seg, weights=score),
        head.weight.grad,
    ]


PROGRAMS = [accum_schedulers, data_pipeline, tied_lm, grad_modes, inplace_views, segment_pooling]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
