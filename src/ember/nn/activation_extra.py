"""Layers over ``functional.activation_extra``: RReLU, AlphaDropout, FeatureAlphaDropout,
Softmax2d, ChannelShuffle and LocalResponseNorm, with PyTorch's arguments and reprs. RReLU and
the alpha dropouts draw from ember's default generator in training mode and are deterministic
in evaluation mode (``module.eval()``)."""

from __future__ import annotations

from ..errors import ShapeError
from ..tensor import Tensor
from . import functional as F
from .dropout import _DropoutNd
from .module import Module


class RReLU(Module):
    """Randomized leaky ReLU: random slopes in U(lower, upper) while training, their mean in
    evaluation."""

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False):
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        inplace = ", inplace=True" if self.inplace else ""
        return f"lower={self.lower}, upper={self.upper}{inplace}"


class AlphaDropout(_DropoutNd):
    """Dropout that keeps a SELU network's zero mean and unit variance."""

    _fn = "alpha_dropout"


class FeatureAlphaDropout(_DropoutNd):
    """Alpha dropout of whole channels."""

    _fn = "feature_alpha_dropout"


class Softmax2d(Module):
    """Softmax over the channels of a (N, C, H, W) or (C, H, W) input."""

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (3, 4):
            raise ShapeError(
                f"Softmax2d: expected input of 3 or 4 dimensions, got {input.ndim}",
                op="softmax2d",
            )
        return F.softmax(input, -3)


class ChannelShuffle(Module):
    """Interleaves ``groups`` groups of channels (ShuffleNet)."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


class LocalResponseNorm(Module):
    """Normalizes each channel by the energy of ``size`` neighbouring channels."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input: Tensor) -> Tensor:
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
