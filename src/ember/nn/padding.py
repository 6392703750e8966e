"""Padding layers over ``F.pad``: ZeroPad, ConstantPad, ReflectionPad, ReplicationPad and
CircularPad in 1-3 dimensions, with PyTorch's arguments, ``padding`` attribute (an int becomes
a tuple of ``2 * n`` sizes, (left, right, top, bottom, front, back)) and reprs. The padding
is a composite of ember ops, so it differentiates and captures."""

from __future__ import annotations

from ..tensor import Tensor
from . import functional as F
from .module import Module


def _sizes(padding, n: int) -> tuple:
    if isinstance(padding, int):
        return (padding,) * (2 * n)
    return tuple(padding)


class _PadNd(Module):
    _nd = 1
    _mode = "constant"

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = _sizes(padding, self._nd)

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pads the last dimension with ``value``."""


class ConstantPad2d(_ConstantPadNd):
    """Pads the last two dimensions with ``value``."""

    _nd = 2


class ConstantPad3d(_ConstantPadNd):
    """Pads the last three dimensions with ``value``."""

    _nd = 3


class ZeroPad1d(ConstantPad1d):
    """Pads the last dimension with zeros."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Pads the last two dimensions with zeros."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    """Pads the last three dimensions with zeros."""

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ReflectionPad1d(_PadNd):
    """Pads the last dimension with its reflection (the edge not repeated)."""

    _mode = "reflect"


class ReflectionPad2d(ReflectionPad1d):
    _nd = 2


class ReflectionPad3d(ReflectionPad1d):
    _nd = 3


class ReplicationPad1d(_PadNd):
    """Pads the last dimension by repeating its edge values."""

    _mode = "replicate"


class ReplicationPad2d(ReplicationPad1d):
    _nd = 2


class ReplicationPad3d(ReplicationPad1d):
    _nd = 3


class CircularPad1d(_PadNd):
    """Pads the last dimension with values wrapped around from the other end."""

    _mode = "circular"


class CircularPad2d(CircularPad1d):
    _nd = 2


class CircularPad3d(CircularPad1d):
    _nd = 3
