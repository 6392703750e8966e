"""``ember.utils.data``: PyTorch's module path over ember.data, with the samplers, iterable
datasets and get_worker_info; compared with torch.utils.data where outputs are deterministic
(random orders come from another generator, so only their properties are compared)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import ember
import ember.data
from ember.utils import data as eud
from ember.utils.data import (
    BatchSampler,
    ChainDataset,
    DataLoader,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    get_worker_info,
    random_split,
)

torch = pytest.importorskip("torch")
tud = torch.utils.data


def test_module_paths_are_ember_data_objects():
    for name in ("Dataset", "TensorDataset", "Subset", "ConcatDataset", "DataLoader"):
        assert getattr(eud, name) is getattr(ember.data, name)
    assert eud.default_collate is ember.data.default_collate
    from ember.utils.data.dataloader import DataLoader as dl
    from ember.utils.data.dataset import Dataset
    from ember.utils.data.sampler import RandomSampler as rs

    assert dl is DataLoader and rs is RandomSampler and Dataset is ember.data.Dataset
    assert set(eud.__all__) >= {
        "BatchSampler",
        "IterableDataset",
        "SubsetRandomSampler",
        "WeightedRandomSampler",
        "get_worker_info",
        "random_split",
    }
    assert eud.DistributedSampler is eud.distributed.DistributedSampler


def test_sequential_and_batch_sampler_match_torch():
    data = list(range(10))
    assert list(SequentialSampler(data)) == list(tud.SequentialSampler(data))
    assert len(SequentialSampler(data)) == 10
    for batch_size in (1, 3, 4, 10, 11):
        for drop_last in (False, True):
            ours = BatchSampler(SequentialSampler(data), batch_size, drop_last)
            theirs = tud.BatchSampler(tud.SequentialSampler(data), batch_size, drop_last)
            assert list(ours) == list(theirs) and len(ours) == len(theirs)
    with pytest.raises(ember.ShapeError, match="batch_size"):
        BatchSampler(data, 0, False)
    with pytest.raises(TypeError, match="drop_last"):
        BatchSampler(data, 2, 1)


def test_random_sampler_orders_and_lengths():
    data = list(range(7))
    g = ember.Generator().manual_seed(0)
    first, second = list(RandomSampler(data, generator=g)), list(RandomSampler(data, generator=g))
    assert sorted(first) == data and sorted(second) == data and first != second
    again = ember.Generator().manual_seed(0)
    assert list(RandomSampler(data, generator=again)) == first  # reproducible from the seed
    # beyond the dataset without replacement: whole permutations, then part of one (PyTorch)
    long = list(RandomSampler(data, num_samples=17, generator=g))
    assert len(long) == 17 == len(tud.RandomSampler(data, num_samples=17))
    assert sorted(long[:7]) == data and sorted(long[7:14]) == data and len(set(long[14:])) == 3
    drawn = list(RandomSampler(data, replacement=True, num_samples=500, generator=g))
    assert len(drawn) == 500 and set(drawn) == set(data)
    assert len(RandomSampler(data, replacement=True)) == len(tud.RandomSampler(data, True))
    with pytest.raises(ember.ShapeError, match="num_samples"):
        RandomSampler(data, num_samples=0)
    with pytest.raises(TypeError, match="replacement"):
        RandomSampler(data, replacement=1)
    with pytest.raises(TypeError, match="ember.Generator"):
        RandomSampler(data, generator=torch.Generator())


def test_random_sampler_without_generator_draws_from_the_default():
    ember.manual_seed(5)
    a = list(RandomSampler(range(20)))
    ember.manual_seed(5)
    assert list(RandomSampler(range(20))) == a


def test_subset_random_sampler():
    indices = [10, 20, 30, 40]
    g = ember.Generator().manual_seed(1)
    s = SubsetRandomSampler(indices, generator=g)
    orders = [tuple(s) for _ in range(5)]
    assert all(sorted(o) == indices for o in orders) and len(set(orders)) > 1
    assert len(s) == len(tud.SubsetRandomSampler(indices)) == 4


def test_weighted_random_sampler_frequencies():
    weights = [0.1, 0.0, 0.6, 0.3]
    g = ember.Generator().manual_seed(0)
    s = WeightedRandomSampler(weights, 20000, generator=g)
    counts = Counter(s)
    assert len(s) == len(tud.WeightedRandomSampler(weights, 20000)) == 20000
    assert counts[1] == 0
    for i, w in enumerate(weights):
        assert abs(counts[i] / 20000 - w) < 0.02
    unique = list(WeightedRandomSampler(ember.tensor(weights), 3, replacement=False, generator=g))
    assert sorted(unique) == [0, 2, 3]
    with pytest.raises(ValueError, match="without replacement"):
        WeightedRandomSampler(weights, 4, replacement=False)
    with pytest.raises(ValueError, match="non-negative"):
        WeightedRandomSampler([1.0, -1.0], 2)
    with pytest.raises(ember.ShapeError, match="1-D"):
        WeightedRandomSampler([[1.0]], 2)


def test_samplers_drive_the_data_loader():
    x = ember.arange(10.0).reshape(10, 1)
    ds = TensorDataset(x)
    g = ember.Generator().manual_seed(0)
    loader = DataLoader(ds, batch_size=4, sampler=RandomSampler(ds, generator=g))
    seen = np.concatenate([b[0].numpy().ravel() for b in loader])
    assert sorted(seen.tolist()) == list(range(10)) and len(loader) == 3
    sub = DataLoader(ds, batch_size=2, sampler=SubsetRandomSampler([1, 3, 5], generator=g))
    assert sorted(np.concatenate([b[0].numpy().ravel() for b in sub]).tolist()) == [1, 3, 5]


def test_custom_sampler_subclass():
    class Evens(Sampler):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(range(0, self.n, 2))

        def __len__(self):
            return (self.n + 1) // 2

    ds = TensorDataset(ember.arange(6.0))
    out = [b[0].numpy().tolist() for b in DataLoader(ds, batch_size=2, sampler=Evens(6))]
    assert out == [[0.0, 2.0], [4.0]]
    with pytest.raises(NotImplementedError):
        iter(Sampler())


def test_random_split_lengths_match_torch():
    data = list(range(11))
    for lengths in ([0.5, 0.5], [0.3, 0.3, 0.4], [0.1, 0.9], [5, 6], [11, 0]):
        ours = random_split(data, lengths, generator=ember.Generator().manual_seed(0))
        theirs = tud.random_split(data, lengths, generator=torch.Generator().manual_seed(0))
        assert [len(s) for s in ours] == [len(s) for s in theirs]
        assert sorted(i for s in ours for i in s) == data
    a = random_split(data, [0.5, 0.5], generator=ember.Generator().manual_seed(3))
    b = random_split(data, [0.5, 0.5], generator=ember.Generator().manual_seed(3))
    assert [list(s) for s in a] == [list(s) for s in b]
    with pytest.raises(ember.ShapeError):
        random_split(data, [5, 5])


class Stream(IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


class TorchStream(tud.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        return self.n


def test_iterable_and_chain_datasets_match_torch():
    chained = Stream(3) + Stream(2)
    theirs = TorchStream(3) + TorchStream(2)
    assert isinstance(chained, ChainDataset) and list(chained) == list(theirs)
    assert len(chained) == len(theirs) == 5
    assert list(ChainDataset([Stream(1), Stream(2)])) == [0, 0, 1]
    with pytest.raises(TypeError, match="IterableDataset"):
        ChainDataset([[1, 2]])
    with pytest.raises(NotImplementedError):
        iter(IterableDataset())


def test_get_worker_info_in_the_main_process():
    assert get_worker_info() is None is tud.get_worker_info()
    info = ember.data.WorkerInfo(id=1, num_workers=2, seed=7, dataset=None)
    from ember.data import worker_info

    worker_info.set_worker_info(info)
    try:
        assert get_worker_info() is info and info.num_workers == 2
    finally:
        worker_info.set_worker_info(None)
