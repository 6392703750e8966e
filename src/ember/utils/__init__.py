"""``ember.utils``: PyTorch's ``torch.utils`` paths for what ember has (``ember.utils.data``,
``ember.utils.checkpoint``, ``ember.utils.dlpack``)."""

from . import checkpoint, data, dlpack

__all__ = ["checkpoint", "data", "dlpack"]
