"""``ember.utils``: PyTorch's ``torch.utils`` paths for what ember has (``ember.utils.data``,
``ember.utils.checkpoint``)."""

from . import checkpoint, data

__all__ = ["checkpoint", "data"]
