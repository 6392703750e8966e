"""Stochastic weight averaging and exponential moving averages of a model's weights, as
``torch.optim.swa_utils``: `AveragedModel` (a copy of a model whose parameters, and with
``use_buffers`` its buffers, are running averages of another's), the averaging functions
(``get_swa_avg_fn``, ``get_ema_avg_fn`` and their in-place ``multi`` forms), `SWALR` (anneals
each group's learning rate to ``swa_lr``) and `update_bn` (recomputes BatchNorm statistics
with one pass over the data).

The first ``update_parameters`` copies the model's values; later ones average with the
function given (by default the equal-weight SWA mean, computed as PyTorch's ``lerp``). The
averaging functions are not part of ``state_dict``, as in PyTorch.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Iterable

import numpy as np

from ..errors import ArgumentError, EmberError
from ..grad_mode import no_grad
from ..nn.module import Module
from ..nn.normalization import _BatchNorm
from ..ops import api as E
from ..tensor import Tensor
from ._lr_base import LRScheduler, check_optimizer, format_param
from .optimizer import Optimizer, OptimizerError

__all__ = [
    "SWALR",
    "AveragedModel",
    "get_ema_avg_fn",
    "get_ema_multi_avg_fn",
    "get_swa_avg_fn",
    "get_swa_multi_avg_fn",
    "update_bn",
]


def _check_decay(decay: float) -> None:
    if decay < 0.0 or decay > 1.0:
        raise ArgumentError(
            f"Invalid decay value {decay} provided. Please provide a value in [0,1] range."
        )


def get_ema_multi_avg_fn(decay: float = 0.999) -> Callable:
    """In place over lists: ``ema = decay * ema + (1 - decay) * current`` (as a lerp)."""
    _check_decay(decay)

    def ema_update(ema_params: list, current_params: list, _num_averaged) -> None:
        with no_grad():
            for p, q in zip(ema_params, current_params):
                if p.dtype.is_floating_point:
                    p.copy_(E.lerp(p, q, 1 - decay))
                else:
                    p.copy_(p * decay + q * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn() -> Callable:
    """In place over lists: the running mean ``avg + (current - avg) / (n + 1)``."""

    def swa_update(averaged_params: list, current_params: list, num_averaged) -> None:
        n = float(num_averaged)
        with no_grad():
            for p, q in zip(averaged_params, current_params):
                if p.dtype.is_floating_point:
                    p.copy_(E.lerp(p, q, 1.0 / (n + 1)))
                else:
                    p.copy_(p + (q - p) / (n + 1))

    return swa_update


def get_ema_avg_fn(decay: float = 0.999) -> Callable:
    """``(ema, current, n) -> decay * ema + (1 - decay) * current``."""
    _check_decay(decay)

    def ema_update(ema_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        with no_grad():
            return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn() -> Callable:
    """``(avg, current, n) -> avg + (current - avg) / (n + 1)``."""

    def swa_update(averaged_param: Tensor, current_param: Tensor, num_averaged) -> Tensor:
        with no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(Module):
    """A deep copy of ``model`` holding running averages of its parameters (SWA by default,
    EMA with ``get_ema_multi_avg_fn``); ``forward`` calls the copy."""

    def __init__(
        self,
        model: Module,
        device=None,
        avg_fn: Callable | None = None,
        multi_avg_fn: Callable | None = None,
        use_buffers: bool = False,
    ) -> None:
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise EmberError(
                "Only one of avg_fn and multi_avg_fn should be provided", op="AveragedModel"
            )
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", Tensor(np.array(0, dtype=np.int64)))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model: Module) -> None:
        """Average ``model``'s current values into this copy (the first call copies them)."""
        if self.use_buffers:
            mine = list(itertools.chain(self.module.parameters(), self.module.buffers()))
            theirs = list(itertools.chain(model.parameters(), model.buffers()))
        else:
            mine, theirs = list(self.parameters()), list(model.parameters())
        mine = [p.detach() for p in mine]
        theirs = [p.detach() for p in theirs]
        n = int(self.n_averaged.item())
        with no_grad():
            if n == 0:
                for p, q in zip(mine, theirs):
                    p.copy_(q)
            elif self.avg_fn is not None:
                for p, q in zip(mine, theirs):
                    p.copy_(self.avg_fn(p, q, self.n_averaged))
            else:
                fn = self.multi_avg_fn or get_swa_multi_avg_fn()
                fn(mine, theirs, self.n_averaged)
            if not self.use_buffers:  # buffers follow the model's (update_bn recomputes BN's)
                for b, c in zip(self.module.buffers(), model.buffers()):
                    b.detach().copy_(c.detach())
            self.n_averaged.add_(1)


def update_bn(loader: Iterable, model: Module, device=None) -> None:
    """Recompute every BatchNorm's running statistics with one pass of ``loader`` through
    ``model`` (cumulative averages: momentum None during the pass); a batch that is a list or
    tuple contributes its first element."""
    momenta = {}
    for module in model.modules():
        if isinstance(module, _BatchNorm):
            module.reset_running_stats()
            momenta[module] = module.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for module in momenta:
        module.momentum = None
    with no_grad():
        for batch in loader:
            if isinstance(batch, (list, tuple)):
                batch = batch[0]
            if device is not None:
                batch = batch.to(device)
            model(batch)
    for module, momentum in momenta.items():
        module.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's learning rate from its current value to ``swa_lr`` over
    ``anneal_epochs`` steps (cosine or linear), then holds it, as PyTorch's SWALR."""

    def __init__(
        self,
        optimizer: Optimizer,
        swa_lr: float | list[float],
        anneal_epochs: int = 10,
        anneal_strategy: str = "cos",
        last_epoch: int = -1,
    ) -> None:
        op = "SWALR"
        check_optimizer(op, optimizer)
        for lr, group in zip(format_param(op, "swa_lr", optimizer, swa_lr), optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise OptimizerError(
                f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}",
                op=op,
            )
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise OptimizerError(
                f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}", op=op
            )
        self.anneal_strategy = anneal_strategy
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def anneal_func(self, t: float) -> float:
        if self.anneal_strategy == "linear":
            return t
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr: float, swa_lr: float, alpha: float) -> float:
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self) -> list[float]:
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        groups = self.optimizer.param_groups
        prev_lrs = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha) for g in groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [g["swa_lr"] * alpha + lr * (1 - alpha) for g, lr in zip(groups, prev_lrs)]
