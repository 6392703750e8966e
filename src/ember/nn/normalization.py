"""Normalization layers: `BatchNorm1d`/`2d`/`3d` (running statistics, ``num_batches_tracked``
as int64, momentum=None for a cumulative average), `InstanceNorm1d`/`2d`, `LayerNorm`,
`GroupNorm` and `RMSNorm`, each with PyTorch's parameters, buffers and reprs.

The math lives in ``ember.nn.functional`` (batch_norm updates the running buffers it is given, in
place); these classes own the state and decide, like PyTorch, which statistics a call uses.
"""

from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes as dt
from ..autograd import no_grad
from ..errors import ArgumentError, ShapeError
from ..tensor import Tensor
from . import functional as F
from . import init
from .module import Module
from .parameter import new_parameter, new_tensor


class _NormBase(Module):
    """Per-channel affine parameters and (optionally) running statistics."""

    # (a captured graph bakes these in: swa_utils.update_bn sets momentum to None for a
    # cumulative average and back, which retraces as PyTorch's guards recompile)
    _graph_flags = ("momentum", "eps", "track_running_stats")

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _affine_parameters(self, (num_features,), affine, bias, device, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", new_tensor((num_features,), 0.0, device, dtype))
            self.register_buffer("running_var", new_tensor((num_features,), 1.0, device, dtype))
            count = new_tensor((), 0, device, dt.int64)
            self.register_buffer("num_batches_tracked", count)
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    _version = 2

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ) -> None:
        """As PyTorch's: a dict without ``num_batches_tracked`` (one written before the buffer
        existed, or filtered by the user, so carrying no version 2 metadata) keeps the
        module's count instead of reporting the key missing."""
        version = local_metadata.get("version", None)
        key = prefix + "num_batches_tracked"
        if (version is None or version < 2) and self.track_running_stats and key not in state_dict:
            state_dict[key] = (
                self.num_batches_tracked
                if self.num_batches_tracked is not None
                else Tensor(np.array(0, dtype=np.int64))
            )
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            with no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim not in self._dims:
            wanted = " or ".join(f"{d}D" for d in self._dims)
            raise ShapeError(
                f"expected {wanted} input (got {input.ndim}D input of shape {tuple(input.shape)})",
                op=type(self).__name__,
            )

    def extra_repr(self) -> str:
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, bias={self.bias is not None}, "
            f"track_running_stats={self.track_running_stats}"
        )


class _BatchNorm(_NormBase):
    _dims: tuple = ()

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if not self.training:  # (evaluation: the branches below, each buffer read once)
            mean, var = self.running_mean, self.running_var
            use_batch = mean is None and var is None
            weight, bias = self.weight, self.bias
            return F.batch_norm(input, mean, var, weight, bias, use_batch, factor, self.eps)
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative moving average
                # (a float64 0-d tensor, not a Python float: inside a captured step the count
                # is a graph value, which Python cannot read)
                factor = 1.0 / self.num_batches_tracked.to(dt.float64)
        # batch statistics while training, or in evaluation when no running statistics exist
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        # the running buffers are passed only when they are to be updated or used
        pass_running = not self.training or self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if pass_running else None,
            self.running_var if pass_running else None,
            self.weight,
            self.bias,
            use_batch,
            factor,
            self.eps,
        )


class BatchNorm1d(_BatchNorm):
    """Batch normalization over (N, C) or (N, C, L) inputs."""

    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization over (N, C, H, W) inputs."""

    _dims = (4,)


class BatchNorm3d(_BatchNorm):
    """Batch normalization over (N, C, D, H, W) inputs."""

    _dims = (5,)


class _InstanceNorm(_NormBase):
    _dims: tuple = ()

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__(
            num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias
        )

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        unbatched = input.ndim == self._dims[0]
        channel_dim = 0 if unbatched else 1
        if self.affine and input.shape[channel_dim] != self.num_features:
            raise ShapeError(
                f"expected input's size at dim={channel_dim} to match num_features "
                f"({self.num_features}), but got: {input.shape[channel_dim]}",
                op=type(self).__name__,
            )
        x = input.unsqueeze(0) if unbatched else input
        y = F.instance_norm(
            x,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            self.training or not self.track_running_stats,
            self.momentum if self.momentum is not None else 0.0,
            self.eps,
        )
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """Instance normalization over (N, C, L) or unbatched (C, L) inputs."""

    _dims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    """Instance normalization over (N, C, H, W) or unbatched (C, H, W) inputs."""

    _dims = (3, 4)


def _affine_parameters(module: Module, shape, affine: bool, bias: bool, device, dtype) -> None:
    """Register the per-feature ``weight`` and ``bias`` of a normalization layer (None when
    ``affine`` or ``bias`` is off, as PyTorch registers them)."""
    if affine:
        module.weight = new_parameter(shape, device, dtype)
        if bias:
            module.bias = new_parameter(shape, device, dtype)
        else:
            module.register_parameter("bias", None)
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)


def _shape_tuple(normalized_shape) -> tuple:
    if isinstance(normalized_shape, numbers.Integral):
        return (int(normalized_shape),)
    return tuple(int(s) for s in normalized_shape)


class LayerNorm(Module):
    """Normalization over the trailing ``normalized_shape`` dimensions of each sample."""

    def __init__(
        self,
        normalized_shape,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _affine_parameters(self, self.normalized_shape, elementwise_affine, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, "
            f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}"
        )


class GroupNorm(Module):
    """Normalization over groups of channels of each sample, then a per-channel affine."""

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if num_channels % num_groups != 0:
            raise ArgumentError(
                f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})"
            )
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _affine_parameters(self, (num_channels,), affine, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
            f"bias={self.bias is not None}"
        )


class RMSNorm(Module):
    """Root-mean-square normalization over the trailing ``normalized_shape`` dimensions."""

    def __init__(
        self,
        normalized_shape,
        eps: float | None = None,
        elementwise_affine: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = new_parameter(self.normalized_shape, device, dtype)
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, input: Tensor) -> Tensor:
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )
