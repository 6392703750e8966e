"""The long tail of PyTorch's losses as composites: ``soft_margin_loss``,
``multilabel_soft_margin_loss``, ``multi_margin_loss``, ``multilabel_margin_loss``,
``poisson_nll_loss``, ``gaussian_nll_loss`` and ``hinge_embedding_loss``, with PyTorch's
arguments, defaults and reductions (the deprecated ``size_average`` / ``reduce`` included).

All are written in ember ops, so they differentiate (with respect to the input and, where
PyTorch does, the target and variance) and capture under ``ember.function``. Value checks that
need data (negative variances, out-of-range classes) run eagerly only: a traced tensor has no
values to check.
"""

from __future__ import annotations

import math

import numpy as np

from ..dtypes import int64
from ..errors import ArgumentError, EmberError, ShapeError
from ..ops import _item_scalars as _items
from ..ops import api as E
from ..ops._autocast import Autocast, autocasts
from ..ops._node_names import renames
from ..ops._registry import export
from ..ops._util import fmt_shape
from ..ops.promotion import promote, to_tensor
from ._common import concrete, float_input, reduce_loss, reduction_arg, refuse_complex_grad
from .activation import logsigmoid, softplus


def _class_targets(op: str, x, target):
    """Integer class targets for an (N, C) or (C,) input: shape (N,) or ()."""
    t = to_tensor(target)
    if t.dtype.is_floating_point or t.dtype.name == "bool":
        raise EmberError(f"target must hold integer class indices, got {t.dtype}", op=op)
    if x.ndim == 1 and tuple(t.shape) == (1,):  # (PyTorch's: a (C,) input's one target, kept 1-d)
        return t
    if x.ndim not in (1, 2) or t.ndim != x.ndim - 1 or tuple(t.shape) != tuple(x.shape[:-1]):
        raise ShapeError(
            f"expected an (N, C) input with (N,) targets or a (C,) input with a 0-d target, got "
            f"input {fmt_shape(x.shape)} and target {fmt_shape(t.shape)}",
            op=op,
        )
    data = concrete(t)
    if data is not None and data.size and (data.min() < 0 or data.max() >= x.shape[-1]):
        raise EmberError(
            f"target holds class {int(data.max() if data.max() >= 0 else data.min())} outside "
            f"[0, {x.shape[-1]})",
            op=op,
        )
    return t


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
@renames("SoftMarginLossBackward0")
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):
    """``log(1 + exp(-y * x))`` for targets ``y`` in {1, -1}, averaged over every element
    (computed as ``softplus(-y * x)``, which stays finite where PyTorch's direct formula
    overflows to inf for ``-y * x`` above ~88 in float32)."""
    op = "soft_margin_loss"
    reduction = reduction_arg(op, reduction, size_average, reduce)
    x, t = promote(float_input(op, input, complex_ok=True), to_tensor(target), floating=True)
    if x.dtype.is_complex:  # (PyTorch's formula: softplus takes no complex tensors)
        refuse_complex_grad(op, x)
        return reduce_loss(E.log1p(E.exp(-t * x)), reduction)
    return reduce_loss(softplus(-t * x), reduction)


@export(functional=True, toplevel=False)
def multilabel_soft_margin_loss(
    input, target, weight=None, size_average=None, reduce=None, reduction: str = "mean"
):
    """``-(y log σ(x) + (1 - y) log σ(-x))``, times ``weight``, averaged over the last (class)
    dimension: one loss per sample, then reduced."""
    op = "multilabel_soft_margin_loss"
    reduction = reduction_arg(op, reduction, size_average, reduce)
    x, t = promote(float_input(op, input), to_tensor(target), floating=True)
    if x.ndim == 0:
        raise ShapeError("expected an input of at least 1 dimension, got a 0-d one", op=op)
    loss = -(t * logsigmoid(x) + (1 - t) * logsigmoid(-x))
    if weight is not None:
        loss = loss * to_tensor(weight)
    loss = E.sum(loss, x.ndim - 1) / x.shape[-1]
    return reduce_loss(loss, reduction)


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
@renames("MultiMarginLossBackward0")
def multi_margin_loss(
    input,
    target,
    p: int = 1,
    margin: float = 1.0,
    weight=None,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
):
    """The multi-class hinge loss: ``sum_{j != y} w[y] * max(0, margin - x[y] + x[j])^p / C``
    per sample (``p`` is 1 or 2)."""
    op = "multi_margin_loss"
    reduction = reduction_arg(op, reduction, size_average, reduce)
    if p not in (1, 2):
        raise ArgumentError(f"{op}: only p == 1 and p == 2 supported, got {p!r}")
    x = float_input(op, input)
    if x.ndim == 0:  # (one score: PyTorch's one class, a 0-d loss)
        x = E.reshape(x, (1,))
    t = _class_targets(op, x, target)
    x2 = x if x.ndim == 2 else E.reshape(x, (1, x.shape[0]))
    t2 = E.reshape(t, (x2.shape[0], 1))
    classes = x2.shape[1]
    x_y = E.gather(x2, 1, t2)
    terms = E.relu(_items.number(margin) - x_y + x2)
    if p == 2:
        terms = terms * terms
    if weight is not None:
        w = float_input(op, weight, "weight")
        if tuple(w.shape) != (classes,):
            raise ShapeError(
                f"weight of shape {fmt_shape(w.shape)} must hold one value per class ({classes})",
                op=op,
            )
        terms = terms * E.reshape(
            E.index_select(E.cast(w, x.dtype), 0, E.reshape(t2, (-1,))), (-1, 1)
        )
    is_target = E.arange(classes) == t2
    loss = E.sum(E.where(is_target, 0.0, terms), 1) / classes
    if x.ndim == 1:
        loss = E.reshape(loss, tuple(t.shape))
    return reduce_loss(loss, reduction)


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
@renames("MultilabelMarginLossBackward0")
def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction: str = "mean"):
    """``sum_{j in targets, i not in targets} max(0, 1 - (x[j] - x[i])) / C`` per sample. Each
    target row lists class indices and ends at its first -1 (entries after it are ignored)."""
    op = "multilabel_margin_loss"
    reduction = reduction_arg(op, reduction, size_average, reduce)
    x = float_input(op, input)
    t = to_tensor(target)
    if t.dtype.is_floating_point or t.dtype.name == "bool":
        raise EmberError(f"target must hold integer class indices, got {t.dtype}", op=op)
    if x.ndim == 0 and t.ndim == 0:  # (one score: PyTorch's one class, a 0-d loss)
        x, t = E.reshape(x, (1,)), E.reshape(t, (1,))
    if x.ndim not in (1, 2) or tuple(t.shape) != tuple(x.shape):
        raise ShapeError(
            f"expected (N, C) or (C,) input and target of the same shape, got input "
            f"{fmt_shape(x.shape)} and target {fmt_shape(t.shape)}",
            op=op,
        )
    classes = x.shape[-1]
    x2 = x if x.ndim == 2 else E.reshape(x, (1, classes))
    t2 = E.reshape(t, tuple(x2.shape))
    data = concrete(t2)
    if data is not None and data.size:
        valid = np.cumsum(data == -1, axis=1) == 0
        listed = data[valid]
        if listed.size and (listed.min() < 0 or listed.max() >= classes):
            raise EmberError(f"target holds a class outside [-1, {classes})", op=op)
    # a target entry counts while no -1 precedes it (inclusive)
    valid = E.cumsum(E.cast(t2 == -1, int64), 1) == 0
    # is_target[n, c]: class c is listed among sample n's valid targets
    hits = (E.reshape(t2, (x2.shape[0], classes, 1)) == E.arange(classes)) & E.reshape(
        valid, (x2.shape[0], classes, 1)
    )
    is_target = E.any(hits, 1)
    # pairs[n, k, i] = max(0, 1 - x[t[k]] + x[i]) for k a valid entry and i not a target; a
    # class listed twice counts twice, as in PyTorch's kernel
    n = x2.shape[0]
    x_t = E.gather(x2, 1, E.where(valid, t2, 0))
    diff = 1.0 - E.reshape(x_t, (n, classes, 1)) + E.reshape(x2, (n, 1, classes))
    pair = E.reshape(valid, (n, classes, 1)) & E.reshape(E.logical_not(is_target), (n, 1, classes))
    loss = E.sum(E.where(pair, E.relu(diff), 0.0), (1, 2)) / classes
    if x.ndim == 1:
        loss = E.reshape(loss, ())
    return reduce_loss(loss, reduction)


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
def poisson_nll_loss(
    input,
    target,
    log_input: bool = True,
    full: bool = False,
    size_average=None,
    eps: float = 1e-8,
    reduce=None,
    reduction: str = "mean",
):
    """The Poisson negative log-likelihood: ``exp(x) - y * x`` with ``log_input``, else
    ``x - y * log(x + eps)``; ``full`` adds Stirling's ``y log y - y + log(2πy) / 2`` where
    ``y > 1``. The target's gradient is 0 where ``y`` is 0 (PyTorch's is NaN there: its masked
    Stirling term still differentiates ``log(0)``)."""
    op = "poisson_nll_loss"
    reduction = reduction_arg(op, reduction, size_average, reduce)
    x = float_input(op, input, complex_ok=True, integers=True)
    x, t = promote(x, to_tensor(target))  # (integers: t * x wraps in their dtype, as PyTorch's)
    if log_input:
        loss = E.exp(x) - t * x
    else:
        loss = x - t * E.log(x + _items.number(eps))
    if full:
        big = t > 1
        safe = E.where(big, t, 2.0)  # log reads only y > 1, so no NaN reaches the gradient
        stirling = safe * E.log(safe) - safe + 0.5 * E.log(2 * math.pi * safe)
        loss = loss + E.where(big, stirling, 0.0)
    return reduce_loss(loss, reduction)


@export(functional=True, toplevel=False)
def gaussian_nll_loss(
    input, target, var, full: bool = False, eps: float = 1e-6, reduction: str = "mean"
):
    """The Gaussian negative log-likelihood ``(log(var) + (x - y)^2 / var) / 2`` (plus
    ``log(2π) / 2`` with ``full``). ``var`` has the input's shape, or that shape without its last
    dimension, or one dimension of size 1 where the input's is larger, or is a float (PyTorch's
    rules). It is clamped below at ``eps`` for the value only: its gradient is the unclamped
    one, as PyTorch clamps under ``no_grad``."""
    op = "gaussian_nll_loss"
    x = float_input(op, input)
    if isinstance(var, float):
        if var < 0:
            raise ArgumentError(f"{op}: var has negative entry/entries")
        v = E.full(tuple(x.shape), var, dtype=x.dtype)
    else:
        v = to_tensor(var)
        data = concrete(v)
        if data is not None and np.any(data < 0):
            raise ArgumentError(f"{op}: var has negative entry/entries")
    xs, vs = tuple(x.shape), tuple(v.shape)
    if vs != xs:
        if xs[:-1] == vs:
            v = E.unsqueeze(v, -1)
        elif not (len(xs) == len(vs) and sum(b for a, b in zip(xs, vs) if a != b) == 1):
            raise ArgumentError(
                f"{op}: var is of incorrect size: {fmt_shape(vs)} for input {fmt_shape(xs)}"
            )
    if reduction not in ("none", "mean", "sum"):
        raise ArgumentError(f"{reduction} is not valid")
    x, t, v = promote(x, to_tensor(target), v, floating=True)
    v = v + E.stop_gradient(E.maximum(v, _items.number(eps)) - v)
    loss = 0.5 * (E.log(v) + (x - t) ** 2 / v)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return reduce_loss(loss, reduction)


@export(functional=True, toplevel=False)
@autocasts(Autocast.FP32)
def hinge_embedding_loss(
    input,
    target,
    margin: float = 1.0,
    size_average=None,
    reduce=None,
    reduction: str = "mean",
):
    """``x`` where ``y == 1`` plus ``max(0, margin - x)`` where ``y == -1`` (PyTorch's
    formula: an entry of ``y`` that is neither adds both terms' parts as PyTorch's does)."""
    op = "hinge_embedding_loss"
    reduction = reduction_arg(op, reduction, size_average, reduce)
    x, t = promote(float_input(op, input), to_tensor(target), floating=True)
    margin_part = E.where(t != 1, E.relu(_items.number(margin) - x), 0.0)
    self_part = E.where(t != -1, x, 0.0)
    return reduce_loss(margin_part + self_part, reduction)


@export(functional=True, toplevel=False)
def linear_cross_entropy(
    input,
    linear_weight,
    target,
    *,
    linear_bias=None,
    weight=None,
    reduction: str = "mean",
    ignore_index: int | None = None,
    label_smoothing: float = 0.0,
    options=None,
):
    """``cross_entropy(linear(input, linear_weight, linear_bias), target, ...)`` as PyTorch's
    ``F.linear_cross_entropy``: ``input`` (N, in) or (in,); ``linear_weight`` (C, d_1, ..., d_K,
    in) for a K-dimensional loss over logits (N, C, d_1, ..., d_K); ``ignore_index=None`` is -100
    (and refused with probability targets). ``options`` (PyTorch's chunking, a memory strategy
    with the same result) is not in ember: only None is accepted."""
    from ..ops.linalg import linear
    from .loss import cross_entropy

    op = "linear_cross_entropy"
    if options is not None:
        raise EmberError(
            "options (PyTorch's LinearCrossEntropyOptions, a chunked evaluation) are not in "
            "ember; pass options=None (the same loss, computed whole)",
            op=op,
        )
    x, w = to_tensor(input), to_tensor(linear_weight)
    if x.ndim not in (1, 2):
        raise ShapeError(f"expected input with dimensionality 1 or 2, got {x.ndim}", op=op)
    if w.ndim < 2:
        raise ShapeError(
            f"expected linear_weight with dimensionality at least 2, got {w.ndim}", op=op
        )
    batch, in_features = tuple(x.shape[:-1]), x.shape[-1]
    if in_features != w.shape[-1]:
        raise ShapeError(
            f"expected equal input and linear_weight last dimensions (in_features), got "
            f"{in_features} and {w.shape[-1]}",
            op=op,
        )
    classes, out_features = w.shape[0], tuple(w.shape[1:-1])
    if linear_bias is not None and tuple(linear_bias.shape) != (classes, *out_features):
        raise ShapeError(
            f"expected linear_bias shape {fmt_shape((classes, *out_features))}, got "
            f"{fmt_shape(linear_bias.shape)}",
            op=op,
        )
    if out_features and not batch:
        raise ShapeError(
            f"a K-dimensional loss (linear_weight {fmt_shape(w.shape)}) needs batched input "
            f"(N, {in_features}), got {fmt_shape(x.shape)}",
            op=op,
        )
    logits_shape = (*batch, classes, *out_features)
    t = to_tensor(target)
    if tuple(t.shape) == logits_shape and ignore_index is not None:
        raise EmberError("ignore_index cannot be given when target holds probabilities", op=op)
    rows = math.prod(out_features) * classes
    logits = linear(
        x,
        E.reshape(w, (rows, in_features)),
        None if linear_bias is None else E.reshape(linear_bias, (rows,)),
    )
    return cross_entropy(
        E.reshape(logits, logits_shape),
        t,
        weight=weight,
        reduction=reduction,
        ignore_index=-100 if ignore_index is None else ignore_index,
        label_smoothing=label_smoothing,
    )
