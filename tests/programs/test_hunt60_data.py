"""Programs of hunt60 on data pipelines as training scripts build them: WeightedRandomSampler
without replacement feeding a BatchSampler, random_split by fractions with Subset and
ConcatDataset indexing, an IterableDataset with batch_size=None and a dict collate,
default_collate/default_convert on nested records, DistributedSampler shards across epochs,
SubsetRandomSampler/RandomSampler(replacement, num_samples) with generators, a seeded
shuffling DataLoader training a logistic regression with BCEWithLogits pos_weight, a
Dataset with __getitems__ (batched fetching), and a class-balanced sampler built from
label counts.
"""

import collections

import numpy as np
import pytest

from .harness import check_program

# ruff: noqa: N806, E741, B007, E501, E731, F841, B023, C408, B006, E702, E701, E401, C416, UP031, B905, PIE810, SIM108, RUF005


def _to_list(batches):
    return [b.tolist() if hasattr(b, "tolist") else b for b in batches]


def weighted_sampler_batches(torch, ctx):
    """WeightedRandomSampler (replacement=False, a seeded generator) inside a BatchSampler
    with drop_last, given to DataLoader(batch_sampler=...); two epochs of index batches."""
    D = torch.utils.data
    w = [0.1, 0.5, 2.0, 1.0, 0.2, 3.0, 0.7, 1.5, 0.05, 0.9]
    g = torch.Generator().manual_seed(7)
    sampler = D.WeightedRandomSampler(w, num_samples=7, replacement=False, generator=g)
    bs = D.BatchSampler(sampler, batch_size=3, drop_last=True)
    data = D.TensorDataset(torch.arange(10) * 10)
    loader = D.DataLoader(data, batch_sampler=bs)
    epochs = [[b[0].tolist() for b in loader] for _ in range(2)]
    g2 = torch.Generator().manual_seed(3)
    with_rep = list(D.WeightedRandomSampler(torch.tensor(w, dtype=torch.float64), 12, generator=g2))
    return [epochs, len(bs), len(loader), with_rep]


def split_subset_concat(torch, ctx):
    """random_split by fractions (0.7/0.2/0.1) and by counts with a seeded generator, the
    Subsets' indices, ConcatDataset of two datasets with a negative index and
    cumulative_sizes, and a Subset of a Subset."""
    D = torch.utils.data

    class Squares(D.Dataset):
        def __init__(self, n, offset=0):
            self.n, self.offset = n, offset

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            if i < 0:
                i += self.n
            return torch.tensor(float((i + self.offset) ** 2)), i + self.offset

    ds = Squares(13)
    tr, va, te = D.random_split(ds, [0.7, 0.2, 0.1], generator=torch.Generator().manual_seed(42))
    a, b = D.random_split(ds, [10, 3], generator=torch.Generator().manual_seed(1))
    cat = D.ConcatDataset([Squares(4), Squares(3, 100)])
    sub = D.Subset(D.Subset(ds, [5, 3, 1, 12]), [2, 0])
    return [list(tr.indices), list(va.indices), list(te.indices), [len(tr), len(va), len(te)], list(a.indices), list(b.indices), cat.cumulative_sizes, [cat[i][1] for i in range(len(cat))], cat[-1][1], cat[-5][1], [sub[i][1] for i in range(len(sub))], sub[0][0]]


def iterable_stream(torch, ctx):
    """An IterableDataset that yields already-batched dicts (DataLoader batch_size=None), one
    that yields samples collated by a custom collate_fn padding variable-length sequences,
    get_worker_info() in the main process, and itertools-style chaining with ChainDataset."""
    D = torch.utils.data
    rng = np.random.default_rng(0)
    seqs = [rng.integers(1, 9, rng.integers(2, 6)).tolist() for _ in range(7)]

    class Batched(D.IterableDataset):
        def __iter__(self):
            info = D.get_worker_info()
            for i in range(0, len(seqs), 3):
                chunk = seqs[i:i + 3]
                yield {"n": torch.tensor([len(s) for s in chunk]), "worker": -1 if info is None else info.id}

    class Samples(D.IterableDataset):
        def __init__(self, items):
            self.items = items

        def __iter__(self):
            return iter(self.items)

    def pad_collate(batch):
        ids = [torch.tensor(s) for s in batch]
        lens = torch.tensor([len(s) for s in batch])
        return torch.nn.utils.rnn.pad_sequence(ids, batch_first=True, padding_value=0), lens

    out = [[(d["n"].tolist(), d["worker"]) for d in D.DataLoader(Batched(), batch_size=None)]]
    for padded, lens in D.DataLoader(Samples(seqs), batch_size=3, collate_fn=pad_collate, drop_last=False):
        out.append([padded.tolist(), lens.tolist()])
    chain = D.ChainDataset([Samples([1, 2]), Samples([3])])
    out.append(list(chain))
    out.append([b.tolist() for b in D.DataLoader(chain, batch_size=2)])
    return out


def nested_collate(torch, ctx):
    """default_collate on records of dicts, namedtuples, tuples, NumPy arrays, Python floats
    and ints, strings and nested lists; default_convert on NumPy input."""
    D = torch.utils.data
    Point = collections.namedtuple("Point", ["x", "y"])
    rng = np.random.default_rng(1)
    records = [{"img": rng.standard_normal((2, 2)).astype(np.float32), "label": i, "w": 0.5 * i, "name": f"s{i}", "pt": Point(torch.tensor([i, i + 1]), float(i)), "pair": (i, [i * 2, i * 3])} for i in range(3)]
    b = D.default_collate(records)
    conv = D.default_convert({"a": np.arange(3), "b": [np.ones(2, np.float32)], "c": 3})
    return [b["img"], b["label"], b["label"].dtype, b["w"], b["w"].dtype, b["name"], type(b["pt"]).__name__, b["pt"].x, b["pt"].y, b["pair"][0], [t.tolist() for t in b["pair"][1]], conv["a"], conv["b"][0], conv["c"]]


def distributed_shards(torch, ctx):
    """DistributedSampler for three replicas: shuffled with a seed, set_epoch changing the
    order, padding to equal shard sizes (13 samples) and drop_last=True; shards of an epoch
    cover the dataset."""
    D = torch.utils.data
    ds = D.TensorDataset(torch.arange(13))
    out = []
    for drop_last in (False, True):
        for epoch in (0, 1):
            shards = []
            for rank in range(3):
                s = D.DistributedSampler(ds, num_replicas=3, rank=rank, shuffle=True, seed=5, drop_last=drop_last)
                s.set_epoch(epoch)
                shards.append(list(s))
            out.append(shards)
            out.append(len(s))
    plain = D.DistributedSampler(ds, num_replicas=2, rank=1, shuffle=False)
    out.append(list(plain))
    return out


def samplers_with_generators(torch, ctx):
    """SubsetRandomSampler, RandomSampler with replacement and num_samples, SequentialSampler,
    all with seeded generators; a DataLoader(shuffle=True, generator=g) over 10 items twice,
    and torch.randperm/randint with the same generator."""
    D = torch.utils.data
    g = torch.Generator()
    g.manual_seed(11)
    out = [list(D.SubsetRandomSampler([3, 5, 7, 9, 11], generator=g))]
    out.append(list(D.RandomSampler(range(6), replacement=True, num_samples=9, generator=g)))
    out.append(list(D.RandomSampler(range(6), num_samples=8, generator=g)))
    out.append(list(D.SequentialSampler(range(4))))
    loader = D.DataLoader(list(range(10)), batch_size=4, shuffle=True, generator=g)
    out += [[b.tolist() for b in loader], [b.tolist() for b in loader]]
    out += [torch.randperm(6, generator=g), torch.randint(0, 5, (4,), generator=g), g.initial_seed()]
    return out


def logistic_loader_training(torch, ctx):
    """A seeded shuffling DataLoader over a TensorDataset training a logistic regression
    (BCEWithLogitsLoss with pos_weight for an imbalanced label) for two epochs with SGD;
    loss per batch and final weights."""
    nn = torch.nn
    D = torch.utils.data
    rng = np.random.default_rng(2)
    X = ctx.t(rng.standard_normal((22, 4)).astype(np.float32))
    y = ctx.t((rng.uniform(size=22) < 0.25).astype(np.float32))
    model = ctx.init(nn.Linear(4, 1))
    crit = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([3.0]))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    loader = D.DataLoader(D.TensorDataset(X, y), batch_size=5, shuffle=True, generator=torch.Generator().manual_seed(0))
    losses = []
    for epoch in range(2):
        for xb, yb in loader:
            opt.zero_grad()
            loss = crit(model(xb).squeeze(1), yb)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return [losses, model.weight, model.bias]


def getitems_batched(torch, ctx):
    """A map-style Dataset with __getitems__ (the fetcher asks for a whole batch at once, as
    HF datasets do) returning a list of samples, and one returning an already-collated dict
    with a collate_fn that passes it through; the batches and how many fetch calls were made."""
    D = torch.utils.data
    calls = []

    class Rows(D.Dataset):
        def __len__(self):
            return 7

        def __getitem__(self, i):
            calls.append(("item", i))
            return torch.tensor([i, i * i])

        def __getitems__(self, idxs):
            calls.append(("items", list(idxs)))
            return [torch.tensor([i, i * i]) for i in idxs]

    class Columnar(D.Dataset):
        def __len__(self):
            return 5

        def __getitems__(self, idxs):
            return {"x": torch.tensor(idxs) * 2, "n": len(idxs)}

    a = [b.tolist() for b in D.DataLoader(Rows(), batch_size=3)]
    b = [{k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in d.items()} for d in D.DataLoader(Columnar(), batch_size=2, collate_fn=lambda d: d)]
    return [a, calls, b]


def class_balanced_sampler(torch, ctx):
    """The Kaggle recipe for imbalanced classes: per-class counts with bincount, per-sample
    weights 1/count[label], WeightedRandomSampler(replacement=True) in a DataLoader; the label
    histogram of the drawn epoch, and a stratified split made with argsort/unique."""
    D = torch.utils.data
    labels = torch.tensor([0] * 12 + [1] * 4 + [2] * 2)
    counts = torch.bincount(labels)
    weights = 1.0 / counts[labels].double()
    sampler = D.WeightedRandomSampler(weights, num_samples=36, replacement=True, generator=torch.Generator().manual_seed(9))
    loader = D.DataLoader(D.TensorDataset(torch.arange(18), labels), batch_size=6, sampler=sampler)
    drawn = torch.cat([yb for _, yb in loader])
    hist = torch.bincount(drawn, minlength=3)
    order = torch.argsort(labels, stable=True)
    classes, inverse, cnt = torch.unique(labels, return_inverse=True, return_counts=True)
    val = [order[labels[order] == c][: max(1, int(n) // 4)].tolist() for c, n in zip(classes.tolist(), cnt)]
    return [counts, weights, drawn, hist, val, inverse]


PROGRAMS = [weighted_sampler_batches, split_subset_concat, iterable_stream, nested_collate, distributed_shards, samplers_with_generators, logistic_loader_training, getitems_batched, class_balanced_sampler]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_eager(program):
    check_program(program, rtol=1e-5, atol=1e-6)
