"""Regression losses as composites: mse_loss, l1_loss, smooth_l1_loss and huber_loss, with
PyTorch's arguments, defaults and reductions.

Input and target broadcast (with a warning when their shapes differ, as in PyTorch) and are
promoted together, so an integer target never widens a float32 loss. The optional elementwise
``weight`` follows PyTorch too: a weighted ``'mean'`` divides by the sum of the weights for
mse_loss and l1_loss, but by the element count for huber_loss.
"""

from __future__ import annotations

from ..errors import ArgumentError, ShapeError
from ..ops import _item_scalars as _items
from ..ops import api as E
from ..ops._autocast import Autocast, autocasts
from ..ops._node_names import rename_node
from ..ops._registry import apply, export
from ..ops._util import fmt_shape
from ..ops.promotion import promote
from ..ops.robust_losses import HUBER, SMOOTH_L1
from ._common import broadcast_target, float_input, reduce_loss, reduction_arg


def _difference(op: str, input, target, complex_ok: bool = False):
    x = float_input(op, input, complex_ok=complex_ok)
    x, t = promote(x, target, floating=True)
    x, t = broadcast_target(op, x, t)
    return x, x - t


def _elementwise_weight(op: str, weight, x):
    if weight is None:
        return None
    w = float_input(op, weight, "weight")
    if tuple(w.shape) != tuple(x.shape):
        raise ShapeError(
            f"weight of shape {fmt_shape(w.shape)} must have the input's shape "
            f"{fmt_shape(x.shape)}",
            op=op,
        )
    return w if w.dtype is x.dtype else E.cast(w, x.dtype)


def _weighted(op, losses, weight, x, reduction: str, mean_over_weights: bool):
    w = _elementwise_weight(op, weight, x)
    if w is None:
        return reduce_loss(losses, reduction)
    losses = losses * w
    if reduction == "mean" and mean_over_weights:
        return E.sum(losses) / E.sum(w)
    return reduce_loss(losses, reduction)


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
def mse_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", weight=None):
    """Squared error ``(x - t)**2``."""
    reduction = reduction_arg("mse_loss", reduction, size_average, reduce)
    x, diff = _difference("mse_loss", input, target)
    losses = _weighted("mse_loss", diff * diff, weight, x, reduction, True)
    return rename_node(losses, "MseLossBackward0")


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
def l1_loss(input, target, size_average=None, reduce=None, reduction: str = "mean", weight=None):
    """Absolute error ``|x - t|`` (gradient 0 where equal, as PyTorch); complex tensors give
    the real moduli."""
    reduction = reduction_arg("l1_loss", reduction, size_average, reduce)
    x, diff = _difference("l1_loss", input, target, complex_ok=True)
    return _weighted("l1_loss", E.abs(diff), weight, x, reduction, True)


def _smooth(diff, beta: float):
    """``0.5 * d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 * beta``."""
    a = E.abs(diff)
    return E.where(a < beta, diff * diff * (0.5 / beta), a - 0.5 * beta)


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
def smooth_l1_loss(
    input, target, size_average=None, reduce=None, reduction: str = "mean", beta: float = 1.0
):
    """Squared error below ``beta``, absolute error above (l1_loss when ``beta == 0``)."""
    reduction = reduction_arg("smooth_l1_loss", reduction, size_average, reduce)
    if _items.is_item(beta):  # (a traced .item(): its tensor, ops/_item_scalars.py)
        _, diff = _difference("smooth_l1_loss", input, target)
        beta = _items.scalar(beta, diff.dtype, "smooth_l1_loss", "beta")
        zero = beta == 0  # (l1 there; the other branch divides by a safe beta)
        losses = E.where(zero, E.abs(diff), _smooth(diff, E.where(zero, 1, beta)))
        return reduce_loss(losses, reduction)
    beta = float(beta)
    if beta < 0:
        raise ArgumentError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    _, diff = _difference("smooth_l1_loss", input, target)
    # (one op each way: ops/robust_losses.py, PyTorch's formulas)
    losses = E.abs(diff) if beta == 0.0 else apply(SMOOTH_L1, diff, beta=beta)
    return rename_node(reduce_loss(losses, reduction), "SmoothL1LossBackward0")


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
def huber_loss(input, target, reduction: str = "mean", delta: float = 1.0, weight=None):
    """``0.5 * d**2`` where ``|d| < delta``, else ``delta * (|d| - 0.5 * delta)``."""
    reduction = reduction_arg("huber_loss", reduction)
    delta = delta if _items.is_item(delta) else float(delta)  # (an item: its tensor, unchecked)
    if not _items.is_item(delta) and delta <= 0:
        raise ArgumentError(f"huber_loss: delta must be positive, got {delta}")
    x, diff = _difference("huber_loss", input, target)
    if _items.is_item(delta):
        a = E.abs(diff)
        losses = E.where(a < delta, diff * diff * 0.5, (a - 0.5 * delta) * delta)
    else:  # (one op each way: ops/robust_losses.py, PyTorch's formulas)
        losses = apply(HUBER, diff, delta=delta)
    losses = _weighted("huber_loss", losses, weight, x, reduction, False)
    return rename_node(losses, "HuberLossBackward0")
