"""Reading and writing: checkpoints (``ember.save`` / ``ember.load``).

`save` / `load` write and read safetensors files whose metadata holds the JSON structure of
the saved object (see checkpoint.py); `CheckpointTypeError` is raised for objects a checkpoint
cannot hold. `load` also reads PyTorch's zip checkpoints (``torch.save``), without torch and
without running pickle code (torch_format.py).
"""

from ._tree import CheckpointTypeError
from .checkpoint import load, save

__all__ = ["CheckpointTypeError", "load", "save"]
