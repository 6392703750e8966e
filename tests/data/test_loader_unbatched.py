"""DataLoader(batch_size=None): automatic batching disabled, as in PyTorch. Each sample comes out
on its own, converted by `default_convert` (or collate_fn), with shuffle, samplers, iterable
datasets, workers and resumption; and `default_convert` itself against torch's."""

import collections
import sys

import numpy as np
import pytest

import ember
from ember.data import (
    DataLoader,
    Dataset,
    IterableDataset,
    SequentialSampler,
    default_convert,
)
from ember.errors import DTypeError, ShapeError

try:
    import torch
    import torch.utils.data as tud
except ImportError:
    torch = None

TORCH_MISSING = "PyTorch is not installed (pip install torch==2.13.0 from the CPU index)"
Point = collections.namedtuple("Point", "x y")


class Batches(Dataset):
    """Ready-made (x, y) batches, as the char_lstm program's dataset returns them."""

    def __init__(self, n=6):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        x = np.arange(12, dtype=np.int64).reshape(3, 4) + 100 * i
        return x, x + 1


class Stream(IterableDataset):
    def __iter__(self):
        return iter({"v": np.full(2, i, np.float32), "i": i} for i in range(5))


def _plain(obj):
    """Tensors (ember's or torch's) as NumPy arrays, tuples as lists: for comparisons."""
    if isinstance(obj, ember.Tensor) or (torch is not None and isinstance(obj, torch.Tensor)):
        return ("tensor", str(obj.dtype).split(".")[-1], obj.numpy().tolist())
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__, [_plain(v) for v in obj])
    if isinstance(obj, np.ndarray):
        return ("ndarray", obj.tolist())
    return obj


CONVERT_CASES = [
    np.arange(6, dtype=np.float32).reshape(2, 3),
    np.float64(2.5),
    np.int64(7),
    np.array([True, False]),
    (np.ones(2, np.int32), 3, "text"),
    [np.zeros((1, 2), np.float16), b"raw", None],
    {"a": np.arange(3), "b": {"c": np.float32(1)}, "s": "x"},
    collections.OrderedDict(k=np.ones(1)),
    Point(np.ones(2), 4.0),
    np.array(["a", "b"]),
    np.array([object(), 1], dtype=object)[1:],
    "plain string",
    5,
]


@pytest.mark.skipif(torch is None, reason=TORCH_MISSING)
@pytest.mark.parametrize("case", range(len(CONVERT_CASES)))
def test_default_convert_matches_torch(case):
    data = CONVERT_CASES[case]
    got, want = default_convert(data), tud.default_convert(data)
    assert type(got) is type(want) or isinstance(got, ember.Tensor)
    if isinstance(data, np.ndarray) and data.dtype.kind == "O":
        assert got is data and want is data
        return
    assert _plain(got) == _plain(want)


def test_default_convert_shares_memory_and_copies_containers():
    a = np.zeros(3, np.float32)
    t = default_convert(a)
    a[0] = 5
    assert t.numpy()[0] == 5  # as torch.as_tensor: the array's memory
    sample = {"a": a}
    out = default_convert(sample)
    assert out is not sample and isinstance(sample["a"], np.ndarray)  # the input is unchanged
    assert isinstance(out["a"], ember.Tensor)


def test_default_convert_refuses_dtypes_ember_lacks():
    with pytest.raises(DTypeError, match=r"sample\['x'\]\[0\].*longdouble|float128"):
        default_convert({"x": [np.ones(2, np.longdouble)]})
    converted = default_convert({"x": [np.ones(2, np.uint32)]})  # (PyTorch's uint32 too)
    assert converted["x"][0].dtype == ember.uint32
    converted = default_convert({"x": [np.ones(2, np.complex64)]})  # (complex: ember has it)
    assert converted["x"][0].dtype == ember.complex64


def test_exported_under_torch_paths():
    import ember.utils.data as eud

    assert eud.default_convert is default_convert is ember.data.default_convert


def test_samples_come_out_as_they_are():
    loader = DataLoader(Batches(), batch_size=None)
    assert len(loader) == 6
    out = list(loader)
    assert len(out) == 6
    for i, (x, y) in enumerate(out):  # a tuple comes back as a list, as in torch
        assert isinstance(x, ember.Tensor) and x.shape == (3, 4) and x.dtype == ember.int64
        np.testing.assert_array_equal(x.numpy(), np.arange(12).reshape(3, 4) + 100 * i)
        np.testing.assert_array_equal(y.numpy(), x.numpy() + 1)


@pytest.mark.skipif(torch is None, reason=TORCH_MISSING)
def test_same_items_as_torch():
    ours = [_plain(s) for s in DataLoader(Batches(4), batch_size=None)]
    theirs = [_plain(s) for s in tud.DataLoader(Batches(4), batch_size=None)]
    assert ours == theirs
    assert len(DataLoader(Batches(4), batch_size=None)) == len(
        tud.DataLoader(Batches(4), batch_size=None)
    )
    ours = [_plain(s) for s in DataLoader(Stream(), batch_size=None)]
    torch_stream = type("TorchStream", (tud.IterableDataset,), {"__iter__": Stream.__iter__})
    theirs = [_plain(s) for s in tud.DataLoader(torch_stream(), batch_size=None)]
    assert ours == theirs


def test_shuffle_and_sampler_order_the_samples():
    gen = ember.Generator().manual_seed(3)
    firsts = [
        int(x[0, 0]) // 100 for x, _ in DataLoader(Batches(), None, shuffle=True, generator=gen)
    ]
    assert sorted(firsts) == list(range(6)) and firsts != list(range(6))
    loader = DataLoader(Batches(), batch_size=None, sampler=[4, 1, 4])
    assert len(loader) == 3
    assert [int(x[0, 0]) // 100 for x, _ in loader] == [4, 1, 4]
    seq = DataLoader(Batches(), batch_size=None, sampler=SequentialSampler(range(6)))
    assert [int(x[0, 0]) // 100 for x, _ in seq] == list(range(6))


def test_collate_fn_is_applied_to_each_sample():
    seen = []

    def collate(sample):
        seen.append(type(sample).__name__)
        return sample[0].sum()

    out = list(DataLoader(Batches(3), batch_size=None, collate_fn=collate))
    assert seen == ["tuple"] * 3  # the raw sample, not a list of them
    assert out == [np.arange(12).sum() + 1200 * i for i in range(3)]


def test_iterable_dataset():
    out = list(DataLoader(Stream(), batch_size=None))
    assert [o["i"] for o in out] == list(range(5))  # ints stay ints
    assert all(isinstance(o["v"], ember.Tensor) for o in out)


def test_prefetch_thread_gives_the_same_samples():
    plain = [_plain(s) for s in DataLoader(Batches(), batch_size=None)]
    assert [_plain(s) for s in DataLoader(Batches(), batch_size=None, prefetch=2)] == plain


@pytest.mark.skipif(sys.platform == "win32", reason="uses fork")
def test_workers_give_the_same_samples():
    gen = ember.Generator().manual_seed(0)
    plain = [_plain(s) for s in DataLoader(Batches(), None, shuffle=True, generator=gen)]
    gen.manual_seed(0)
    loader = DataLoader(Batches(), None, shuffle=True, generator=gen, num_workers=2)
    assert [_plain(s) for s in loader] == plain
    # the conversion and the collate_fn run in the worker
    out = list(DataLoader(Batches(4), batch_size=None, num_workers=2, collate_fn=_worker_pid))
    assert len(out) == 4 and all(isinstance(o, int) for o in out)
    import os

    assert os.getpid() not in out
    # an iterable dataset: each worker has its copy, as in torch (so each sample twice)
    items = [o["i"] for o in DataLoader(Stream(), batch_size=None, num_workers=2)]
    assert sorted(items) == sorted(list(range(5)) * 2)


def _worker_pid(sample):
    import os

    return os.getpid()


def test_resumption_mid_epoch():
    gen = ember.Generator().manual_seed(1)
    loader = DataLoader(Batches(), batch_size=None, shuffle=True, generator=gen)
    it = iter(loader)
    next(it), next(it)
    state = loader.state_dict()
    rest = [_plain(s) for s in it]
    resumed = DataLoader(Batches(), batch_size=None, shuffle=True, generator=ember.Generator())
    resumed.load_state_dict(state)
    assert [_plain(s) for s in resumed] == rest and len(rest) == 4


def test_argument_errors_name_the_argument():
    with pytest.raises(ShapeError, match="batch_sampler"):
        DataLoader(Batches(), batch_size=None, batch_sampler=[[0, 1]])
    with pytest.raises(ShapeError, match="drop_last"):
        DataLoader(Batches(), batch_size=None, drop_last=True)
    with pytest.raises(ShapeError, match="batch_size must be a positive int or None"):
        DataLoader(Batches(), batch_size=0)
