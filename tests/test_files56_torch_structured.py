"""Seeded structured PyTorch checkpoints: valid zip archives whose ``data.pkl`` names only the
globals ``torch.load(weights_only=True)`` allows, built from random parts past the first checks
(storages of random dtypes and element counts whose records are of the right or wrong size,
views at random offsets, sizes and strides, overlapping and huge, one storage shared by many
views or named with two dtypes, persistent ids of the wrong shape, containers nested deep,
OrderedDicts, sets, complex numbers and bytes beside them). Each is read or refused with an
`EmberError`; a read tensor equals the strided view NumPy makes of the same bytes.
``EMBER_FUZZ_CASES``/``EMBER_FUZZ_SEED`` run more."""

from __future__ import annotations

import io
import pickle
import random
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import ember

from . import files54_fuzzing as fz

torch = pytest.importorskip("torch")

STORAGES = [
    (torch.FloatStorage, np.float32),
    (torch.DoubleStorage, np.float64),
    (torch.LongStorage, np.int64),
    (torch.ByteStorage, np.uint8),
    (torch.BoolStorage, np.bool_),
    (torch.HalfStorage, np.float16),
]


class _Storage:
    def __init__(self, kind, key, numel):
        self.kind, self.key, self.numel = kind, key, numel


class _Tensor:
    """Pickles as torch's ``_rebuild_tensor_v2`` of a storage at an offset, size and stride."""

    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, tuple(size), tuple(stride), False, OrderedDict())

    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2, self.args)


class _Pickler(pickle.Pickler):
    def __init__(self, file, odd_ids: bool):
        super().__init__(file, protocol=2)
        self.odd_ids = odd_ids

    def persistent_id(self, obj):
        if isinstance(obj, _Storage):
            pid = ("storage", obj.kind, obj.key, "cpu", obj.numel)
            return pid[:4] if self.odd_ids else pid
        return None


def _case(rng: random.Random):
    """(the checkpoint's bytes, [(tensor place in the object, numpy array expected)])."""
    records, storages, expected = {}, [], []
    for k in range(rng.choice([1, 1, 2, 3])):
        kind, np_dtype = rng.choice(STORAGES)
        numel = rng.choice([0, 1, 5, 12, 64])
        data = np.arange(numel).astype(np_dtype)
        blob = data.tobytes()
        if rng.random() < 0.15:  # a record of another size than its storage
            blob = blob[: rng.randrange(len(blob) + 1)] if rng.random() < 0.5 else blob + b"\0"
        records[f"archive/data/{k}"] = blob
        if rng.random() < 0.1:  # the same record named with another dtype: read as it says
            other, other_dtype = rng.choice(STORAGES)
            fits = len(blob) == numel * np.dtype(other_dtype).itemsize
            as_other = np.frombuffer(blob, other_dtype) if fits else data
            storages.append((_Storage(other, str(k), numel), as_other))
        storages.append((_Storage(kind, str(k), numel), data))
    obj = {}
    for j in range(rng.choice([1, 2, 4, 12])):
        storage, data = rng.choice(storages)
        ndim = rng.choice([0, 1, 2, 3])
        size = [rng.choice([0, 1, 2, 3, 4, 2**20, 2**40]) for _ in range(ndim)]
        stride = [rng.choice([0, 1, 2, 4, -1, 2**40]) for _ in range(ndim)]
        offset = rng.choice([0, 0, 1, 3, data.size, -1, 2**62])
        obj[f"t{j}"] = _Tensor(storage, offset, size, stride)
        expected.append((f"t{j}", data, offset, size, stride))
    extras = [
        OrderedDict(a=1),
        {1, 2, 3},
        complex(1, 2),
        b"\x00\xff",
        (1, "two", None),
        float("nan"),
    ]
    obj["extra"] = rng.choice(extras)
    if rng.random() < 0.1:
        nested = obj
        for _ in range(rng.choice([100, 5000])):
            nested = [nested]
        obj = {"deep": nested}
    buffer = io.BytesIO()
    try:
        _Pickler(buffer, odd_ids=rng.random() < 0.05).dump(obj)
    except RecursionError:
        return None
    records["archive/data.pkl"] = buffer.getvalue()
    records["archive/version"] = b"3\n"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, blob in records.items():
            archive.writestr(name, blob)
    return out.getvalue(), expected


def _expected_view(data, offset, size, stride):
    """NumPy's view of ``data`` at the place, or None where it does not lie inside it."""
    if offset < 0 or any(s < 0 for s in stride) or len(size) != len(stride):
        return None
    if 0 in size:
        return np.empty(size, data.dtype)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= data.size:
        return None
    item = data.itemsize
    return np.lib.stride_tricks.as_strided(
        data[offset:], shape=size, strides=[s * item for s in stride]
    )


def test_seeded_structured_checkpoints_are_read_exactly_or_refused():
    rng = random.Random(fz.seed(56))
    tally = fz.Tally()
    compared = 0
    for case in range(fz.cases(300)):
        made = _case(rng)
        if made is None:
            continue
        data, expected = made
        loaded = {}

        def read(data=data, loaded=loaded):
            loaded["value"] = ember.load(io.BytesIO(data))

        tally.check(f"case {case}", read)
        value = loaded.get("value")
        if not isinstance(value, dict) or "deep" in value:
            continue
        for name, source, offset, size, stride in expected:
            want = _expected_view(source, offset, size, stride)
            got = value[name]
            assert want is not None, f"case {case}: {name} read, but lies outside its storage"
            np.testing.assert_array_equal(got.numpy(), want, err_msg=f"case {case}: {name}")
            compared += 1
    assert not tally.escapes, tally.report()
    assert tally.read > 10 and tally.refused > 10 and compared > 10, tally.report()
