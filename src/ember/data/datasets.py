"""Built-in datasets: the bundled 8x8 digits, and Fashion-MNIST read from its IDX files.

Both return a `LabeledImages` dataset: float32 images of shape (1, H, W) scaled to [0, 1] and
int64 labels, with torchvision-style ``transform`` / ``target_transform`` hooks. Without
transforms a DataLoader gathers whole batches from it with one index per tensor.

**digits** (`digits()`): the UCI "Optical Recognition of Handwritten Digits" data set (Alpaydin &
Kaynak, 1998; UCI Machine Learning Repository, CC BY 4.0), in the copy scikit-learn ships as
``digits.csv.gz`` (BSD-3-Clause): 1797 images of 8x8 pixels with values 0..16, then the label.
The train/test split is fixed and stratified, with no randomness involved: within each class, in
file order, sample number r (from 0) is a test sample when ``floor((r + 1) * f)`` exceeds
``floor(r * f)`` for the test fraction f. With the default f = 0.2 that is every fifth sample of
each class (r = 4, 9, 14, ...): 355 test and 1442 training images.

**Fashion-MNIST** (`fashion_mnist()`): Zalando's 28x28 grey-scale clothing images (60000 train,
10000 test), read from the standard files ``train-images-idx3-ubyte.gz``,
``train-labels-idx1-ubyte.gz``, ``t10k-images-idx3-ubyte.gz``, ``t10k-labels-idx1-ubyte.gz``
(uncompressed names accepted too) in ``root``; Debian's ``dataset-fashion-mnist`` package
installs them in /usr/share/datasets/fashion-mnist.
"""

from __future__ import annotations

import functools
import io
import os
import zlib
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from .._file_limits import decompress_gzip
from ..errors import DatasetError
from ..tensor import Tensor
from .collate import default_collate
from .dataset import Dataset, fetch_samples, gather_rows, reads_as
from .idx import read_idx

DIGITS_FILE = os.path.join(os.path.dirname(__file__), "_files", "digits.csv.gz")
FASHION_MNIST_ROOT = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_PACKAGE = "dataset-fashion-mnist"
FASHION_MNIST_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)


class LabeledImages(Dataset):
    """Images (N, C, H, W) and int64 labels (N,); sample i is ``(image, label)`` with the image a
    Tensor (a copy) and the label a Python int, each passed through its transform if given."""

    def __init__(
        self,
        images: Tensor,
        targets: Tensor,
        transform: Callable | None = None,
        target_transform: Callable | None = None,
        classes: tuple = (),
    ):
        if images.shape[0] != targets.shape[0]:
            raise DatasetError(
                f"{images.shape[0]} images but {targets.shape[0]} labels", op="LabeledImages"
            )
        self.data, self.targets = images, targets
        self.transform, self.target_transform = transform, target_transform
        self.classes = tuple(classes)

    def __len__(self) -> int:
        return self.data.shape[0]

    def __getitem__(self, index: int):
        image = Tensor(self.data.numpy(force=True)[index].copy())
        label = int(self.targets.numpy(force=True)[index])
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return image, label

    def fetch_batch(self, indices: np.ndarray):
        plain = self.transform is None and self.target_transform is None
        if plain and reads_as(self, LabeledImages):
            return [gather_rows(self.data, indices), gather_rows(self.targets, indices)]
        return default_collate(fetch_samples(self, indices))

    def __repr__(self) -> str:
        return (
            f"LabeledImages({len(self)} images of shape {tuple(self.data.shape[1:])}, "
            f"{len(self.classes) or 'unnamed'} classes)"
        )


# ------------------------------------------------------------------------------------- digits
_DIGITS_MAX_BYTES = 16 << 20  # the table is about 0.5 MB: far more is not the bundled file


@functools.cache
def _digits_raw() -> tuple[np.ndarray, np.ndarray]:
    def damaged(why: str) -> DatasetError:
        return DatasetError(
            f"the bundled digits file {DIGITS_FILE} is missing or damaged ({why}); reinstall ember",
            op="digits",
        )

    try:
        with open(DIGITS_FILE, "rb") as f:
            raw = f.read(_DIGITS_MAX_BYTES + 1)
        text = decompress_gzip(raw, _DIGITS_MAX_BYTES)
        if len(text) > _DIGITS_MAX_BYTES:
            raise damaged(f"it inflates to more than {_DIGITS_MAX_BYTES:,} bytes")
        table = np.loadtxt(io.StringIO(text.decode("ascii")), delimiter=",", dtype=np.int64)
    except (OSError, ValueError, EOFError, zlib.error) as exc:
        if isinstance(exc, DatasetError):
            raise
        raise damaged(str(exc)[:200]) from exc
    if table.ndim != 2 or table.shape[1] != 65:
        raise damaged(f"expected rows of 64 pixels and a label, got shape {table.shape}")
    pixels, labels = table[:, :64], table[:, 64]
    if pixels.size and not (pixels.min() >= 0 and pixels.max() <= 16):
        raise damaged("a pixel value is outside 0..16")
    if labels.size and not (labels.min() >= 0 and labels.max() <= 9):
        raise damaged("a label is outside 0..9")
    pixels = pixels.astype(np.uint8)
    pixels.flags.writeable = labels.flags.writeable = False  # shared by every call: read-only
    return pixels, labels


def digits_test_mask(labels: np.ndarray, test_fraction: float) -> np.ndarray:
    """True for the test samples of the fixed stratified split described in the module doc."""
    f = Fraction(repr(float(test_fraction)))
    mask = np.zeros(len(labels), dtype=bool)
    for c in np.unique(labels):
        positions = np.flatnonzero(labels == c)
        ranks = np.arange(len(positions))
        mask[positions] = [(r + 1) * f // 1 > r * f // 1 for r in ranks]
    return mask


def digits(
    train: bool = True,
    test_fraction: float = 0.2,
    transform: Callable | None = None,
    target_transform: Callable | None = None,
) -> LabeledImages:
    """The bundled 8x8 handwritten digits: (1, 8, 8) float32 images in [0, 1], labels 0..9.

    ``train`` picks the training or the test part of the fixed split (see the module doc).
    """
    if not 0.0 < test_fraction < 1.0:
        raise DatasetError(
            f"test_fraction must lie strictly between 0 and 1, got {test_fraction}", op="digits"
        )
    pixels, labels = _digits_raw()
    test = digits_test_mask(labels, test_fraction)
    keep = ~test if train else test
    images = pixels[keep].reshape(-1, 1, 8, 8).astype(np.float32) / np.float32(16)
    return LabeledImages(
        Tensor(images),
        Tensor(labels[keep].astype(np.int64)),
        transform,
        target_transform,
        classes=tuple(str(d) for d in range(10)),
    )


# ------------------------------------------------------------------------------ fashion-mnist
def _install_hint(root: str) -> str:
    return (
        f"install Debian's {FASHION_MNIST_PACKAGE} package (apt-get install "
        f"{FASHION_MNIST_PACKAGE}), which puts the files in {FASHION_MNIST_ROOT}, or pass "
        "root= (--data-root for `ember train`) the directory that holds them"
        + (f" (searched root={root!r})" if root else "")
    )


def _find(root: str, base: str) -> str:
    for name in (base + ".gz", base):
        path = os.path.join(root, name)
        if os.path.isfile(path):
            return path
    if not os.path.isdir(root):
        raise DatasetError(
            f"the directory {root} does not exist; {_install_hint(root)}", op="fashion_mnist"
        )
    raise DatasetError(
        f"cannot find {base}.gz (or {base}) in {root}; {_install_hint(root)}", op="fashion_mnist"
    )


@functools.lru_cache(maxsize=4)
def _read_pair(images_path: str, labels_path: str, stamp: tuple) -> tuple[np.ndarray, np.ndarray]:
    images, labels = read_idx(images_path), read_idx(labels_path)
    if images.dtype != np.uint8 or images.ndim != 3:
        raise DatasetError(
            f"{images_path}: expected uint8 images of shape (N, H, W), got {images.dtype} "
            f"{images.shape}",
            op="fashion_mnist",
        )
    if labels.dtype != np.uint8 or labels.ndim != 1:
        raise DatasetError(
            f"{labels_path}: expected uint8 labels of shape (N,), got {labels.dtype} "
            f"{labels.shape}",
            op="fashion_mnist",
        )
    if len(images) != len(labels):
        raise DatasetError(
            f"{images_path} holds {len(images)} images but {labels_path} holds {len(labels)} "
            "labels",
            op="fashion_mnist",
        )
    if labels.size and labels.max() >= len(FASHION_MNIST_CLASSES):
        raise DatasetError(
            f"{labels_path}: label {int(labels.max())} is out of range 0..9", op="fashion_mnist"
        )
    images.flags.writeable = labels.flags.writeable = False  # cached: read-only
    return images, labels


def fashion_mnist(
    root: str | os.PathLike | None = FASHION_MNIST_ROOT,
    train: bool = True,
    transform: Callable | None = None,
    target_transform: Callable | None = None,
) -> LabeledImages:
    """Fashion-MNIST from the IDX files in ``root``: (1, 28, 28) float32 images in [0, 1] and
    int64 labels 0..9 (names in ``.classes``); ``train`` picks the 60000 training or the 10000
    test images. A missing or damaged file raises `ember.DatasetError` saying what to do."""
    root = os.fspath(FASHION_MNIST_ROOT if root is None else root)
    prefix = "train" if train else "t10k"
    images_path = _find(root, f"{prefix}-images-idx3-ubyte")
    labels_path = _find(root, f"{prefix}-labels-idx1-ubyte")
    stamp = tuple((s.st_mtime_ns, s.st_size) for s in map(os.stat, (images_path, labels_path)))
    images, labels = _read_pair(images_path, labels_path, stamp)
    scaled = images[:, None].astype(np.float32) / np.float32(255)
    return LabeledImages(
        Tensor(scaled),
        Tensor(labels.astype(np.int64)),
        transform,
        target_transform,
        classes=FASHION_MNIST_CLASSES,
    )
