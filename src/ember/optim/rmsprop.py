"""RMSprop, with momentum, the centered variant and weight decay.

The update is PyTorch's single-tensor ``torch.optim.RMSprop`` step::

    t = t + 1
    g = -grad if maximize else grad
    g = g + weight_decay * p                       (if weight_decay)
    v = alpha * v + (1 - alpha) * g * g
    avg = sqrt(v) + eps, or, centered: a = lerp(a, g, 1 - alpha); avg = sqrt(v - a * a) + eps
    buf = momentum * buf + g / avg; p = p - lr * buf   (if momentum > 0)
    p = p - lr * g / avg                               (otherwise)

State per parameter: ``'step'`` (float32 0-d tensor), ``'square_avg'``, and ``'momentum_buffer'``
(momentum > 0 when the state was created) and ``'grad_avg'`` (centered).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..ops import api as E
from ..tensor import Tensor
from ._common import check_flags
from .optimizer import Optimizer, as_operand, check_number, lerp_, new_step_counter

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """``RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
    centered=False, *, maximize=False)``, as ``torch.optim.RMSprop``."""

    runtime_hyperparameters = ("lr", "momentum", "alpha", "eps", "weight_decay")

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum: float = 0,
        centered: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "alpha": alpha,
            "eps": eps,
            "centered": centered,
            "weight_decay": weight_decay,
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def _validate(self, group: dict[str, Any]) -> None:
        check_flags("RMSprop", group)
        for name in ("lr", "eps", "momentum", "weight_decay", "alpha"):
            check_number("RMSprop", name, group[name], tensor_ok=name == "lr")

    def _branch_facts(self, group: dict[str, Any]) -> tuple:
        # (lerp's form for the centered average: its weight 1 - alpha below 0.5 or not)
        return (group["weight_decay"] != 0, group["momentum"] > 0, abs(1 - group["alpha"]) < 0.5)

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        decayed, use_momentum, near_start = self._branch_facts(group)
        lr, alpha = self._hyper(group, "lr"), self._hyper(group, "alpha")
        eps = self._hyper(group, "eps")
        weight_decay = self._hyper(group, "weight_decay") if decayed else None
        momentum = self._hyper(group, "momentum") if use_momentum else None
        centered, maximize = group["centered"], group["maximize"]
        for p in params:
            state = self.state[p]
            if not state:
                state["step"] = new_step_counter()
                state["square_avg"] = E.zeros_like(p)
                if use_momentum:
                    state["momentum_buffer"] = E.zeros_like(p)
                if centered:
                    state["grad_avg"] = E.zeros_like(p)
            state["step"].add_(1)
            g = -p.grad if maximize else p.grad
            if decayed:
                g = g + p * as_operand(weight_decay, p)
            square_avg = state["square_avg"]
            square_avg.mul_(as_operand(alpha, p))
            square_avg.add_(g * as_operand(1 - alpha, p) * g)
            if centered:
                grad_avg = state["grad_avg"]
                lerp_(grad_avg, g, 1 - alpha, near_start)
                avg = (square_avg - grad_avg * grad_avg).sqrt() + as_operand(eps, p)
            else:
                avg = square_avg.sqrt() + as_operand(eps, p)
            if use_momentum:
                buf = state["momentum_buffer"]
                buf.mul_(as_operand(momentum, p))
                buf.add_(g / avg)
                p.sub_(buf * as_operand(lr, p))
            else:
                p.sub_(g / avg * as_operand(lr, p))
