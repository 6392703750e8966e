"""`LRScheduler`, the base of the learning-rate schedulers, and helpers they share.

A scheduler owns ``last_epoch`` (how many times it stepped; -1 before its first, implicit step),
``base_lrs`` (each group's ``'initial_lr'``, which the scheduler records in the group when it
starts) and the sequence rule ``get_lr()``. Its first step happens in the constructor, as in
PyTorch, so ``last_epoch`` is 0 once it exists. ``step()`` advances ``last_epoch`` and writes the
new learning rates into the optimizer's param groups. Rules are PyTorch's *chainable* (recursive)
forms, so several schedulers may act on one optimizer; ``_get_closed_form_lr`` gives the value
at an arbitrary epoch (used by ``step(epoch)`` and `SequentialLR` at its milestones).

``state_dict()`` is the scheduler's attributes except the optimizer (and other objects a
checkpoint cannot hold): numbers, lists, tuples and dicts, so ``ember.save`` writes it.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..autograd import no_grad
from ..errors import StateDictError, user_stacklevel
from ..tensor import Tensor
from .optimizer import Optimizer, OptimizerError

__all__ = ["LRScheduler", "format_param", "group_values", "set_group_value"]

EPOCH_DEPRECATION_WARNING = (
    "passing an epoch to scheduler.step() is deprecated (as in PyTorch): the closed form is used "
    "where the scheduler has one; call scheduler.step() once per epoch instead"
)


def check_optimizer(scheduler: str, optimizer) -> Optimizer:
    if not isinstance(optimizer, Optimizer):
        raise OptimizerError(
            f"expected an ember.optim.Optimizer, got {type(optimizer).__name__}", op=scheduler
        )
    return optimizer


def format_param(scheduler: str, name: str, optimizer: Optimizer, value) -> list:
    """One value per param group: a list/tuple must have one per group; a scalar is repeated."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise OptimizerError(
                f"{name} has {len(value)} values but the optimizer has "
                f"{len(optimizer.param_groups)} param groups; give one per group or a single "
                "value",
                op=scheduler,
            )
        return [_copy(v) for v in value]
    return [_copy(value) for _ in optimizer.param_groups]


def _copy(value):
    return value.detach().clone() if isinstance(value, Tensor) else value


def group_values(optimizer: Optimizer, key: str) -> list:
    """Each group's ``key``, a Tensor one (PyTorch's Tensor ``lr``) cloned so that the list
    does not change with the group."""
    return [_copy(group[key]) for group in optimizer.param_groups]


def set_group_value(group: dict, key: str, value) -> None:
    """``group[key] = value``, but a Tensor entry is filled in place (as PyTorch's
    ``_update_param_group_val``), so what holds the Tensor (a compiled step) sees the change."""
    current = group[key]
    if isinstance(current, Tensor):
        if isinstance(value, Tensor):
            value = value.item()
        with no_grad():
            current.fill_(value)
    else:
        group[key] = value


# entries of PyTorch's scheduler state dicts about its own call bookkeeping (a flag set while
# get_lr runs, the deprecated verbose switch) or the first step, which a checkpoint written by
# PyTorch carries and ember's schedulers need not restore
_TORCH_BOOKKEEPING = frozenset({"_is_initial", "_get_lr_called_within_step", "verbose"})


class LRScheduler:
    """Base class of the schedulers (PyTorch's ``torch.optim.lr_scheduler.LRScheduler``)."""

    # attributes that state_dict leaves out (besides the optimizer)
    _not_saved: tuple[str, ...] = ()
    _is_initial: bool = False

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        name = type(self).__name__
        self.optimizer = check_optimizer(name, optimizer)
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", _copy(group["lr"]))
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise OptimizerError(
                        f"param group {i} has no 'initial_lr', so the scheduler cannot resume "
                        f"at last_epoch={last_epoch}; load the optimizer's state_dict first, or "
                        "start with last_epoch=-1",
                        op=name,
                    )
        self.base_lrs: list[float] = group_values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self) -> None:
        """The step the constructor takes: it sets the learning rates for epoch 0."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list[float]:
        """The learning rates for ``last_epoch`` (called by `step`, after it advances)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement get_lr")

    def get_last_lr(self) -> list[float]:
        """The learning rates the last step set, one per param group."""
        return self._last_lr

    def step(self, epoch: int | None = None) -> None:
        if self._step_count == 1 and not self._is_initial:
            opt = self.optimizer
            if type(opt).step is Optimizer.step and getattr(opt, "_step_count", 1) == 0:
                warnings.warn(
                    "lr_scheduler.step() was called before optimizer.step(); call "
                    "optimizer.step() first, or the first value of the schedule is skipped",
                    UserWarning,
                    stacklevel=user_stacklevel(),
                )
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=user_stacklevel())
        self._update_lr(epoch)

    def _update_lr(self, epoch: int | None = None) -> None:
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed_form = getattr(self, "_get_closed_form_lr", None)
            values = closed_form() if closed_form is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values, strict=True):
            set_group_value(group, "lr", lr)
        self._last_lr = group_values(self.optimizer, "lr")

    # ------------------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        skip = ("optimizer", "_is_initial", *self._not_saved)
        return {k: v for k, v in self.__dict__.items() if k not in skip}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        name = f"{type(self).__name__}.load_state_dict"
        if not isinstance(state_dict, dict):
            raise StateDictError(
                f"expected a dict from a scheduler's state_dict(), got {type(state_dict).__name__}",
                op=name,
            )
        missing = [k for k in ("last_epoch",) if k not in state_dict]
        if missing:
            raise StateDictError(
                f"the state dict has no {missing[0]!r} entry; it must come from a scheduler's "
                "state_dict()",
                op=name,
            )
        groups = len(self.optimizer.param_groups)
        for key in ("base_lrs", "_last_lr"):
            if key in state_dict and len(state_dict[key]) != groups:
                raise StateDictError(
                    f"{key} has {len(state_dict[key])} entries but the optimizer has {groups} "
                    "param groups",
                    op=name,
                )
        unknown = set(state_dict) - set(self.__dict__) - _TORCH_BOOKKEEPING
        if unknown:
            raise StateDictError(
                f"unexpected entries {sorted(unknown)}: the state dict comes from a different "
                f"kind of scheduler than {type(self).__name__}",
                op=name,
            )
        self.__dict__.update({k: v for k, v in state_dict.items() if k not in _TORCH_BOOKKEEPING})

    def __repr__(self) -> str:
        return f"{type(self).__name__}(last_epoch={self.last_epoch}, lr={self.get_last_lr()})"
