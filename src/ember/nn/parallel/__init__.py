"""``ember.nn.parallel``: PyTorch's ``torch.nn.parallel`` path (`DataParallel`, and
`DistributedDataParallel` over ``ember.distributed``)."""

from ..data_parallel import DataParallel
from .distributed import DistributedDataParallel

__all__ = ["DataParallel", "DistributedDataParallel"]
