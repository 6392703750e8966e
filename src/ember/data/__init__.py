"""Datasets, data loaders and transforms (``ember.data``).

* `Dataset`, `TensorDataset`, `Subset`, `ConcatDataset`, `random_split` (dataset.py);
* `DataLoader` with seeded shuffling, exact resumption and background prefetching (loader.py);
* `default_collate` (collate.py); `current_generator` for data randomness (rng.py);
* ``ember.data.transforms``: torchvision-style image transforms;
* ``ember.data.datasets``: the bundled 8x8 digits and Fashion-MNIST; ``ember.data.idx``: the IDX
  file reader.
"""

from . import datasets, idx, transforms
from .collate import default_collate
from .dataset import ConcatDataset, Dataset, Subset, TensorDataset, random_split
from .loader import DataLoader
from .rng import current_generator

__all__ = [
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "Subset",
    "TensorDataset",
    "current_generator",
    "datasets",
    "default_collate",
    "idx",
    "random_split",
    "transforms",
]
