"""Map-style datasets: `Dataset`, `TensorDataset`, `Subset`, `ConcatDataset`, `StackDataset`
and `random_split` (PyTorch's names and semantics).

A dataset maps an index in ``range(len(dataset))`` to a sample. Besides ``__getitem__`` a dataset
may define ``fetch_batch(indices)``: the default-collated batch of the samples at ``indices`` (a
1-D int64 NumPy array). `DataLoader` uses it when no ``collate_fn`` is given, so datasets that
hold whole tensors gather a batch with one fancy-index per tensor instead of a Python loop over
samples; the base class's version is that loop followed by `default_collate`.
"""

from __future__ import annotations

import bisect
import math
import numbers
from collections.abc import Sequence

import numpy as np

from .. import random_streams as streams
from ..errors import ArgumentError, ShapeError
from ..random import Generator, resolve
from ..tensor import Tensor
from .collate import default_collate


def fetch_samples(dataset, indices) -> list:
    """The samples at ``indices``, as PyTorch's map-style fetcher reads them: the dataset's
    ``__getitems__`` (given the indices as a list of ints) where it defines one, else its
    ``__getitem__`` one index at a time."""
    getitems = getattr(dataset, "__getitems__", None)
    if getitems:
        return getitems([int(i) for i in indices])
    return [dataset[int(i)] for i in indices]


def reads_as(dataset, cls) -> bool:
    """Whether ``dataset`` reads its samples as ``cls`` does (no subclass overrides
    ``__getitem__`` or ``__getitems__``), so ``cls``'s gathering ``fetch_batch`` gives what
    they would: a subclass's own reading (a transform, a random crop) must run."""
    kind = type(dataset)
    return kind.__getitem__ is cls.__getitem__ and getattr(kind, "__getitems__", None) is getattr(
        cls, "__getitems__", None
    )


class Dataset:
    """Base class of map-style datasets: subclasses define ``__getitem__`` and ``__len__``."""

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__")

    def __len__(self) -> int:
        raise NotImplementedError(f"{type(self).__name__} must define __len__")

    def fetch_batch(self, indices: np.ndarray):
        """The default-collated batch of the samples at ``indices`` (`fetch_samples`)."""
        return default_collate(fetch_samples(self, indices))

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class TensorDataset(Dataset):
    """Sample ``i`` is ``tuple(t[i] for t in tensors)``; all tensors share their first dimension.

    NumPy arrays are accepted and wrapped as tensors (sharing memory).
    """

    def __init__(self, *tensors):
        if not tensors:
            raise ShapeError("needs at least one tensor", op="TensorDataset")
        self.tensors = tuple(t if isinstance(t, Tensor) else Tensor(np.asarray(t)) for t in tensors)
        sizes = [t.shape[0] if t.ndim else None for t in self.tensors]
        if None in sizes or len(set(sizes)) != 1:
            shapes = ", ".join(str(tuple(t.shape)) for t in self.tensors)
            raise ShapeError(
                f"all tensors must have the same size in dimension 0, got shapes {shapes}",
                op="TensorDataset",
            )

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]

    def fetch_batch(self, indices: np.ndarray):
        if not reads_as(self, TensorDataset):
            return Dataset.fetch_batch(self, indices)
        # (a list: PyTorch's default_collate of tuple samples)
        return [gather_rows(t, indices) for t in self.tensors]


def gather_rows(t: Tensor, indices: np.ndarray) -> Tensor:
    """Rows ``indices`` of ``t`` as a new tensor (one NumPy take; the ember op keeps autograd)."""
    if t.requires_grad:
        return t[Tensor(np.asarray(indices, dtype=np.int64))]
    n = t.shape[0]
    if indices.size and (indices.max() >= n or indices.min() < -n):
        bad = indices[(indices >= n) | (indices < -n)][0]
        raise IndexError(f"index {int(bad)} is out of range for a dataset of {n} samples")
    return Tensor(np.take(t.numpy(force=True), indices, axis=0))


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset, indices: Sequence[int]):
        self.dataset = dataset
        self.indices = indices
        self._index_array = np.asarray(indices, dtype=np.int64).reshape(-1)

    def __getitem__(self, index):
        if isinstance(index, list):
            return [self.dataset[self.indices[i]] for i in index]
        return self.dataset[int(self._index_array[index])]

    def __getitems__(self, indices: list) -> list:
        # (PyTorch's: the inner dataset's __getitems__ where it has one)
        return fetch_samples(self.dataset, [self._index_array[i] for i in indices])

    def __len__(self) -> int:
        return len(self.indices)

    def fetch_batch(self, indices: np.ndarray):
        if not reads_as(self, Subset):
            return Dataset.fetch_batch(self, indices)
        inner = self._index_array[indices]
        fetch = getattr(self.dataset, "fetch_batch", None)
        if fetch is None:
            return default_collate(fetch_samples(self.dataset, inner))
        return fetch(inner)


class ConcatDataset(Dataset):
    """The samples of several datasets, one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise ShapeError("needs at least one dataset", op="ConcatDataset")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]).tolist())

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, index: int):
        n = len(self)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"index {index} is out of range for a dataset of {n} samples")
        which = bisect.bisect_right(self.cumulative_sizes, index)
        start = self.cumulative_sizes[which - 1] if which else 0
        return self.datasets[which][index - start]


class StackDataset(Dataset):
    """PyTorch's ``StackDataset``: sample ``i`` gathers sample ``i`` of each dataset, as a tuple
    (``StackDataset(a, b)``) or a dict (``StackDataset(image=a, label=b)``); all of one length.
    ``__getitems__`` serves a batch of indices as a list of samples."""

    def __init__(self, *args, **kwargs):
        if args and kwargs:
            raise ArgumentError(
                "Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like "
                "input/output, but both types are given."
            )
        datasets = args or tuple(kwargs.values())
        if not datasets:
            raise ArgumentError("At least one dataset should be passed")
        self._length = len(datasets[0])
        if any(len(d) != self._length for d in datasets):
            raise ArgumentError("Size mismatch between datasets")
        self.datasets = args if args else dict(kwargs)

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: list) -> list:
        return [self[i] for i in indices]


def random_split(dataset, lengths: Sequence, generator: Generator | None = None) -> list[Subset]:
    """Split ``dataset`` into non-overlapping random subsets of the given lengths.

    ``lengths`` are sample counts summing to ``len(dataset)``, or fractions summing to 1: each
    fraction gets ``floor(fraction * len)`` samples and the remainder is dealt one by one to the
    subsets in order (as PyTorch does). The permutation comes from ``generator`` (ember's default
    generator when None): PyTorch's ``randperm``, so a seed splits as PyTorch's does.
    """
    n = len(dataset)
    lengths = list(lengths)
    fractional = lengths and all(
        isinstance(x, numbers.Real) and not isinstance(x, numbers.Integral) for x in lengths
    )
    if fractional and math.isclose(sum(lengths), 1.0, abs_tol=1e-9):
        if any(x < 0 or x > 1 for x in lengths):
            raise ShapeError(f"fractions must lie in [0, 1], got {lengths}", op="random_split")
        counts = [int(math.floor(n * f)) for f in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if any(not isinstance(x, numbers.Integral) or x < 0 for x in lengths):
        raise ShapeError(
            f"lengths must be non-negative ints summing to the dataset size ({n}) or fractions "
            f"summing to 1, got {lengths}",
            op="random_split",
        )
    if sum(lengths) != n:
        raise ShapeError(
            f"lengths {lengths} sum to {sum(lengths)} but the dataset has {n} samples",
            op="random_split",
        )
    order = streams.permutation(resolve(generator), n)  # PyTorch's randperm, same seed
    splits, start = [], 0
    for length in lengths:
        splits.append(Subset(dataset, order[start : start + length].tolist()))
        start += length
    return splits
