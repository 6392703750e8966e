"""ONNX's Softmax, LogSoftmax and Hardmax, Dropout, and the two losses
(NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss).

Before opset 13 the softmax family coerces its input to a matrix: the dimensions from ``axis``
on are flattened into one, normalized together, and the result reshaped back. From opset 13
``axis`` is one dimension (default -1).
"""

from __future__ import annotations

import math

import numpy as np

from ...random import Generator
from .._convert import converter, ember_dtype, is_static
from ._common import E, F, axis


def _along(ctx, x, fn):
    """``fn(t, dim)`` applied the way the node's opset reads ``axis``."""
    if ctx.opset >= 13:
        return fn(x, axis(ctx.attr("axis", -1), x.ndim, ctx))
    if x.ndim == 0:
        return fn(E.reshape(x, (1, 1)), 1).reshape(())
    first = axis(ctx.attr("axis", 1), x.ndim, ctx) if x.ndim else 0
    shape = tuple(x.shape)
    rows = math.prod(shape[:first])
    matrix = E.reshape(x, (rows, math.prod(shape[first:])))
    return E.reshape(fn(matrix, 1), shape)


@converter("Softmax", 1)
def _softmax(ctx, x):
    return _along(ctx, ctx.tensor(x), lambda t, d: F.softmax(t, d))


@converter("LogSoftmax", 1)
def _log_softmax(ctx, x):
    return _along(ctx, ctx.tensor(x), lambda t, d: F.log_softmax(t, d))


def _hardmax(t, dim):
    """1 at the first maximum along ``dim``, 0 elsewhere."""
    if t.shape[dim] == 0:
        return E.zeros_like(t)
    first = E.argmax(t, dim, keepdim=True)
    positions = E.arange(t.shape[dim], dtype=first.dtype)
    positions = E.reshape(positions, tuple(-1 if i == dim else 1 for i in range(t.ndim)))
    return E.cast(positions == first, t.dtype)


@converter("Hardmax", 1)
def _hardmax_converter(ctx, x):
    return _along(ctx, ctx.tensor(x), _hardmax)


# ---------------------------------------------------------------------------------------------
# dropout


@converter("Dropout", 1, random=True)
def _dropout(ctx, x, ratio=None, training_mode=None):
    if ctx.opset >= 12:
        training = training_mode is not None and bool(
            ctx.static(training_mode, "training_mode").reshape(-1)[0]
        )
        ratio = 0.5 if ratio is None else float(ctx.static(ratio, "ratio").reshape(-1)[0])
    else:
        # opsets 1 to 11 describe an inference graph (is_test, where present, says so; an
        # inference runtime treats even is_test=0 as inference, as onnxruntime does)
        ratio, training = float(ctx.attr("ratio", 0.5)), False
    if not training or ratio == 0.0:
        # the identity; a static input stays static (the node is never folded: it may draw)
        mask_shape = tuple(x.shape)
        if not is_static(x):
            x = ctx.tensor(x)
        if not ctx.output_used(1):
            return x
        if is_static(x):
            return x, np.ones(mask_shape, np.bool_)
        return x, E.ones(mask_shape, dtype=ember_dtype(np.bool_, ctx.label))
    if not 0.0 < ratio < 1.0:
        raise ctx.error(f"ratio must lie in [0, 1) in training mode, got {ratio}")
    x = ctx.tensor(x)
    seed = ctx.attr("seed", None)
    generator = None if seed is None else Generator(int(seed) % 2**63)
    keep = E.rand(*tuple(x.shape), generator=generator, dtype=x.dtype) >= ratio
    y = x * E.cast(keep, x.dtype) * (1.0 / (1.0 - ratio))
    return (y, keep) if ctx.output_used(1) else y


# ---------------------------------------------------------------------------------------------
# losses


def _reduction(ctx) -> str:
    reduction = ctx.attr("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        raise ctx.error(f"reduction {reduction!r} is not none, sum or mean")
    return reduction


def _nll(ctx, log_prob, target, weight):
    """ONNX's NegativeLogLikelihoodLoss of ``log_prob`` (N, C, d1, ...) at ``target``."""
    if log_prob.ndim < 2:
        raise ctx.error(f"input of shape {tuple(log_prob.shape)} needs (N, C, ...)")
    target = ctx.tensor(target)
    if target.dtype.is_floating_point:
        raise ctx.error("target must hold integer class indices")
    if target.dtype != ember_dtype(np.int64, ctx.label):
        target = E.cast(target, ember_dtype(np.int64, ctx.label))
    expected = (log_prob.shape[0],) + tuple(log_prob.shape[2:])
    if tuple(target.shape) != expected:
        raise ctx.error(f"target of shape {tuple(target.shape)} must have shape {expected}")
    if weight is not None:
        weight = ctx.tensor(weight, log_prob.dtype)
    ignore = ctx.attr("ignore_index", None)
    return F.nll_loss(
        log_prob,
        target,
        weight,
        ignore_index=-100 if ignore is None else int(ignore),
        reduction=_reduction(ctx),
    )


@converter("NegativeLogLikelihoodLoss", 12)
def _nll_loss(ctx, x, target, weight=None):
    return _nll(ctx, ctx.tensor(x), target, weight)


@converter("SoftmaxCrossEntropyLoss", 12)
def _softmax_cross_entropy(ctx, scores, labels, weights=None):
    scores = ctx.tensor(scores)
    if scores.ndim < 2:
        raise ctx.error(f"scores of shape {tuple(scores.shape)} need (N, C, ...)")
    log_prob = F.log_softmax(scores, 1)
    loss = _nll(ctx, log_prob, labels, weights)
    return (loss, log_prob) if ctx.output_used(1) else loss
