"""RAdam: Adam with the variance of the adaptive learning rate rectified.

The update is PyTorch's single-tensor ``torch.optim.RAdam`` step::

    t = t + 1
    g = -grad if maximize else grad
    p = p * (1 - lr * weight_decay)                (decoupled_weight_decay)
    g = g + weight_decay * p                       (otherwise, if weight_decay)
    m = lerp(m, g, 1 - beta1)
    v = beta2 * v + (1 - beta2) * g * g
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 t beta2**t / (1 - beta2**t)
    m_hat = m / (1 - beta1**t)
    p = p - m_hat * lr * sqrt(1 - beta2**t) / (sqrt(v) + eps) * r_t     (rho_t > 5)
    p = p - m_hat * lr                                                 (otherwise)
    with r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))

Eagerly ``rho_t > 5`` is decided in Python, as PyTorch does; a recorded step computes both
updates and picks one with ``where`` (optim/_common.py), so its graph is right at every step.
``lr``, ``betas``, ``eps`` and ``weight_decay`` are runtime values of a recorded step. State per
parameter: ``'step'`` (float32 0-d tensor), ``'exp_avg'`` (m), ``'exp_avg_sq'`` (v).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..ops import api as E
from ..tensor import Tensor
from ._common import addcmul_, check_betas, check_flags, is_eager
from .optimizer import Optimizer, as_operand, check_number, lerp_, new_step_counter

__all__ = ["RAdam"]


class RAdam(Optimizer):
    """``RAdam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
    decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
    differentiable=False)``, as ``torch.optim.RAdam``.

    ``foreach`` and ``capturable`` are kept in the param groups and change nothing;
    ``differentiable=True`` is refused (see optim/_common.py)."""

    runtime_hyperparameters = ("lr", "betas", "eps", "weight_decay")

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
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
            "maximize": maximize,
            "foreach": foreach,
            "capturable": capturable,
            "decoupled_weight_decay": decoupled_weight_decay,
            "differentiable": differentiable,
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
        maximize, decoupled = group["maximize"], group["decoupled_weight_decay"]
        for p in params:
            state = self.state[p]
            if not state:
                state["step"] = new_step_counter()
                state["exp_avg"] = E.zeros_like(p)
                state["exp_avg_sq"] = E.zeros_like(p)
            step = self._step_counter(state)
            g = -p.grad if maximize else p.grad
            if decayed:
                if decoupled:
                    p.mul_(as_operand(1 - lr * weight_decay, p))
                else:
                    g = g + p * as_operand(weight_decay, p)
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            lerp_(exp_avg, g, 1 - beta1, near_start)
            exp_avg_sq.mul_(as_operand(beta2, p))
            addcmul_(exp_avg_sq, g, g, 1 - beta2)

            bias_correction1 = 1 - beta1**step
            bias_correction2 = 1 - beta2**step
            update = exp_avg / as_operand(bias_correction1, p) * as_operand(lr, p)
            rho_inf = 2 / (1 - beta2) - 1
            rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
            rectified = rho_t > 5.0
            if is_eager(rho_t) and not rectified:
                p.sub_(update)
                continue
            # (a recorded step computes r_t at every step; where rho_t <= 5 its square root
            # may be of a negative number, so it is taken of 1 there, and not used)
            ratio = (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
            if not is_eager(rho_t):
                ratio = E.where(rectified, ratio, 1.0)
            rect = ratio**0.5
            # (PyTorch's ``number / tensor`` is ``tensor.reciprocal() * number``)
            adaptive_lr = (exp_avg_sq.sqrt() + as_operand(eps, p)).reciprocal() * as_operand(
                bias_correction2**0.5, p
            )
            rectified_update = update * adaptive_lr * as_operand(rect, p)
            if is_eager(rho_t):
                p.sub_(rectified_update)
            else:
                p.sub_(E.where(rectified, rectified_update, update))
