"""Rprop: resilient backpropagation, a per-element step size driven by the gradient's sign.

The update is PyTorch's single-tensor ``torch.optim.Rprop`` step::

    t = t + 1
    g = -grad if maximize else grad
    s = sign(g * prev)
    factor = etaplus where s > 0, etaminus where s < 0, 1 where s == 0
    step_size = clamp(step_size * factor, step_size_min, step_size_max)
    g = 0 where s < 0                              (the sign changed: no step there)
    p = p - sign(g) * step_size
    prev = g

``lr`` is only the initial step size (read when a parameter's state is made). ``lr``, ``etas``
and ``step_sizes`` are runtime values of a recorded step (optim/optimizer.py
`Optimizer._hyper`). State per parameter: ``'step'`` (float32 0-d tensor), ``'prev'`` and
``'step_size'``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..ops import api as E
from ..tensor import Tensor
from ._common import check_flags
from .optimizer import Optimizer, OptimizerError, as_operand, check_number, new_step_counter

__all__ = ["Rprop"]


def _pair(op: str, name: str, value) -> None:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise OptimizerError(f"{name} must be a pair, got {value!r}", op=op)


class Rprop(Optimizer):
    """``Rprop(params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False,
    foreach=None, maximize=False, differentiable=False)``, as ``torch.optim.Rprop``.

    ``foreach`` and ``capturable`` are kept in the param groups and change nothing;
    ``differentiable=True`` is refused (see optim/_common.py)."""

    runtime_hyperparameters = ("lr", "etas", "step_sizes")

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-2,
        etas: tuple[float, float] = (0.5, 1.2),
        step_sizes: tuple[float, float] = (1e-6, 50),
        *,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        defaults = {
            "lr": lr,
            "etas": tuple(etas) if isinstance(etas, (list, tuple)) else etas,
            "step_sizes": tuple(step_sizes) if isinstance(step_sizes, list) else step_sizes,
            "foreach": foreach,
            "maximize": maximize,
            "differentiable": differentiable,
            "capturable": capturable,
        }
        super().__init__(params, defaults)

    def _validate(self, group: dict[str, Any]) -> None:
        op = type(self).__name__
        check_number(op, "lr", group["lr"], tensor_ok=True)
        _pair(op, "etas", group["etas"])
        etaminus, etaplus = group["etas"]
        check_number(op, "etas[0]", etaminus, low=float("-inf"))
        check_number(op, "etas[1]", etaplus, low=float("-inf"))
        if not 0.0 < etaminus < 1.0 < etaplus:
            raise OptimizerError(
                f"invalid etas={tuple(group['etas'])!r}: they must satisfy "
                "0 < etaminus < 1 < etaplus",
                op=op,
            )
        _pair(op, "step_sizes", group["step_sizes"])
        for i, value in enumerate(group["step_sizes"]):
            check_number(op, f"step_sizes[{i}]", value, low=float("-inf"))
        check_flags(op, group)

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        etaminus, etaplus = self._hyper(group, "etas", 0), self._hyper(group, "etas", 1)
        low, high = self._hyper(group, "step_sizes", 0), self._hyper(group, "step_sizes", 1)
        maximize = group["maximize"]
        for p in params:
            state = self.state[p]
            if not state:
                state["step"] = new_step_counter()
                state["prev"] = E.zeros_like(p)
                # (ones * lr is lr exactly; a recorded step's lr is a graph input, not a number)
                state["step_size"] = E.ones_like(p) * as_operand(self._hyper(group, "lr"), p)
            state["step"].add_(1)
            g = -p.grad if maximize else p.grad
            prev, step_size = state["prev"], state["step_size"]
            sign = (g * prev).sign()
            # PyTorch's three masked fills, in its order (a NaN sign stays NaN)
            negative = sign < 0
            factor = E.where(sign == 0, 1.0, sign)
            factor = E.where(negative, as_operand(etaminus, p), factor)
            factor = E.where(sign > 0, as_operand(etaplus, p), factor)
            step_size.mul_(factor)
            step_size.clamp_(as_operand(low, p), as_operand(high, p))
            g = E.where(negative, 0.0, g)
            p.sub_(g.sign() * step_size)
            prev.copy_(g)
