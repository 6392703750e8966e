"""``ember.utils.hooks``: PyTorch's ``torch.utils.hooks`` path of the handle a hook
registration returns (code annotates with ``torch.utils.hooks.RemovableHandle``)."""

from ..nn.hooks import RemovableHandle

__all__ = ["RemovableHandle"]
