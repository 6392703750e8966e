"""Datasets, data loaders and transforms (``ember.data``).

* `Dataset`, `TensorDataset`, `Subset`, `ConcatDataset`, `StackDataset`, `random_split`
  (dataset.py);
* `DataLoader` with seeded shuffling, exact resumption, background prefetching and worker
  processes (loader.py; the processes, their pool and transport: _workers.py);
* `default_collate` (collate.py); `current_generator` for data randomness (rng.py);
* samplers (sampler.py), `IterableDataset` / `ChainDataset` (iterable.py), `get_worker_info`
  (worker_info.py); ``ember.utils.data`` re-exports all of these under PyTorch's module path;
* ``ember.data.transforms``: torchvision-style image transforms;
* ``ember.data.datasets``: the bundled 8x8 digits and Fashion-MNIST; ``ember.data.idx``: the IDX
  file reader.
"""

from . import datasets, idx, transforms
from ._workers import WorkerError
from .collate import default_collate, default_convert
from .dataset import ConcatDataset, Dataset, StackDataset, Subset, TensorDataset, random_split
from .distributed import DistributedSampler
from .iterable import ChainDataset, IterableDataset
from .loader import DataLoader
from .rng import current_generator
from .sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)
from .worker_info import WorkerInfo, get_worker_info

__all__ = [
    "BatchSampler",
    "ChainDataset",
    "ConcatDataset",
    "StackDataset",
    "DataLoader",
    "DistributedSampler",
    "Dataset",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "WeightedRandomSampler",
    "WorkerError",
    "WorkerInfo",
    "current_generator",
    "datasets",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "idx",
    "random_split",
    "transforms",
]
