"""ReduceLROnPlateau: cut the learning rate by ``factor`` when a metric stops improving.

``step(metric)`` counts epochs without an improvement larger than ``threshold`` (relative or
absolute, for ``mode`` 'min' or 'max'); after more than ``patience`` of them it multiplies each
group's learning rate by ``factor`` (not below that group's ``min_lr``; changes smaller than
``eps`` are skipped) and waits ``cooldown`` epochs before counting again. As in PyTorch.
"""

from __future__ import annotations

import math
from typing import Any

from ._lr_base import LRScheduler, check_optimizer, group_values, set_group_value
from .optimizer import Optimizer, OptimizerError

__all__ = ["ReduceLROnPlateau"]


class ReduceLROnPlateau(LRScheduler):
    """``ReduceLROnPlateau(optimizer, mode='min', factor=0.1, patience=10, threshold=1e-4,
    threshold_mode='rel', cooldown=0, min_lr=0, eps=1e-8)``."""

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: float | list[float] = 0,
        eps: float = 1e-8,
    ) -> None:
        op = "ReduceLROnPlateau"
        if not factor < 1.0:
            raise OptimizerError(f"factor must be < 1.0, got {factor!r}", op=op)
        self.factor = factor
        self.optimizer = check_optimizer(op, optimizer)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise OptimizerError(
                    f"expected {len(optimizer.param_groups)} min_lrs (one per param group), "
                    f"got {len(min_lr)}",
                    op=op,
                )
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = group_values(optimizer, "lr")
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _reset(self) -> None:
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics, epoch: int | None = None) -> None:  # type: ignore[override]
        """Record this epoch's ``metrics`` (a number or a one-element tensor)."""
        current = float(metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs during the cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = group_values(self.optimizer, "lr")

    def _reduce_lr(self) -> None:
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise OptimizerError(
                    f"the optimizer now has {len(groups)} param groups but min_lr was given for "
                    f"{len(self.min_lrs)}; set scheduler.min_lrs to one value per group",
                    op="ReduceLROnPlateau",
                )
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, min_lr in zip(groups, self.min_lrs):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, min_lr)
            if old_lr - new_lr > self.eps:
                set_group_value(group, "lr", new_lr)

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def _is_better(self, a: float, best: float) -> bool:
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min":
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def _init_is_better(self, mode: str, threshold: float, threshold_mode: str) -> None:
        if mode not in ("min", "max"):
            raise OptimizerError(
                f"mode must be 'min' or 'max', got {mode!r}", op="ReduceLROnPlateau"
            )
        if threshold_mode not in ("rel", "abs"):
            raise OptimizerError(
                f"threshold_mode must be 'rel' or 'abs', got {threshold_mode!r}",
                op="ReduceLROnPlateau",
            )
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)
