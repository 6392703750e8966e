"""Classification losses as composites: cross_entropy (class indices or probabilities, label
smoothing, class weights, ignore_index), nll_loss, binary_cross_entropy (with and without
logits) and kl_div, with PyTorch's arguments, defaults and ``reduction`` semantics.

Class-index losses pick each target's log-probability with ``gather`` (no dense one-hot). Ignored
targets are first replaced by class 0 so the gather stays in range, and their losses and weights
are then masked to zero; a weighted ``'mean'`` divides by the sum of the weights of the kept
targets, exactly as PyTorch. Class indices are int64 (or uint8 for inputs of one or two
dimensions), refused otherwise in PyTorch's words; they never enter float arithmetic, so a
float32 loss stays float32. cross_entropy takes a target of the input's shape as class
probabilities (a float tensor, whose dtype promotes the loss's), as PyTorch decides.

Eagerly, cross_entropy with class indices on float32/float64 logits is one op each way instead
(ops/cross_entropy.py: the same semantics in one C pass), and so is nll_loss with class indices
(ops/nll_loss.py: one pick forward, one scatter backward); graphs keep the composite, whose
loops the passes fuse.
"""

from __future__ import annotations

import numpy as np

from ..errors import ArgumentError, DTypeError, ShapeError
from ..ops import _item_scalars as _items
from ..ops import api as E
from ..ops import cross_entropy as _fused
from ..ops import nll_loss as _fused_nll
from ..ops._autocast import Autocast, autocasts
from ..ops._index_dtypes import scalar_name
from ..ops._index_plan import IndexOutOfRangeError
from ..ops._node_names import rename_node
from ..ops._registry import apply, export
from ..ops._util import fmt_shape
from ..ops.promotion import to_tensor
from ._common import check_same_shape, concrete, float_input, reduce_loss, reduction_arg
from .softmax import log_softmax


def _class_dim(x) -> int:
    return 0 if x.ndim == 1 else 1


_INT64, _UINT8 = np.dtype(np.int64), np.dtype(np.uint8)


def _check_index_target(op: str, x, target) -> None:
    data, classes = getattr(x, "_data", None), getattr(target, "_data", None)
    if (
        type(data) is np.ndarray
        and type(classes) is np.ndarray
        and data.ndim == 2
        and (classes.dtype == _INT64 or classes.dtype == _UINT8)
        and classes.shape == data.shape[:1]
    ):
        return  # ((N, C) logits, (N,) int64 or uint8 classes: every check below passes)
    if 0 < x.ndim <= 2 and target.ndim > 1:  # (PyTorch checks this before the dtype)
        raise ShapeError("0D or 1D target tensor expected, multi-target not supported", op=op)
    _check_index_dtype(op, x, target)
    if x.ndim == 0:
        raise ShapeError("the input needs a class dimension, got a 0-d tensor", op=op)
    expected = () if x.ndim == 1 else (x.shape[0],) + tuple(x.shape[2:])
    if tuple(target.shape) != expected:
        raise ShapeError(
            f"target of shape {fmt_shape(target.shape)} does not fit input of shape "
            f"{fmt_shape(x.shape)}: expected target shape {fmt_shape(expected)} "
            "(the input without its class dimension 1)",
            op=op,
        )


def _check_index_dtype(op: str, x, target) -> None:
    """PyTorch's class-index dtypes: int64, or uint8 where the input has one or two dimensions
    (its nll_loss kernel takes Byte, nll_loss2d, which larger inputs run, Long only), refused
    in its words (ember's DTypeError is a RuntimeError, as PyTorch's)."""
    name = target.dtype.name
    if name not in ("int64", "uint8"):
        raise DTypeError(
            f"expected target dtype to be Long or Byte, but got {scalar_name(target.dtype)}",
            op=op,
        )
    if name == "uint8" and x.ndim > 2:
        raise DTypeError("expected scalar type Long but found Byte", op=op)


# signed integer dtypes -> their unsigned twins, whose view of a negative index is past any class
_UNSIGNED = {np.dtype(t): np.dtype(u) for t, u in ((np.int64, np.uint64), (np.int32, np.uint32))}


_largest = np.maximum.reduce  # (the ufunc's own method: ndarray.max's Python layers skipped)


def _check_class_values(op: str, target, n_classes: int, ignore_index: int) -> None:
    data = getattr(target, "_data", None)
    if type(data) is np.ndarray:  # (an eager tensor's, as `concrete` reads it)
        unsigned = _UNSIGNED.get(data.dtype)
        if unsigned is not None and data.size and _largest(data.view(unsigned), None) < n_classes:
            return  # (every index in [0, n_classes): one reduction, the common case)
    else:
        data = concrete(target)
    if data is None or data.size == 0:
        return
    bad = (data != ignore_index) & ((data < 0) | (data >= n_classes))
    if bad.any():
        value = int(data[bad].reshape(-1)[0])
        raise IndexOutOfRangeError(
            f"target {value} is out of bounds: class indices must lie in [0, {n_classes}) "
            f"or equal ignore_index ({ignore_index})",
            op=op,
        )


def _class_weight(op: str, weight, x, n_classes: int):
    if weight is None:
        return None
    w = float_input(op, weight, "weight")
    if tuple(w.shape) != (n_classes,):
        raise ShapeError(
            f"weight of shape {fmt_shape(w.shape)} must have one entry per class ({n_classes})",
            op=op,
        )
    return w if w.dtype is x.dtype else E.cast(w, x.dtype)


def _picked_losses(logp, target, weight, ignore_index: int):
    """Per-target ``-weight[t] * logp[t]`` (0 where ignored), the per-target weights (the
    kept-target indicator without class weights) and the kept mask, all shaped like ``logp``
    with its class dimension reduced to size 1 (so reductions need no squeeze). The weights and
    the mask are None when every target is kept with weight 1."""
    d = _class_dim(logp)
    data = concrete(target)
    target = E.unsqueeze(target, d)
    if weight is None and data is not None and not (data == ignore_index).any():
        # eager, nothing ignored, no class weights: no masks to build (the values are the same)
        return -E.gather(logp, d, target), None, None
    kept = target != ignore_index
    safe = E.where(kept, target, 0)
    picked = E.gather(logp, d, safe)
    if weight is None:
        return E.where(kept, -picked, 0), E.cast(kept, logp.dtype), kept
    w = E.where(kept, E.reshape(E.index_select(weight, 0, E.reshape(safe, (-1,))), safe.shape), 0)
    return -picked * w, w, kept


def _reduce_weighted(losses, weights, reduction: str, class_dim: int):
    if reduction == "none":
        return E.squeeze(losses, class_dim)
    if reduction == "sum":
        return E.sum(losses)
    if weights is None:
        return E.sum(losses) / losses.numel()
    return E.sum(losses) / E.sum(weights)


def _nll(op, logp, target, weight, ignore_index, reduction):
    """The reduced nll loss, plus the per-target weights, kept mask and validated class weight
    (cross_entropy's label smoothing reuses them)."""
    _check_index_target(op, logp, target)
    d = _class_dim(logp)
    n_classes = logp.shape[d]
    _check_class_values(op, target, n_classes, ignore_index)
    weight = _class_weight(op, weight, logp, n_classes)
    losses, weights, kept = _picked_losses(logp, target, weight, int(ignore_index))
    return _reduce_weighted(losses, weights, reduction, d), weights, kept, weight


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
def nll_loss(
    input,
    target,
    weight=None,
    size_average=None,
    ignore_index: int = -100,
    reduce=None,
    reduction: str = "mean",
):
    """Negative log-likelihood of class-index ``target`` under log-probabilities ``input``
    ((N, C), (C,) or (N, C, d1, ...)); ``'mean'`` divides by the kept targets' total weight."""
    x = float_input("nll_loss", input)
    reduction = reduction_arg("nll_loss", reduction, size_average, reduce)
    target = to_tensor(target)
    if _fused_nll.applies(x, target, weight):  # eagerly one op each way (ops/nll_loss.py)
        _check_index_target("nll_loss", x, target)
        d = _class_dim(x)
        _check_class_values("nll_loss", target, x.shape[d], int(ignore_index))
        w = _class_weight("nll_loss", weight, x, x.shape[d])
        return apply(
            _fused_nll.NLL_LOSS,
            x,
            target,
            *(() if w is None else (w,)),
            ignore_index=int(ignore_index),
            reduction=reduction,
        )
    loss, _, _, _ = _nll("nll_loss", x, target, weight, ignore_index, reduction)
    return loss


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
def cross_entropy(
    input,
    target,
    weight=None,
    size_average=None,
    ignore_index: int = -100,
    reduce=None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
):
    """Cross-entropy between the logits ``input`` ((N, C), (C,) or (N, C, d1, ...)) and either
    class indices (an integer tensor without the class dimension) or class probabilities (a
    float tensor of the input's shape)."""
    x = float_input("cross_entropy", input)
    reduction = reduction_arg("cross_entropy", reduction, size_average, reduce)
    item = _items.is_item(label_smoothing)  # (a traced .item(): in the arithmetic, unchecked)
    eps = label_smoothing if item else float(label_smoothing)
    if not item and not 0.0 <= eps <= 1.0:
        raise ArgumentError(f"cross_entropy: label_smoothing must lie in [0, 1], got {eps}")
    if x.ndim == 0:
        raise ShapeError("the input needs a class dimension, got a 0-d tensor", op="cross_entropy")
    d = _class_dim(x)
    target = to_tensor(target)
    # PyTorch tells the two kinds of target apart by shape: class probabilities have the
    # input's (and a floating dtype), class indices its shape without the class dimension
    soft = tuple(target.shape) == tuple(x.shape)
    if soft and not target.dtype.is_floating_point:
        raise DTypeError(
            "Expected floating point type for target with class probabilities, got "
            f"{scalar_name(target.dtype)}",
            op="cross_entropy",
        )
    # eagerly one op each way (ops/cross_entropy.py)
    if not item and not soft and _fused.applies(x, target, weight):
        _check_index_target("cross_entropy", x, target)
        classes = x.shape[d]
        _check_class_values("cross_entropy", target, classes, int(ignore_index))
        w = _class_weight("cross_entropy", weight, x, classes)
        return apply(
            _fused.SOFTMAX_CROSS_ENTROPY,
            x,
            target,
            *(() if w is None else (w,)),
            ignore_index=int(ignore_index),
            reduction=reduction,
            smoothing=eps,
        )
    logp = log_softmax(x, d)
    if soft:
        return _soft_target_loss(x, logp, target, weight, reduction, eps)
    loss, weights, kept, w = _nll("cross_entropy", logp, target, weight, ignore_index, reduction)
    if not item and eps == 0.0:
        return loss
    # PyTorch's smoothing term: the (weighted) sum of -logp over classes, masked like the nll
    n_classes = x.shape[d]
    if w is not None:
        logp = logp * E.reshape(w, (n_classes,) + (1,) * (x.ndim - d - 1))
    smooth = -E.sum(logp, d, keepdim=True)
    if kept is not None:
        smooth = E.where(kept, smooth, 0)
    return loss * (1.0 - eps) + _reduce_weighted(smooth, weights, reduction, d) * (eps / n_classes)


def _soft_target_loss(x, logp, target, weight, reduction: str, eps: float):
    check_same_shape("cross_entropy", x, target, "probability target")
    # (a target of another float dtype promotes the products, as PyTorch's: float64
    # probabilities give float32 logits a float64 loss)
    d = _class_dim(x)
    n_classes = x.shape[d]
    if _items.is_item(eps) or eps > 0.0:
        target = target * (1.0 - eps) + eps / n_classes
    w = _class_weight("cross_entropy", weight, x, n_classes)
    terms = logp * target
    if w is not None:
        terms = terms * E.reshape(w, (n_classes,) + (1,) * (x.ndim - d - 1))
    # 'mean' averages over samples (and positions), not over weights, as in PyTorch, whose
    # nodes are a division by their count ('mean') or the negation ('sum', 'none')
    loss = reduce_loss(-E.sum(terms, d), reduction)
    return rename_node(loss, "DivBackward1" if reduction == "mean" else "NegBackward0")
