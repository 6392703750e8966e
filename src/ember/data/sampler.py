"""Samplers: the order in which a `DataLoader` visits a dataset (PyTorch's names and semantics).

A sampler is an iterable of dataset indices with a ``__len__``; give one to
``DataLoader(dataset, sampler=...)``. `BatchSampler` groups another sampler's indices into
lists of ``batch_size``. Random samplers draw from their ``generator`` (an `ember.Generator`),
or from ember's default generator when none is given, at the start of each pass: two passes give
two orders, and a seeded generator gives the same sequence of orders every run. `RandomSampler`
and `SubsetRandomSampler` draw PyTorch's orders for the same seed (``randperm`` and ``randint``
on PyTorch's stream, ember/random_streams.py; without a generator, RandomSampler seeds a fresh
one from a 63-bit draw of the default generator, as PyTorch's does); `WeightedRandomSampler`'s
draws are ember's own (NumPy's ``choice``), with the same distribution as PyTorch's.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from .. import random_streams as streams
from ..errors import ArgumentError, ArgumentTypeError, ShapeError
from ..random import Generator, resolve

__all__ = [
    "BatchSampler",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "SubsetRandomSampler",
    "WeightedRandomSampler",
]


def _positive_int(value, name: str, op: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ShapeError(f"{name} should be a positive integer, got {name}={value!r}", op=op)
    return int(value)


class Sampler:
    """Base class: subclasses define ``__iter__`` (the indices) and usually ``__len__``.
    ``data_source`` is accepted for compatibility and unused, as in PyTorch."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self) -> Iterator[int]:
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    """A random order of ``data_source``'s indices.

    Without ``replacement``: a permutation, or for ``num_samples`` beyond the dataset's size,
    whole permutations one after another and then the start of one more (PyTorch's rule). With
    ``replacement``: ``num_samples`` independent uniform draws (default ``len(data_source)``).
    """

    def __init__(
        self,
        data_source,
        replacement: bool = False,
        num_samples: int | None = None,
        generator: Generator | None = None,
    ):
        if not isinstance(replacement, bool):
            raise ArgumentTypeError(f"replacement should be a boolean value, got {replacement!r}")
        if generator is not None:
            resolve(generator)
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if num_samples is not None:
            _positive_int(num_samples, "num_samples", "RandomSampler")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else int(self._num_samples)

    def __iter__(self) -> Iterator[int]:
        n, count = len(self.data_source), self.num_samples
        gen = own_generator(self.generator)
        if self.replacement:  # PyTorch's: 32 randint draws at a time
            parts = [_randint(gen, n, 32) for _ in range(count // 32)]
            parts.append(_randint(gen, n, count % 32))
        else:  # (PyTorch draws the last, partial permutation even when it takes none of it)
            whole, rest = divmod(count, n) if n else (0, 0)
            parts = [streams.permutation(gen, n) for _ in range(whole)]
            parts.append(streams.permutation(gen, n)[:rest])
        order = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        return iter(order.tolist())

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a random order, a new one each pass."""

    def __init__(self, indices: Sequence[int], generator: Generator | None = None):
        if generator is not None:
            resolve(generator)
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        order = streams.permutation(resolve(self.generator), len(self.indices))
        return (self.indices[i] for i in order.tolist())

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probabilities proportional to ``weights`` (with or
    without ``replacement``), as ``torch.multinomial``."""

    def __init__(
        self,
        weights: Sequence[float],
        num_samples: int,
        replacement: bool = True,
        generator: Generator | None = None,
    ):
        self.num_samples = _positive_int(num_samples, "num_samples", "WeightedRandomSampler")
        if not isinstance(replacement, bool):
            raise ArgumentTypeError(f"replacement should be a boolean value, got {replacement!r}")
        w = np.asarray(getattr(weights, "numpy", lambda: weights)(), dtype=np.float64)
        if w.ndim != 1:
            raise ShapeError(
                f"weights should be a 1-D sequence, got shape {w.shape}", op="WeightedRandomSampler"
            )
        if not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
            raise ArgumentError(
                "WeightedRandomSampler: weights must be finite, non-negative and not all zero"
            )
        if not replacement and self.num_samples > np.count_nonzero(w):
            raise ArgumentError(
                f"WeightedRandomSampler: cannot draw {self.num_samples} samples without "
                f"replacement from {np.count_nonzero(w)} non-zero weights"
            )
        if generator is not None:
            resolve(generator)
        self.weights = w
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        # torch.multinomial on the double weights, so a seed gives PyTorch's indices
        draws = streams.multinomial(
            self.weights[None], self.num_samples, self.replacement, resolve(self.generator)
        )
        return iter(draws[0].tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices from ``sampler``; the last shorter list is dropped when
    ``drop_last``. ``DataLoader`` takes the equivalent ``sampler=`` plus ``batch_size=``."""

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool):
        self.batch_size = _positive_int(batch_size, "batch_size", "BatchSampler")
        if not isinstance(drop_last, bool):
            raise ArgumentTypeError(f"drop_last should be a boolean value, got {drop_last!r}")
        self.sampler = sampler
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


def own_generator(generator: Generator | None) -> Generator:
    """``generator``, or as PyTorch's RandomSampler does without one, a fresh generator seeded
    with a 63-bit draw of the default generator (``torch.empty((), dtype=torch.int64)
    .random_()``: a 64-bit draw modulo 2**63)."""
    if generator is not None:
        return resolve(generator)
    seed = int(resolve(None).words64(1)[0]) % 2**63
    return Generator(seed)


def _randint(generator: Generator, n: int, count: int) -> np.ndarray:
    out = np.empty(count, np.int64)
    if count:
        streams.integers_into(out, generator, 0, n)
    return out
