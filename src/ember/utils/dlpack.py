"""``ember.utils.dlpack``: PyTorch's ``torch.utils.dlpack`` (``from_dlpack``, ``to_dlpack``),
defined in ops/interop.py: tensors exchanged with other libraries through DLPack, memory
shared."""

from ..ops.interop import from_dlpack, to_dlpack

__all__ = ["from_dlpack", "to_dlpack"]
