"""``ember.signal``: PyTorch's ``torch.signal`` (its window functions, ``ember.signal.windows``)."""

from . import windows

__all__ = ["windows"]
