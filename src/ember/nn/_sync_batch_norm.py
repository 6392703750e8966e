"""SyncBatchNorm's training step across ranks: batch statistics over the global batch.

Each rank sends its per-channel (count, mean, sum of squared deviations) in one allgather and
combines them with the parallel-variance formula (Chan et al.), which keeps the precision of a
two-pass variance; the running statistics take the global mean and the unbiased global variance,
as PyTorch's do. Backward all-reduces the two per-channel sums the input's gradient needs
(sum of dy, sum of dy·x̂), so each rank's input gradient is exactly its rows of the gradient over
the global batch; the weight and bias gradients stay local (DistributedDataParallel averages
them)."""

from __future__ import annotations

import numpy as np

from ..autograd_function import Function
from ..distributed import collectives as C
from ..tensor import Tensor


def _shape(x: np.ndarray) -> tuple:
    return (1, x.shape[1]) + (1,) * (x.ndim - 2)


class SyncBatchNormFunction(Function):
    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, eps, momentum, group):
        a = x._data
        channels = a.shape[1]
        axes = (0,) + tuple(range(2, a.ndim))
        wide = a.astype(np.float64)
        n = a.size // channels if channels else 0
        mean_l = wide.mean(axis=axes) if n else np.zeros(channels)
        m2_l = ((wide - mean_l.reshape(_shape(a))) ** 2).sum(axis=axes)
        mine = np.concatenate([[float(n)], mean_l, m2_l])
        table = np.empty((group.size(), mine.size), dtype=np.float64)
        all_rows = [Tensor._wrap(row) for row in table]
        C.all_gather(all_rows, Tensor._wrap(mine), group)
        counts, means, m2s = table[:, :1], table[:, 1 : 1 + channels], table[:, 1 + channels :]
        total = counts.sum()
        mean = (counts * means).sum(axis=0) / total
        m2 = (m2s + counts * (means - mean) ** 2).sum(axis=0)
        var = m2 / total
        invstd = 1.0 / np.sqrt(var + eps)
        xhat = (wide - mean.reshape(_shape(a))) * invstd.reshape(_shape(a))
        y = xhat
        if weight is not None:
            y = y * weight._data.astype(np.float64).reshape(_shape(a))
        if bias is not None:
            y = y + bias._data.astype(np.float64).reshape(_shape(a))
        if running_mean is not None:
            rm, rv = running_mean._data, running_var._data
            rm[...] = (1 - momentum) * rm + momentum * mean
            unbiased = m2 / max(total - 1, 1)
            rv[...] = (1 - momentum) * rv + momentum * unbiased
            running_mean._vc[0] += 1
            running_var._vc[0] += 1
        ctx.xhat, ctx.invstd, ctx.total, ctx.group = xhat, invstd, total, group
        ctx.has_weight = weight is not None
        ctx.has_bias = bias is not None
        ctx.save_for_backward(weight)
        return Tensor._wrap(y.astype(a.dtype))

    @staticmethod
    def backward(ctx, dy):
        (weight,) = ctx.saved_tensors
        g = dy._data.astype(np.float64)
        xhat = ctx.xhat
        axes = (0,) + tuple(range(2, g.ndim))
        sum_dy = g.sum(axis=axes)
        sum_dy_xhat = (g * xhat).sum(axis=axes)
        both = np.concatenate([sum_dy, sum_dy_xhat])
        C.all_reduce(Tensor._wrap(both), C.ReduceOp.SUM, ctx.group)
        channels = sum_dy.size
        shape = _shape(g)
        mean_dy = (both[:channels] / ctx.total).reshape(shape)
        mean_dy_xhat = (both[channels:] / ctx.total).reshape(shape)
        scale = ctx.invstd.reshape(shape)
        if weight is not None:
            scale = scale * weight._data.astype(np.float64).reshape(shape)
        dx = scale * (g - mean_dy - xhat * mean_dy_xhat)
        dtype = dy._data.dtype
        dw = Tensor._wrap(sum_dy_xhat.astype(dtype)) if ctx.has_weight else None
        db = Tensor._wrap(sum_dy.astype(dtype)) if ctx.has_bias else None
        return Tensor._wrap(dx.astype(dtype)), dw, db, None, None, None, None, None


def sync_batch_norm_ops(x, weight, bias, running_mean, running_var, eps, momentum, group):
    """The same training step in ember ops with the collective ops (distributed/functional.py),
    which is how a captured step (``ember.function``) records it: the count and per-channel sums
    in one all-reduce, then the sums of squared deviations from the global mean in a second
    (a two-pass variance, in float64 as above). Its gradient is graph autodiff's: the VJP of an
    all-reduce sum all-reduces the cotangents, which are the two per-channel sums above."""
    from .. import dtypes as dt
    from ..distributed import functional as F
    from ..grad_mode import no_grad
    from ..ops.concat import concat
    from ..ops.creation import full

    channels = x.shape[1]
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, channels) + (1,) * (x.ndim - 2)
    wide = x.to(dt.float64)
    n = x.numel() // channels if channels else 0
    count = full((1,), float(n), dtype=dt.float64)
    first = F.all_reduce(concat([count, wide.sum(dim=axes)]), "sum", group)
    total = first[0]
    mean = first[1:] / total
    centered = wide - mean.reshape(shape)
    m2 = F.all_reduce((centered * centered).sum(dim=axes), "sum", group)
    invstd = (m2 / total + eps).rsqrt()
    y = centered * invstd.reshape(shape)
    if weight is not None:
        y = y * weight.to(dt.float64).reshape(shape)
    if bias is not None:
        y = y + bias.to(dt.float64).reshape(shape)
    if running_mean is not None:
        with no_grad():
            unbiased = m2 / (total - 1).clamp(min=1)
            new_mean = running_mean * (1 - momentum) + (mean * momentum).to(running_mean.dtype)
            new_var = running_var * (1 - momentum) + (unbiased * momentum).to(running_var.dtype)
            running_mean.copy_(new_mean)
            running_var.copy_(new_var)
    return y.to(x.dtype)
