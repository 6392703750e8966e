"""``ember.utils.data``: PyTorch's ``torch.utils.data`` module path over ``ember.data``.

Everything here is ember.data's (the same objects, so ``isinstance`` checks agree): map-style
and iterable-style datasets, `random_split`, the samplers, `DataLoader`, `default_collate`,
`default_convert` and `get_worker_info`. Where ember differs from PyTorch it says so in each
object's docstring; the main points:

* generators are `ember.Generator` objects (``ember.Generator().manual_seed(0)``); for the same
  seed, `random_split` and the random samplers give other permutations than PyTorch's (another
  random number generator), with the same distribution;
* ``DistributedSampler`` (over ``ember.distributed``) gives PyTorch's index lists exactly.
"""

from ...data import (
    BatchSampler,
    ChainDataset,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
    StackDataset,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    WorkerInfo,
    default_collate,
    default_convert,
    get_worker_info,
    random_split,
)
from ...data.distributed import DistributedSampler
from . import _utils, dataloader, dataset, distributed, sampler

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
    "WorkerInfo",
    "dataloader",
    "dataset",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "random_split",
    "sampler",
]
