"""`Flatten` and `Unflatten`: reshape layers with PyTorch's arguments and reprs."""

from __future__ import annotations

import math

from ..errors import ArgumentTypeError, ShapeError
from ..ops._util import fmt_shape, normalize_axis
from ..tensor import Tensor
from .module import Module


class Flatten(Module):
    """Flattens dimensions ``start_dim`` through ``end_dim`` into one (batch kept by default)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Expands dimension ``dim`` into ``unflattened_size`` (one entry may be -1)."""

    def __init__(self, dim: int, unflattened_size) -> None:
        super().__init__()
        if not isinstance(dim, int):
            raise ArgumentTypeError(f"Unflatten: dim must be an int, got {type(dim).__name__}")
        if not isinstance(unflattened_size, (tuple, list)):
            raise ArgumentTypeError(
                f"Unflatten: unflattened_size must be a tuple of ints, got "
                f"{type(unflattened_size).__name__}"
            )
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input: Tensor) -> Tensor:
        dim = normalize_axis("unflatten", self.dim, input.ndim)
        size = self.unflattened_size
        known = math.prod(s for s in size if s != -1)
        extent = input.shape[dim]
        if size.count(-1) > 1 or (extent % max(known, 1) if -1 in size else known != extent):
            raise ShapeError(
                f"cannot unflatten dimension {self.dim} of size {extent} of an input of shape "
                f"{fmt_shape(input.shape)} into {size}; the sizes must multiply to {extent}",
                op="unflatten",
            )
        return input.reshape(input.shape[:dim] + size + input.shape[dim + 1 :])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
