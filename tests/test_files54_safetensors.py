"""Hostile plain safetensors files (as ``transformers`` writes ``model.safetensors``; read by
io/checkpoint.read_safetensors for load_bert): seeded mutations of the bytes and of the
header's JSON (dtypes, shapes and offsets made huge, negative, fractional, overlapping or of
the wrong kind, entries dropped or nested deep) are read or refused with an `EmberError`
naming the file, and what is read is what the header says."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from ember.io.checkpoint import read_safetensors

from . import files54_fuzzing as fz

safetensors_numpy = pytest.importorskip("safetensors.numpy")

ARRAYS = {
    "a": np.arange(12, dtype=np.float32).reshape(3, 4),
    "b": np.ones(5, np.int64),
    "c": np.zeros((2, 0), np.float16),
    "d": np.array([True, False]),
}
FIELD_VALUES = [
    [0, 2**64], [-1, 4], [0, 2**63], [5, 3], [1.5, 3], "x", [0, 48, 1], None, ["F32"], "F64",
    "BF16", "F8_E4M3", "U8", "I4", [2**40, 2**40], [-3], [3, 4, 5, 6, 7, 8, 9, 1, 1, 1, 1],
]  # fmt: skip


def _read(path):
    return read_safetensors(path, lambda metadata, where: None)


def test_mutated_plain_safetensors_files_are_read_or_refused(tmp_path):
    good = safetensors_numpy.save(ARRAYS, metadata={"format": "pt"})
    length = int.from_bytes(good[:8], "little")
    header, body = json.loads(good[8 : 8 + length]), good[8 + length :]
    rng = random.Random(fz.seed())
    tally = fz.Tally()
    path = tmp_path / "model.safetensors"
    for case in range(fz.cases(1500)):
        if rng.random() < 0.3:
            data = fz.mutate_bytes(good, rng, [0, 8, 8 + length])
        else:
            changed = fz.mutate_json(header, rng)
            if isinstance(changed, dict) and rng.random() < 0.4:
                entry = changed.get(rng.choice(list(ARRAYS)))
                if isinstance(entry, dict):
                    entry[rng.choice(["dtype", "shape", "data_offsets"])] = rng.choice(FIELD_VALUES)
            try:
                text = json.dumps(changed).encode("utf-8", "surrogatepass")
            except (RecursionError, ValueError):
                text = b"[" * 100_000
            data = len(text).to_bytes(8, "little") + text + body
        path.write_bytes(data)

        def check():
            _metadata, arrays = _read(path)
            for name, array in arrays.items():  # what is read fits what the file holds
                assert array.nbytes <= len(data), name

        tally.check(f"case {case}: {data[8:160]!r}", check)
    assert not tally.escapes, tally.report()
    assert tally.read and tally.refused > tally.read


def test_the_seed_reads_back_exactly(tmp_path):
    path = tmp_path / "model.safetensors"
    safetensors_numpy.save_file(ARRAYS, str(path))
    _metadata, arrays = _read(path)
    for name, array in ARRAYS.items():
        np.testing.assert_array_equal(arrays[name], array)
        assert arrays[name].dtype == array.dtype
