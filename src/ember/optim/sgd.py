"""Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay.

The update is PyTorch's single-tensor ``torch.optim.SGD`` step, op for op::

    g = -grad if maximize else grad
    g = g + weight_decay * p                       (if weight_decay)
    buf = clone(g) on the first step, else buf = momentum * buf + (1 - dampening) * g
    g = g + momentum * buf if nesterov else buf    (if momentum)
    p = p - lr * g

each ``a + c * b`` with a number ``c`` PyTorch's ``a.add(b, alpha=c)``: one fused multiply-add,
rounded once, as ATen's CPU kernel computes it, so an eager float32 step equals PyTorch's bit
for bit (tests/test_sem59_optim_rounding.py); a recorded step (ember.function), whose
hyper-parameters are graph values, rounds its momentum and weight decay as the eager one
(ops/add_scaled.py), its final ``p - lr * g`` as a product then a difference.

State: ``'momentum_buffer'`` per parameter, only when momentum is non-zero.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..tensor import Tensor
from ._common import add_scaled, check_flags
from ._multi_tensor import sgd_step
from .optimizer import Optimizer, OptimizerError, as_operand, check_number

__all__ = ["SGD"]


class SGD(Optimizer):
    """``SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
    maximize=False)``, as ``torch.optim.SGD``."""

    runtime_hyperparameters = ("lr", "momentum", "dampening", "weight_decay")

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        momentum: float = 0,
        dampening: float = 0,
        weight_decay: float = 0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        defaults = {
            "lr": lr,
            "momentum": momentum,
            "dampening": dampening,
            "weight_decay": weight_decay,
            "nesterov": nesterov,
            "maximize": maximize,
            "foreach": foreach,
            "differentiable": differentiable,
            "fused": fused,
        }
        super().__init__(params, defaults)

    def _validate(self, group: dict[str, Any]) -> None:
        check_flags("SGD", group)
        check_number("SGD", "lr", group["lr"], tensor_ok=True)
        check_number("SGD", "momentum", group["momentum"])
        check_number("SGD", "dampening", group["dampening"], low=float("-inf"))
        check_number("SGD", "weight_decay", group["weight_decay"])
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise OptimizerError(
                f"Nesterov momentum needs momentum > 0 and dampening == 0, got "
                f"momentum={group['momentum']!r}, dampening={group['dampening']!r}",
                op="SGD",
            )

    def _branch_facts(self, group: dict[str, Any]) -> tuple:
        return tuple(group[k] != 0 for k in ("momentum", "dampening", "weight_decay"))

    _update_sparse = Optimizer._update_densified  # PyTorch's sparse step, as its dense one

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        # the branches on the plain values (`_branch_facts`), the arithmetic on `_hyper`'s
        # (a recorded step reads only the hyper-parameters its branches use)
        use_momentum, damped, decayed = self._branch_facts(group)
        lr = self._hyper(group, "lr")
        momentum = self._hyper(group, "momentum") if use_momentum else None
        dampening = self._hyper(group, "dampening") if use_momentum and damped else None
        weight_decay = self._hyper(group, "weight_decay") if decayed else None
        nesterov, maximize = group["nesterov"], group["maximize"]
        values = {"lr": lr, "momentum": momentum, "dampening": dampening}
        values["weight_decay"] = weight_decay
        if sgd_step(self, group, params, (use_momentum, damped, decayed), values):
            return  # one C call for the group (optim/_multi_tensor.py); else the ops below
        for p in params:
            g = -p.grad if maximize else p.grad
            if decayed:
                g = add_scaled(g, p, weight_decay)
            if use_momentum:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    # a copy, never p.grad itself: the next backward may accumulate into it
                    buf = state["momentum_buffer"] = g.detach().clone()
                else:
                    buf.mul_(as_operand(momentum, p))
                    if damped:
                        add_scaled(buf, g, 1 - dampening, inplace=True)
                    else:
                        buf.add_(g)
                g = add_scaled(g, buf, momentum) if nesterov else buf
            if isinstance(lr, float):
                add_scaled(p, g, -lr, inplace=True)
            else:  # (a recorded step's lr, a graph input: multiplied first, as before: the
                # fused add_scaled update did not plan in place yet, its new parameter values
                # held beside the old ones; momentum and weight decay use it)
                p.sub_(g * as_operand(lr, p))
