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
from .optimizer import Optimizer, check_number, lerp_, new_step_counter

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """``RMSprop(params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
    centered=False, *, maximize=False)``, as ``torch.optim.RMSprop``."""

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
        *,
        maximize: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "alpha": alpha,
            "eps": eps,
            "centered": centered,
            "weight_decay": weight_decay,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    def _validate(self, group: dict[str, Any]) -> None:
        for name in ("lr", "eps", "momentum", "weight_decay", "alpha"):
            check_number("RMSprop", name, group[name])

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        lr, alpha, eps = float(group["lr"]), float(group["alpha"]), float(group["eps"])
        weight_decay, momentum = float(group["weight_decay"]), float(group["momentum"])
        centered, maximize = group["centered"], group["maximize"]
        for p in params:
            state = self.state[p]
            if not state:
                state["step"] = new_step_counter()
                state["square_avg"] = E.zeros_like(p)
                if momentum > 0:
                    state["momentum_buffer"] = E.zeros_like(p)
                if centered:
                    state["grad_avg"] = E.zeros_like(p)
            state["step"].add_(1)
            g = -p.grad if maximize else p.grad
            if weight_decay != 0:
                g = g + p * weight_decay
            square_avg = state["square_avg"]
            square_avg.mul_(alpha)
            square_avg.add_(g * (1 - alpha) * g)
            if centered:
                grad_avg = state["grad_avg"]
                lerp_(grad_avg, g, 1 - alpha)
                avg = (square_avg - grad_avg * grad_avg).sqrt() + eps
            else:
                avg = square_avg.sqrt() + eps
            if momentum > 0:
                buf = state["momentum_buffer"]
                buf.mul_(momentum)
                buf.add_(g / avg)
                p.sub_(buf * lr)
            else:
                p.sub_(g / avg * lr)
