"""InstanceNorm3d, and SyncBatchNorm for one process.

``SyncBatchNorm`` is a BatchNorm over inputs of any rank from 2 with PyTorch's arguments
(``process_group`` accepted) and ``convert_sync_batchnorm``. It synchronizes nothing: ember has
no process groups yet (the distributed issue), so its statistics are each process's own batch's,
which is exactly what PyTorch's SyncBatchNorm computes when no process group is initialized.
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
    """Batch normalization over (N, C, *) inputs; in ember it synchronizes nothing (see the
    module docstring)."""

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
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)
        self.process_group = process_group

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
