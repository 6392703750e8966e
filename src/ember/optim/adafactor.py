"""Adafactor, PyTorch's ``torch.optim.Adafactor`` (its single-tensor step).

Per parameter of two or more dimensions the second moment is factored over the last two: a
row variance R (``shape[-1] = 1``) and a column variance C (``shape[-2] = 1``); a vector keeps
the full variance V::

    t = t + 1
    g = -grad if maximize else grad
    beta2_t = t ** beta2_decay                              (its "one minus beta2")
    rho = min(lr, 1 / sqrt(t))
    alpha = max(eps2, ||p||_2 / sqrt(numel)) * rho
    p = p * (1 - lr * weight_decay)                         (if weight_decay)
    R = lerp(R, mean(g^2, -1), beta2_t); C = lerp(C, mean(g^2, -2), beta2_t)
    v = R @ C / max(mean(R, -2), eps1)                      (matrices; vectors: V = lerp(V, g^2))
    u = g / sqrt(max(v, eps1^2))
    p = p - alpha / max(1, ||u||_2 / (sqrt(numel) d)) * u

``eps1`` None is the parameter dtype's machine epsilon. Eagerly the scalars (``rho``,
``alpha``, the clipping denominator) are Python floats, as PyTorch computes them with
``.item()``; while a step is recorded (``ember.function``) they are 0-d tensors of the graph,
so the captured step computes them at every call instead of baking one step's values in.
``lr``, ``beta2_decay``, ``d`` and ``weight_decay`` are runtime values of a recorded step.
State per parameter: ``'step'`` (float32 0-d tensor), ``'row_var'`` and ``'col_var'`` or
``'variance'``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .. import dtypes as dt
from ..ops import api as E
from ..tensor import Tensor
from ..typeinfo import finfo
from ._common import is_eager, refuse_complex
from .optimizer import Optimizer, OptimizerError, as_operand, check_number, new_step_counter

__all__ = ["Adafactor"]


def _max(a, b):
    """max of two scalars: Python floats eagerly, 0-d tensors while a step is recorded."""
    if is_eager(a) and is_eager(b):
        return max(a, b)
    return E.maximum(_as_tensor(a), _as_tensor(b))


def _min(a, b):
    if is_eager(a) and is_eager(b):
        return min(a, b)
    return E.minimum(_as_tensor(a), _as_tensor(b))


def _as_tensor(x):
    return Tensor(float(x), dtype=dt.float64) if is_eager(x) else x.to(dt.float64)


def _norm(t: Tensor, eager: bool):
    """``||t||_2`` as a scalar: a Python float eagerly (PyTorch's ``.item()``), else 0-d."""
    n = E.sqrt((t * t).sum())
    return float(n.item()) if eager else n.to(dt.float64)


def _mean_square(g: Tensor, dim: int) -> Tensor:
    """PyTorch's ``norm(g, dim=dim, keepdim=True).square_().div_(g.size(dim))``."""
    return E.square(E.sqrt((g * g).sum(dim, keepdim=True))) / g.shape[dim]


class Adafactor(Optimizer):
    """``Adafactor(params, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
    weight_decay=0.0, *, foreach=None, maximize=False)``, as ``torch.optim.Adafactor``
    (``foreach`` is kept in the param groups and changes nothing)."""

    runtime_hyperparameters = ("lr", "beta2_decay", "d", "weight_decay")

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-2,
        beta2_decay: float = -0.8,
        eps: tuple = (None, 1e-3),
        d: float = 1.0,
        weight_decay: float = 0.0,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "beta2_decay": beta2_decay,
            "eps": eps,
            "d": d,
            "weight_decay": weight_decay,
            "foreach": foreach,
            "maximize": maximize,
        }
        super().__init__(params, defaults)

    def _validate(self, group: dict[str, Any]) -> None:
        op = type(self).__name__
        check_number(op, "lr", group["lr"], tensor_ok=True)
        if not group["beta2_decay"] <= 0.0:
            raise OptimizerError(
                f"beta2_decay should be <= 0 but is: {group['beta2_decay']}", op=op
            )
        eps = group["eps"]
        if not isinstance(eps, (tuple, list)) or len(eps) != 2:
            raise OptimizerError(f"eps must be a pair (eps1, eps2), got {eps!r}", op=op)
        if eps[0] is not None:
            check_number(op, "eps[0]", eps[0])
        check_number(op, "eps[1]", eps[1])
        check_number(op, "d", group["d"], low=1.0)
        check_number(op, "weight_decay", group["weight_decay"])
        if group.get("foreach") not in (None, True, False):
            raise OptimizerError(
                f"foreach must be None, True or False, got {group['foreach']!r}", op=op
            )

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """As `Optimizer.add_param_group`; complex parameters are refused (PyTorch's Adafactor
        refuses them at its first step)."""
        super().add_param_group(refuse_complex(type(self).__name__, param_group))

    def state_shape(self, name: str, param: Tensor) -> tuple:
        """The factored variances' shapes: ``row_var`` (..., m, 1), ``col_var`` (..., 1, n)."""
        shape = tuple(param.shape)
        if name == "row_var":
            return shape[:-1] + (1,)
        if name == "col_var":
            return shape[:-2] + (1, shape[-1])
        return super().state_shape(name, param)

    def _branch_facts(self, group: dict[str, Any]) -> tuple:
        return (group["weight_decay"] != 0,)

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        (decayed,) = self._branch_facts(group)
        lr = self._hyper(group, "lr")
        beta2_decay = self._hyper(group, "beta2_decay")
        d = self._hyper(group, "d")
        weight_decay = self._hyper(group, "weight_decay") if decayed else None
        eps1_given, eps2 = group["eps"]
        for p in params:
            state = self.state[p]
            if not state:
                state["step"] = new_step_counter()
                if p.ndim > 1:
                    state["row_var"] = E.zeros(tuple(p.shape[:-1]) + (1,), dtype=p.dtype)
                    state["col_var"] = E.zeros(
                        tuple(p.shape[:-2]) + (1, p.shape[-1]), dtype=p.dtype
                    )
                else:
                    state["variance"] = E.zeros_like(p)
            eps1 = finfo(p.dtype).eps if eps1_given is None else float(eps1_given)
            g = -p.grad if group["maximize"] else p.grad
            step = self._step_counter(state)
            eager = is_eager(step)
            one_minus_beta2 = step**beta2_decay
            rho = _min(lr, 1 / step**0.5)
            alpha = _max(eps2, _norm(p, eager) / math.sqrt(p.numel())) * rho
            if decayed:
                p.mul_(as_operand(1 - lr * weight_decay, p))
            beta = as_operand(one_minus_beta2, p)
            if p.ndim > 1:
                row_var, col_var = state["row_var"], state["col_var"]
                row_var.lerp_(_mean_square(g, -1), beta)
                col_var.lerp_(_mean_square(g, -2), beta)
                var = (row_var @ col_var) / row_var.mean(-2, keepdim=True).clamp(min=eps1)
            else:
                state["variance"].lerp_(g * g, beta)
                var = state["variance"].clone()
            update = var.clamp(min=eps1 * eps1).rsqrt() * g
            denom = _max(1.0, _norm(update, eager) / (math.sqrt(update.numel()) * d))
            p.add_(update * as_operand(-alpha / denom, p))
