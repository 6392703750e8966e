"""Combinators of schedulers: SequentialLR (one schedule after another, switching at
milestones) and ChainedScheduler (several schedules stepped together, their factors multiplying),
as in PyTorch. Their state_dict nests the member schedulers' state dicts.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

from ..errors import StateDictError
from ._lr_base import LRScheduler, check_optimizer, group_values, set_group_value
from ._lr_plateau import ReduceLROnPlateau
from .optimizer import Optimizer, OptimizerError

__all__ = ["ChainedScheduler", "SequentialLR"]


class SequentialLR(LRScheduler):
    """Run ``schedulers`` one after another, switching at each of ``milestones``."""

    _not_saved = ("_schedulers",)

    def __init__(
        self,
        optimizer: Optimizer,
        schedulers: Sequence[LRScheduler],
        milestones: Sequence[int],
        last_epoch: int = -1,
    ) -> None:
        check_optimizer("SequentialLR", optimizer)
        _check_members("SequentialLR", optimizer, schedulers)
        if len(milestones) != len(schedulers) - 1:
            raise OptimizerError(
                f"expects one milestone fewer than schedulers, got {len(schedulers)} schedulers "
                f"and {len(milestones)} milestones",
                op="SequentialLR",
            )
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        # the members each took their initial step when built: undo those and start over
        for group in optimizer.param_groups:
            set_group_value(group, "lr", group["initial_lr"])
        for s in self._schedulers:
            _undo_initial_step(s)
        first = self._schedulers[bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def step(self) -> None:  # type: ignore[override]
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            scheduler._update_lr(0)  # the next scheduler starts from its epoch 0 (closed form)
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        members = state.pop("_schedulers", None)
        if members is None or len(members) != len(self._schedulers):
            raise StateDictError(
                f"the state dict holds {0 if members is None else len(members)} schedulers but "
                f"this SequentialLR has {len(self._schedulers)}",
                op="SequentialLR.load_state_dict",
            )
        super().load_state_dict(state)
        for s, saved in zip(self._schedulers, members):
            s.load_state_dict(saved)


class ChainedScheduler(LRScheduler):
    """Step several schedulers together each epoch (their effects multiply)."""

    _not_saved = ("_schedulers",)

    def __init__(
        self, schedulers: Sequence[LRScheduler], optimizer: Optimizer | None = None
    ) -> None:
        if not schedulers:
            raise OptimizerError("expects at least one scheduler", op="ChainedScheduler")
        optimizer = optimizer or schedulers[0].optimizer
        _check_members("ChainedScheduler", optimizer, schedulers)
        self._schedulers = list(schedulers)
        self.optimizer = optimizer
        self._last_lr = group_values(optimizer, "lr")

    def step(self) -> None:  # type: ignore[override]
        for s in self._schedulers:
            s.step()
        self._last_lr = group_values(self.optimizer, "lr")

    def state_dict(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        state["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        state = dict(state_dict)
        members = state.pop("_schedulers", [])
        if len(members) != len(self._schedulers):
            raise StateDictError(
                f"the state dict holds {len(members)} schedulers but this ChainedScheduler has "
                f"{len(self._schedulers)}",
                op="ChainedScheduler.load_state_dict",
            )
        self.__dict__.update(state)
        for s, saved in zip(self._schedulers, members):
            s.load_state_dict(saved)


def _check_members(name: str, optimizer: Optimizer, schedulers: Sequence[LRScheduler]) -> None:
    if not schedulers:
        raise OptimizerError("expects at least one scheduler", op=name)
    for i, s in enumerate(schedulers):
        if isinstance(s, ReduceLROnPlateau):
            raise OptimizerError(
                f"scheduler {i} is a ReduceLROnPlateau, which needs a metric at each step and "
                "cannot be combined",
                op=name,
            )
        if getattr(s, "optimizer", None) is not optimizer:
            raise OptimizerError(
                f"scheduler {i} ({type(s).__name__}) belongs to a different optimizer; all must "
                "share one",
                op=name,
            )


def _undo_initial_step(scheduler: LRScheduler) -> None:
    members = getattr(scheduler, "_schedulers", None)
    if members is not None:
        for s in members:
            _undo_initial_step(s)
    elif hasattr(scheduler, "last_epoch"):
        scheduler.last_epoch -= 1
