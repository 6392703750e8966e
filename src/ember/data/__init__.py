"""Datasets, data loaders and transforms (``ember.data``).

* `Dataset`, `TensorDataset`, `Subset`, `ConcatDataset`, `random_split` (dataset.py);
* `IterableDataset` for streams of samples (dataset.py);
* `DataLoader` with seeded shuffling, exact resumption, background prefetching and worker
  processes (loader.py; `get_worker_info` inside a worker, _workers.py);
* `default_collate` (collate.py); `current_generator` for data randomness (rng.py);
* ``ember.data.transforms``: torchvision-style image transforms;
* ``ember.data.datasets``: the bundled 8x8 digits and Fashion-MNIST; ``ember.data.idx``: the IDX
  file reader.
"""

from . import datasets, idx, transforms
from ._workers import WorkerError, WorkerInfo, get_worker_info
from .collate import default_collate
from .dataset import (
    ConcatDataset,
    Dataset,
    IterableDataset,
    Subset,
    TensorDataset,
    random_split,
)
from .loader import DataLoader
from .rng import current_generator

__all__ = [
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "IterableDataset",
    "Subset",
    "TensorDataset",
    "WorkerError",
    "WorkerInfo",
    "current_generator",
    "datasets",
    "default_collate",
    "get_worker_info",
    "idx",
    "random_split",
    "transforms",
]
