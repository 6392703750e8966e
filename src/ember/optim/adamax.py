"""Adamax: Adam with the infinity norm in place of the second moment.

The update is PyTorch's single-tensor ``torch.optim.Adamax`` step::

    t = t + 1
    g = -grad if maximize else grad
    g = g + weight_decay * p                       (if weight_decay)
    m = lerp(m, g, 1 - beta1)
    u = maximum(beta2 * u, |g| + eps)
    p = p - lr / (1 - beta1**t) * m / u

The bias correction is computed from the step count in double precision, as PyTorch does.
``lr``, ``betas``, ``eps`` and ``weight_decay`` are runtime values of a recorded step
(optim/optimizer.py `Optimizer._hyper`). State per parameter: ``'step'`` (float32 0-d tensor),
``'exp_avg'`` (m) and ``'exp_inf'`` (u).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..ops import api as E
from ..tensor import Tensor
from ._common import addcdiv_, check_betas, check_flags
from .optimizer import Optimizer, as_operand, check_number, lerp_, new_step_counter

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """``Adamax(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, foreach=None, *,
    maximize=False, differentiable=False, capturable=False)``, as ``torch.optim.Adamax``.

    ``foreach`` and ``capturable`` are kept in the param groups and change nothing;
    ``differentiable=True`` is refused (see optim/_common.py)."""

    runtime_hyperparameters = ("lr", "betas", "eps", "weight_decay")

    def __init__(
        self,
        params: Iterable,
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "betas": tuple(betas) if isinstance(betas, (list, tuple)) else betas,
            "eps": eps,
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
        check_number(op, "eps", group["eps"])
        check_betas(op, group)
        check_number(op, "weight_decay", group["weight_decay"])
        check_flags(op, group)

    def _branch_facts(self, group: dict[str, Any]) -> tuple:
        # (lerp's form: the first moment's weight 1 - beta1 below 0.5 or not)
        return (group["weight_decay"] != 0, abs(1 - group["betas"][0]) < 0.5)

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        decayed, near_start = self._branch_facts(group)
        lr, eps = self._hyper(group, "lr"), self._hyper(group, "eps")
        beta1, beta2 = self._hyper(group, "betas", 0), self._hyper(group, "betas", 1)
        weight_decay = self._hyper(group, "weight_decay") if decayed else None
        maximize = group["maximize"]
        for p in params:
            state = self.state[p]
            if not state:
                state["step"] = new_step_counter()
                state["exp_avg"] = E.zeros_like(p)
                state["exp_inf"] = E.zeros_like(p)
            step = self._step_counter(state)
            g = -p.grad if maximize else p.grad
            if decayed:
                g = g + p * as_operand(weight_decay, p)
            exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
            lerp_(exp_avg, g, 1 - beta1, near_start)
            exp_inf.mul_(as_operand(beta2, p))
            exp_inf.maximum_(g.abs() + as_operand(eps, p))
            clr = lr / (1 - beta1**step)
            addcdiv_(p, exp_avg, exp_inf, -clr)
