"""Programs of hunt59 on data pipelines and training utilities, run on PyTorch and on ember:
an IterableDataset sharded by hand with a batching DataLoader and drop_last, a map dataset
with a custom batch sampler (length-bucketed) and a padding collate_fn returning dicts,
random_split/Subset/ConcatDataset with a seeded generator, WeightedRandomSampler;
torch.save/torch.load of a whole training state (model, optimizer, scheduler, RNG state,
Python values) into a buffer, resumed to the same trajectory; activation checkpointing with
dropout inside (RNG state preserved across the recomputation) and checkpoint_sequential;
bfloat16 autocast with a GradScaler loop; gradient accumulation with clip_grad_norm_.
"""

import io

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def iterable_pipeline(torch, ctx):
    """An IterableDataset yielding (features, label) from a generator over shards, split
    across get_worker_info (None in the main process), chained with itertools and batched by
    DataLoader(batch_size=3, drop_last=True); a second loader with batch_size=None passing
    items through; a training loop over it."""
    import itertools

    data = torch.utils.data
    nn = torch.nn
    rng = np.random.default_rng(0)
    shards = [rng.standard_normal((n, 3)).astype(np.float32) for n in (4, 5, 3)]

    class Shards(data.IterableDataset):
        def __init__(self, shards):
            self.shards = shards

        def __iter__(self):
            info = data.get_worker_info()
            mine = self.shards if info is None else self.shards[info.id :: info.num_workers]
            rows = itertools.chain.from_iterable(((torch.tensor(r), int(r.sum() > 0)) for r in s) for s in mine)
            return rows

    loader = data.DataLoader(Shards(shards), batch_size=3, drop_last=True)
    model = ctx.init(nn.Linear(3, 2), "lin")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    out = []
    for xb, yb in loader:
        loss = nn.functional.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out.append([xb.shape[0], yb, loss.detach()])
    items = [(x.shape, y) for x, y in data.DataLoader(Shards(shards[:1]), batch_size=None)]
    return [out, len(out), [[list(s), y] for s, y in items], model.weight]


def bucketed_collate(torch, ctx):
    """A map-style dataset of variable-length token lists; a BatchSampler subclass bucketing
    indices by length (sorted within chunks of a seeded permutation), a collate_fn padding
    to the longest and returning a dict with lengths and a mask; default_collate on nested
    dicts and tuples; Subset, ConcatDataset and random_split with a generator."""
    data = torch.utils.data
    rng = np.random.default_rng(1)
    seqs = [list(rng.integers(1, 9, rng.integers(2, 7))) for _ in range(11)]

    class Tokens(data.Dataset):
        def __len__(self):
            return len(seqs)

        def __getitem__(self, i):
            return {"ids": torch.tensor(seqs[i]), "label": i % 3}

    class Bucket(data.Sampler):
        def __init__(self, n, bs, g):
            self.n, self.bs, self.g = n, bs, g

        def __iter__(self):
            perm = torch.randperm(self.n, generator=self.g).tolist()
            for i in range(0, self.n, self.bs * 2):
                chunk = sorted(perm[i : i + self.bs * 2], key=lambda j: len(seqs[j]))
                for k in range(0, len(chunk), self.bs):
                    yield chunk[k : k + self.bs]

        def __len__(self):
            return (self.n + self.bs - 1) // self.bs

    def collate(batch):
        ids = torch.nn.utils.rnn.pad_sequence([b["ids"] for b in batch], batch_first=True)
        lens = torch.tensor([len(b["ids"]) for b in batch])
        return {"ids": ids, "lens": lens, "mask": ids != 0, "label": torch.tensor([b["label"] for b in batch])}

    g = torch.Generator().manual_seed(3)
    loader = data.DataLoader(Tokens(), batch_sampler=Bucket(len(seqs), 2, g), collate_fn=collate)
    batches = [[b["ids"], b["lens"], b["mask"], b["label"]] for b in loader]
    nested = data.default_collate([{"a": (torch.ones(2) * i, i), "b": {"c": float(i)}} for i in range(3)])
    ds = data.TensorDataset(torch.arange(10.0), torch.arange(10) % 2)
    tr, va = data.random_split(ds, [0.7, 0.3], generator=torch.Generator().manual_seed(1))
    cat = data.ConcatDataset([data.Subset(ds, [1, 3]), tr])
    ws = list(data.WeightedRandomSampler([0.1, 0.0, 0.5, 0.4], 6, replacement=True, generator=torch.Generator().manual_seed(2)))
    rs = list(data.RandomSampler(range(6), generator=torch.Generator().manual_seed(5)))
    return [batches, nested["a"][0], nested["a"][1], nested["b"]["c"], list(tr.indices), list(va.indices), len(cat), cat[3][0], ws, rs]


def save_resume(torch, ctx):
    """A training state (model, AdamW, OneCycleLR, the global RNG state, epoch and a history
    list) saved to a BytesIO with torch.save and loaded with weights_only=True into fresh
    objects; the resumed run (with dropout drawing from the restored RNG) must continue
    exactly as an uninterrupted one."""
    nn = torch.nn
    F = nn.functional

    made = []

    def make():
        made.append(1)
        m = ctx.init(nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.3), nn.Linear(8, 1)), f"m{len(made)}")
        o = torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.05)
        s = torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.05, total_steps=8)
        return m, o, s

    rng = np.random.default_rng(2)
    xs = [ctx.t(rng.standard_normal((5, 4)).astype(np.float32)) for _ in range(6)]
    ys = [ctx.t(rng.standard_normal((5, 1)).astype(np.float32)) for _ in range(6)]

    def train(m, o, s, lo, hi, hist):
        for i in range(lo, hi):
            loss = F.mse_loss(m(xs[i]), ys[i])
            o.zero_grad()
            loss.backward()
            o.step()
            s.step()
            hist.append(round(loss.item(), 5))

    torch.manual_seed(11)
    m, o, s = make()
    ref = []
    train(m, o, s, 0, 6, ref)
    ref_w = m[3].weight.detach().clone()

    torch.manual_seed(11)
    m, o, s = make()
    hist = []
    train(m, o, s, 0, 3, hist)
    buf = io.BytesIO()
    torch.save({"model": m.state_dict(), "opt": o.state_dict(), "sched": s.state_dict(), "rng": torch.get_rng_state(), "epoch": 3, "hist": list(hist)}, buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    m2, o2, s2 = make()
    m2.load_state_dict(state["model"])
    o2.load_state_dict(state["opt"])
    s2.load_state_dict(state["sched"])
    torch.set_rng_state(state["rng"])
    hist2 = list(state["hist"])
    train(m2, o2, s2, state["epoch"], 6, hist2)
    return [ref, hist2, ref_w, m2[3].weight, torch.equal(ref_w, m2[3].weight.detach()), s2.last_epoch, sorted(state), o2.state_dict()["param_groups"][0]["lr"]]


def checkpoint_dropout(torch, ctx):
    """torch.utils.checkpoint with use_reentrant=False around blocks that contain dropout
    (preserve_rng_state: the recomputation draws the same mask), gradients equal to the
    unchekpointed run from the same seed; checkpoint_sequential over a Sequential in 2
    segments; a checkpointed function with keyword and non-tensor arguments."""
    nn = torch.nn
    cp = torch.utils.checkpoint
    blocks = ctx.init(nn.Sequential(nn.Linear(6, 6), nn.GELU(), nn.Dropout(0.5), nn.Linear(6, 6), nn.Tanh(), nn.Dropout(0.2), nn.Linear(6, 3)), "blocks")
    rng = np.random.default_rng(3)
    x = ctx.t(rng.standard_normal((4, 6)).astype(np.float32)).requires_grad_()

    def part(h, scale=1.0, act="gelu"):
        h = blocks[0](h) * scale
        return blocks[2](blocks[1](h))

    torch.manual_seed(5)
    y_ref = blocks[6](blocks[5](blocks[4](blocks[3](part(x, scale=0.5)))))
    y_ref.sum().backward()
    g_ref = [x.grad.clone(), blocks[0].weight.grad.clone()]
    x.grad = None
    blocks.zero_grad()
    torch.manual_seed(5)
    h = cp.checkpoint(part, x, use_reentrant=False, scale=0.5, act="gelu")
    y = blocks[6](blocks[5](blocks[4](blocks[3](h))))
    y.sum().backward()
    g_cp = [x.grad.clone(), blocks[0].weight.grad.clone()]
    x.grad = None
    blocks.zero_grad()
    torch.manual_seed(6)
    ys = cp.checkpoint_sequential(blocks, 2, x, use_reentrant=False)
    ys.pow(2).mean().backward()
    return [y_ref, y, g_ref, g_cp, ys, x.grad, blocks[3].weight.grad]


def autocast_scaler(torch, ctx):
    """A CPU bfloat16 autocast training loop with torch.amp.GradScaler("cpu", enabled) and
    gradient accumulation over two micro-batches, unscale_ before clip_grad_norm_, the
    scaler's scale and state_dict; outputs' dtypes inside autocast (linear: bfloat16,
    softmax/log_softmax and losses: float32)."""
    nn = torch.nn
    F = nn.functional
    model = ctx.init(nn.Sequential(nn.Linear(5, 16), nn.LayerNorm(16), nn.ReLU(), nn.Linear(16, 3)), "m")
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8, growth_interval=2)
    rng = np.random.default_rng(4)
    out = []
    def micro_step(x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(x)
            lsm = logits.log_softmax(-1)
            loss = F.cross_entropy(logits, y) / 2
        scaler.scale(loss).backward()
        return logits, lsm, loss

    micro_step = ctx.fn(micro_step)
    for step in range(3):
        opt.zero_grad()
        for micro in range(2):
            x = ctx.t(rng.standard_normal((4, 5)).astype(np.float32))
            y = ctx.t(rng.integers(0, 3, 4))
            logits, lsm, loss = micro_step(x, y)
            out.append([logits.dtype, lsm.dtype, loss.dtype])
        scaler.unscale_(opt)
        norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        out.append([loss.detach().float(), norm, scaler.get_scale()])
    sd = scaler.state_dict()
    return [out, model[0].weight, {k: v for k, v in sd.items()}]


PROGRAMS = [iterable_pipeline, bucketed_collate, save_resume, checkpoint_dropout, autocast_scaler]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, rtol=2e-2 if program is autocast_scaler else 1e-4, atol=2e-3 if program is autocast_scaler else 1e-5)


def test_captured_autocast_scaler():
    check_program(autocast_scaler, capture=True, rtol=2e-2, atol=2e-3)
