"""``ember.nn.utils.clip_grad``: gradient clipping with PyTorch's formulas (the total norm is
the norm of the per-tensor norms; gradients are scaled by ``min(max_norm / (total + 1e-6),
1)``); also ``ember.nn.utils.<name>``, as PyTorch's."""

from __future__ import annotations

import math
import types
import warnings

from ... import dtypes as dt
from ...autograd import no_grad
from ...errors import user_stacklevel
from ...ops import api as E
from ...ops.checks import check
from ...tensor import Tensor

__all__ = [
    "clip_grad_norm",
    "clip_grad_norm_",
    "clip_grad_value_",
    "clip_grads_with_norm_",
    "get_total_norm",
]


def _as_list(tensors) -> list:
    if isinstance(tensors, Tensor):
        return [tensors]
    is_generator = isinstance(tensors, types.GeneratorType)
    tensors = list(tensors)
    if is_generator and not tensors:
        warnings.warn(
            "`parameters` is an empty generator, no gradient clipping will occur.",
            stacklevel=user_stacklevel(),
        )
    return tensors


def _vector_norm(x: Tensor, p: float) -> Tensor:
    a = x.abs()
    if p == math.inf:
        return a.max()
    if p == -math.inf:
        return a.min()
    if p == 0:
        return (a != 0).sum().to(x.dtype)
    if p == 1:
        return a.sum()
    if p == 2:
        return (a * a).sum().sqrt()
    return (a**p).sum() ** (1.0 / p)


@no_grad()
def get_total_norm(
    tensors,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """The ``norm_type`` norm of all ``tensors`` seen as one vector."""
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return E.tensor(0.0)
    norms = [_vector_norm(t, norm_type) for t in tensors]
    common = dt.result_type(*[n.dtype for n in norms])
    total = _vector_norm(E.stack([n.to(common) for n in norms]), norm_type)
    if error_if_nonfinite:  # (a graph node while a graph is built: checked when it runs,
        # before any gradient is scaled by the norm)
        total = check(
            total,
            E.isfinite(total),
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the gradients "
            "by the non-finite norm anyway, set `error_if_nonfinite=False`",
        )
    return total


@no_grad()
def clip_grads_with_norm_(
    parameters, max_norm: float, total_norm: Tensor, foreach: bool | None = None
) -> None:
    """Scale every gradient by ``min(max_norm / (total_norm + 1e-6), 1)`` in place."""
    grads = [p.grad for p in _as_list(parameters) if p.grad is not None]
    if not grads:
        return
    coef = (float(max_norm) / (total_norm + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.to(g.dtype))


def clip_grad_norm_(
    parameters,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Rescale the gradients of ``parameters`` so that their total ``norm_type`` norm is at most
    ``max_norm``; returns the total norm before clipping."""
    parameters = _as_list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_norm(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite=False,
                   foreach=None) -> Tensor:  # fmt: skip
    """Deprecated: `clip_grad_norm_` (PyTorch's old name, with its FutureWarning)."""
    warnings.warn(
        "`torch.nn.utils.clip_grad_norm` is now deprecated in favor of "
        "`torch.nn.utils.clip_grad_norm_`.",
        FutureWarning,
        stacklevel=user_stacklevel(),
    )
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


@no_grad()
def clip_grad_value_(parameters, clip_value: float, foreach: bool | None = None) -> None:
    """Clamp every gradient to ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    for p in _as_list(parameters):
        if p.grad is not None:
            p.grad.clamp_(min=-clip_value, max=clip_value)
