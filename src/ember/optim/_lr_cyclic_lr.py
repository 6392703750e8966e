"""CyclicLR (Smith's cyclical learning rates): the learning rate goes from ``base_lr`` up to
``max_lr`` in ``step_size_up`` steps and back in ``step_size_down``, the cycle's amplitude
scaled by ``mode`` (triangular: constant, triangular2: halved each cycle, exp_range:
``gamma ** step``) or a custom ``scale_fn``; with ``cycle_momentum`` the momentum (or Adam's
beta1) moves the opposite way between ``max_momentum`` and ``base_momentum``. Each value comes
from the step count alone, as PyTorch computes it; step it after every batch.

``state_dict`` leaves out a custom ``scale_fn`` (PyTorch keeps a callable object's
``__dict__``; a function or lambda is dropped by both), so a resumed scheduler keeps the
``scale_fn`` it was constructed with.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ._lr_base import LRScheduler, check_optimizer, format_param, set_group_value
from .optimizer import Optimizer, OptimizerError

__all__ = ["CyclicLR"]


class CyclicLR(LRScheduler):
    """``torch.optim.lr_scheduler.CyclicLR``: same arguments, defaults and values."""

    _not_saved = ("_scale_fn_custom",)

    def __init__(
        self,
        optimizer: Optimizer,
        base_lr: float | list[float],
        max_lr: float | list[float],
        step_size_up: int = 2000,
        step_size_down: int | None = None,
        mode: str = "triangular",
        gamma: float = 1.0,
        scale_fn: Callable[[float], float] | None = None,
        scale_mode: str = "cycle",
        cycle_momentum: bool = True,
        base_momentum: float | list[float] = 0.8,
        max_momentum: float | list[float] = 0.9,
        last_epoch: int = -1,
    ) -> None:
        op = "CyclicLR"
        check_optimizer(op, optimizer)
        base_lrs = format_param(op, "base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                set_group_value(group, "lr", lr)
        self.max_lrs = format_param(op, "max_lr", optimizer, max_lr)
        step_size_up = float(step_size_up)
        step_size_down = float(step_size_down) if step_size_down is not None else step_size_up
        if step_size_up + step_size_down <= 0:
            raise OptimizerError("step_size_up + step_size_down must be positive", op=op)
        self.total_size = step_size_up + step_size_down
        self.step_ratio = step_size_up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise OptimizerError(
                f"mode must be 'triangular', 'triangular2' or 'exp_range' (or give scale_fn), "
                f"got {mode!r}",
                op=op,
            )
        if scale_mode not in ("cycle", "iterations"):
            raise OptimizerError(
                f"scale_mode must be 'cycle' or 'iterations', got {scale_mode!r}", op=op
            )
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        if scale_fn is None:  # the mode decides the scale mode, as in PyTorch
            self.scale_mode = "iterations" if mode == "exp_range" else "cycle"
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise OptimizerError(
                    "optimizer must support momentum or beta1 with `cycle_momentum` option "
                    f"enabled ({type(optimizer).__name__} has neither); pass "
                    "cycle_momentum=False",
                    op=op,
                )
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = format_param(op, "base_momentum", optimizer, base_momentum)
            self.max_momentums = format_param(op, "max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for top, base, group in zip(
                    self.max_momentums, self.base_momentums, optimizer.param_groups
                ):
                    self._set_momentum(group, top)
                    group["max_momentum"] = top
                    group["base_momentum"] = base
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def load_state_dict(self, state_dict: dict) -> None:
        # (a PyTorch state holds its custom scale_fn's __dict__ or None: the one this scheduler
        # was built with stays)
        state = {k: v for k, v in state_dict.items() if k != "_scale_fn_custom"}
        super().load_state_dict(state)

    def _set_momentum(self, group: dict, value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def scale_fn(self, x: float) -> float:
        """The amplitude's scale at cycle (or step) ``x``."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma**x

    def get_lr(self) -> list[float]:
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [
            base + (top - base) * scale_factor * scale
            for base, top in zip(self.base_lrs, self.max_lrs)
        ]
        if self.cycle_momentum:
            for base, top, group in zip(
                self.base_momentums, self.max_momentums, self.optimizer.param_groups
            ):
                self._set_momentum(group, top - (top - base) * scale_factor * scale)
        return lrs
