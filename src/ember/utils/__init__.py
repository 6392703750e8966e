"""``ember.utils``: PyTorch's ``torch.utils`` paths for what ember has (``ember.utils.data``,
``ember.utils.checkpoint``, ``ember.utils.dlpack``, ``ember.utils.hooks``,
``ember.utils._pytree``, ``ember.utils.flop_counter``)."""

from . import _pytree, checkpoint, data, dlpack, flop_counter, hooks

__all__ = ["_pytree", "checkpoint", "data", "dlpack", "flop_counter", "hooks"]
