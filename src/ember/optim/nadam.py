"""NAdam: Adam with Nesterov momentum and a momentum schedule.

The update is PyTorch's single-tensor, non-capturable ``torch.optim.NAdam`` step::

    t = t + 1
    g = -grad if maximize else grad
    p = p * (1 - lr * weight_decay)                (decoupled_weight_decay)
    g = g + weight_decay * p                       (otherwise, if weight_decay)
    mu = beta1 * (1 - 0.5 * 0.96**(t * momentum_decay))
    mu_next = beta1 * (1 - 0.5 * 0.96**((t + 1) * momentum_decay))
    mu_product = mu_product * mu                   (a float32 0-d tensor, as in PyTorch)
    m = lerp(m, g, 1 - beta1)
    v = beta2 * v + (1 - beta2) * g * g
    denom = sqrt(v / (1 - beta2**t)) + eps
    p = p - lr * (1 - mu) / (1 - mu_product) * g / denom
    p = p - lr * mu_next / (1 - mu_product * mu_next) * m / denom

The scalar arithmetic is in double precision from the step count and ``mu_product``'s value, as
PyTorch does. ``lr``, ``betas``, ``eps``, ``weight_decay`` and ``momentum_decay`` are runtime
values of a recorded step (optim/optimizer.py `Optimizer._hyper`). State per parameter:
``'step'`` and ``'mu_product'`` (float32 0-d tensors), ``'exp_avg'`` (m), ``'exp_avg_sq'`` (v).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..ops import api as E
from ..ops._registry import scalar_value
from ..tensor import Tensor
from ._common import addcdiv_, addcmul_, check_betas, check_flags
from .optimizer import Optimizer, as_operand, check_number, lerp_, new_step_counter

__all__ = ["NAdam"]


class NAdam(Optimizer):
    """``NAdam(params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
    momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None, maximize=False,
    capturable=False, differentiable=False)``, as ``torch.optim.NAdam``.

    ``foreach`` and ``capturable`` are kept in the param groups and change nothing;
    ``differentiable=True`` is refused (see optim/_common.py)."""

    runtime_hyperparameters = ("lr", "betas", "eps", "weight_decay", "momentum_decay")
    scalar_state = ("mu_product",)

    def __init__(
        self,
        params: Iterable,
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "betas": tuple(betas) if isinstance(betas, (list, tuple)) else betas,
            "eps": eps,
            "weight_decay": weight_decay,
            "momentum_decay": momentum_decay,
            "decoupled_weight_decay": decoupled_weight_decay,
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "differentiable": differentiable,
        }
        super().__init__(params, defaults)

    def _validate(self, group: dict[str, Any]) -> None:
        op = type(self).__name__
        check_number(op, "lr", group["lr"], tensor_ok=True)
        check_number(op, "eps", group["eps"])
        check_betas(op, group)
        check_number(op, "weight_decay", group["weight_decay"])
        check_number(op, "momentum_decay", group["momentum_decay"])
        check_flags(op, group)

    def _branch_facts(self, group: dict[str, Any]) -> tuple:
        # (lerp's form: the first moment's weight 1 - beta1 below 0.5 or not)
        return (group["weight_decay"] != 0, abs(1 - group["betas"][0]) < 0.5)

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        decayed, near_start = self._branch_facts(group)
        lr, eps = self._hyper(group, "lr"), self._hyper(group, "eps")
        beta1, beta2 = self._hyper(group, "betas", 0), self._hyper(group, "betas", 1)
        weight_decay = self._hyper(group, "weight_decay") if decayed else None
        momentum_decay = self._hyper(group, "momentum_decay")
        maximize, decoupled = group["maximize"], group["decoupled_weight_decay"]
        for p in params:
            state = self.state[p]
            if not state:
                state["step"] = new_step_counter()
                state["mu_product"] = new_step_counter(1.0)
                state["exp_avg"] = E.zeros_like(p)
                state["exp_avg_sq"] = E.zeros_like(p)
            step = self._step_counter(state)
            g = -p.grad if maximize else p.grad
            bias_correction2 = 1 - beta2**step
            if decayed:
                if decoupled:
                    p.mul_(as_operand(1 - lr * weight_decay, p))
                else:
                    g = g + p * as_operand(weight_decay, p)
            mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
            mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
            mu_product = state["mu_product"]
            mu_product.mul_(as_operand(mu, mu_product))
            mu_product_value = scalar_value(mu_product)

            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            lerp_(exp_avg, g, 1 - beta1, near_start)
            exp_avg_sq.mul_(as_operand(beta2, p))
            addcmul_(exp_avg_sq, g, g, 1 - beta2)
            denom = (exp_avg_sq / as_operand(bias_correction2, p)).sqrt() + as_operand(eps, p)
            mu_product_next = mu_product_value * mu_next
            addcdiv_(p, g, denom, -lr * (1.0 - mu) / (1.0 - mu_product_value))
            addcdiv_(p, exp_avg, denom, (-lr * mu_next) / (1.0 - mu_product_next))
