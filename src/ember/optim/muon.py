"""Muon, PyTorch's ``torch.optim.Muon``: momentum whose update is orthogonalized by a
Newton-Schulz iteration, for the 2-D parameters of hidden layers::

    B = lerp(B, g, 1 - momentum)                       (the momentum buffer)
    U = lerp(g, B, momentum) if nesterov else B
    X = bfloat16(U), transposed when it has more rows than columns
    X = X / max(||X||_2, eps)
    k times: A = X X^T;  X = a X + (b A + c A A) X    (ns_coefficients (a, b, c))
    p = p * (1 - lr * weight_decay)
    p = p - lr * ratio * X                              (X transposed back)

``ratio`` is ``sqrt(max(1, rows / cols))`` (``adjust_lr_fn`` None or "original") or
``0.2 * sqrt(max(rows, cols))`` ("match_rms_adamw"). The iteration runs in bfloat16, as
PyTorch's does (products summed in float32, each result rounded to bfloat16). State per
parameter: ``'momentum_buffer'``. ``lr``, ``weight_decay`` and ``momentum`` are runtime values
of a recorded step.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .. import dtypes as dt
from ..ops import api as E
from ..tensor import Tensor
from ._common import add_scaled, refuse_complex
from .optimizer import Optimizer, OptimizerError, as_operand, check_number

__all__ = ["Muon"]

_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
_ADJUSTMENTS = (None, "original", "match_rms_adamw")


def _orthogonalized(update: Tensor, coefficients, steps: int, eps: float) -> Tensor:
    """The Newton-Schulz iteration of the module docstring, in bfloat16."""
    a, b, c = coefficients
    x = update.to(dt.bfloat16)
    tall = update.shape[0] > update.shape[1]
    if tall:
        x = x.T
    x = x / x.norm().clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.T
        x = E.addmm(x, E.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if tall else x


def _ratio(adjust: str | None, shape) -> float:
    rows, cols = shape[:2]
    if adjust is None or adjust == "original":
        return math.sqrt(max(1, rows / cols))
    return 0.2 * math.sqrt(max(rows, cols))


class Muon(Optimizer):
    """``Muon(params, lr=1e-3, weight_decay=0.1, momentum=0.95, nesterov=True,
    ns_coefficients=(3.4445, -4.7750, 2.0315), eps=1e-7, ns_steps=5, adjust_lr_fn=None)``,
    as ``torch.optim.Muon``: 2-D parameters only (biases and embeddings belong to another
    optimizer, as PyTorch says)."""

    runtime_hyperparameters = ("lr", "weight_decay", "momentum")

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients: tuple = _COEFFICIENTS,
        eps: float = 1e-7,
        ns_steps: int = 5,
        adjust_lr_fn: str | None = None,
    ) -> None:
        defaults = {
            "lr": lr,
            "weight_decay": weight_decay,
            "momentum": momentum,
            "nesterov": nesterov,
            "ns_coefficients": ns_coefficients,
            "eps": eps,
            "ns_steps": ns_steps,
            "adjust_lr_fn": adjust_lr_fn,
        }
        super().__init__(params, defaults)

    def _validate(self, group: dict[str, Any]) -> None:
        op = type(self).__name__
        check_number(op, "lr", group["lr"], tensor_ok=True)
        check_number(op, "momentum", group["momentum"])
        check_number(op, "weight_decay", group["weight_decay"])
        check_number(op, "eps", group["eps"])
        if group["adjust_lr_fn"] not in _ADJUSTMENTS:
            raise OptimizerError(
                f"Adjust learning rate function {group['adjust_lr_fn']} is not supported", op=op
            )
        steps = group["ns_steps"]
        if isinstance(steps, bool) or not isinstance(steps, int) or not 0 <= steps < 100:
            raise OptimizerError(
                f"ns_steps must be a number of steps below 100, got {steps!r}", op=op
            )
        if len(tuple(group["ns_coefficients"])) != 3:
            raise OptimizerError("ns_coefficients must be 3 values (a, b, c)", op=op)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """As `Optimizer.add_param_group`; parameters must be 2-D, and real."""
        param_group = refuse_complex(type(self).__name__, param_group)
        params = param_group["params"]
        for p in [params] if isinstance(params, Tensor) else list(params):
            if isinstance(p, Tensor) and p.ndim != 2:
                raise OptimizerError(
                    "Muon only supports 2D parameters whereas we found a parameter with "
                    f"size: {tuple(p.shape)}",
                    op=type(self).__name__,
                )
        super().add_param_group(param_group)

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        lr = self._hyper(group, "lr")
        weight_decay = self._hyper(group, "weight_decay")
        momentum = self._hyper(group, "momentum")
        coefficients = tuple(float(v) for v in group["ns_coefficients"])
        for p in params:
            state = self.state[p]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = E.zeros_like(p.grad)
            buf = state["momentum_buffer"]
            g = p.grad
            buf.lerp_(g, as_operand(1 - momentum, g))
            update = g.lerp(buf, as_operand(momentum, g)) if group["nesterov"] else buf
            update = _orthogonalized(update, coefficients, group["ns_steps"], group["eps"])
            scale = lr * _ratio(group["adjust_lr_fn"], tuple(p.shape))
            p.mul_(as_operand(1 - lr * weight_decay, p))
            # (the bfloat16 update in the parameter's dtype, added with alpha=-scale: one fused
            # multiply-add, as PyTorch's add_(update, alpha=-lr))
            add_scaled(p, update.to(p.dtype), -scale, inplace=True)
