"""PyTorch checkpoints whose pickle is valid and names only allowed globals, but makes the reader
build far more than the file holds (io/_pickle_allowance.py): one large value reached again and
again through memo references (``BINGET``) and handed to a copying call (``_codecs.encode``,
``builtins.set``, ``bytearray``, ``torch.Size``, a NumPy array's state), or a thousand distinct
``expand``s of one float, each copied. Before the allowance a 1 MB file made ember.load build
gigabytes (``_codecs.encode`` of a million characters ten thousand times) and a 2 kB file one
gigabyte (four expanded views); each is now refused with a `CheckpointError` naming the file.

The allowance's floor is lowered to 1 MB here so the cases stay small; the real checkpoints
torch writes (zip and legacy, views, NumPy values, sparse tensors) still load under it.
"""

from __future__ import annotations

import codecs
import io
import pickle
import random
import zipfile

import numpy as np
import pytest

import ember
from ember.errors import CheckpointError
from ember.io import _pickle_allowance

torch = pytest.importorskip("torch")

FLOOR = 1 << 20


@pytest.fixture(autouse=True)
def small_floor(monkeypatch):
    monkeypatch.setattr(_pickle_allowance, "FLOOR", FLOOR)


def _zip(pickled: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", pickled)
        archive.writestr("archive/version", "3\n")
    return buffer.getvalue()


class _Call:
    """Pickles as a call of ``fn`` on ``args`` (then ``state`` set, when given): the pickler
    memoizes the arguments' objects, so the same large value costs its bytes once and a memo
    reference in every further call."""

    def __init__(self, fn, args, state=None):
        self.fn, self.args, self.state = fn, args, state

    def __reduce__(self):
        return (self.fn, self.args) if self.state is None else (self.fn, self.args, self.state)


def _calls(fn, args, times: int, state=None) -> bytes:
    return _zip(pickle.dumps([_Call(fn, args, state) for _ in range(times)], protocol=2))


def _load(data: bytes):
    return ember.load(io.BytesIO(data))


_TEXT = "a" * 200_000
_ITEMS = list(range(5_000))
CASES = {
    "codecs.encode of one string": (codecs.encode, (_TEXT, "latin1")),
    "bytearray of one string": (bytearray, (_TEXT, "latin1")),
    "set of one list": (set, (_ITEMS,)),
    "torch.Size of one list": (torch.Size, (_ITEMS,)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_one_value_copied_through_memo_references_is_refused(case):
    fn, args = CASES[case]
    assert len(_load(_calls(fn, args, 1))) == 1  # one call is an ordinary value
    data = _calls(fn, args, 200)
    assert len(data) < FLOOR
    with pytest.raises(CheckpointError, match="hostile PyTorch checkpoint.*builds"):
        _load(data)


def test_numpy_arrays_built_again_and_again_from_one_state_are_refused():
    raw = np.arange(50_000, dtype=np.float32)
    reconstruct, args, state = raw.__reduce__()  # numpy's own pickle: _reconstruct, BUILD
    assert np.array_equal(_load(_calls(reconstruct, args, 1, state))[0], raw)
    with pytest.raises(CheckpointError, match="hostile PyTorch checkpoint"):
        _load(_calls(reconstruct, args, 60, state))  # one state, 60 arrays of 200 kB


def _saved(obj, legacy: bool = False) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer, _use_new_zipfile_serialization=not legacy)
    return buffer.getvalue()


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_many_expanded_views_of_one_float_are_refused(legacy):
    base = torch.zeros(1)
    few = _saved([base.expand(2**14) for _ in range(4)], legacy)
    assert [t.shape for t in _load(few)] == [(2**14,)] * 4  # copies within the allowance
    many = _saved([base.expand(2**14) for _ in range(100)], legacy)  # 6.5 MB of copies
    with pytest.raises(CheckpointError, match="hostile PyTorch checkpoint"):
        _load(many)


def test_views_of_one_legacy_storage_bring_its_bytes_once():
    """Two hundred views of one legacy storage, each expanded: the storage's bytes count once
    toward what the file brought, however often it is named (counted per naming, they would
    have raised the limit past the copies)."""
    big = torch.zeros(40_000)
    data = _saved([big[: 2**10 + k].expand(3, -1) for k in range(200)], legacy=True)
    with pytest.raises(CheckpointError, match="hostile PyTorch checkpoint"):
        _load(data)


def _real_checkpoints():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2))
    base = torch.arange(12.0).reshape(3, 4)
    return {
        "state_dict": net.state_dict(),
        "views": {"a": base, "b": base[1:, ::2], "d": base[0].expand(2, 4), "t": base.t()},
        "numpy": {"acc": np.float64(0.5), "counts": np.arange(1000, dtype=np.int64)},
        "sparse": torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.ones(2, 2), (3, 2)),
        "bytes": {"b": b"\x00\x01" * 1000, "s": {1, 2, 3}, "size": torch.Size([2, 3])},
    }


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
@pytest.mark.parametrize("name", list(_real_checkpoints()))
def test_real_checkpoints_load_under_the_allowance(name, legacy):
    obj = _real_checkpoints()[name]
    loaded = _load(_saved(obj, legacy))
    assert type(loaded).__name__ in ("dict", "OrderedDict", "SparseTensor")


def test_seeded_repetition_counts_are_refused_past_the_allowance_only():
    """Random string sizes and repetition counts: refused exactly when the copies pass the
    floor plus twice the file's bytes, read otherwise."""
    rng = random.Random(56)
    for _ in range(12):
        size, times = rng.choice([1_000, 30_000, 100_000]), rng.choice([1, 5, 40, 120])
        text = "a" * size
        pickled = pickle.dumps(
            [_Call(codecs.encode, (text, "latin1")) for _ in range(times)], protocol=2
        )
        built = (size + 64) * times  # the bytes, and the argument tuples' two items
        limit = FLOOR + 2 * len(pickled)
        if built > limit + 64 * times:
            with pytest.raises(CheckpointError, match="hostile"):
                _load(_zip(pickled))
        elif built < limit - 64 * times:
            assert len(_load(_zip(pickled))) == times
