"""Binary and distribution losses as composites: binary_cross_entropy,
binary_cross_entropy_with_logits and kl_div (PyTorch's arguments, defaults and reductions).

``binary_cross_entropy`` clamps each log at -100 as PyTorch does, so a probability of exactly 0
or 1 gives a finite loss; the log reads a masked input there, so the gradient stays finite too.
``binary_cross_entropy_with_logits`` uses the stable form
``(1 - t) * x - (1 + (pos_weight - 1) * t) * logsigmoid(x)``, which never exponentiates a large
positive number.
"""

from __future__ import annotations

from ..errors import EmberError, ShapeError
from ..ops import api as E
from ..ops._autocast import Autocast, autocasts
from ..ops._node_names import rename_node
from ..ops._registry import export
from ..ops._util import broadcast_shapes, fmt_shape
from ..ops.promotion import promote
from ._common import concrete, float_input, reduce_loss, reduction_arg
from .activation import logsigmoid


def _same_size(op: str, x, target) -> None:
    if tuple(x.shape) != tuple(target.shape):
        raise ShapeError(
            f"target of shape {fmt_shape(target.shape)} must have the input's shape "
            f"{fmt_shape(x.shape)}",
            op=op,
        )


def _float_pair(op: str, input, target):
    x = float_input(op, input)
    x, t = promote(x, target, floating=True)
    _same_size(op, x, t)
    return x, t


def _weight(op: str, weight, x, what: str = "weight"):
    if weight is None:
        return None
    w = float_input(op, weight, what)
    broadcast_shapes(op, w.shape, x.shape)
    return w if w.dtype is x.dtype else E.cast(w, x.dtype)


def _clamped_log(p):
    """``max(log(p), -100)``, with a zero (not NaN) gradient where p == 0."""
    positive = p > 0
    return E.clip(E.where(positive, E.log(E.where(positive, p, 1)), -100.0), min=-100.0)


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
def binary_cross_entropy(
    input, target, weight=None, size_average=None, reduce=None, reduction: str = "mean"
):
    """``-w * (t * log(p) + (1 - t) * log(1 - p))`` for probabilities ``p`` in [0, 1], each log
    clamped at -100 as in PyTorch. The gradient is this loss's derivative everywhere, also at
    ``p`` = 0 or 1 (where the clamped log is flat and the other one is not: 1 at ``p = 0``,
    ``t = 0``); PyTorch's backward formula ``(p - t) / max(p (1 - p), 1e-12)`` gives 0 there."""
    op = "binary_cross_entropy"
    reduction = reduction_arg(op, reduction, size_average, reduce)
    x, t = _float_pair(op, input, target)
    data = concrete(x)
    if data is not None and data.size and ((data < 0) | (data > 1)).any():
        raise EmberError(
            "all elements of the input must lie in [0, 1] (they are probabilities); "
            "for logits use binary_cross_entropy_with_logits",
            op=op,
        )
    losses = -(t * _clamped_log(x) + (1 - t) * _clamped_log(1 - x))
    w = _weight(op, weight, x)
    if w is not None:
        losses = losses * w
    return rename_node(reduce_loss(losses, reduction), "BinaryCrossEntropyBackward0")


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
def binary_cross_entropy_with_logits(
    input,
    target,
    weight=None,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
    pos_weight=None,
):
    """``binary_cross_entropy(sigmoid(x), t)`` computed stably from logits ``x``; ``pos_weight``
    weighs the positive term (broadcast along the last dimension, e.g. one per class)."""
    op = "binary_cross_entropy_with_logits"
    reduction = reduction_arg(op, reduction, size_average, reduce)
    x, t = _float_pair(op, input, target)
    log_sig = logsigmoid(x)
    pw = _weight(op, pos_weight, x, "pos_weight")
    if pw is None:
        losses = (1 - t) * x - log_sig
    else:
        losses = (1 - t) * x - ((pw - 1) * t + 1) * log_sig
    w = _weight(op, weight, x)
    if w is not None:
        losses = losses * w
    return rename_node(reduce_loss(losses, reduction), "BinaryCrossEntropyWithLogitsBackward0")


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
def kl_div(
    input,
    target,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
    log_target: bool = False,
):
    """KL divergence ``t * (log t - x)`` between the target distribution and log-probabilities
    ``input`` (``exp(t) * (t - x)`` with ``log_target``). ``'batchmean'`` divides the sum by the
    batch size (the true KL divergence); ``'mean'`` averages over every element."""
    op = "kl_div"
    reduction = reduction_arg(
        op, reduction, size_average, reduce, allowed=("mean", "batchmean", "sum", "none")
    )
    x = float_input(op, input)
    x, t = promote(x, target, floating=True)
    if log_target:
        losses = E.exp(t) * (t - x)
    else:
        # PyTorch's xlogy(t, t) - t * x: 0 at t == 0, NaN at a negative t (and a NaN target
        # gradient at t == 0, as PyTorch's)
        losses = E.xlogy(t, t) - t * x
    if reduction == "batchmean":
        total = E.sum(losses)
        return total / x.shape[0] if x.ndim else total
    return reduce_loss(losses, reduction)
