"""Dropout layers: active in training mode, the identity in evaluation mode (``module.eval()``).
Masks are drawn from ember's default generator, so ``ember.manual_seed`` makes them repeatable."""

from __future__ import annotations

from ..errors import ArgumentError
from ..tensor import Tensor
from . import functional as F
from .module import Module


class _DropoutNd(Module):
    _fn = "dropout"
    # (a captured graph bakes in the probability: a schedule, or ``m.p = 0`` for evaluation,
    # retraces as PyTorch's guards recompile)
    _graph_flags = ("p",)

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ArgumentError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, self._fn)(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zeroes each element with probability ``p`` and scales the rest by ``1 / (1 - p)``."""


class Dropout1d(_DropoutNd):
    """Zeroes whole channels of (N, C, L) inputs."""

    _fn = "dropout1d"


class Dropout2d(_DropoutNd):
    """Zeroes whole channels of (N, C, H, W) inputs."""

    _fn = "dropout2d"


class Dropout3d(_DropoutNd):
    """Zeroes whole channels of (N, C, D, H, W) inputs."""

    _fn = "dropout3d"
