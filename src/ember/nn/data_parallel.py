"""``nn.DataParallel`` as PyTorch's behaves without GPUs: it holds ``module`` (so state_dict
keys carry the ``module.`` prefix a DataParallel checkpoint has) and calls it unchanged.
ember runs on the CPU, where PyTorch's DataParallel also just calls its module; device ids
other than none are refused."""

from __future__ import annotations

from ..errors import EmberError
from .module import Module


class DataParallel(Module):
    """Wraps ``module``; ``forward`` calls it (one device: nothing to scatter or gather)."""

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0):
        super().__init__()
        if device_ids:
            raise EmberError(
                f"ember runs on the CPU only; DataParallel got device_ids={device_ids!r}",
                op="DataParallel",
            )
        self.module = module
        self.device_ids: list = []
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)
