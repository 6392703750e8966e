"""``ember.utils.data.distributed``: PyTorch's ``torch.utils.data.distributed`` path."""

from ...data.distributed import DistributedSampler

__all__ = ["DistributedSampler"]
