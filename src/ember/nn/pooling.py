"""Pooling layers: max, average and adaptive pooling in 1-3 dimensions, with PyTorch's
arguments, defaults (``stride`` defaults to ``kernel_size``) and reprs."""

from __future__ import annotations

from ..errors import ArgumentTypeError
from ..tensor import Tensor
from . import functional as F
from .module import Module


class _MaxPoolNd(Module):
    _nd = 0

    def __init__(
        self,
        kernel_size,
        stride=None,
        padding=0,
        dilation=1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor):
        pool = getattr(F, f"max_pool{self._nd}d")
        return pool(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            ceil_mode=self.ceil_mode,
            return_indices=self.return_indices,
        )

    def extra_repr(self) -> str:
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class MaxPool1d(_MaxPoolNd):
    _nd = 1


class MaxPool2d(_MaxPoolNd):
    _nd = 2


class MaxPool3d(_MaxPoolNd):
    _nd = 3


class _AvgPoolNd(Module):
    _nd = 0

    def __init__(
        self,
        kernel_size,
        stride=None,
        padding=0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        pool = getattr(F, f"avg_pool{self._nd}d")
        return pool(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    _nd = 1

    def __init__(
        self,
        kernel_size,
        stride=None,
        padding=0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
    ) -> None:
        # PyTorch keeps AvgPool1d's sizes as 1-tuples (its repr shows them so)
        def single(v):
            return tuple(v) if isinstance(v, (tuple, list)) else (v,)

        super().__init__(
            single(kernel_size),
            single(stride if stride is not None else kernel_size),
            single(padding),
            ceil_mode,
            count_include_pad,
        )

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool1d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
        )


class AvgPool2d(_AvgPoolNd):
    _nd = 2


class AvgPool3d(_AvgPoolNd):
    _nd = 3


class _AdaptivePool(Module):
    _kind = ""
    _nd = 0

    def __init__(self, output_size, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        if self._kind == "max":
            self.return_indices = return_indices
        elif return_indices:
            raise ArgumentTypeError(f"{type(self).__name__} has no return_indices argument")

    def forward(self, input: Tensor):
        pool = getattr(F, f"adaptive_{self._kind}_pool{self._nd}d")
        if self._kind == "max":
            return pool(input, self.output_size, self.return_indices)
        return pool(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePool):
    _kind, _nd = "avg", 1

    def __init__(self, output_size) -> None:
        super().__init__(output_size)


class AdaptiveAvgPool2d(_AdaptivePool):
    _kind, _nd = "avg", 2

    def __init__(self, output_size) -> None:
        super().__init__(output_size)


class AdaptiveAvgPool3d(_AdaptivePool):
    _kind, _nd = "avg", 3

    def __init__(self, output_size) -> None:
        super().__init__(output_size)


class AdaptiveMaxPool1d(_AdaptivePool):
    _kind, _nd = "max", 1


class AdaptiveMaxPool2d(_AdaptivePool):
    _kind, _nd = "max", 2


class AdaptiveMaxPool3d(_AdaptivePool):
    _kind, _nd = "max", 3
