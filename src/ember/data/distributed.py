"""``DistributedSampler``: each rank's share of a dataset's indices, PyTorch's
``torch.utils.data.distributed.DistributedSampler`` index for index.

Shuffling reproduces ``torch.randperm(n, generator=torch.Generator().manual_seed(seed + epoch))``
exactly: PyTorch's CPU generator is MT19937 seeded with the low 32 bits of the seed, and its
randperm (for n below 2**32 / 20) swaps position i with i + (next 32-bit output mod (n - i)).
NumPy's MT19937 with the legacy seeding is the same generator, so the same arguments give the
same lists as PyTorch's sampler without torch installed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from ..errors import ArgumentError, EmberError
from .sampler import Sampler

__all__ = ["DistributedSampler", "torch_randperm"]


def torch_randperm(n: int, seed: int) -> list[int]:
    """``torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()``."""
    if n >= 2**32 // 20:
        raise EmberError(
            f"DistributedSampler: {n} samples; PyTorch's permutation for n >= 2**32/20 uses "
            "another algorithm, which ember does not reproduce",
            op="DistributedSampler",
        )
    bits = np.random.MT19937(0)
    bits._legacy_seeding(seed & 0xFFFFFFFF)
    draws = bits.random_raw(max(n - 1, 0)).tolist()
    order = list(range(n))
    for i in range(n - 1):
        j = i + draws[i] % (n - i)
        order[i], order[j] = order[j], order[i]
    return order


class DistributedSampler(Sampler):
    """The indices of rank ``rank`` of ``num_replicas`` (the default process group's when None);
    the list is padded by repeating (or, with ``drop_last``, trimmed) to divide evenly. Call
    ``set_epoch(epoch)`` before each epoch to reshuffle."""

    def __init__(
        self,
        dataset,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        if num_replicas is None or rank is None:
            from ..distributed import get_rank, get_world_size

            num_replicas = get_world_size() if num_replicas is None else num_replicas
            rank = get_rank() if rank is None else rank
        if rank >= num_replicas or rank < 0:
            raise ArgumentError(
                f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]"
            )
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        if drop_last and len(dataset) % num_replicas != 0:
            self.num_samples = math.ceil((len(dataset) - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(len(dataset) / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        indices = torch_randperm(n, self.seed + self.epoch) if self.shuffle else list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[: self.total_size]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
