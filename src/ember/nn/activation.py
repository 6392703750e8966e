"""Activation layers: thin modules over ``ember.nn.functional`` with PyTorch's constructor
arguments and reprs. `PReLU` is the one with a parameter (its learnable slopes).
(MultiheadAttention, which PyTorch also files under activations, lives in attention.py.)"""

from __future__ import annotations

from ..errors import ArgumentError
from ..tensor import Tensor
from . import functional as F
from . import init
from .module import Module
from .parameter import new_parameter


def _inplace_repr(inplace: bool) -> str:
    return "inplace=True" if inplace else ""


class ReLU(Module):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.relu_(input) if self.inplace else F.relu(input)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class _InplaceActivation(Module):
    """An activation ``F.<_fn>(input, inplace=...)`` with no other arguments."""

    _fn = ""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, self._fn)(input, inplace=self.inplace)

    def extra_repr(self) -> str:
        return _inplace_repr(self.inplace)


class ReLU6(_InplaceActivation):
    _fn = "relu6"


class SiLU(_InplaceActivation):
    _fn = "silu"


class SELU(_InplaceActivation):
    _fn = "selu"


class Mish(_InplaceActivation):
    _fn = "mish"


class Hardsigmoid(_InplaceActivation):
    _fn = "hardsigmoid"


class Hardswish(_InplaceActivation):
    _fn = "hardswish"


class _Plain(Module):
    """An activation ``F.<_fn>(input)`` without arguments."""

    _fn = ""

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, self._fn)(input)


class Sigmoid(_Plain):
    _fn = "sigmoid"


class Tanh(_Plain):
    _fn = "tanh"


class Softsign(_Plain):
    _fn = "softsign"


class Tanhshrink(_Plain):
    _fn = "tanhshrink"


class LogSigmoid(_Plain):
    _fn = "logsigmoid"


class GELU(Module):
    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    _fn = "elu"

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, self._fn)(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class CELU(ELU):
    _fn = "celu"


class Softplus(Module):
    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        if max_val <= min_val:
            raise ArgumentError(f"Hardtanh: max_val ({max_val}) must exceed min_val ({min_val})")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        tail = ", inplace=True" if self.inplace else ""
        return f"min_val={self.min_val}, max_val={self.max_val}{tail}"


class Threshold(Module):
    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        tail = ", inplace=True" if self.inplace else ""
        return f"threshold={self.threshold}, value={self.value}{tail}"


class Hardshrink(Module):
    _fn = "hardshrink"

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, self._fn)(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    _fn = "softshrink"


class _DimActivation(Module):
    """``F.<_fn>(input, dim)``: softmax-like activations over one dimension."""

    _fn = ""

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return getattr(F, self._fn)(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_DimActivation):
    _fn = "softmax"


class LogSoftmax(_DimActivation):
    _fn = "log_softmax"


class Softmin(_DimActivation):
    _fn = "softmin"


class GLU(_DimActivation):
    _fn = "glu"

    def __init__(self, dim: int = -1) -> None:
        super().__init__(dim)


class PReLU(Module):
    """``max(0, x) + weight * min(0, x)`` with one learnable slope, or one per channel."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = new_parameter((num_parameters,), device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init.constant_(self.weight, self.init)

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"
