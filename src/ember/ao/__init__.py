"""``ember.ao``: PyTorch's ``torch.ao`` path to quantization, ``ember.ao.quantization`` being
`ember.quantization` (``from torch.ao.quantization import quantize_dynamic`` ports as is)."""

from . import quantization

__all__ = ["quantization"]
