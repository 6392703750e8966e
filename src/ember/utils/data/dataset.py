"""``ember.utils.data.dataset``: PyTorch's ``torch.utils.data.dataset`` path."""

from ...data.dataset import ConcatDataset, Dataset, Subset, TensorDataset, random_split
from ...data.iterable import ChainDataset, IterableDataset

__all__ = [
    "ChainDataset",
    "ConcatDataset",
    "Dataset",
    "IterableDataset",
    "Subset",
    "TensorDataset",
    "random_split",
]
