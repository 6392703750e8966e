"""Convolution layers: `Conv1d`/`Conv2d`/`Conv3d` (padding modes zeros, reflect, replicate,
circular) and `ConvTranspose1d`/`2d`/`3d` (with ``output_size`` at call time).

Weights are laid out as in PyTorch: (out, in/groups, *kernel) for convolutions and
(in, out/groups, *kernel) for transposed ones; both start from PyTorch's default initialisation.
Non-zero padding modes pad explicitly with ``F.pad`` and then convolve without padding.
"""

from __future__ import annotations

import math

from ..errors import ArgumentError
from ..tensor import Tensor
from . import functional as F
from . import init
from .module import Module
from .parameter import new_parameter

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _ntuple(value, n: int, what: str) -> tuple:
    if isinstance(value, (tuple, list)):
        if len(value) != n:
            raise ArgumentError(f"{what} must be an int or a tuple of {n} ints, got {value}")
        return tuple(int(v) for v in value)
    return (int(value),) * n


# (an f-string per call cost each eager layer a tenth of a microsecond)
_CONV_NAMES = {1: "conv1d", 2: "conv2d", 3: "conv3d"}


class _ConvNd(Module):
    _nd = 0
    _transposed = False

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride,
        padding,
        dilation,
        output_padding,
        groups: int,
        bias: bool,
        padding_mode: str,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        nd = self._nd
        if groups <= 0:
            raise ArgumentError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ArgumentError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ArgumentError("out_channels must be divisible by groups")
        if padding_mode not in _PADDING_MODES:
            raise ArgumentError(
                f"padding_mode must be one of {list(_PADDING_MODES)}, but got "
                f"padding_mode='{padding_mode}'"
            )
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, nd, "kernel_size")
        self.stride = _ntuple(stride, nd, "stride")
        self.dilation = _ntuple(dilation, nd, "dilation")
        self.output_padding = _ntuple(output_padding, nd, "output_padding")
        self.groups = groups
        self.padding_mode = padding_mode
        self.transposed = self._transposed
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ArgumentError(
                    f"Invalid padding string '{padding}', should be one of ('same', 'valid')"
                )
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ArgumentError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _ntuple(padding, nd, "padding")
        self._reversed_padding_repeated_twice = self._explicit_padding()
        if self._transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = new_parameter(shape, device, dtype)
        if bias:
            self.bias = new_parameter((out_channels,), device, dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _explicit_padding(self) -> tuple:
        """F.pad's argument (last dimension first) for the non-zero padding modes."""
        pads = [0, 0] * self._nd
        if self.padding == "valid":
            return tuple(pads)
        for i, (d, k) in enumerate(zip(reversed(self.dilation), reversed(self.kernel_size))):
            if self.padding == "same":
                total = d * (k - 1)
                pads[2 * i], pads[2 * i + 1] = total // 2, total - total // 2
            else:
                pads[2 * i] = pads[2 * i + 1] = self.padding[self._nd - 1 - i]
        return tuple(pads)

    def reset_parameters(self) -> None:
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        nd = self._nd
        s = (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}"
        )
        if self.padding != (0,) * nd:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * nd:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * nd:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        dilation=1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ) -> None:
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            0,
            groups,
            bias,
            padding_mode,
            device,
            dtype,
        )

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        conv = getattr(F, _CONV_NAMES[self._nd])  # (looked up: a __torch_function__ may replace it)
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(padded, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input: Tensor) -> Tensor:
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1-D convolution over (N, C_in, L) or unbatched (C_in, L) inputs."""

    _nd = 1


class Conv2d(_Conv):
    """2-D convolution over (N, C_in, H, W) or unbatched (C_in, H, W) inputs."""

    _nd = 2


class Conv3d(_Conv):
    """3-D convolution over (N, C_in, D, H, W) or unbatched inputs."""

    _nd = 3


class _ConvTranspose(_ConvNd):
    _transposed = True

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size,
        stride=1,
        padding=0,
        output_padding=0,
        groups: int = 1,
        bias: bool = True,
        dilation=1,
        padding_mode: str = "zeros",
        device=None,
        dtype=None,
    ) -> None:
        if padding_mode != "zeros":
            raise ArgumentError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        if isinstance(padding, str):
            raise ArgumentError(f"{type(self).__name__} does not accept a padding string")
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            output_padding,
            groups,
            bias,
            padding_mode,
            device,
            dtype,
        )

    def _output_padding(self, input: Tensor, output_size) -> tuple:
        """The output_padding that makes the output exactly ``output_size`` (PyTorch's rule)."""
        if output_size is None:
            return self.output_padding
        nd = self._nd
        non_spatial = 2 if input.ndim == nd + 2 else 1
        output_size = tuple(int(s) for s in output_size)
        if len(output_size) == non_spatial + nd:
            output_size = output_size[non_spatial:]
        if len(output_size) != nd:
            raise ArgumentError(
                f"ConvTranspose{nd}D: for {input.ndim}D input, output_size must have {nd} or "
                f"{non_spatial + nd} elements (got {len(output_size)})"
            )
        result = []
        for d in range(nd):
            smallest = (
                (input.shape[d + non_spatial] - 1) * self.stride[d]
                - 2 * self.padding[d]
                + self.dilation[d] * (self.kernel_size[d] - 1)
                + 1
            )
            largest = smallest + self.stride[d] - 1
            if not smallest <= output_size[d] <= largest:
                raise ArgumentError(
                    f"requested an output size of {output_size}, but valid sizes range from "
                    f"{smallest} to {largest} in dimension {d} (for an input of shape "
                    f"{tuple(input.shape)})"
                )
            result.append(output_size[d] - smallest)
        return tuple(result)

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        conv = getattr(F, f"conv_transpose{self._nd}d")
        output_padding = self._output_padding(input, output_size)
        return conv(
            input,
            self.weight,
            self.bias,
            self.stride,
            self.padding,
            output_padding,
            self.groups,
            self.dilation,
        )


class ConvTranspose1d(_ConvTranspose):
    """The adjoint of Conv1d ("deconvolution") over (N, C_in, L) inputs."""

    _nd = 1


class ConvTranspose2d(_ConvTranspose):
    """The adjoint of Conv2d ("deconvolution") over (N, C_in, H, W) inputs."""

    _nd = 2


class ConvTranspose3d(_ConvTranspose):
    """The adjoint of Conv3d over (N, C_in, D, H, W) inputs."""

    _nd = 3
