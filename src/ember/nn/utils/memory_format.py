"""``ember.nn.utils.memory_format``: PyTorch's ``convert_conv2d_weight_memory_format`` and
``convert_conv3d_weight_memory_format``: each convolution's weight laid out in the format
through ``Tensor.contiguous(memory_format=...)`` (ops/_memory_format.py; the convolutions read
any layout); the module is returned, as PyTorch's."""

from __future__ import annotations

from ..conv import Conv2d, Conv3d, ConvTranspose2d, ConvTranspose3d
from ..module import Module

__all__ = ["convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format"]


def _convert(module: Module, memory_format, kinds: tuple) -> Module:
    if isinstance(module, kinds):
        module.weight.data = module.weight.detach().contiguous(memory_format=memory_format)
    for child in module.children():
        _convert(child, memory_format, kinds)
    return module


def convert_conv2d_weight_memory_format(module: Module, memory_format) -> Module:
    """The weights of every ``Conv2d`` and ``ConvTranspose2d`` in ``module`` in
    ``memory_format`` (``ember.channels_last``, ...); returns ``module``."""
    return _convert(module, memory_format, (Conv2d, ConvTranspose2d))


def convert_conv3d_weight_memory_format(module: Module, memory_format) -> Module:
    """The weights of every ``Conv3d`` and ``ConvTranspose3d`` in ``module`` in
    ``memory_format`` (``ember.channels_last_3d``, ...); returns ``module``."""
    return _convert(module, memory_format, (Conv3d, ConvTranspose3d))
