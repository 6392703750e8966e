"""``ember.utils``: PyTorch's ``torch.utils`` paths for what ember has (``ember.utils.data``)."""

from . import data

__all__ = ["data"]
