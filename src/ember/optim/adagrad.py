"""Adagrad, with learning-rate decay and weight decay.

The update is PyTorch's single-tensor ``torch.optim.Adagrad`` step::

    t = t + 1
    g = -grad if maximize else grad
    g = g + weight_decay * p                       (if weight_decay)
    clr = lr / (1 + (t - 1) * lr_decay)
    s = s + g * g
    p = p - clr * g / (sqrt(s) + eps)

State per parameter, created when the optimizer is built (as PyTorch does): ``'step'`` (float32
0-d tensor) and ``'sum'`` (filled with ``initial_accumulator_value``). Parameters added later with
`add_param_group` get theirs on their first step.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..ops import api as E
from ..tensor import Tensor
from ._common import check_flags
from .optimizer import Optimizer, as_operand, check_number, new_step_counter

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """``Adagrad(params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
    eps=1e-10, *, maximize=False)``, as ``torch.optim.Adagrad``."""

    runtime_hyperparameters = ("lr", "lr_decay", "eps", "weight_decay")

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-2,
        lr_decay: float = 0,
        weight_decay: float = 0,
        initial_accumulator_value: float = 0,
        eps: float = 1e-10,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        defaults = {
            "lr": lr,
            "lr_decay": lr_decay,
            "eps": eps,
            "weight_decay": weight_decay,
            "initial_accumulator_value": initial_accumulator_value,
            "maximize": maximize,
            "foreach": foreach,
            "differentiable": differentiable,
            "fused": fused,
        }
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(self.state[p], p, group)

    @staticmethod
    def _init_state(state: dict, p: Tensor, group: dict[str, Any]) -> None:
        state["step"] = new_step_counter()
        value = float(group["initial_accumulator_value"])
        # a complex parameter's parts are two real ones (optim/_complex.py): each part's sum
        # starts at the value, as PyTorch's complex(value, value)
        state["sum"] = E.full_like(p, complex(value, value) if p.dtype.is_complex else value)

    def _validate(self, group: dict[str, Any]) -> None:
        check_flags("Adagrad", group)
        for name in ("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps"):
            check_number("Adagrad", name, group[name], tensor_ok=name == "lr")

    def _branch_facts(self, group: dict[str, Any]) -> tuple:
        return (group["weight_decay"] != 0,)

    _update_sparse = Optimizer._update_densified  # PyTorch's sparse step, as its dense one

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        (decayed,) = self._branch_facts(group)
        lr, lr_decay = self._hyper(group, "lr"), self._hyper(group, "lr_decay")
        eps = self._hyper(group, "eps")
        weight_decay = self._hyper(group, "weight_decay") if decayed else None
        maximize = group["maximize"]
        for p in params:
            state = self.state[p]
            if not state:
                self._init_state(state, p, group)
            step = self._step_counter(state)
            g = -p.grad if maximize else p.grad
            if decayed:
                g = g + p * as_operand(weight_decay, p)
            clr = as_operand(lr / (1 + (step - 1) * lr_decay), p)
            state_sum = state["sum"]
            state_sum.add_(g * g)
            p.sub_(g / (state_sum.sqrt() + as_operand(eps, p)) * clr)
