"""MaxUnpool1d/2d/3d (the partial inverse of MaxPool with ``return_indices=True``) and
LPPool1d/2d/3d (power-average pooling), with PyTorch's arguments, attributes and reprs."""

from __future__ import annotations

from ..tensor import Tensor
from . import functional as F
from .module import Module


def _ntuple(value, n: int) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


class _MaxUnpoolNd(Module):
    _nd = 1

    def __init__(self, kernel_size, stride=None, padding=0) -> None:
        super().__init__()
        self.kernel_size = _ntuple(kernel_size, self._nd)
        self.stride = _ntuple(stride if stride is not None else kernel_size, self._nd)
        self.padding = _ntuple(padding, self._nd)

    def forward(self, input: Tensor, indices: Tensor, output_size=None) -> Tensor:
        unpool = getattr(F, f"max_unpool{self._nd}d")
        return unpool(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """Places each value at its index from MaxPool1d(return_indices=True); zeros elsewhere."""


class MaxUnpool2d(_MaxUnpoolNd):
    """Places each value at its index from MaxPool2d(return_indices=True); zeros elsewhere."""

    _nd = 2


class MaxUnpool3d(_MaxUnpoolNd):
    """Places each value at its index from MaxPool3d(return_indices=True); zeros elsewhere."""

    _nd = 3


class _LPPoolNd(Module):
    _nd = 1

    def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        pool = getattr(F, f"lp_pool{self._nd}d")
        return pool(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (
            f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, ceil_mode={self.ceil_mode}"
        )


class LPPool1d(_LPPoolNd):
    """``(sum over each window of x^p)^(1/p)``."""


class LPPool2d(_LPPoolNd):
    """Two-dimensional power-average pooling."""

    _nd = 2


class LPPool3d(_LPPoolNd):
    """Three-dimensional power-average pooling."""

    _nd = 3
