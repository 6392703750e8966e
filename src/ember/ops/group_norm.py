"""Group normalization with its per-channel affine as one op each way (diffusion U-Nets',
detection heads' and small-batch ResNets' norm).

* ``group_norm(x, weight, bias; groups, eps)``: x is (N, C, *spatial); each sample's channels
  split into ``groups`` groups of ``C / groups``, each group normalized over its channels and
  positions, then ``* weight[c] + bias[c]``. The formula is PyTorch's CPU kernel's:
  ``(x - mean) * rstd * w[c] + b[c]`` with ``rstd = 1 / sqrt(var + eps)`` (the biased
  variance), mean and variance accumulated in double.
* ``group_norm_backward(x, weight, g; groups, eps)`` gives ``(dx, dweight, dbias)``, recomputing
  each group's statistics (cheaper than saving them: the group is read anyway).

As a composite (a reshape, layer norm per group, then the affine as two broadcast ops) it ran
six passes forward and nine backward: several times PyTorch's time eagerly. The C kernels
(kernels/cgroup_norm.py) run one or two passes each way. The backward op's own VJP (the second
derivative, for gradient penalties through a GroupNorm critic) is written with layer norm's
ops on the groups, so gradients of gradients follow layer norm's proven rule. Half precision
is computed in float32 and rounded once.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from ..errors import ShapeError
from ..types import TensorType
from . import _batching
from . import api as E
from ._norm_act_common import _compute_dtype
from ._registry import OpDef, apply, register
from ._rules import Layout
from ._util import elementwise_cost, fmt_shape, require_float, require_same_dtype, value_bytes
from .layer_norm import LAYER_NORM, LAYER_NORM_BACKWARD, _norm_grad_vjp, _stats


def _check(op: str, x, weight, groups) -> None:
    if len(x.shape) < 2:
        raise ShapeError(f"expected an input of shape (N, C, ...), got {fmt_shape(x.shape)}", op=op)
    c = x.shape[1]
    if not isinstance(groups, int) or isinstance(groups, bool) or groups <= 0:
        raise ShapeError(f"groups must be a positive int, got {groups!r}", op=op)
    if isinstance(c, int) and c % groups:
        raise ShapeError(
            f"the {c} channels of an input of shape {fmt_shape(x.shape)} cannot be split into "
            f"{groups} groups",
            op=op,
        )
    if tuple(weight.shape) != (c,):
        raise ShapeError(
            f"weight and bias must have shape ({c},) for an input of shape "
            f"{fmt_shape(x.shape)}, got {fmt_shape(weight.shape)}",
            op=op,
        )


def _check_eps(op: str, eps) -> None:
    # (any float, as PyTorch's: a negative eps below a group's variance gives NaN there)
    if not isinstance(eps, float):
        raise ShapeError(f"eps must be a float, got {eps!r}", op=op)


def _gn_infer(x, weight, bias, *, groups, eps):
    require_float("group_norm", x, weight, bias)
    require_same_dtype("group_norm", x, weight, bias)
    _check("group_norm", x, weight, groups)
    _check("group_norm", x, bias, groups)
    _check_eps("group_norm", eps)
    return TensorType(tuple(x.shape), x.dtype)


def _gn_grad_infer(x, weight, g, *, groups, eps):
    _gn_infer(x, weight, weight, groups=groups, eps=eps)
    require_same_dtype("group_norm_backward", x, g)
    if tuple(g.shape) != tuple(x.shape):
        raise ShapeError(
            f"the gradient {fmt_shape(g.shape)} must have the input's shape {fmt_shape(x.shape)}",
            op="group_norm_backward",
        )
    w = TensorType(tuple(weight.shape), x.dtype)
    return TensorType(tuple(x.shape), x.dtype), w, w


def _normalized(x, groups, eps):
    """(x as (N, groups, K) in the compute dtype, its mean and rstd (N, groups, 1), xhat)."""
    n = x.shape[0]
    v = x.reshape(n, groups, -1).astype(_compute_dtype(x), copy=False)
    k = v.shape[2]
    mean, rstd = _stats(v.reshape(n * groups, k), eps)
    mean, rstd = mean.reshape(n, groups, 1), rstd.reshape(n, groups, 1)
    return v, mean, rstd, (v - mean) * rstd


def _channels(a, x):
    """A (C,) array as (1, C, 1) in x's compute dtype (x read as (N, C, spatial))."""
    return a.reshape(1, -1, 1).astype(_compute_dtype(x), copy=False)


@np.errstate(invalid="ignore", over="ignore")  # NaN and inf as the formula gives them
def _gn_kernel(x, weight, bias, *, groups, eps):
    if x.size == 0:
        return np.empty_like(x)
    n, c = x.shape[:2]
    _, _, _, xhat = _normalized(x, groups, eps)
    y = xhat.reshape(n, c, -1) * _channels(weight, x) + _channels(bias, x)
    return y.reshape(x.shape).astype(x.dtype, copy=False)


@np.errstate(invalid="ignore", over="ignore")
def _gn_grad_kernel(x, weight, g, *, groups, eps):
    if x.size == 0:
        zeros = np.zeros(weight.shape, dtype=x.dtype)
        return np.empty_like(x), zeros, zeros.copy()
    n, c = x.shape[:2]
    v, _, rstd, xhat = _normalized(x, groups, eps)
    k = v.shape[2]
    gr = g.reshape(n, c, -1).astype(v.dtype, copy=False)
    u = (_channels(weight, x) * gr).reshape(n, groups, k)
    mu = (u.astype(np.float64).sum(axis=2, keepdims=True) / k).astype(v.dtype)
    mux = ((u * xhat).astype(np.float64).sum(axis=2, keepdims=True) / k).astype(v.dtype)
    dx = rstd * ((u - mu) - xhat * mux)
    per_channel = (gr * xhat.reshape(n, c, -1)).astype(np.float64)
    dw = per_channel.sum(axis=(0, 2))
    db = gr.astype(np.float64).sum(axis=(0, 2))
    return (
        dx.reshape(x.shape).astype(x.dtype, copy=False),
        dw.astype(x.dtype),
        db.astype(x.dtype),
    )


def _gn_fast(x, weight, bias, *, groups, eps):
    from ..kernels import cgroup_norm

    return cgroup_norm.group_norm(x, weight, bias, groups, eps)


def _gn_grad_fast(x, weight, g, *, groups, eps):
    from ..kernels import cgroup_norm

    return cgroup_norm.group_norm_backward(x, weight, g, groups, eps)


def _gn_batch(in_types, axes, attrs, k):
    """group_norm: each sample's groups are its own, so the batch on x's leading axis passes
    through; the weight and bias must not depend on it."""
    x_axis, w_axis, b_axis = axes
    if x_axis != 0 or w_axis is not None or b_axis is not None:
        raise _batching.NotBatchable("group_norm: the batch must be the input's leading axis")
    return _batching.Batched((0,), attrs)


def _gn_grad_batch(in_types, axes, attrs, k):
    """group_norm_backward: dx keeps the batch, dweight and dbias are partial sums."""
    x_axis, w_axis, g_axis = axes
    if x_axis != 0 or g_axis != 0 or w_axis is not None:
        raise _batching.NotBatchable("group_norm_backward: x and g must carry the batch first")
    return _batching.Batched((0, None, None), attrs)


def _gn_vjp(c, g):
    x, weight, _ = c.inputs
    return apply(GROUP_NORM_BACKWARD, x, weight, g, **c.attrs)


def _channel_view(v, ndim):
    return E.reshape(v, (-1,) + (1,) * (ndim - 2))


def _gn_grad_vjp(c, a, bw, bb):
    """The VJP of (dx, dw, db) = group_norm_backward(x, w, g) for cotangents (a, bw, bb).

    On the groups (N, G, K) with unit weights, ``dx = layer_norm_backward(x, 1, u)[0]`` for
    ``u = w[c] g``, so its VJP is layer norm's second derivative (ops/layer_norm.py) on the
    groups, carried back through u to g and w. ``dw = sum g xhat`` and ``db = sum g`` are
    bilinear and linear: ``xhat bw[c] + bb[c]`` towards g, and towards x the VJP of
    ``xhat = layer_norm(x, 1, 0)`` for the cotangent ``g bw[c]``."""
    x, w, g = c.inputs
    groups, eps = c.attrs["groups"], c.attrs["eps"]
    nd = len(x.shape)
    n = x.shape[0]
    k = math.prod(x.shape[1:]) // groups
    grouped = (n, groups, k)
    unit = E.ones((k,), dtype=x.dtype)
    zero = E.zeros((k,), dtype=x.dtype)
    wv = _channel_view(w, nd)
    xg = E.reshape(x, grouped)
    dx_total, dg_total, dw_total = None, None, None

    def add(total, term):
        return term if total is None else total + term

    if a is not None:  # through dx = rstd P(u) on the groups
        inner = SimpleNamespace(inputs=(xg, unit, E.reshape(g * wv, grouped)), attrs={"eps": eps})
        dxg, _, dug = _norm_grad_vjp(inner, E.reshape(a, grouped), zero, zero)
        du = E.reshape(dug, x.shape)
        dx_total = E.reshape(dxg, x.shape)
        dg_total = du * wv
        dw_total = E.sum(du * g, (0, *range(2, nd)))
    if bw is not None or bb is not None:
        xhat = E.reshape(apply(LAYER_NORM, xg, unit, zero, eps=eps), x.shape)
        if bw is not None:
            bwv = _channel_view(bw, nd)
            dg_total = add(dg_total, xhat * bwv)
            toward_x = E.reshape(g * bwv, grouped)
            dx_total = add(
                dx_total,
                E.reshape(apply(LAYER_NORM_BACKWARD, xg, unit, toward_x, eps=eps)[0], x.shape),
            )
        if bb is not None:
            dg_total = add(dg_total, E.broadcast_to(_channel_view(bb, nd), x.shape))
    return dx_total, dw_total, dg_total


def _gn_workspace(node, layouts) -> int:
    """The C kernels: none beyond the results (the backward's per-block dweight and dbias
    sums are a few rows of doubles). NumPy's: the input's groups in double with their centred
    values and squares for the statistics, and the normalized values: four input sizes in
    double."""
    x = node.inputs[0]
    from ..kernels import cgroup_norm

    if cgroup_norm.available(x.dtype.np):
        return 0
    return 4 * value_bytes(x) * max(8 // x.dtype.itemsize, 1)


# ---------------------------------------------------------------------------------- ONNX


def _onnx_normalized_groups(e, x, groups: int, eps: float):
    """(rstd, xhat) over each sample's groups, as (N, groups, K) tensors."""
    from ._onnx import reduce

    xg = e.node("Reshape", [x, e.ints([0, groups, -1])])
    centred = e.node("Sub", [xg, reduce(e, "ReduceMean", xg, [2], True)])
    var = reduce(e, "ReduceMean", e.node("Mul", [centred, centred]), [2], True)
    eps_c = e.scalar(eps, e.in_types[0].dtype)
    rstd = e.node("Reciprocal", [e.node("Sqrt", [e.node("Add", [var, eps_c])])])
    return rstd, e.node("Mul", [centred, rstd])


def _onnx_channel(e, v, nd: int):
    return e.node("Reshape", [v, e.ints([-1] + [1] * (nd - 2))])


def _onnx_group_norm(e):
    x, weight, bias = e.inputs
    nd = len(e.in_types[0].shape)
    _, xhat = _onnx_normalized_groups(e, x, e.attrs["groups"], float(e.attrs["eps"]))
    y = e.node("Reshape", [xhat, e.node("Shape", [x])])
    y = e.node("Mul", [y, _onnx_channel(e, weight, nd)])
    return e.node("Add", [y, _onnx_channel(e, bias, nd)])


def _onnx_group_norm_backward(e):
    from ._onnx import reduce

    x, weight, g = e.inputs
    nd = len(e.in_types[0].shape)
    groups = e.attrs["groups"]
    rstd, xhat = _onnx_normalized_groups(e, x, groups, float(e.attrs["eps"]))
    shape = e.node("Shape", [x])
    u = e.node(
        "Reshape", [e.node("Mul", [g, _onnx_channel(e, weight, nd)]), e.ints([0, groups, -1])]
    )
    mu = reduce(e, "ReduceMean", u, [2], True)
    mux = reduce(e, "ReduceMean", e.node("Mul", [u, xhat]), [2], True)
    inner = e.node("Sub", [e.node("Sub", [u, mu]), e.node("Mul", [xhat, mux])])
    dx = e.node("Reshape", [e.node("Mul", [rstd, inner]), shape])
    axes = [0, *range(2, nd)]
    dw = reduce(e, "ReduceSum", e.node("Mul", [g, e.node("Reshape", [xhat, shape])]), axes, False)
    db = reduce(e, "ReduceSum", g, axes, False)
    return dx, dw, db


GROUP_NORM_BACKWARD = register(
    OpDef(
        name="group_norm_backward",
        layout=Layout((0, 1)),  # (channels-last in, out: PyTorch's)
        onnx=_onnx_group_norm_backward,
        kind="nn",
        infer=_gn_grad_infer,
        kernel=_gn_grad_kernel,
        fast=_gn_grad_fast,
        vjp=_gn_grad_vjp,
        cost=elementwise_cost(14),
        num_outputs=3,
        workspace=_gn_workspace,
        batch=_gn_grad_batch,
        doc="group_norm_backward(x, weight, g; groups, eps): (dx, dweight, dbias) of group_norm",
    )
)

GROUP_NORM = register(
    OpDef(
        name="group_norm",
        layout=Layout((0,)),  # (channels-last in, out: PyTorch's)
        grad_fn="NativeGroupNormBackward0",
        onnx=_onnx_group_norm,
        kind="nn",
        infer=_gn_infer,
        kernel=_gn_kernel,
        fast=_gn_fast,
        vjp=_gn_vjp,
        cost=elementwise_cost(8),
        save_inputs=(0, 1),
        workspace=_gn_workspace,
        batch=_gn_batch,
        doc="group_norm(x, weight, bias; groups, eps): each sample's channel groups normalized "
        "over their channels and positions, then * weight[c] + bias[c]",
    )
)
