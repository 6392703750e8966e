"""InstanceNorm3d, and SyncBatchNorm.

``SyncBatchNorm`` is a BatchNorm over inputs of any rank from 2 with PyTorch's arguments and
``convert_sync_batchnorm``. While training in a process group (``ember.distributed``) of more
than one rank, its batch statistics are the global batch's (nn/_sync_batch_norm.py); otherwise
(evaluation, no group, one rank) it is the plain BatchNorm, as PyTorch's is.
"""

from __future__ import annotations

from ..errors import ShapeError
from ..grad_mode import no_grad
from ..tensor import Tensor
from .module import Module
from .normalization import _BatchNorm, _InstanceNorm


class InstanceNorm3d(_InstanceNorm):
    """Instance normalization over (N, C, D, H, W) or unbatched (C, D, H, W) inputs."""

    _dims = (4, 5)


class SyncBatchNorm(_BatchNorm):
    """Batch normalization over (N, C, *) inputs with the statistics of the batch of every rank
    of ``process_group`` (the default group when None; see the module docstring)."""

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        process_group=None,
        device=None,
        dtype=None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__(
            num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias
        )
        self.process_group = process_group

    def forward(self, input: Tensor) -> Tensor:
        from ..distributed.process_group import _group, is_initialized

        group = self.process_group
        if group is None and is_initialized():
            group = _group()
        if not self.training or group is None or group.size() == 1:
            return super().forward(input)
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        running = self.track_running_stats and self.running_mean is not None
        if running and self.num_batches_tracked is not None:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked)
        from ..ops._registry import building_graph
        from ._sync_batch_norm import SyncBatchNormFunction, sync_batch_norm_ops

        return (sync_batch_norm_ops if building_graph() else SyncBatchNormFunction.apply)(
            input,
            self.weight,
            self.bias,
            self.running_mean if running else None,
            self.running_var if running else None,
            self.eps,
            factor,
            group,
        )

    def _check_input_dim(self, input: Tensor) -> None:
        if input.ndim < 2:
            raise ShapeError(
                f"expected at least 2D input (got {input.ndim}D input)", op="SyncBatchNorm"
            )

    @classmethod
    def convert_sync_batchnorm(cls, module: Module, process_group=None) -> Module:
        """``module`` with every BatchNorm*d (recursively) replaced by a SyncBatchNorm that
        shares its parameters and buffers; a BatchNorm ``module`` itself is returned replaced."""
        output = module
        if isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm):
            output = SyncBatchNorm(
                module.num_features,
                module.eps,
                module.momentum,
                module.affine,
                module.track_running_stats,
                process_group,
            )
            with no_grad():
                if module.affine:
                    output.weight = module.weight
                    output.bias = module.bias
            output.running_mean = module.running_mean
            output.running_var = module.running_var
            output.num_batches_tracked = module.num_batches_tracked
            output.training = module.training
        for name, child in module.named_children():
            output.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return output
