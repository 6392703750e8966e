"""Batch normalization as three primitives (the functional ``batch_norm`` in
functional/normalization.py calls them; they are not public themselves):

* ``batch_norm_train(x, weight, bias; eps) -> (y, mean, var)``: the batch statistics of each
  channel (dimension 1) over the batch and spatial dimensions (``var`` biased) and
  ``y = (x - mean) / sqrt(var + eps) * weight + bias``;
* ``batch_norm_backward(gy, gmean, gvar, x, mean, var, weight; eps) -> (gx, gweight, gbias)``:
  its VJP in one op. The cotangents of the statistics enter as per-channel terms of the same
  pass (``gmean / n`` and ``2 gvar (x - mean) / n``), so a caller that only updates running
  buffers with them pays nothing for them. Its own VJP, in ember ops, gives a training-mode
  batch norm second derivatives;
* ``batch_norm_eval(x, mean, var, weight, bias; eps) -> y``: the per-channel affine with given
  statistics, its VJP in ember ops (so it is differentiable any number of times).

The per-channel operands share one dtype: the input's, or float32 beside a float16/bfloat16
input (PyTorch's mixed-type kernels, which autocast's CNNs meet: float32 parameters, 16-bit
activations). Then the statistics and the parameters' gradients are float32, the result and
the input's gradient 16-bit, each rounded once, and no float32 copy of the activation exists.

The NumPy kernels are the specification: statistics and the affine in float64, the result
rounded to the input's dtype, the statistics to the per-channel dtype. kernels/cbatchnorm.py is
the ``fast`` rule of each.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import ShapeError
from ..types import TensorType
from . import _batching, _onnx
from . import api as E
from ._half import HALF
from ._registry import Cost, OpDef, apply, register
from ._rules import Layout
from ._util import fmt_shape, io_bytes, numel, require_float, value_bytes

HALF_TYPES = (dt.float16, dt.bfloat16)
_HALF_NP = tuple(np.dtype(t.np) for t in HALF_TYPES)


def _compiled():
    if not _LOADED:  # (imported on first use; every eager batch norm passes here)
        from ..kernels import cbatchnorm

        _LOADED.append(cbatchnorm)
    return _LOADED[0]


_LOADED: list = []


def _numpy_workspace(x_input: int, arrays: int):
    """A workspace rule: the C kernels allocate only their results (and a few per-channel
    rows); the NumPy kernels compute in float64, with ``arrays`` input-sized float64 arrays
    alive at their peak (forward: the copy, its centred values and their squares or the
    result; backward: the gradient's and the normalized input's copies and two terms), which in
    half precision is sixteen times the input's own size."""

    def workspace(node, layouts) -> int:
        x = node.inputs[x_input]
        if _compiled().available(x.dtype.np):
            return 0
        return arrays * (value_bytes(x) // max(x.dtype.itemsize, 1)) * 8

    return workspace


def _axes(ndim: int) -> tuple:
    return (0,) + tuple(range(2, ndim))


def _view(a: np.ndarray, ndim: int) -> np.ndarray:
    return a.reshape((-1,) + (1,) * (ndim - 2))


def _check(op: str, x, *per_channel):
    """Validate the operands; the per-channel dtype (x's, or float32 beside 16-bit x)."""
    if x.ndim < 2:
        raise ShapeError(f"expected (N, C, ...), got shape {fmt_shape(x.shape)}", op=op)
    require_float(op, x, *per_channel)
    channel = per_channel[0].dtype if per_channel else x.dtype
    if channel != x.dtype and not (x.dtype in HALF_TYPES and channel == dt.float32):
        channel = x.dtype  # (reported below as a mismatch with the input's dtype)
    for p in per_channel:
        if tuple(p.shape) != (x.shape[1],) or p.dtype != channel:
            raise ShapeError(
                f"per-channel operand of shape {fmt_shape(p.shape)} and dtype {p.dtype} must be "
                f"({x.shape[1]},) in {channel} (all per-channel operands in the input's dtype "
                f"{x.dtype}{', or all float32' if x.dtype in HALF_TYPES else ''})",
                op=op,
            )
    return channel


def _whole_batch(in_types, axes, attrs, k):
    """Batch rule of the training ops: per-channel statistics over the batch, so no slice of the
    batch gives the whole batch's result. Run whole, the first output (y or gx) holds the batch
    on axis 0 and the per-channel ones are batch-free."""
    raise _batching.NotBatchable(
        "its per-channel statistics are computed from the whole batch; slices would "
        "normalize by their own",
        out_axes=(0, None, None) if _per_sample_on_0(axes) else None,
    )


def _per_sample_on_0(axes) -> bool:
    """The batch only on axis 0 of the (N, C, ...) operands (x, and the backward's gy)."""
    samples = (0, 3) if len(axes) == 7 else (0,)
    return all(a is None or (i in samples and a == 0) for i, a in enumerate(axes))


def _cost(flops_per_element: int):
    def cost(in_types, out_types, attrs) -> Cost:
        return Cost(flops_per_element * numel(in_types[0].shape), io_bytes(in_types, out_types))

    return cost


# ------------------------------------------------------------------------------- training


def _train_infer(x, weight, bias, *, eps):
    channel = _check("batch_norm_train", x, weight, bias)
    c = TensorType((x.shape[1],), channel)
    return TensorType(tuple(x.shape), x.dtype), c, c


def _train_kernel(x, weight, bias, *, eps):
    axes = _axes(x.ndim)
    xd = x.astype(np.float64)
    mean = xd.mean(axis=axes)
    centred = xd - _view(mean, x.ndim)
    var = np.mean(centred * centred, axis=axes)
    scale = weight.astype(np.float64) / np.sqrt(var + eps)
    y = centred * _view(scale, x.ndim) + _view(bias.astype(np.float64), x.ndim)
    return y.astype(x.dtype), mean.astype(weight.dtype), var.astype(weight.dtype)


def _train_fast(x, weight, bias, *, eps):
    return _compiled().train_forward(x, weight, bias, eps)


def _train_vjp(ctx, gy, gmean, gvar):
    x, weight, _ = ctx.inputs
    _, mean, var = ctx.outputs
    gx, gw, gb = apply(BATCH_NORM_BACKWARD, gy, gmean, gvar, x, mean, var, weight, **ctx.attrs)
    nx, nw, nb = ctx.needs_input_grad
    return gx if nx else None, gw if nw else None, gb if nb else None


# ------------------------------------------------------------------------------- backward


def _backward_infer(gy, gmean, gvar, x, mean, var, weight, *, eps):
    channel = _check("batch_norm_backward", x, gmean, gvar, mean, var, weight)
    if tuple(gy.shape) != tuple(x.shape) or gy.dtype != x.dtype:
        raise ShapeError(
            f"output gradient of shape {fmt_shape(gy.shape)} and dtype {gy.dtype} must match "
            f"the input's {fmt_shape(x.shape)} and {x.dtype}",
            op="batch_norm_backward",
        )
    c = TensorType((x.shape[1],), channel)
    return TensorType(tuple(x.shape), x.dtype), c, c


def _backward_kernel(gy, gmean, gvar, x, mean, var, weight, *, eps):
    axes, nd = _axes(x.ndim), x.ndim
    n = x.size // max(x.shape[1], 1)
    g = gy.astype(np.float64)
    invstd = 1.0 / np.sqrt(var.astype(np.float64) + eps)
    xhat = (x.astype(np.float64) - _view(mean.astype(np.float64), nd)) * _view(invstd, nd)
    gbias = g.sum(axis=axes)
    gweight = (g * xhat).sum(axis=axes)
    k = weight.astype(np.float64) * invstd
    gx = _view(k, nd) * (g - _view(gbias / n, nd) - xhat * _view(gweight / n, nd))
    # the statistics' own cotangents: d mean / dx = 1 / n, d var / dx = 2 (x - mean) / n
    gx += _view(gmean.astype(np.float64) / n, nd)
    gx += xhat * _view(2.0 * gvar.astype(np.float64) / (n * invstd), nd)
    return gx.astype(x.dtype), gweight.astype(weight.dtype), gbias.astype(weight.dtype)


def _backward_fast(gy, gmean, gvar, x, mean, var, weight, *, eps):
    used = gmean.any() or gvar.any()  # (rare: the statistics are used beyond the running buffers)
    if used and x.dtype in _HALF_NP:  # (16 bits: the NumPy kernel rounds the sum once)
        return None
    found = _compiled().train_backward(gy, x, mean, var, weight, eps)
    if found is None:
        return None
    gx, gw, gb = found
    if used:
        nd = x.ndim
        n = x.size // max(x.shape[1], 1)
        shift = gmean.astype(np.float64) / n - 2.0 * gvar * mean.astype(np.float64) / n
        gx += (_view(shift, nd) + x * _view(2.0 * gvar.astype(np.float64) / n, nd)).astype(x.dtype)
    return gx, gw, gb


def _backward_vjp(ctx, u, alpha, beta):
    """The VJP of ``batch_norm_backward`` (so a training-mode batch norm, and instance norm
    through it, has second derivatives, as PyTorch's: a gradient penalty). With r = x - mean,
    s = 1 / sqrt(var + eps), n values per channel, sums per channel over the other axes and
    A = sum(gy r), its outputs are gb = sum(gy), gw = s A and
    gx = w s (gy - gb / n) - w s^3 A r / n + gmean / n + 2 gvar r / n. Given the cotangents
    u, alpha, beta of (gx, gw, gb), with U = sum(u), V = sum(u r), P = sum(u gy),
    cg = alpha s - w s^3 V / n and cu = 2 gvar / n - w s^3 A / n:
    d gy = w s (u - U / n) + cg r + beta, d x = cg gy + cu u, d mean = -(cg gb + cu U),
    d var = -s^3 / 2 (w P - w gb U / n - 3 w s^2 A V / n + alpha A),
    d w = s P - s gb U / n - s^3 A V / n, d gmean = U / n, d gvar = 2 V / n."""
    gy, _, gvar, x, mean, var, weight = ctx.inputs
    ngy, ngmean, ngvar, nx, nmean, nvar, nw = ctx.needs_input_grad
    nd = len(ctx.in_types[3].shape)
    axes = _axes(nd)
    x_dtype = ctx.in_types[3].dtype
    shape = tuple(ctx.in_types[3].shape)
    n = float(numel(shape) // max(shape[1], 1))

    def view(t):
        return E.reshape(t, (t.shape[0],) + (1,) * (nd - 2))

    def wide(t):  # (16-bit data beside float32 parameters: the terms in float32)
        return E.cast(t, weight.dtype) if weight.dtype != x_dtype else t

    zeros = E.zeros_like(weight)
    gy, x = wide(gy), wide(x)
    u = E.zeros_like(x) if u is None else wide(u)
    alpha = zeros if alpha is None else alpha
    beta = zeros if beta is None else beta
    s = E.rsqrt(var + float(ctx.attrs["eps"]))
    s3 = s * s * s
    r = x - view(mean)
    gb, big_a = E.sum(gy, axes), E.sum(gy * r, axes)
    big_u, big_v, big_p = E.sum(u, axes), E.sum(u * r, axes), E.sum(u * gy, axes)
    cg = alpha * s - weight * s3 * big_v / n
    cu = gvar * (2.0 / n) - weight * s3 * big_a / n
    d_gy = d_x = d_mean = d_var = d_w = None
    if ngy:
        d_gy = E.cast(view(weight * s) * (u - view(big_u / n)) + r * view(cg) + view(beta), x_dtype)
    if nx:
        d_x = E.cast(view(cg) * gy + view(cu) * u, x_dtype)
    if nmean:
        d_mean = -(cg * gb + cu * big_u)
    if nvar:
        inner = weight * big_p - weight * gb * big_u / n - 3.0 * weight * s * s * big_a * big_v / n
        d_var = (inner + alpha * big_a) * (s3 * -0.5)
    if nw:
        d_w = s * big_p - s * gb * big_u / n - s3 * big_a * big_v / n
    d_gmean = big_u / n if ngmean else None
    d_gvar = big_v * (2.0 / n) if ngvar else None
    return d_gy, d_gmean, d_gvar, d_x, d_mean, d_var, d_w


# ------------------------------------------------------------------------------ evaluation


def _eval_infer(x, mean, var, weight, bias, *, eps):
    dtype, shape = x.dtype, tuple(x.shape)
    if len(shape) >= 2 and (dtype is dt.float32 or dtype is dt.float64):
        # (every eager inference BatchNorm: `_check`'s common case without its calls)
        channels = (shape[1],)
        for p in (mean, var, weight, bias):
            if p.dtype is not dtype or tuple(p.shape) != channels:
                break
        else:
            return TensorType(shape, dtype)
    _check("batch_norm_eval", x, mean, var, weight, bias)
    return TensorType(tuple(x.shape), x.dtype)


def _scale_shift(mean, var, weight, bias, eps):
    scale = weight.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
    return scale, bias.astype(np.float64) - mean.astype(np.float64) * scale


def _eval_kernel(x, mean, var, weight, bias, *, eps):
    scale, shift = _scale_shift(mean, var, weight, bias, eps)
    y = x.astype(np.float64) * _view(scale, x.ndim) + _view(shift, x.ndim)
    return y.astype(x.dtype)


def _eval_fast(x, mean, var, weight, bias, *, eps):
    found = _compiled().eval_normalize(x, mean, var, weight, bias, eps)
    if found is not None:  # (float32/float64: the terms in C, with _scale_shift's bits)
        return found
    scale, shift = _scale_shift(mean, var, weight, bias, eps)
    if x.dtype in HALF:  # (the 16-bit kernel takes the terms in double, as the reference)
        return _compiled().eval_forward(x, scale, shift)
    return _compiled().eval_forward(x, scale.astype(x.dtype), shift.astype(x.dtype))


def _eval_c_step(node):
    """The C graph runner's step (runtime/cgraph.py): the per-channel terms, then the affine."""
    x = node.inputs[0].type
    if any(v.dtype != x.dtype for v in (*node.inputs, *node.outputs)):
        return None
    return _compiled().eval_step(x.shape, x.dtype.np, float(node.attrs["eps"]))


def _train_c_step(node):
    """The C graph runner's step: `_train_fast`'s kernel (float32/float64, one dtype)."""
    x = node.inputs[0].type
    if any(v.dtype != x.dtype for v in (*node.inputs, *node.outputs)):
        return None
    return _compiled().train_step(x.shape, x.dtype.np, float(node.attrs["eps"]))


def _fold_c_step(node):
    """The C graph runner's step: the per-channel terms and the scaled weight in one pass."""
    w = node.inputs[0].type
    if any(v.dtype != w.dtype for v in (*node.inputs, *node.outputs)):
        return None
    a = node.attrs
    shifted = numel(node.inputs[5].type.shape) if len(node.inputs) > 5 else 0
    view = _fold_view(w.shape, a["groups"], a["axis"])[0]
    return _compiled().fold_step(view, a["axis"], w.dtype.np, float(a["eps"]), shifted)


def _eval_channel_affine(arrays, attrs):
    """The call as ``x * scale + shift`` per channel, when its statistics and affine parameters
    are constants (an inference graph's frozen batch norm)."""
    if any(a is None for a in arrays[1:]):
        return None
    scale, shift = _scale_shift(*arrays[1:], attrs["eps"])
    return 0, scale, shift


def _eval_channel_terms(in_types, attrs):
    """The call as ``x * scale + shift`` per channel whatever its statistics hold, folded into
    a producer's weight by one `batch_norm_fold` call (transforms/fold_affine_inputs.py: for
    statistics that are graph inputs, computed on every call)."""
    eps = float(attrs["eps"])

    def fold(weight, shift, inputs, groups, axis, shift_shape):
        _, mean, var, gamma, beta = inputs
        operands = (weight, mean, var, gamma, beta) + (() if shift is None else (shift,))
        layout = dict(groups=groups, axis=axis, shift_shape=tuple(shift_shape))
        return tuple(apply(BATCH_NORM_FOLD, *operands, eps=eps, **layout))

    return 0, fold


# ------------------------------------------------------------------------------ folding
# batch_norm_fold: an inference batch norm folded into the weight of the call before it, as
# transforms/fold_affine_inputs.py emits it: one node computing the scaled weight and the shift
# from the statistics on every call (its cost is one pass over the weight).


def _fold_view(w_shape, groups, axis):
    """The weight seen as (groups, rows / groups, ...) and the scale's shape against it."""
    view = (groups, w_shape[0] // groups) + tuple(w_shape[1:])
    scale = [1] * len(view)
    scale[0], scale[axis + 1] = groups, view[axis + 1]
    return view, tuple(scale)


def _fold_infer(w, mean, var, weight, bias, shift=None, *, eps, groups, axis, shift_shape):
    require_float("batch_norm_fold", w, mean, var, weight, bias)
    ok = (
        w.ndim >= 1
        and groups >= 1
        and 0 <= axis < w.ndim
        and isinstance(w.shape[0], int)
        and w.shape[0] % groups == 0
    )
    view = _fold_view(w.shape, groups, axis)[0] if ok else ()
    c = groups * view[axis + 1] if ok else -1
    same = all(tuple(p.shape) == (c,) and p.dtype == w.dtype for p in (mean, var, weight, bias))
    if not ok or not same or numel(shift_shape) != c:
        raise ShapeError(
            f"weight of shape {fmt_shape(w.shape)} (groups {groups}, axis {axis}) does not fit "
            f"per-channel operands of shape {fmt_shape(mean.shape)} (the weight's dtype) and "
            f"shift shape {shift_shape}",
            op="batch_norm_fold",
        )
    if shift is not None and (shift.dtype != w.dtype or numel(shift.shape) not in (1, c)):
        raise ShapeError(
            f"shift of shape {fmt_shape(shift.shape)} must have {c} elements",
            op="batch_norm_fold",
        )
    return TensorType(tuple(w.shape), w.dtype), TensorType(tuple(shift_shape), w.dtype)


def _fold_kernel(w, mean, var, weight, bias, shift=None, *, eps, groups, axis, shift_shape):
    # the per-channel terms in float64 as batch_norm_eval's; the weight's product in one pass
    # in its own dtype (the scale rounded, then the product: two roundings of each weight), in
    # float32 for half precision (rounded once more at the end)
    scale, t = _scale_shift(mean, var, weight, bias, eps)
    if shift is not None:
        t = t + np.broadcast_to(shift.astype(np.float64).reshape(-1), scale.shape) * scale
    view, scale_view = _fold_view(w.shape, groups, axis)
    wide = np.promote_types(w.dtype, np.float32)
    folded = np.multiply(w.reshape(view), scale.astype(wide).reshape(scale_view))
    return folded.reshape(w.shape).astype(w.dtype, copy=False), t.reshape(shift_shape).astype(
        w.dtype
    )


def _fold_cost(in_types, out_types, attrs) -> Cost:
    flops = numel(in_types[0].shape) + 6 * numel(in_types[1].shape)
    return Cost(flops, io_bytes(in_types, out_types))


def _fold_workspace(node, layouts) -> int:
    # a weight that is not contiguous is copied by the reshape
    w = node.inputs[0]
    return 0 if layouts.contiguous(w) else value_bytes(w)


def _eval_vjp(ctx, gy):
    x, mean, var, weight, _ = ctx.inputs
    nx, nmean, nvar, nw, nb = ctx.needs_input_grad
    nd = len(ctx.in_types[0].shape)
    axes = _axes(nd)

    def view(t):
        return E.reshape(t, (t.shape[0],) + (1,) * (nd - 2))

    x_dtype = ctx.in_types[0].dtype
    if weight.dtype != x_dtype:  # (16-bit data, float32 parameters: their gradients float32)
        gy, x = E.cast(gy, weight.dtype), E.cast(x, weight.dtype)
    invstd = E.rsqrt(var + float(ctx.attrs["eps"]))
    scale = weight * invstd
    gx = E.cast(gy * view(scale), x_dtype) if nx else None
    gb = E.sum(gy, axes) if (nb or nmean) else None
    gyc = E.sum(gy * (x - view(mean)), axes) if (nw or nvar) else None
    gw = gyc * invstd if nw else None
    gmean = -gb * scale if nmean else None
    gvar = gyc * weight * (invstd * invstd * invstd) * -0.5 if nvar else None
    return gx, gmean, gvar, gw, gb if nb else None


def _onnx_channel_view(e, v, ndim):
    return e.node("Reshape", [v, e.ints([1, -1] + [1] * (ndim - 2))])


def _onnx_widened(e, x, data, channel):
    """``x`` cast to the per-channel dtype where it differs (16-bit data beside float32
    parameters: computed in float32, each result rounded once by a Cast back)."""
    return x if data == channel else e.node("Cast", [x], to=e.dtype(channel))


def _onnx_narrowed(e, y, data, channel):
    return y if data == channel else e.node("Cast", [y], to=e.dtype(data))


def _onnx_batch_norm_train(e):
    x, weight, bias = e.inputs
    data, t = e.in_types[0].dtype, e.in_types[1]
    x = _onnx_widened(e, x, data, t.dtype)
    t = TensorType(tuple(e.in_types[0].shape), t.dtype)
    axes = [0] + list(range(2, len(t.shape)))
    mean = _onnx.reduce(e, "ReduceMean", x, axes, False)
    centered = e.node("Sub", [x, _onnx_channel_view(e, mean, len(t.shape))])
    var = _onnx.reduce(e, "ReduceMean", e.node("Mul", [centered, centered]), axes, False)
    eps = _onnx.scalar(e, e.attrs["eps"], t.dtype)
    invstd = e.node("Reciprocal", [e.node("Sqrt", [e.node("Add", [var, eps])])])
    scale = _onnx_channel_view(e, e.node("Mul", [invstd, weight]), len(t.shape))
    y = e.node("Add", [e.node("Mul", [centered, scale]), _onnx_channel_view(e, bias, len(t.shape))])
    return _onnx_narrowed(e, y, data, t.dtype), mean, var


BATCH_NORM_TRAIN = register(
    OpDef(
        name="batch_norm_train",
        layout=Layout((0,)),  # (channels-last in, out: PyTorch's)
        grad_fn="NativeBatchNormBackward0",
        onnx=_onnx_batch_norm_train,
        kind="nn",
        infer=_train_infer,
        cached_infer=True,
        kernel=_train_kernel,
        fast=_train_fast,
        c_step=_train_c_step,
        vjp=_train_vjp,
        save_inputs=(0, 1),
        save_outputs=(1, 2),
        num_outputs=3,
        cost=_cost(7),
        workspace=_numpy_workspace(0, 3),
        batch=_whole_batch,
        doc="batch_norm_train(x, weight, bias; eps): (y, mean, biased var) of training-mode "
        "batch normalization over all dimensions but 1",
    )
)


def _onnx_batch_norm_backward(e):
    gy, gmean, gvar, x, mean, var, weight = e.inputs
    data, channel = e.in_types[3].dtype, e.in_types[6].dtype
    gy, x = (_onnx_widened(e, v, data, channel) for v in (gy, x))
    t = TensorType(tuple(e.in_types[3].shape), channel)
    nd = len(t.shape)
    axes = [0] + list(range(2, nd))
    count = e.node(
        "Div", [e.node("Size", [x]), e.node("Gather", [e.node("Shape", [x]), e.ints([1])])]
    )
    n = e.node("Cast", [count], to=e.dtype(t.dtype))
    eps = _onnx.scalar(e, e.attrs["eps"], t.dtype)
    invstd = e.node("Reciprocal", [e.node("Sqrt", [e.node("Add", [var, eps])])])
    xhat = e.node(
        "Mul",
        [e.node("Sub", [x, _onnx_channel_view(e, mean, nd)]), _onnx_channel_view(e, invstd, nd)],
    )
    gbias = _onnx.reduce(e, "ReduceSum", gy, axes, False)
    gweight = _onnx.reduce(e, "ReduceSum", e.node("Mul", [gy, xhat]), axes, False)
    k = _onnx_channel_view(e, e.node("Mul", [weight, invstd]), nd)
    inner = e.node(
        "Sub",
        [
            e.node("Sub", [gy, _onnx_channel_view(e, e.node("Div", [gbias, n]), nd)]),
            e.node("Mul", [xhat, _onnx_channel_view(e, e.node("Div", [gweight, n]), nd)]),
        ],
    )
    gx = e.node("Mul", [k, inner])
    gx = e.node("Add", [gx, _onnx_channel_view(e, e.node("Div", [gmean, n]), nd)])
    two = _onnx.scalar(e, 2, t.dtype)
    vterm = e.node("Div", [e.node("Mul", [two, gvar]), e.node("Mul", [n, invstd])])
    gx = e.node("Add", [gx, e.node("Mul", [xhat, _onnx_channel_view(e, vterm, nd)])])
    return _onnx_narrowed(e, gx, data, channel), gweight, gbias


BATCH_NORM_BACKWARD = register(
    OpDef(
        name="batch_norm_backward",
        layout=Layout((0, 1)),  # (channels-last in, out: PyTorch's)
        onnx=_onnx_batch_norm_backward,
        kind="nn",
        infer=_backward_infer,
        cached_infer=True,
        kernel=_backward_kernel,
        fast=_backward_fast,
        vjp=_backward_vjp,
        save_inputs=(0, 2, 3, 4, 5, 6),
        num_outputs=3,
        cost=_cost(9),
        workspace=_numpy_workspace(3, 4),
        batch=_whole_batch,
        doc="batch_norm_backward(gy, gmean, gvar, x, mean, var, weight; eps): (gx, gweight, "
        "gbias), the VJP of batch_norm_train",
    )
)


def _onnx_batch_norm_eval(e):
    x, mean, var, weight, bias = e.inputs
    data, channel = e.in_types[0].dtype, e.in_types[1].dtype
    x = _onnx_widened(e, x, data, channel)
    y = e.node("BatchNormalization", [x, weight, bias, mean, var], epsilon=float(e.attrs["eps"]))
    return _onnx_narrowed(e, y, data, channel)


BATCH_NORM_EVAL = register(
    OpDef(
        name="batch_norm_eval",
        layout=Layout((0,)),  # (channels-last in, out: PyTorch's)
        grad_fn="NativeBatchNormBackward0",
        onnx=_onnx_batch_norm_eval,
        kind="nn",
        infer=_eval_infer,
        cached_infer=True,
        kernel=_eval_kernel,
        fast=_eval_fast,
        vjp=_eval_vjp,
        channel_affine=_eval_channel_affine,
        c_step=_eval_c_step,
        channel_terms=_eval_channel_terms,
        cost=_cost(2),
        workspace=_numpy_workspace(0, 1),
        batch=_batching.per_sample(),
        doc="batch_norm_eval(x, mean, var, weight, bias; eps): the per-channel affine "
        "(x - mean) / sqrt(var + eps) * weight + bias over dimension 1",
    )
)


def _onnx_batch_norm_fold(e):
    w, mean, var, weight, bias, *shift = e.inputs
    a = e.attrs
    dtype = e.in_types[0].dtype
    w_shape = e.in_types[0].shape
    eps = _onnx.scalar(e, a["eps"], dtype)
    scale = e.node("Div", [weight, e.node("Sqrt", [e.node("Add", [var, eps])])])
    t = e.node("Sub", [bias, e.node("Mul", [mean, scale])])
    if shift:
        flat = e.node("Reshape", [shift[0], e.ints([-1])])
        t = e.node(
            "Add", [t, e.node("Mul", [e.node("Expand", [flat, e.node("Shape", [scale])]), scale])]
        )
    view, scale_view = _fold_view(w_shape, a["groups"], a["axis"])
    scaled = e.node(
        "Mul",
        [e.node("Reshape", [w, e.ints(view)]), e.node("Reshape", [scale, e.ints(scale_view)])],
    )
    folded = e.node("Reshape", [scaled, e.ints(w_shape)])
    return folded, e.node("Reshape", [t, e.shape(a["shift_shape"])])


BATCH_NORM_FOLD = register(
    OpDef(
        name="batch_norm_fold",
        onnx=_onnx_batch_norm_fold,
        kind="nn",
        infer=_fold_infer,
        kernel=_fold_kernel,
        c_step=_fold_c_step,
        num_outputs=2,
        cost=_fold_cost,
        workspace=_fold_workspace,
        batch=None,
        doc="batch_norm_fold(w, mean, var, weight, bias[, shift]; eps, groups, axis, "
        "shift_shape): (w scaled per output channel by weight / sqrt(var + eps), the shift "
        "bias - mean * scale [+ shift * scale]): an inference batch norm folded into the "
        "weight of the call before it (ChannelWeights' layout); no gradient",
    )
)
