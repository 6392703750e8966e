"""Hostile IDX files (ember/data/idx.py, read by `fashion_mnist`): seeded mutations of a valid
pair of files, plain and gzip-compressed, are read or refused with a `DatasetError` naming the
file; a gzip bomb is refused without being inflated; dimensions no memory holds are refused
before anything is allocated."""

from __future__ import annotations

import gzip
import random
import tracemalloc
import zlib

import numpy as np
import pytest

from ember.data import idx as idx_module
from ember.data.datasets import fashion_mnist
from ember.data.idx import read_idx
from ember.errors import DatasetError

from . import files54_fuzzing as fz

IMAGES = "train-images-idx3-ubyte"
LABELS = "train-labels-idx1-ubyte"


def _pair():
    images = fz.idx_bytes((4, 28, 28))
    labels = fz.idx_bytes((4,), data=bytes([0, 3, 9, 1]))
    return images, labels


def test_mutated_dataset_files_are_read_or_refused_naming_the_file(tmp_path):
    rng = random.Random(fz.seed())
    tally = fz.Tally()
    good = _pair()
    boundaries = [0, 2, 3, 4, 8, 12, 16]
    for case in range(fz.cases(1200)):
        which = rng.randrange(2)
        data = fz.mutate_bytes(good[which], rng, boundaries, big_endian=True)
        if rng.random() < 0.5:
            data = gzip.compress(data, compresslevel=1)
            if rng.random() < 0.3:
                data = fz.mutate_bytes(data, rng)
        names = [IMAGES, LABELS]
        for k, name in enumerate(names):
            (tmp_path / name).write_bytes(data if k == which else good[k])
        tally.check(f"case {case}, {names[which]}", lambda: fashion_mnist(str(tmp_path)))
    assert not tally.escapes, tally.report()
    assert tally.read and tally.refused > tally.read  # both outcomes reached


def test_refusals_name_the_file(tmp_path):
    path = tmp_path / LABELS
    path.write_bytes(fz.idx_bytes((4,))[:-1])
    with pytest.raises(DatasetError, match=f"{path}: truncated"):
        read_idx(path)
    path.write_bytes(gzip.compress(fz.idx_bytes((4,)))[:-3])
    with pytest.raises(DatasetError, match=f"{path}: the gzip stream is truncated"):
        read_idx(path)


def test_a_gzip_bomb_is_refused_without_being_inflated(tmp_path):
    # a 10-byte array, then 256 MiB of zeros: about 250 KB compressed
    deflater = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    parts = [deflater.compress(fz.idx_bytes((10,)))]
    zeros = bytes(1 << 20)
    parts += [deflater.compress(zeros) for _ in range(256)]
    path = tmp_path / "bomb.gz"
    path.write_bytes(b"".join(parts) + deflater.flush())
    tracemalloc.start()
    try:
        with pytest.raises(DatasetError, match="trailing bytes"):
            read_idx(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak  # the whole stream would be 256 MiB


@pytest.mark.parametrize("compressed", [False, True])
def test_dimensions_no_memory_holds_are_refused_before_allocating(tmp_path, compressed):
    data = fz.idx_bytes((2**32 - 1, 2**32 - 1, 2**32 - 1), 0x0E, data=b"\0" * 64)
    path = tmp_path / "huge"
    path.write_bytes(gzip.compress(data) if compressed else data)
    with pytest.raises(DatasetError, match=f"{path}: the IDX dimensions .* more than this"):
        read_idx(path)


def test_valid_files_read_as_before(tmp_path):
    images, labels = _pair()
    (tmp_path / (IMAGES + ".gz")).write_bytes(gzip.compress(images))
    (tmp_path / LABELS).write_bytes(labels)
    data = fashion_mnist(str(tmp_path))
    assert len(data) == 4 and data.targets.tolist() == [0, 3, 9, 1]
    want = np.frombuffer(images[16:], np.uint8).reshape(4, 1, 28, 28) / np.float32(255)
    np.testing.assert_array_equal(data.data.numpy(), want.astype(np.float32))
    # several gzip members, one after another, are one stream (as gzip reads them)
    (tmp_path / "two.gz").write_bytes(gzip.compress(labels[:7]) + gzip.compress(labels[7:]))
    assert read_idx(tmp_path / "two.gz").tolist() == [0, 3, 9, 1]
    assert idx_module.parse_idx(labels).tolist() == [0, 3, 9, 1]


def test_a_damaged_bundled_digits_file_is_refused_saying_to_reinstall(tmp_path, monkeypatch):
    from ember.data import datasets

    raw = open(datasets.DIGITS_FILE, "rb").read()
    text = gzip.decompress(raw)
    damaged = tmp_path / "digits.csv.gz"
    monkeypatch.setattr(datasets, "DIGITS_FILE", str(damaged))
    rng = random.Random(fz.seed())
    tally = fz.Tally()
    too_long = gzip.compress(text + b"\0" * (20 << 20), compresslevel=1)  # inflates too far
    variants = [
        lambda: fz.mutate_bytes(raw, rng),  # (corrupt deflate data raised zlib.error)
        lambda: gzip.compress(text.replace(b",", rng.choice([b",99,", b",-1,", b";"]), 3), 1),
        lambda: too_long,
    ]
    for case in range(fz.cases(90)):
        damaged.write_bytes(variants[case % 3]())
        datasets._digits_raw.cache_clear()
        tally.check(f"case {case}", lambda: datasets.digits())
    datasets._digits_raw.cache_clear()
    assert not tally.escapes, tally.report()
    assert tally.refused > 60
    damaged.write_bytes(gzip.compress(text.replace(b"\n", b",\n", 1)))
    with pytest.raises(DatasetError, match="digits.csv.gz is missing or damaged .*reinstall"):
        datasets.digits()
    datasets._digits_raw.cache_clear()
