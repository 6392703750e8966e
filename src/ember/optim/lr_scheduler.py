"""Learning-rate schedulers (``ember.optim.lr_scheduler``), as ``torch.optim.lr_scheduler``.

This module holds the schedules that follow a fixed formula of the epoch: LambdaLR,
MultiplicativeLR, StepLR, MultiStepLR, ConstantLR, LinearLR, ExponentialLR, PolynomialLR and
CosineAnnealingLR. The cyclic schedules (OneCycleLR, CosineAnnealingWarmRestarts), the
combinators (SequentialLR, ChainedScheduler) and ReduceLROnPlateau live in their own modules and
are re-exported here. Each ``get_lr`` is PyTorch's recursive (chainable) rule and each
``_get_closed_form_lr`` its closed form, so the learning-rate sequences are PyTorch's exactly.
"""

from __future__ import annotations

import math
import types
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from ._lr_base import LRScheduler, check_optimizer, group_values
from ._lr_combine import ChainedScheduler, SequentialLR
from ._lr_cyclic import CosineAnnealingWarmRestarts, OneCycleLR
from ._lr_cyclic_lr import CyclicLR
from ._lr_plateau import ReduceLROnPlateau
from .optimizer import Optimizer, OptimizerError

__all__ = [
    "ChainedScheduler",
    "ConstantLR",
    "CosineAnnealingLR",
    "CosineAnnealingWarmRestarts",
    "CyclicLR",
    "ExponentialLR",
    "LRScheduler",
    "LambdaLR",
    "LinearLR",
    "MultiStepLR",
    "MultiplicativeLR",
    "OneCycleLR",
    "PolynomialLR",
    "ReduceLROnPlateau",
    "SequentialLR",
    "StepLR",
]


class _LRScheduler(LRScheduler):
    """PyTorch's older name of the base class, which schedulers written before 2.0 subclass (a
    subclass rather than an alias, as PyTorch's, so such a class's ``__mro__`` names it)."""


class _LambdaScheduler(LRScheduler):
    """Shared by LambdaLR and MultiplicativeLR: one function of the epoch per param group."""

    _not_saved = ("lr_lambdas",)

    def __init__(self, optimizer: Optimizer, lr_lambda, last_epoch: int = -1) -> None:
        name = type(self).__name__
        check_optimizer(name, optimizer)
        n = len(optimizer.param_groups)
        lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * n
        if len(lambdas) != n:
            raise OptimizerError(f"expected {n} lr_lambdas, got {len(lambdas)}", op=name)
        for fn in lambdas:
            if not callable(fn):
                raise OptimizerError(
                    f"lr_lambda must be callable, got {type(fn).__name__}", op=name
                )
        self.lr_lambdas: list[Callable[[int], float]] = lambdas
        super().__init__(optimizer, last_epoch)

    def state_dict(self) -> dict[str, Any]:
        # plain functions are code, not state; callable objects keep their attributes
        state = super().state_dict()
        state["lr_lambdas"] = [
            None if isinstance(fn, types.FunctionType) else dict(vars(fn)) for fn in self.lr_lambdas
        ]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        saved = state.pop("lr_lambdas", [None] * len(self.lr_lambdas))
        super().load_state_dict(state)
        for fn, attrs in zip(self.lr_lambdas, saved):
            if attrs is not None:
                vars(fn).update(attrs)


class LambdaLR(_LambdaScheduler):
    """lr = initial_lr * lr_lambda(epoch)."""

    def get_lr(self) -> list[float]:
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]


class MultiplicativeLR(_LambdaScheduler):
    """lr = previous lr * lr_lambda(epoch) (from epoch 1 on)."""

    def get_lr(self) -> list[float]:
        if self._is_initial:
            return group_values(self.optimizer, "lr")
        return [
            g["lr"] * fn(self.last_epoch)
            for fn, g in zip(self.lr_lambdas, self.optimizer.param_groups)
        ]


class StepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every ``step_size`` epochs."""

    def __init__(
        self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        if not isinstance(step_size, int) or step_size <= 0:
            raise OptimizerError(
                f"step_size must be a positive int, got {step_size!r}", op="StepLR"
            )
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return group_values(self.optimizer, "lr")
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base * self.gamma ** (self.last_epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` at each milestone epoch."""

    def __init__(
        self,
        optimizer: Optimizer,
        milestones: Iterable[int],
        gamma: float = 0.1,
        last_epoch: int = -1,
    ) -> None:
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch not in self.milestones:
            return group_values(self.optimizer, "lr")
        factor = self.gamma ** self.milestones[self.last_epoch]
        return [g["lr"] * factor for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        milestones = sorted(self.milestones.elements())
        return [
            base * self.gamma ** bisect_right(milestones, self.last_epoch) for base in self.base_lrs
        ]

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        self.milestones = Counter(dict(self.milestones))  # a checkpoint gives a plain dict back


class ConstantLR(LRScheduler):
    """Multiply the learning rate by ``factor`` until epoch ``total_iters``."""

    def __init__(
        self,
        optimizer: Optimizer,
        factor: float = 1.0 / 3,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if not 0 <= factor <= 1:
            raise OptimizerError(f"factor must be in [0, 1], got {factor!r}", op="ConstantLR")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return [g["lr"] * self.factor for g in self.optimizer.param_groups]
        if self.last_epoch != self.total_iters:
            return group_values(self.optimizer, "lr")
        return [g["lr"] * (1.0 / self.factor) for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        on = self.last_epoch >= self.total_iters
        return [base * (self.factor + on * (1 - self.factor)) for base in self.base_lrs]


class LinearLR(LRScheduler):
    """Scale the learning rate linearly from ``start_factor`` to ``end_factor`` over
    ``total_iters`` epochs."""

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if not 0 < start_factor <= 1:
            raise OptimizerError(
                f"start_factor must be in (0, 1], got {start_factor!r}", op="LinearLR"
            )
        if not 0 <= end_factor <= 1:
            raise OptimizerError(f"end_factor must be in [0, 1], got {end_factor!r}", op="LinearLR")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return [g["lr"] * self.start_factor for g in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return group_values(self.optimizer, "lr")
        delta = self.end_factor - self.start_factor
        factor = 1.0 + delta / (
            self.total_iters * self.start_factor + (self.last_epoch - 1) * delta
        )
        return [g["lr"] * factor for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        delta = self.end_factor - self.start_factor
        done = min(self.total_iters, self.last_epoch)
        return [
            base * (self.start_factor + delta * done / self.total_iters) for base in self.base_lrs
        ]


class ExponentialLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial:
            return group_values(self.optimizer, "lr")
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        return [base * self.gamma**self.last_epoch for base in self.base_lrs]


class PolynomialLR(LRScheduler):
    """Decay the learning rate to 0 over ``total_iters`` epochs as ``(1 - t/T) ** power``."""

    def __init__(
        self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1
    ) -> None:
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial or self.last_epoch > self.total_iters:
            return group_values(self.optimizer, "lr")
        t, total = self.last_epoch, self.total_iters
        factor = ((1.0 - t / total) / (1.0 - (t - 1) / total)) ** self.power
        return [g["lr"] * factor for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self) -> list[float]:
        done = min(self.total_iters, self.last_epoch)
        return [base * (1.0 - done / self.total_iters) ** self.power for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from the initial learning rate to ``eta_min`` over ``T_max`` epochs
    (PyTorch's recursive form, which keeps oscillating past ``T_max``)."""

    def __init__(
        self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1
    ) -> None:
        if not isinstance(T_max, int) or T_max <= 0:
            raise OptimizerError(
                f"T_max must be a positive int, got {T_max!r}", op="CosineAnnealingLR"
            )
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups, t, T, low = self.optimizer.param_groups, self.last_epoch, self.T_max, self.eta_min
        if self._is_initial:
            return group_values(self.optimizer, "lr")
        if self._step_count == 1 and t > 0:  # resuming at last_epoch > 0: the closed form
            return [
                low + (base - low) * (1 + math.cos(t * math.pi / T)) / 2 for base in self.base_lrs
            ]
        if (t - 1 - T) % (2 * T) == 0:
            return [
                g["lr"] + (base - low) * (1 - math.cos(math.pi / T)) / 2
                for base, g in zip(self.base_lrs, groups)
            ]
        ratio = (1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T))
        return [ratio * (g["lr"] - low) + low for g in groups]

    def _get_closed_form_lr(self) -> list[float]:
        low, t, T = self.eta_min, self.last_epoch, self.T_max
        return [low + (base - low) * (1 + math.cos(math.pi * t / T)) / 2 for base in self.base_lrs]
