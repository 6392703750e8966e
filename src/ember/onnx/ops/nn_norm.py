"""ONNX's normalizations: BatchNormalization (inference and training forms), Instance-, Layer-,
Group- and RMSNormalization, LRN, MeanVarianceNormalization, LpNormalization.

The common forms run as ember's fused normalizations (``F.batch_norm``'s C kernel,
``F.layer_norm``'s one-pass op); the rest are composites of ember ops. ``stash_type`` (the
precision of the statistics) is honoured by computing them in float32 for half-precision
inputs; inputs of higher precision keep theirs.
"""

from __future__ import annotations

from ... import dtypes as dt
from ...ops._registry import apply
from ...ops.batch_norm import BATCH_NORM_TRAIN
from .._convert import converter, ember_dtype
from ._common import E, F, axis, dtype_np, np_dtype
from .nn import channel_view, spatial_input


def _as(ctx, t, like):
    return t if t.dtype == like.dtype else E.cast(t, like.dtype)


def _channel_terms(ctx, x, *terms):
    """BatchNormalization's per-channel inputs: in x's dtype, or all float32 beside 16-bit x
    (opset 15's separate types, which ember's batch norm takes as PyTorch's mixed kernel does:
    the parameters unrounded, the result rounded once)."""
    if x.dtype in (dt.float16, dt.bfloat16) and all(t.dtype is dt.float32 for t in terms):
        return terms
    return tuple(_as(ctx, t, x) for t in terms)


# ---------------------------------------------------------------------------------------------
# batch normalization


@converter("BatchNormalization", 1, state_inputs=(3, 4))
def _batch_norm(ctx, x, scale, bias, mean, var):
    x = ctx.tensor(x)
    if x.ndim < 2:
        raise ctx.error(f"X of shape {tuple(x.shape)} has no channel dimension")
    eps = float(ctx.attr("epsilon", 1e-5))
    momentum = float(ctx.attr("momentum", 0.9))
    if ctx.opset >= 14:
        training = bool(ctx.attr("training_mode", 0))
    elif ctx.opset >= 7:
        # before opset 14 a node asking for the statistics' outputs is a training node
        training = any(ctx.output_used(i) for i in range(1, 5))
    else:
        training = not ctx.attr("is_test", 0) and any(ctx.output_used(i) for i in range(1, 5))
    scale, bias = ctx.tensor(scale), ctx.tensor(bias)
    mean, var = ctx.tensor(mean), ctx.tensor(var)
    if ctx.opset < 9 and not ctx.attr("spatial", 1) and scale.ndim > 1:
        # spatial=0: statistics per activation, shaped (C, D1, ...)
        return _batch_norm_per_activation(ctx, x, scale, bias, mean, var, eps)
    if not training:  # (F.batch_norm keeps float32 terms beside 16-bit x, as PyTorch)
        return F.batch_norm(x, mean, var, scale, bias, eps=eps)
    y, batch_mean, batch_var = apply(
        BATCH_NORM_TRAIN, x, *_channel_terms(ctx, x, scale, bias), eps=eps
    )
    # ONNX's momentum weighs the running statistic (PyTorch's the batch's)
    running_mean = mean * momentum + E.cast(batch_mean, mean.dtype) * (1.0 - momentum)
    running_var = var * momentum + E.cast(batch_var, var.dtype) * (1.0 - momentum)
    if ctx.opset >= 14:
        return y, running_mean, running_var
    # opsets 6 to 13: Y, mean, var, saved_mean, saved_var
    return y, running_mean, running_var, batch_mean, batch_var


def _batch_norm_per_activation(ctx, x, scale, bias, mean, var, eps):
    def view(t):
        return E.reshape(_as(ctx, t, x), (1,) + tuple(t.shape))

    return (x - view(mean)) * E.rsqrt(view(var) + eps) * view(scale) + view(bias)


@converter("InstanceNormalization", 1)
def _instance_norm(ctx, x, scale, bias):
    x = spatial_input(ctx, x, "input")
    eps = float(ctx.attr("epsilon", 1e-5))
    return F.instance_norm(
        x, weight=_as(ctx, ctx.tensor(scale), x), bias=_as(ctx, ctx.tensor(bias), x), eps=eps
    )


# ---------------------------------------------------------------------------------------------
# layer, group and RMS normalization


def _stash(ctx, x):
    """The dtype the statistics are computed in: stash_type's where it is wider than X's."""
    code = int(ctx.attr("stash_type", 1))
    want = np_dtype(code, ctx.label)
    have = dtype_np(x)
    if have.itemsize >= want.itemsize and have.kind == "f":
        return x.dtype
    return ember_dtype(want, ctx.label)


def _standardize(x, axes, eps):
    """(normalized, mean, 1 / std) over ``axes`` (kept as size-1 dims)."""
    mean = E.mean(x, axes, keepdim=True)
    centred = x - mean
    inv_std = E.rsqrt(E.mean(centred * centred, axes, keepdim=True) + eps)
    return centred * inv_std, mean, inv_std


@converter("LayerNormalization", 17)
def _layer_norm(ctx, x, scale, bias=None):
    x, scale = ctx.tensor(x), ctx.tensor(scale)
    bias = None if bias is None else ctx.tensor(bias)
    first = axis(ctx.attr("axis", -1), x.ndim, ctx)
    eps = float(ctx.attr("epsilon", 1e-5))
    shape = tuple(x.shape[first:])
    axes = tuple(range(first, x.ndim))
    stash = _stash(ctx, x)
    stats = ctx.output_used(1) or ctx.output_used(2)
    exact = tuple(scale.shape) == shape and (bias is None or tuple(bias.shape) == shape)
    if not stats and exact and stash == x.dtype:
        return F.layer_norm(
            x, shape, _as(ctx, scale, x), None if bias is None else _as(ctx, bias, x), eps
        )
    xs = x if stash == x.dtype else E.cast(x, stash)
    normalized, mean, inv_std = _standardize(xs, axes, eps)
    y = _as(ctx, normalized, x) * _as(ctx, scale, x)
    if bias is not None:
        y = y + _as(ctx, bias, x)
    if not stats:
        return y
    # Mean and InvStdDev are of stash_type's type (U)
    u = ember_dtype(np_dtype(int(ctx.attr("stash_type", 1)), ctx.label), ctx.label)
    return y, E.cast(mean, u), E.cast(inv_std, u)


@converter("GroupNormalization", 18)
def _group_norm(ctx, x, scale, bias):
    x = ctx.tensor(x)
    if x.ndim < 2:
        raise ctx.error(f"X of shape {tuple(x.shape)} has no channel dimension")
    groups = int(ctx.attr("num_groups"))
    eps = float(ctx.attr("epsilon", 1e-5))
    channels = x.shape[1]
    if groups < 1 or channels % groups:
        raise ctx.error(f"num_groups {groups} does not divide the {channels} channels")
    scale, bias = _as(ctx, ctx.tensor(scale), x), _as(ctx, ctx.tensor(bias), x)
    if ctx.opset < 21:
        # opset 18: one scale and bias per group, shared by its channels
        if tuple(scale.shape) != (groups,) or tuple(bias.shape) != (groups,):
            raise ctx.error(f"scale and bias must have shape ({groups},) (one per group)")
        scale = E.repeat_interleave(scale, channels // groups)
        bias = E.repeat_interleave(bias, channels // groups)
    elif tuple(scale.shape) != (channels,) or tuple(bias.shape) != (channels,):
        raise ctx.error(f"scale and bias must have shape ({channels},) (one per channel)")
    stash = _stash(ctx, x) if ctx.opset >= 21 else x.dtype
    if stash == x.dtype:
        return F.group_norm(x, groups, scale, bias, eps)
    normalized = _as(ctx, F.group_norm(E.cast(x, stash), groups, None, None, eps), x)
    return normalized * channel_view(scale, x.ndim) + channel_view(bias, x.ndim)


@converter("RMSNormalization", 23)
def _rms_norm(ctx, x, scale):
    x, scale = ctx.tensor(x), ctx.tensor(scale)
    first = axis(ctx.attr("axis", -1), x.ndim, ctx)
    eps = float(ctx.attr("epsilon", 1e-5))
    axes = tuple(range(first, x.ndim))
    stash = _stash(ctx, x)
    xs = x if stash == x.dtype else E.cast(x, stash)
    normalized = xs * E.rsqrt(E.mean(xs * xs, axes, keepdim=True) + eps)
    # Y has the scale's type (V)
    y = _as(ctx, normalized, x) * scale
    return y if y.dtype == scale.dtype else E.cast(y, scale.dtype)


# ---------------------------------------------------------------------------------------------
# LRN, MVN, Lp


@converter("LRN", 1)
def _lrn(ctx, x):
    x = ctx.tensor(x)
    if x.ndim < 2:
        raise ctx.error(f"X of shape {tuple(x.shape)} has no channel dimension")
    size = int(ctx.attr("size"))
    alpha, beta = float(ctx.attr("alpha", 1e-4)), float(ctx.attr("beta", 0.75))
    bias = float(ctx.attr("bias", 1.0))
    if size < 1:
        raise ctx.error(f"size must be positive, got {size}")
    # channel c sums the squares of c - floor((size-1)/2) .. c + ceil((size-1)/2)
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    squares = x * x
    spatial = [0, 0] * (x.ndim - 2)
    padded = F.pad(squares, tuple(spatial + [before, after]))
    channels = x.shape[1]
    total = None
    for offset in range(size):
        part = E.narrow(padded, 1, offset, channels)
        total = part if total is None else total + part
    return x / E.pow(total * (alpha / size) + bias, beta)


@converter("MeanVarianceNormalization", 9)
def _mvn(ctx, x):
    x = ctx.tensor(x)
    axes = ctx.attr("axes", [0, 2, 3])
    axes = tuple(sorted({axis(a, x.ndim, ctx) for a in axes}))
    # ONNX's function: (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9)
    mean = E.mean(x, axes, keepdim=True)
    # (rounding can make the difference slightly negative where the variance is ~0)
    variance = E.clamp(E.mean(x * x, axes, keepdim=True) - mean * mean, 0.0)
    return (x - mean) / (E.sqrt(variance) + 1e-9)


@converter("LpNormalization", 1)
def _lp_normalization(ctx, x):
    x = ctx.tensor(x)
    dim = axis(ctx.attr("axis", -1), x.ndim, ctx)
    p = int(ctx.attr("p", 2))
    if p == 1:
        norm = E.sum(E.abs(x), dim, keepdim=True)
    elif p == 2:
        norm = E.sqrt(E.sum(x * x, dim, keepdim=True))
    else:
        raise ctx.error(f"p must be 1 or 2, got {p}")
    # a zero norm gives zeros (as onnx's reference), not 0 / 0
    zero = norm == 0
    return E.where(zero, E.zeros_like(x), x / E.where(zero, E.ones_like(norm), norm))
