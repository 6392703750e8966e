"""SparseAdam, PyTorch's ``torch.optim.SparseAdam``: Adam whose moments and parameter move only
where the gradient has entries (the "lazy" Adam of embedding tables)::

    t = t + 1
    g = -grad if maximize else grad                     (on the rows the gradient touches)
    m = m + (1 - beta1) * (g - m);  v = v + (1 - beta2) * (g^2 - v)
    p = p - lr * sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + eps)

Rows the gradient does not touch keep their moments and values. A sparse gradient
(``nn.Embedding(sparse=True)``, eagerly) touches the rows of its indices, as PyTorch's. PyTorch
refuses dense gradients; ember takes them too (a captured step's gradients are dense), a row
counting as touched where its gradient is not all zeros: the same update wherever a looked-up
row's gradient is not exactly zero. Rows are along the first dimension (an embedding's
entries); a 1-D parameter's rows are its elements.

The step is written in ember ops (a ``where`` over the touched rows), so it runs eagerly and
inside ``ember.function``. ``lr``, ``betas`` and ``eps`` are runtime values of a recorded step.
State per parameter: ``'step'`` (a float32 0-d tensor: PyTorch keeps a Python int, which a
recorded step could not advance; a PyTorch state_dict's int loads as it), ``'exp_avg'``,
``'exp_avg_sq'``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .. import dtypes as dt
from ..ops import api as E
from ..ops.sparse_tensor import SparseTensor
from ..tensor import Tensor
from ._common import check_betas, is_eager, refuse_complex
from .optimizer import Optimizer, OptimizerError, as_operand, check_number, new_step_counter

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    """``SparseAdam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, maximize=False)``, as
    ``torch.optim.SparseAdam`` (see the module for the gradients it takes)."""

    runtime_hyperparameters = ("lr", "betas", "eps")

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        betas: tuple = (0.9, 0.999),
        eps: float = 1e-8,
        maximize: bool = False,
    ) -> None:
        defaults = {"lr": lr, "betas": betas, "eps": eps, "maximize": maximize}
        super().__init__(params, defaults)

    def _validate(self, group: dict[str, Any]) -> None:
        op = type(self).__name__
        check_number(op, "lr", group["lr"], tensor_ok=True)
        if not group["lr"] > 0.0:
            raise OptimizerError(f"Invalid learning rate: {group['lr']}", op=op)
        check_number(op, "eps", group["eps"])
        if not group["eps"] > 0.0:
            raise OptimizerError(f"Invalid epsilon value: {group['eps']}", op=op)
        check_betas(op, group)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """As `Optimizer.add_param_group`; complex parameters are refused, as PyTorch's."""
        super().add_param_group(refuse_complex(type(self).__name__, param_group))

    def _update_sparse(self, group: dict[str, Any], params: list[Tensor]) -> None:
        self._update_group(group, params)  # (a sparse gradient's rows: `_gradient_rows`)

    def _update_group(self, group: dict[str, Any], params: list[Tensor]) -> None:
        lr = self._hyper(group, "lr")
        beta1 = self._hyper(group, "betas", 0)
        beta2 = self._hyper(group, "betas", 1)
        eps = self._hyper(group, "eps")
        for p in params:
            state = self.state[p]
            if not state:
                state["step"] = new_step_counter()
                state["exp_avg"] = E.zeros_like(p)
                state["exp_avg_sq"] = E.zeros_like(p)
            step = self._step_counter(state)
            g, touched = _gradient_rows(p.grad)
            g = -g if group["maximize"] else g
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            zero = E.zeros((), dtype=p.dtype)
            avg_update = E.where(touched, (g - exp_avg) * as_operand(1 - beta1, p), zero)
            sq_update = E.where(touched, (g * g - exp_avg_sq) * as_operand(1 - beta2, p), zero)
            numer = avg_update + exp_avg
            denom = (sq_update + exp_avg_sq).sqrt() + as_operand(eps, p)
            exp_avg.add_(avg_update)
            exp_avg_sq.add_(sq_update)
            if is_eager(step):
                size = lr * math.sqrt(1 - beta2**step) / (1 - beta1**step)
            else:
                size = lr * (1 - beta2**step).sqrt() / (1 - beta1**step)
            p.add_(E.where(touched, numer / denom * as_operand(-size, p), zero))


def _gradient_rows(grad):
    """The dense gradient and its touched rows (`_touched_rows`); a sparse gradient's rows are
    its indices, as PyTorch's (a looked-up row whose gradient is zero still counts)."""
    if type(grad) is not SparseTensor:
        return grad, _touched_rows(grad)
    rows = E.zeros((grad.shape[0],), dtype=dt.bool_)
    rows[grad._indices()[0]] = True
    return grad.to_dense(), rows.reshape((grad.shape[0],) + (1,) * (grad.ndim - 1))


def _touched_rows(g: Tensor) -> Tensor:
    """A bool tensor broadcasting against ``g``: True on the rows (first dimension) where
    ``g`` has a nonzero entry."""
    if g.ndim <= 1:
        return g != 0
    nonzero = (g != 0).reshape(g.shape[0], -1).any(1)
    return nonzero.reshape((g.shape[0],) + (1,) * (g.ndim - 1))
