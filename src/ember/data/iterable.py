"""Iterable-style datasets: `IterableDataset` and `ChainDataset` (PyTorch's names).

An iterable-style dataset is a stream: it defines ``__iter__`` instead of indexing, for data that
is read in order (files, generators). ``a + b`` chains two of them.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..errors import ArgumentTypeError

__all__ = ["ChainDataset", "IterableDataset"]


class IterableDataset:
    """Base class of iterable-style datasets: subclasses define ``__iter__``.

    Under a `DataLoader` with worker processes each worker iterates its own copy, so a dataset
    that should not repeat samples splits its stream with ``ember.utils.data.get_worker_info()``
    (None in the main process), as with PyTorch.
    """

    def __iter__(self) -> Iterator:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")

    def __add__(self, other: IterableDataset) -> ChainDataset:
        return ChainDataset([self, other])


class ChainDataset(IterableDataset):
    """The samples of several iterable datasets, one stream after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise ArgumentTypeError(
                    f"ChainDataset only supports IterableDataset, got {type(d).__name__}"
                )

    def __iter__(self) -> Iterator:
        for d in self.datasets:
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self.datasets)
