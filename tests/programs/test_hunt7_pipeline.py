"""Training pipelines as whole programs: torch.utils.data with a custom collate_fn, Subset,
random_split, ConcatDataset and a WeightedRandomSampler; the schedulers
CosineAnnealingWarmRestarts, ReduceLROnPlateau, SequentialLR and LambdaLR with gradient
clipping by value; segmentation with Dice and a Lovasz-hinge loss; LSTM forecasting with
teacher forcing and a resume from a BytesIO checkpoint; DeepSets; a gradient-accumulating
trainer class with early stopping.
"""

import io

import numpy as np
import pytest

from .harness import check_program

# each program is PyTorch source written against ``torch`` (the library passed in)
# ruff: noqa: N806, E741, B007


def data_pipeline(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    data = torch.utils.data

    class Sentences(data.Dataset):
        def __init__(s, rng, n):
            s.items = [
                (rng.integers(1, 20, rng.integers(2, 7)).tolist(), int(rng.integers(0, 2)))
                for _ in range(n)
            ]

        def __len__(s):
            return len(s.items)

        def __getitem__(s, i):
            toks, label = s.items[i]
            return torch.tensor(toks), label

    def collate(batch):
        seqs, labels = zip(*batch)
        lengths = torch.tensor([len(x) for x in seqs])
        padded = nn.utils.rnn.pad_sequence(list(seqs), batch_first=True, padding_value=0)
        return padded, lengths, torch.tensor(labels)

    rng = np.random.default_rng(0)
    ds = Sentences(rng, 14)
    extra = Sentences(rng, 4)
    full = data.ConcatDataset([ds, extra])
    train = data.Subset(full, list(range(0, 18, 2)))
    val = data.Subset(full, list(range(1, 18, 2)))
    g = torch.Generator().manual_seed(0)
    a, b = data.random_split(range(10), [0.7, 0.3], generator=g)
    labels = [full[i][1] for i in train.indices]
    counts = np.bincount(labels, minlength=2)
    weights = [1.0 / counts[y] for y in labels]
    sampler = data.WeightedRandomSampler(weights, num_samples=8, replacement=True)
    wr = list(sampler)

    class Bag(nn.Module):
        def __init__(s):
            super().__init__()
            s.emb = nn.Embedding(20, 6, padding_idx=0)
            s.fc = nn.Linear(6, 2)

        def forward(s, x, lengths):
            mask = (x != 0).unsqueeze(-1).float()
            return s.fc((s.emb(x) * mask).sum(1) / lengths.unsqueeze(1).float())

    m = ctx.init(Bag())
    opt = torch.optim.SGD(m.parameters(), lr=0.5)
    loader = data.DataLoader(
        train, batch_size=4, shuffle=False, collate_fn=collate, drop_last=False
    )
    vloader = data.DataLoader(val, batch_size=3, collate_fn=collate)

    def step(x, lengths, y):
        loss = F.cross_entropy(m(x, lengths), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    losses, shapes = [], []
    for _epoch in range(2):
        for x, lengths, y in loader:
            shapes.append(list(x.shape))
            losses.append(step(x, lengths, y))
    correct = 0
    with torch.no_grad():
        for x, lengths, y in vloader:
            correct += (m(x, lengths).argmax(1) == y).sum().item()
    return {
        "l": losses,
        "shapes": shapes,
        "correct": correct,
        "n": [len(full), len(train), len(a), len(b)],
        "wr": [len(wr), all(0 <= i < 9 for i in wr)],
        "batches": len(loader),
    }


def sched_clip(torch, ctx):
    nn, F = torch.nn, torch.nn.functional
    m = ctx.init(nn.Sequential(nn.Linear(4, 8), nn.Softplus(beta=2.0), nn.Linear(8, 1)))
    rng = np.random.default_rng(1)
    x = ctx.t(rng.standard_normal((10, 4)).astype(np.float32))
    y = ctx.t(rng.standard_normal((10, 1)).astype(np.float32))
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
    warm = torch.optim.lr_scheduler.LambdaLR(opt, lambda e: (e + 1) / 3)
    cos = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=1e-3)
    seq = torch.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[2])
    opt2 = torch.optim.Adam(m.parameters(), lr=0.01)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
        opt2, mode="min", factor=0.5, patience=1, threshold=0.1
    )

    def step(x, y):
        loss = F.mse_loss(m(x), y)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_value_(m.parameters(), clip_value=0.05)
        opt.step()
        return loss

    step = ctx.fn(step)
    out, lrs = [], []
    for _ in range(8):
        out.append(step(x, y))
        seq.step()
        lrs.append(opt.param_groups[0]["lr"])
    plateau_lrs = []
    for val in [1.0, 0.95, 0.97, 0.96, 0.5, 0.49, 0.495, 0.5]:
        plateau.step(val)
        plateau_lrs.append(opt2.param_groups[0]["lr"])
    sd = seq.state_dict()
    return {
        "l": out,
        "lrs": lrs,
        "plateau": plateau_lrs,
        "last": seq.get_last_lr(),
        "sd_keys": sorted(k for k in sd if k != "_schedulers"),
        "w": m[0].weight,
        "num_bad": plateau.num_bad_epochs,
    }


def segmentation(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    def dice_loss(logits, target, eps=1.0):
        probs = logits.softmax(1)
        onehot = F.one_hot(target, probs.shape[1]).permute(0, 3, 1, 2).float()
        inter = (probs * onehot).sum((0, 2, 3))
        union = probs.sum((0, 2, 3)) + onehot.sum((0, 2, 3))
        return 1 - ((2 * inter + eps) / (union + eps)).mean()

    def lovasz_grad(gt_sorted):
        gts = gt_sorted.sum()
        inter = gts - gt_sorted.cumsum(0)
        union = gts + (1 - gt_sorted).cumsum(0)
        jac = 1.0 - inter / union
        return torch.cat([jac[:1], jac[1:] - jac[:-1]])

    def lovasz_hinge(logits, labels):
        losses = []
        for lg, lb in zip(logits, labels):
            lg, lb = lg.reshape(-1), lb.reshape(-1).float()
            signs = 2.0 * lb - 1.0
            errors = 1.0 - lg * signs
            errors_sorted, perm = torch.sort(errors, descending=True)
            grad = lovasz_grad(lb[perm])
            losses.append(torch.dot(F.relu(errors_sorted), grad))
        return torch.stack(losses).mean()

    class SegNet(nn.Module):
        def __init__(s):
            super().__init__()
            s.enc = nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.GroupNorm(2, 8), nn.ReLU()
            )
            s.down = nn.Conv2d(8, 16, 3, stride=2, padding=1)
            s.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
            s.head = nn.Conv2d(16, 3, 1)
            s.edge = nn.Conv2d(16, 1, 1)

        def forward(s, x):
            e = s.enc(x)
            d = F.relu(s.down(e))
            u = s.up(d)
            cat = torch.cat([e, u], 1)
            return s.head(cat), s.edge(cat).squeeze(1)

    m = ctx.init(SegNet())
    opt = torch.optim.Adam(m.parameters(), lr=2e-3)
    rng = np.random.default_rng(2)
    x = ctx.t(rng.standard_normal((2, 3, 8, 8)).astype(np.float32))
    y = ctx.t(rng.integers(0, 3, (2, 8, 8)))
    w = torch.tensor([0.2, 1.0, 2.0])

    def step(x, y):
        seg, edge = m(x)
        ce = F.cross_entropy(seg, y, weight=w)
        dl = dice_loss(seg, y)
        lh = lovasz_hinge(edge, (y == 2).long())
        loss = ce + dl + 0.5 * lh
        opt.zero_grad()
        loss.backward()
        opt.step()
        pred = seg.argmax(1)
        iou = torch.stack(
            [
                ((pred == c) & (y == c)).sum() / ((pred == c) | (y == c)).sum().clamp(min=1)
                for c in range(3)
            ]
        )
        return ce, dl, lh, iou

    step = ctx.fn(step)
    out = [step(x, y) for _ in range(3)]
    return {"out": out}


def forecasting(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Seq2SeqForecaster(nn.Module):
        def __init__(s, hid=12, horizon=4):
            super().__init__()
            s.horizon = horizon
            s.encoder = nn.LSTM(2, hid, num_layers=2, batch_first=True, dropout=0.0)
            s.decoder = nn.LSTMCell(1, hid)
            s.proj = nn.Linear(hid, 1)

        def forward(s, past, future=None, teacher_ratio_mask=None):
            _, (h, c) = s.encoder(past)
            h, c = h[-1], c[-1]
            inp = past[:, -1, :1]
            outs = []
            for t in range(s.horizon):
                h, c = s.decoder(inp, (h, c))
                o = s.proj(h)
                outs.append(o)
                if future is not None and teacher_ratio_mask[t]:
                    inp = future[:, t : t + 1]
                else:
                    inp = o
            return torch.cat(outs, 1)

    rng = np.random.default_rng(3)
    t = np.arange(40, dtype=np.float32)
    series = np.sin(t / 3)[None, :] * rng.uniform(0.5, 1.5, (5, 1)).astype(np.float32)
    cov = np.cos(t / 5)[None, :].repeat(5, 0).astype(np.float32)
    past = ctx.t(np.stack([series[:, :12], cov[:, :12]], -1))
    future = ctx.t(series[:, 12:16])
    m = ctx.init(Seq2SeqForecaster())
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    mask = [True, False, True, False]

    def step(past, future):
        pred = m(past, future, mask)
        loss = F.l1_loss(pred, future)
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(m.parameters(), 0.5, norm_type=2.0)
        opt.step()
        return loss

    step = ctx.fn(step)
    out = [step(past, future) for _ in range(2)]
    buf = io.BytesIO()
    torch.save({"model": m.state_dict(), "opt": opt.state_dict(), "epoch": 2}, buf)
    buf.seek(0)
    ck = torch.load(buf, weights_only=True)
    m2 = ctx.init(Seq2SeqForecaster(), "fresh")
    m2.load_state_dict(ck["model"])
    opt2 = torch.optim.Adam(m2.parameters(), lr=1e-2)
    opt2.load_state_dict(ck["opt"])
    m, opt = m2, opt2  # continue with the restored pair (the step reads them by name)
    out += [step(past, future) for _ in range(2)]
    with torch.no_grad():
        m.eval()
        fc = m(past)
    return {
        "out": out,
        "fc": fc,
        "epoch": ck["epoch"],
        "state_step": opt.state_dict()["state"][0]["step"],
    }


def deep_sets(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class DeepSets(nn.Module):
        def __init__(s):
            super().__init__()
            s.phi = nn.Sequential(nn.Linear(1, 16), nn.ELU(alpha=0.5), nn.Linear(16, 16))
            s.rho = nn.Sequential(nn.Linear(32, 16), nn.ELU(), nn.Linear(16, 1))

        def forward(s, x, mask):
            h = s.phi(x.unsqueeze(-1)) * mask.unsqueeze(-1)
            summed = h.sum(1)
            maxed = h.masked_fill(~mask.bool().unsqueeze(-1), float("-inf")).amax(1)
            return s.rho(torch.cat([summed, maxed], -1)).squeeze(-1)

    m = ctx.init(DeepSets())
    opt = torch.optim.Adamax(m.parameters(), lr=5e-3)
    rng = np.random.default_rng(4)
    x = rng.integers(0, 10, (6, 5)).astype(np.float32)
    sizes = rng.integers(1, 6, 6)
    mask = (np.arange(5)[None] < sizes[:, None]).astype(np.float32)
    target = (x * mask).sum(1)
    x, mask, target = ctx.t(x), ctx.t(mask), ctx.t(target.astype(np.float32))

    def step(x, mask, target):
        loss = F.smooth_l1_loss(m(x, mask), target, beta=2.0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    step = ctx.fn(step)
    out = [step(x, mask, target) for _ in range(4)]
    perm = torch.randperm(5)
    with torch.no_grad():
        full = torch.ones(6, 5)
        a = m(x, full)
        b = m(x[:, perm], full)
    return {"out": out, "inv": torch.allclose(a, b, atol=1e-4), "a": a}


def trainer_class(torch, ctx):
    nn, F = torch.nn, torch.nn.functional

    class Trainer:
        def __init__(s, model, accum=2, patience=2):
            s.model = model
            s.opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
            s.accum, s.patience = accum, patience
            s.best, s.bad, s.history = float("inf"), 0, []
            s.best_state = None

        def train_step(s, x, y, i):
            out = s.model(x)
            loss = F.binary_cross_entropy_with_logits(out, y, pos_weight=torch.tensor([2.0]))
            (loss / s.accum).backward()
            if (i + 1) % s.accum == 0:
                s.opt.step()
                s.opt.zero_grad(set_to_none=True)
            return loss.detach()

        def evaluate(s, x, y):
            s.model.eval()
            with torch.no_grad():
                out = s.model(x)
                loss = F.binary_cross_entropy_with_logits(out, y).item()
                acc = ((out > 0).float() == y).float().mean().item()
            s.model.train()
            return loss, acc

        def fit(s, batches, val, epochs):
            for ep in range(epochs):
                losses = [s.train_step(x, y, i) for i, (x, y) in enumerate(batches)]
                vl, acc = s.evaluate(*val)
                s.history.append((torch.stack(losses).mean().item(), vl, acc))
                if vl < s.best - 1e-4:
                    s.best, s.bad = vl, 0
                    s.best_state = {k: v.clone() for k, v in s.model.state_dict().items()}
                else:
                    s.bad += 1
                    if s.bad >= s.patience:
                        break
            s.model.load_state_dict(s.best_state)
            return ep

    m = ctx.init(nn.Sequential(nn.Linear(3, 8), nn.Dropout(0.0), nn.Mish(), nn.Linear(8, 1)))
    tr = Trainer(m)
    tr.train_step = ctx.fn(tr.train_step)
    rng = np.random.default_rng(5)
    batches = [
        (
            ctx.t(rng.standard_normal((4, 3)).astype(np.float32)),
            ctx.t((rng.uniform(size=(4, 1)) < 0.4).astype(np.float32)),
        )
        for _ in range(4)
    ]
    val = (batches[0][0] * 0.5, batches[0][1])
    last = tr.fit(batches, val, epochs=5)
    return {"hist": tr.history, "last": last, "best": tr.best, "sd": dict(m.state_dict())}


PROGRAMS = [data_pipeline, sched_clip, segmentation, forecasting, deep_sets, trainer_class]
CAPTURED = PROGRAMS


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program)


@pytest.mark.parametrize("program", CAPTURED, ids=lambda p: p.__name__)
def test_captured(program):
    check_program(program, capture=True)
