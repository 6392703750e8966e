"""ASGD: averaged stochastic gradient descent.

The update is PyTorch's single-tensor, non-capturable ``torch.optim.ASGD`` step::

    t = t + 1
    g = -grad if maximize else grad
    g = g + weight_decay * p                       (if weight_decay)
    p = p * (1 - lambd * eta) - eta * g
    ax = p if mu == 1 else ax + mu * (p - ax)
    eta = lr / (1 + lambd * lr * t) ** alpha       (rounded to float32, as PyTorch stores it)
    mu = 1 / max(1, t - t0)                        (likewise)

``ax`` is the running average of the parameter (averaging starts after ``t0`` steps). Eagerly
``mu == 1`` is decided in Python, as PyTorch does; a recorded step computes both sides and picks
one with ``where``. ``lr``, ``lambd``, ``alpha``, ``t0`` and ``weight_decay`` are runtime
values of a recorded step (optim/optimizer.py `Optimizer._hyper`). State per parameter:
``'step'``, ``'eta'`` and ``'mu'`` (float32 0-d tensors; ``load_state_dict`` casts ``eta`` and
``mu`` to the parameter's dtype, as PyTorch's does) and ``'ax'``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..ops import api as E
from ..ops._registry import scalar_value
from ..tensor import Tensor
from ._common import check_flags, is_eager, to_float32
from .optimizer import Optimizer, as_operand, check_number, new_step_counter

__all__ = ["ASGD"]


class ASGD(Optimizer):
    """``ASGD(params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, foreach=None,
    maximize=False, differentiable=False, capturable=False)``, as ``torch.optim.ASGD``.

    ``foreach`` and ``capturable`` are kept in the param groups and change nothing;
    ``differentiable=True`` is refused (see optim/_common.py)."""

    runtime_hyperparameters = ("lr", "lambd", "alpha", "t0", "weight_decay")
    scalar_state = ("eta", "mu")

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-2,
        lambd: float = 1e-4,
        alpha: float = 0.75,
        t0: float = 1e6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "lambd": lambd,
            "alpha": alpha,
            "t0": t0,
            "weight_decay": weight_decay,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "capturable": capturable,
        }
        super().__init__(params, defaults)

    def _validate(self, group: dict[str, Any]) -> None:
        op = type(self).__name__
        check_number(op, "lr", group["lr"], tensor_ok=True)
        check_number(op, "weight_decay", group["weight_decay"])
        for name in ("lambd", "alpha", "t0"):
            check_number(op, name, group[name], low=float("-inf"))
        check_flags(op, group)

    def _branch_facts(self, group: dict[str, Any]) -> tuple:
        return (group["weight_decay"] != 0,)

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        (decayed,) = self._branch_facts(group)
        lr, lambd = self._hyper(group, "lr"), self._hyper(group, "lambd")
        alpha, t0 = self._hyper(group, "alpha"), self._hyper(group, "t0")
        weight_decay = self._hyper(group, "weight_decay") if decayed else None
        maximize = group["maximize"]
        for p in params:
            state = self.state[p]
            if not state:
                state["step"] = new_step_counter()
                state["eta"] = new_step_counter()
                state["eta"].copy_(to_float32(lr))
                state["mu"] = new_step_counter(1.0)
                state["ax"] = E.zeros_like(p)
            step = self._step_counter(state)
            g = -p.grad if maximize else p.grad
            if decayed:
                g = g + p * as_operand(weight_decay, p)
            eta, mu, ax = state["eta"], state["mu"], state["ax"]
            eta_value = scalar_value(eta)
            p.mul_(as_operand(1 - lambd * eta_value, p))
            p.sub_(g * as_operand(eta_value, p))

            mu_value = scalar_value(mu)
            if not is_eager(mu_value):
                ax.copy_(E.where(mu_value != 1, ax + (p - ax) * as_operand(mu_value, p), p))
            elif mu_value != 1:
                ax.add_((p - ax) * mu_value)
            else:
                ax.copy_(p)

            eta.copy_(to_float32(lr / ((1 + lambd * lr * step) ** alpha)))
            if is_eager(step):
                mu.copy_(to_float32(1 / max(1, step - t0)))
            else:
                mu.copy_(to_float32(1 / E.maximum(step - t0, 1.0)))
