"""``ember.ao.quantization``: `ember.quantization` under PyTorch's ``torch.ao.quantization``
name (the same functions and modules)."""

from ..quantization import *  # noqa: F403
from ..quantization import __all__  # noqa: F401
