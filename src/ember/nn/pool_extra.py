"""MaxUnpool1d/2d/3d (the partial inverse of MaxPool with ``return_indices=True``) and
LPPool1d/2d/3d (power-average pooling) and FractionalMaxPool2d/3d, with PyTorch's arguments,
attributes and reprs."""

from __future__ import annotations

from ..errors import ArgumentError
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


class _FractionalMaxPoolNd(Module):
    _nd = 2

    def __init__(
        self,
        kernel_size,
        output_size=None,
        output_ratio=None,
        return_indices: bool = False,
        _random_samples=None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        self.kernel_size = _ntuple(kernel_size, self._nd)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = None if output_size is None else _ntuple(output_size, self._nd)
        self.output_ratio = None if output_ratio is None else _ntuple(output_ratio, self._nd)
        if output_size is None and output_ratio is None:
            raise ArgumentError(
                f"{name} requires specifying either an output size, or a pooling ratio"
            )
        if output_size is not None and output_ratio is not None:
            raise ArgumentError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ArgumentError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input: Tensor):
        pool = getattr(F, f"fractional_max_pool{self._nd}d")
        return pool(
            input,
            self.kernel_size,
            self.output_size,
            self.output_ratio,
            self.return_indices,
            _random_samples=self._random_samples,
        )


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """Max pooling over windows at pseudo-random starts (F.fractional_max_pool2d); fixed
    ``_random_samples`` (batch, channels, 2) give the same windows every call."""


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """Three-dimensional fractional max pooling (F.fractional_max_pool3d)."""

    _nd = 3
