"""The generator that data-pipeline randomness draws from.

Random transforms (RandomCrop, RandomHorizontalFlip, ...) given no ``generator`` call
`current_generator()`. Outside a DataLoader that is ember's default generator. While a DataLoader
builds batch *b* of an epoch it installs a per-batch generator seeded from (the epoch's base seed,
*b*), on whichever thread or worker process builds the batch. This makes data randomness

* independent of what the training loop draws from the default generator meanwhile (dropout,
  init), so a prefetching loader gives the same batches as a synchronous one;
* reproducible from the loader's generator alone, batch by batch, so a run resumed in the middle
  of an epoch sees exactly the batches an uninterrupted run would.

The per-batch generator is created lazily: batches that draw nothing cost nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from ..random import Generator, resolve

_SEED_MODULUS = 2**63
_local = threading.local()


class _BatchSeed:
    __slots__ = ("base_seed", "batch_index", "generator")

    def __init__(self, base_seed: int, batch_index: int):
        self.base_seed, self.batch_index = base_seed, batch_index
        self.generator: Generator | None = None

    @property
    def seed(self) -> int:
        """The batch generator's seed: a hash of (base seed, batch), never a worker's seed
        (PyTorch's base seed + worker id), so no batch shares a worker's stream."""
        words = np.random.SeedSequence([self.base_seed, 2, self.batch_index])
        return int(words.generate_state(1, np.uint64)[0]) % _SEED_MODULUS


def current_generator(generator: Generator | None = None) -> Generator:
    """``generator`` when given; else the current batch's generator inside a DataLoader, else
    ember's default generator."""
    if generator is not None:
        return resolve(generator)
    scope = getattr(_local, "scope", None)
    if scope is None:
        return resolve(None)
    if scope.generator is None:
        scope.generator = Generator(scope.seed)
    return scope.generator


@contextmanager
def batch_scope(base_seed: int, batch_index: int) -> Iterator[None]:
    """Within the block, `current_generator()` on this thread is batch ``batch_index``'s own
    generator (MT19937's seeding scrambles the seed, so neighbouring seeds give unrelated
    streams)."""
    previous = getattr(_local, "scope", None)
    _local.scope = _BatchSeed(base_seed, batch_index)
    try:
        yield
    finally:
        _local.scope = previous
