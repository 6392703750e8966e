"""``ember.utils``: PyTorch's ``torch.utils`` paths for what ember has (``ember.utils.data``,
``ember.utils.checkpoint``, ``ember.utils.dlpack``, ``ember.utils.hooks``)."""

from . import checkpoint, data, dlpack, hooks

__all__ = ["checkpoint", "data", "dlpack", "hooks"]
