"""Adadelta, with weight decay and maximize.

The update is PyTorch's single-tensor ``torch.optim.Adadelta`` step::

    t = t + 1
    g = -grad if maximize else grad
    g = g + weight_decay * p                       (if weight_decay)
    v = rho * v + (1 - rho) * g * g
    delta = sqrt(u + eps) / sqrt(v + eps) * g
    u = rho * u + (1 - rho) * delta * delta
    p = p - lr * delta

``lr``, ``rho``, ``eps`` and ``weight_decay`` are runtime values of a recorded step
(optim/optimizer.py `Optimizer._hyper`). State per parameter: ``'step'`` (float32 0-d tensor),
``'square_avg'`` (v) and ``'acc_delta'`` (u).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..ops import api as E
from ..tensor import Tensor
from ._common import addcmul_, check_flags
from .optimizer import Optimizer, as_operand, check_number, new_step_counter

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """``Adadelta(params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
    capturable=False, maximize=False, differentiable=False)``, as ``torch.optim.Adadelta``.

    ``foreach`` and ``capturable`` are kept in the param groups and change nothing (one
    implementation, always recordable by ``ember.function``); ``differentiable=True`` is
    refused (see optim/_common.py)."""

    runtime_hyperparameters = ("lr", "rho", "eps", "weight_decay")

    def __init__(
        self,
        params: Iterable,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "rho": rho,
            "eps": eps,
            "weight_decay": weight_decay,
            "maximize": maximize,
            "capturable": capturable,
            "foreach": foreach,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def _validate(self, group: dict[str, Any]) -> None:
        op = type(self).__name__
        check_number(op, "lr", group["lr"], tensor_ok=True)
        check_number(op, "rho", group["rho"], high=1.0, open_high=False)
        check_number(op, "eps", group["eps"])
        check_number(op, "weight_decay", group["weight_decay"])
        check_flags(op, group)

    def _branch_facts(self, group: dict[str, Any]) -> tuple:
        return (group["weight_decay"] != 0,)

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        (decayed,) = self._branch_facts(group)
        lr, rho = self._hyper(group, "lr"), self._hyper(group, "rho")
        eps = self._hyper(group, "eps")
        weight_decay = self._hyper(group, "weight_decay") if decayed else None
        maximize = group["maximize"]
        for p in params:
            state = self.state[p]
            if not state:
                state["step"] = new_step_counter()
                state["square_avg"] = E.zeros_like(p)
                state["acc_delta"] = E.zeros_like(p)
            state["step"].add_(1)
            g = -p.grad if maximize else p.grad
            if decayed:
                g = g + p * as_operand(weight_decay, p)
            square_avg, acc_delta = state["square_avg"], state["acc_delta"]
            square_avg.mul_(as_operand(rho, p))
            addcmul_(square_avg, g, g, 1 - rho)
            std = (square_avg + as_operand(eps, p)).sqrt()
            delta = (acc_delta + as_operand(eps, p)).sqrt() / std * g
            acc_delta.mul_(as_operand(rho, p))
            addcmul_(acc_delta, delta, delta, 1 - rho)
            p.sub_(delta * as_operand(lr, p))
