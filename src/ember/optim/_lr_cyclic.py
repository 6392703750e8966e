"""Cyclic schedules: OneCycleLR (learning rate up then down, momentum the other way) and
CosineAnnealingWarmRestarts (cosine annealing restarted every ``T_i`` epochs, ``T_i`` growing by
``T_mult``). Both compute each value from the epoch (no recursion), exactly as PyTorch does.

OneCycleLR writes its phase end points into the param groups (``'initial_lr'``, ``'max_lr'``,
``'min_lr'`` and, with ``cycle_momentum``, ``'max_momentum'`` / ``'base_momentum'``), so they
travel with the optimizer's state_dict; it cycles SGD/RMSprop's ``'momentum'`` or Adam's beta1.
"""

from __future__ import annotations

import math

from ._lr_base import LRScheduler, check_optimizer, format_param, group_values, set_group_value
from .optimizer import Optimizer, OptimizerError

__all__ = ["CosineAnnealingWarmRestarts", "OneCycleLR"]


def _positive_int(op: str, name: str, value) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise OptimizerError(f"{name} must be a positive int, got {value!r}", op=op)
    return value


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin), as ``torch.optim.lr_scheduler.OneCycleLR``; step it
    after every batch, ``total_steps`` (or ``epochs * steps_per_epoch``) times in all."""

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | list[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float | list[float] = 0.85,
        max_momentum: float | list[float] = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        op = "OneCycleLR"
        check_optimizer(op, optimizer)
        if total_steps is not None:
            self.total_steps = _positive_int(op, "total_steps", total_steps)
        elif epochs is not None and steps_per_epoch is not None:
            epochs = _positive_int(op, "epochs", epochs)
            self.total_steps = epochs * _positive_int(op, "steps_per_epoch", steps_per_epoch)
        else:
            raise OptimizerError(
                "give either total_steps, or both epochs and steps_per_epoch", op=op
            )
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise OptimizerError(f"pct_start must be a float in [0, 1], got {pct_start!r}", op=op)
        if anneal_strategy not in ("cos", "linear"):
            raise OptimizerError(
                f"anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}", op=op
            )
        self._anneal_func_type = anneal_strategy
        up_end = float(pct_start * self.total_steps) - 1
        if three_phase:
            self._schedule_phases = [
                _phase(up_end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                _phase(
                    float(2 * pct_start * self.total_steps) - 2,
                    "max_lr",
                    "initial_lr",
                    "base_momentum",
                    "max_momentum",
                ),
                _phase(
                    self.total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"
                ),
            ]
        else:
            self._schedule_phases = [
                _phase(up_end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                _phase(self.total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]

        max_lrs = format_param(op, "max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for group, top in zip(optimizer.param_groups, max_lrs):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor

        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise OptimizerError(
                    f"cycle_momentum needs an optimizer with 'momentum' or 'betas', and "
                    f"{type(optimizer).__name__} has neither; pass cycle_momentum=False",
                    op=op,
                )
            self.use_beta1 = "betas" in optimizer.defaults
            tops = format_param(op, "max_momentum", optimizer, max_momentum)
            bases = format_param(op, "base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for top, base, group in zip(tops, bases, optimizer.param_groups):
                    self._set_momentum(group, top)
                    group["max_momentum"] = top
                    group["base_momentum"] = base
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group: dict, value: float) -> None:
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise OptimizerError(
                f"stepped {step_num} times, but total_steps is {self.total_steps}; build the "
                "scheduler with the number of batches you will train for",
                op="OneCycleLR",
            )
        lrs = []
        last = len(self._schedule_phases) - 1
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step_num <= end_step or i == last:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lr = self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        momentum = self._anneal(
                            group[phase["start_momentum"]], group[phase["end_momentum"]], pct
                        )
                    break
                start_step = phase["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                self._set_momentum(group, momentum)
        return lrs


def _phase(end_step: float, start_lr: str, end_lr: str, start_mom: str, end_mom: str) -> dict:
    return {
        "end_step": end_step,
        "start_lr": start_lr,
        "end_lr": end_lr,
        "start_momentum": start_mom,
        "end_momentum": end_mom,
    }


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing with warm restarts (SGDR): period ``T_0``, multiplied by ``T_mult``
    after each restart. ``step(epoch)`` accepts fractional epochs (e.g. ``epoch + i / iters``)."""

    def __init__(
        self,
        optimizer: Optimizer,
        T_0: int,
        T_mult: int = 1,
        eta_min: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        op = "CosineAnnealingWarmRestarts"
        _positive_int(op, "T_0", T_0)
        if not isinstance(T_mult, int) or T_mult < 1:
            raise OptimizerError(f"T_mult must be an int >= 1, got {T_mult!r}", op=op)
        if not isinstance(eta_min, (int, float)):
            raise OptimizerError(f"eta_min must be a number, got {eta_min!r}", op=op)
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        low = self.eta_min
        return [
            low + (base - low) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
            for base in self.base_lrs
        ]

    def step(self, epoch: float | None = None) -> None:
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise OptimizerError(
                    f"epoch must be non-negative, got {epoch!r}", op="CosineAnnealingWarmRestarts"
                )
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult**n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            set_group_value(group, "lr", lr)
        self._last_lr = group_values(self.optimizer, "lr")
