"""Built-in datasets (digits, Fashion-MNIST), the IDX reader, Subset and random_split."""

import csv
import gzip
import os
import struct

import numpy as np
import pytest

import ember
from ember.data import DataLoader, Subset, TensorDataset, datasets, random_split, transforms
from ember.data.idx import read_idx

try:
    import torch
except ImportError:
    torch = None

FASHION_ROOT = "/usr/share/datasets/fashion-mnist"


# --------------------------------------------------------------------------------------- digits
def _digits_reference():
    """The bundled CSV read independently with the csv module."""
    with gzip.open(datasets.DIGITS_FILE, "rt") as f:
        rows = [[int(v) for v in row] for row in csv.reader(f)]
    table = np.array(rows)
    return table[:, :64], table[:, 64]


def test_digits_shapes_dtypes_and_ranges():
    train, test = datasets.digits(train=True), datasets.digits(train=False)
    assert len(train) + len(test) == 1797
    image, label = train[0]
    assert image.shape == (1, 8, 8) and image.dtype == ember.float32 and isinstance(label, int)
    assert train.data.shape == (len(train), 1, 8, 8) and train.targets.dtype == ember.int64
    for part in (train, test):
        values = part.data.numpy()
        assert values.min() == 0.0 and values.max() == 1.0
        assert sorted(set(part.targets.numpy().tolist())) == list(range(10))


def test_digits_split_is_every_fifth_sample_of_each_class():
    pixels, labels = _digits_reference()
    in_test = np.zeros(len(labels), bool)
    for c in range(10):
        rows = np.flatnonzero(labels == c)
        in_test[rows[4::5]] = True  # ranks 4, 9, 14, ... within the class
    test, train = datasets.digits(train=False), datasets.digits(train=True)
    np.testing.assert_array_equal(test.targets.numpy(), labels[in_test])
    np.testing.assert_array_equal(train.targets.numpy(), labels[~in_test])
    np.testing.assert_allclose(test.data.numpy().reshape(-1, 64), pixels[in_test] / 16.0, rtol=1e-7)
    assert len(test) == 355 and len(train) == 1442


def test_digits_split_is_deterministic_and_follows_test_fraction():
    a, b = datasets.digits(train=False), datasets.digits(train=False)
    np.testing.assert_array_equal(a.data.numpy(), b.data.numpy())
    a.data.numpy()[:] = 0  # datasets are independent copies
    assert datasets.digits(train=False).data.numpy().max() == 1.0
    _, labels = _digits_reference()
    quarter = datasets.digits(train=False, test_fraction=0.25)
    expected = sum(int(np.sum(labels == c)) // 4 for c in range(10))
    assert len(quarter) == expected
    with pytest.raises(ember.DatasetError, match="test_fraction"):
        datasets.digits(test_fraction=1.0)


def test_digits_with_transforms_through_a_loader():
    flip = transforms.RandomHorizontalFlip(p=1.0)
    ds = datasets.digits(train=False, transform=flip, target_transform=lambda y: y + 100)
    plain = datasets.digits(train=False)
    images, labels = next(iter(DataLoader(ds, batch_size=8)))
    np.testing.assert_array_equal(images.numpy(), plain.data.numpy()[:8, :, :, ::-1])
    np.testing.assert_array_equal(labels.numpy(), plain.targets.numpy()[:8] + 100)


# ------------------------------------------------------------------------------------ IDX files
def _idx_bytes(array, code, fmt):
    header = struct.pack(">HBB", 0, code, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(fmt).tobytes()


@pytest.mark.parametrize(
    "dtype, code, fmt",
    [
        (np.uint8, 0x08, ">u1"),
        (np.int8, 0x09, ">i1"),
        (np.int16, 0x0B, ">i2"),
        (np.int32, 0x0C, ">i4"),
        (np.float32, 0x0D, ">f4"),
        (np.float64, 0x0E, ">f8"),
    ],
)
@pytest.mark.parametrize("compress", [False, True])
def test_read_idx_round_trip(tmp_path, dtype, code, fmt, compress):
    array = (np.arange(24).reshape(2, 3, 4) - 5).astype(dtype)
    if dtype == np.uint8:
        array = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    data = _idx_bytes(array, code, fmt)
    path = tmp_path / ("a.idx.gz" if compress else "a.idx")
    path.write_bytes(gzip.compress(data) if compress else data)
    out = read_idx(path)
    assert out.dtype == np.dtype(dtype) and out.dtype.isnative
    np.testing.assert_array_equal(out, array)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d[:-1], "truncated"),
        (lambda d: d + b"\0", "trailing bytes"),
        (lambda d: d[:6], "truncated header"),
        (lambda d: d[:2], "too short"),
        (lambda d: b"\x01\x02" + d[2:], "not an IDX file"),
        (lambda d: d[:2] + b"\x07" + d[3:], "unknown IDX type code 0x07"),
        (lambda d: d[:3] + b"\x00", "0 dimensions"),
    ],
)
def test_read_idx_rejects_damaged_files_naming_them(tmp_path, mutate, message):
    data = _idx_bytes(np.zeros((2, 3), np.uint8), 0x08, ">u1")
    path = tmp_path / "bad-idx1-ubyte"
    path.write_bytes(mutate(data))
    with pytest.raises(ember.DatasetError, match=message) as info:
        read_idx(path)
    assert str(path) in str(info.value)


def test_read_idx_rejects_a_truncated_gzip_stream(tmp_path):
    packed = gzip.compress(_idx_bytes(np.arange(100, dtype=np.uint8), 0x08, ">u1"))
    path = tmp_path / "labels.gz"
    path.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(ember.DatasetError, match="gzip") as info:
        read_idx(path)
    assert str(path) in str(info.value)
    with pytest.raises(ember.DatasetError, match="no such file"):
        read_idx(tmp_path / "missing")


# --------------------------------------------------------------------------------- fashion-mnist
def _write_fashion(root, prefix, images, labels, gz=True):
    os.makedirs(root, exist_ok=True)
    for name, array in (
        (f"{prefix}-images-idx3-ubyte", images),
        (f"{prefix}-labels-idx1-ubyte", labels),
    ):
        data = _idx_bytes(array, 0x08, ">u1")
        if gz:
            (root / (name + ".gz")).write_bytes(gzip.compress(data))
        else:
            (root / name).write_bytes(data)


def test_fashion_mnist_reads_idx_files_gz_and_plain(tmp_path):
    rng = np.random.default_rng(0)
    train_images = rng.integers(0, 256, size=(6, 28, 28), dtype=np.uint8)
    train_labels = np.array([0, 9, 3, 3, 1, 5], np.uint8)
    test_images = rng.integers(0, 256, size=(2, 28, 28), dtype=np.uint8)
    _write_fashion(tmp_path, "train", train_images, train_labels, gz=True)
    _write_fashion(tmp_path, "t10k", test_images, np.array([2, 7], np.uint8), gz=False)
    train = datasets.fashion_mnist(root=tmp_path, train=True)
    test = datasets.fashion_mnist(root=str(tmp_path), train=False)
    assert len(train) == 6 and len(test) == 2 and train.classes[9] == "Ankle boot"
    image, label = train[1]
    assert image.shape == (1, 28, 28) and image.dtype == ember.float32 and label == 9
    np.testing.assert_allclose(train.data.numpy()[:, 0], train_images / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(test.targets.numpy(), [2, 7])
    assert test.targets.dtype == ember.int64


def test_fashion_mnist_checks_the_pair_of_files(tmp_path):
    _write_fashion(tmp_path, "train", np.zeros((3, 4, 4), np.uint8), np.zeros(2, np.uint8))
    with pytest.raises(ember.DatasetError, match="3 images but .* 2 labels"):
        datasets.fashion_mnist(root=tmp_path)
    _write_fashion(tmp_path / "b", "train", np.zeros((2, 4, 4), np.uint8), np.array([1, 12]))
    with pytest.raises(ember.DatasetError, match="label 12 is out of range"):
        datasets.fashion_mnist(root=tmp_path / "b")


def test_missing_fashion_mnist_names_the_package_the_path_and_root(tmp_path):
    for root in (tmp_path / "nowhere", tmp_path):
        with pytest.raises(ember.DatasetError) as info:
            datasets.fashion_mnist(root=root)
        text = str(info.value)
        assert "dataset-fashion-mnist" in text and str(root) in text and "root=" in text
        assert isinstance(info.value, FileNotFoundError)


@pytest.mark.skipif(
    not os.path.isdir(FASHION_ROOT),
    reason=f"Fashion-MNIST is not installed in {FASHION_ROOT} (apt-get install "
    "dataset-fashion-mnist)",
)
def test_the_installed_fashion_mnist_files():
    train, test = datasets.fashion_mnist(train=True), datasets.fashion_mnist(train=False)
    assert train.data.shape == (60000, 1, 28, 28) and test.data.shape == (10000, 1, 28, 28)
    assert np.bincount(train.targets.numpy()).tolist() == [6000] * 10
    assert np.bincount(test.targets.numpy()).tolist() == [1000] * 10
    assert 0.0 <= float(train.data.numpy().min()) and float(train.data.numpy().max()) == 1.0


# ------------------------------------------------------------------------- subsets and splits
def test_subset_and_its_batched_fetch():
    ds = TensorDataset(ember.arange(10) * 10)
    sub = Subset(ds, [7, 2, 5])
    assert len(sub) == 3 and sub[0][0].item() == 70
    (batch,) = next(iter(DataLoader(sub, batch_size=3)))
    assert batch.numpy().tolist() == [70, 20, 50]


@pytest.mark.parametrize("lengths", ["counts", [0.3, 0.3, 0.4], [0.5, 0.5], [0.1] * 10])
@pytest.mark.parametrize("n", [10, 11, 17])
def test_random_split_sizes_follow_pytorch(lengths, n):
    lengths = [3, n - 3] if lengths == "counts" else lengths
    parts = random_split(TensorDataset(ember.arange(n)), lengths, generator=ember.Generator(0))
    indices = [i for p in parts for i in p.indices]
    assert sorted(indices) == list(range(n))  # disjoint and complete
    if torch is not None:
        ref = torch.utils.data.random_split(range(n), lengths)
        assert [len(p) for p in parts] == [len(r) for r in ref]


def test_random_split_is_reproducible_and_validated():
    ds = TensorDataset(ember.arange(20))
    a = random_split(ds, [0.5, 0.5], generator=ember.Generator(3))
    b = random_split(ds, [0.5, 0.5], generator=ember.Generator(3))
    assert a[0].indices == b[0].indices
    with pytest.raises(ember.ShapeError, match="sum to 19"):
        random_split(ds, [10, 9])
    with pytest.raises(ember.ShapeError, match="lengths"):
        random_split(ds, [0.5, 0.6])


def test_tensor_dataset_requires_one_length():
    with pytest.raises(ember.ShapeError, match=r"\(3,\), \(4,\)"):
        TensorDataset(ember.zeros(3), ember.zeros(4))
