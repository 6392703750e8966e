"""Cross-entropy with class-index targets as one op each way, for eager mode.

Eagerly, ``F.cross_entropy`` built of log_softmax, gather, masks and sums runs six to a dozen
ops forward and as many backward, each a Python dispatch, a tape entry and a NumPy pass; for
the small batches of a classifier that dispatch is most of the loss's time. These ops run one
C pass each way (kernels/ccross_entropy.py). In a graph ``F.cross_entropy`` keeps the
composite, whose loops the passes fuse.

``softmax_cross_entropy(x, target[, weight]; ignore_index, reduction, smoothing)`` follows
PyTorch: x is (C,) or (N, C, d1, ...) logits, target the class indices (x's shape without its
class dimension 1); per position i, kept unless ``target == ignore_index``, with class weights
w (1 without) and e = smoothing,

    loss_i = (1 - e) w[t_i] (-logp_i[t_i]) + e / C * sum_c w_c (-logp_i[c]),   0 if ignored,

reduced by 'none' (the per-position losses), 'sum', or 'mean' (divided by the kept positions'
total weight sum_i w[t_i]; NaN when every target is ignored, as in PyTorch). The targets and
the weights get no gradient. ``softmax_cross_entropy_backward(x, target[, weight], g)`` is
the gradient for x (see kernels/ccross_entropy.py for its formula); it has no VJP of its own:
the forward op's VJP writes the same gradient in ember ops wherever that gradient is itself
recorded (a graph being built, or ``create_graph=True``), so second derivatives work.
"""

from __future__ import annotations

import functools

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentError, DTypeError, ShapeError
from ..types import TensorType
from . import api as E
from ._node_names import nll_node_name
from ._registry import Cost, OpDef, apply, building_graph, is_grad_enabled, register
from ._rules import Autocast
from ._unrecorded import direct
from ._util import elementwise_cost, fmt_shape, io_bytes, numel, require_float

_REDUCTIONS = ("none", "mean", "sum")
_HALF = (np.dtype(np.float16), np.dtype("bfloat16"))


@functools.cache
def _fast_module():
    from ..kernels import ccross_entropy

    return ccross_entropy


def _check(name, x, target, weight, reduction):
    require_float(name, x)
    if not target.dtype.is_integer:
        raise DTypeError(f"the target must hold class indices, got {target.dtype}", op=name)
    if len(x.shape) == 0:
        raise ShapeError("the input needs a class dimension, got a 0-d tensor", op=name)
    expected = () if len(x.shape) == 1 else (x.shape[0],) + tuple(x.shape[2:])
    if tuple(target.shape) != expected:
        raise ShapeError(
            f"target of shape {fmt_shape(target.shape)} does not fit input of shape "
            f"{fmt_shape(x.shape)}: expected {fmt_shape(expected)}",
            op=name,
        )
    c = x.shape[0 if len(x.shape) == 1 else 1]
    for w in weight:
        if tuple(w.shape) != (c,) or w.dtype != x.dtype:
            raise ShapeError(
                f"the class weight {fmt_shape(w.shape)} {w.dtype} must be ({c},) {x.dtype}",
                op=name,
            )
    if reduction not in _REDUCTIONS:
        raise ArgumentError(f"{name}: reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def _infer(x, target, *weight, ignore_index, reduction, smoothing):
    _check("softmax_cross_entropy", x, target, weight, reduction)
    shape = tuple(target.shape) if reduction == "none" else ()
    return TensorType(shape, x.dtype)


def _grad_infer(x, target, *rest, ignore_index, reduction, smoothing):
    *weight, g = rest
    _check("softmax_cross_entropy_backward", x, target, weight, reduction)
    want = tuple(target.shape) if reduction == "none" else ()
    if tuple(g.shape) != want or g.dtype != x.dtype:
        raise ShapeError(
            f"the gradient {fmt_shape(g.shape)} {g.dtype} must be {fmt_shape(want)} {x.dtype}",
            op="softmax_cross_entropy_backward",
        )
    return TensorType(tuple(x.shape), x.dtype)


# ---- the NumPy kernels (the specification)


def _rows(x, target):
    """x as (positions, C) rows in the compute dtype and the flat targets."""
    d = 0 if x.ndim == 1 else 1
    c = x.shape[d]
    dtype = np.float32 if x.dtype in _HALF else x.dtype
    # (the positions counted: -1 is ambiguous where there are no classes)
    rows = np.moveaxis(x, d, -1).reshape(x.size // max(c, 1), c).astype(dtype, copy=False)
    return rows, target.reshape(-1).astype(np.int64, copy=False)


def _picks(rows, t, weight, ignore_index):
    """The kept mask, the targets made safe to index with, the per-position kept weights and
    the class weights (ones without), all in the rows' dtype."""
    c = rows.shape[1]
    kept = t != ignore_index
    bad = kept & ((t < 0) | (t >= c))
    if bad.any():
        raise IndexError(
            f"target {int(t[bad][0])} is out of bounds: class indices must lie in [0, {c}) "
            f"or equal ignore_index ({ignore_index})"
        )
    safe = np.where(kept, t, 0)
    w = weight[0].astype(rows.dtype, copy=False) if weight else np.ones(c, rows.dtype)
    wt = np.where(kept, w[safe], 0).astype(rows.dtype)
    return kept, safe, wt, w


@np.errstate(invalid="ignore", over="ignore", divide="ignore")  # NaN and inf as they come
def _kernel(x, target, *weight, ignore_index, reduction, smoothing):
    rows, t = _rows(x, target)
    kept, safe, wt, w = _picks(rows, t, weight, ignore_index)
    m = rows.max(axis=1, keepdims=True) if rows.size else np.zeros((len(rows), 1), rows.dtype)
    lse = (m + np.log(np.exp(rows - m).sum(axis=1, keepdims=True))).astype(np.float64)
    neg_logp = lse - rows  # double
    e = float(smoothing)
    loss = (1 - e) * wt * np.take_along_axis(neg_logp, safe[:, None], 1)[:, 0]
    if e:
        loss = loss + e / rows.shape[1] * (neg_logp * w).sum(axis=1)
    loss = np.where(kept, loss, 0.0)
    if reduction == "none":
        return loss.reshape(target.shape).astype(x.dtype)
    total = loss.sum()
    if reduction == "mean":
        total = total / wt.astype(np.float64).sum()
    return np.asarray(total, dtype=x.dtype)


@np.errstate(invalid="ignore", over="ignore", divide="ignore")
def _grad_kernel(x, target, *rest, ignore_index, reduction, smoothing):
    *weight, g = rest
    rows, t = _rows(x, target)
    kept, safe, wt, w = _picks(rows, t, weight, ignore_index)
    c = rows.shape[1]
    if rows.size == 0:
        return np.zeros_like(x)
    m = rows.max(axis=1, keepdims=True)
    p = np.exp(rows - m)
    p /= p.sum(axis=1, keepdims=True)
    e = float(smoothing)
    a = ((1 - e) * wt)[:, None]
    dx = p * (a + e / c * w.sum()) - e / c * w
    dx[np.arange(len(rows)), safe] -= a[:, 0]
    # ignored rows: 0 * p (NaN where p is, as PyTorch's log_softmax backward gives)
    scale = np.where(kept[:, None], _grad_scale(g, wt, reduction), 0.0)
    dx = (dx * scale).astype(rows.dtype)
    d = 0 if x.ndim == 1 else 1
    moved = np.moveaxis(x, d, -1).shape
    return np.moveaxis(dx.reshape(moved), -1, d).astype(x.dtype)


def _grad_scale(g, wt, reduction):
    """The incoming gradient's factor per row ((positions, 1)) or for all."""
    if reduction == "none":
        return g.reshape(-1, 1).astype(np.float64)
    if reduction == "sum":
        return float(g)
    return np.float64(g) / wt.astype(np.float64).sum()  # (every target ignored: inf, unused)


def _fast(x, target, *weight, ignore_index, reduction, smoothing):
    if x.dtype in _HALF:
        return None
    found = _fast_module().forward(
        x, target, weight[0] if weight else None, ignore_index, smoothing, reduction == "none"
    )
    if found is None:
        return None
    losses, total, total_weight = found
    if reduction == "none":
        return losses
    if reduction == "sum":
        value = total
    elif total_weight != 0.0:  # (Python's float division is IEEE's, np.float64's: no errstate)
        value = total / total_weight
    else:  # (every target ignored: NaN, as PyTorch)
        with np.errstate(invalid="ignore", divide="ignore"):
            value = np.float64(total) / np.float64(total_weight)
    return np.asarray(value, dtype=x.dtype)


def _grad_fast(x, target, *rest, ignore_index, reduction, smoothing):
    *weight, g = rest
    if x.dtype in _HALF:
        return None
    w = weight[0] if weight else None
    scale = None
    if reduction != "none":
        scale = float(g)
        if reduction == "mean":
            t = target.reshape(-1)
            kept = t != ignore_index
            if w is None:
                total = float(np.count_nonzero(kept))
            else:
                safe = t[kept]
                if safe.size and (safe.min() < 0 or safe.max() >= w.shape[0]):
                    return None  # the reference raises
                total = float(w[safe].astype(np.float64).sum())
            if total != 0.0:  # (Python's float division is IEEE's: no errstate)
                scale = scale / total
            else:
                with np.errstate(invalid="ignore", divide="ignore"):
                    scale = float(np.float64(scale) / np.float64(total))
    return _fast_module().backward(x, target, w, g, ignore_index, smoothing, scale)


# ---- the gradient


def _composite_grad(x, target, weight, g, ignore_index, reduction, smoothing):
    """The backward op's formula in ember ops (differentiable again)."""
    d = 0 if x.ndim == 1 else 1
    c = x.shape[d]
    t = E.unsqueeze(target, d)
    kept = t != ignore_index
    safe = E.where(kept, t, 0)
    classes = E.reshape(E.arange(c, dtype=target.dtype), (c,) + (1,) * (x.ndim - d - 1))
    onehot = E.cast(classes == safe, x.dtype)
    if weight is None:
        wt = E.cast(kept, x.dtype)
        w_b, w_sum = 1.0, float(c)
    else:
        w_b = E.reshape(weight, (c,) + (1,) * (x.ndim - d - 1))
        picked = E.reshape(E.index_select(weight, 0, E.reshape(safe, (-1,))), safe.shape)
        wt = E.where(kept, picked, 0)
        w_sum = E.sum(weight)
    p = E.softmax(x, d)
    e = float(smoothing)
    a = wt * (1.0 - e)
    dx = p * (a + w_sum * (e / c)) - onehot * a - w_b * (e / c)
    if reduction == "none":
        scale = E.unsqueeze(g, d)
    elif reduction == "sum":
        scale = g
    else:
        scale = g / E.sum(wt)
    return dx * E.where(kept, scale, 0)  # ignored rows: 0 * p, as the backward op


def _vjp(c, g):
    x, target, *weight = c.inputs
    attrs = c.attrs
    if building_graph() or is_grad_enabled():  # recorded: the gradient must differentiate
        dx = _composite_grad(
            x,
            target,
            weight[0] if weight else None,
            g,
            attrs["ignore_index"],
            attrs["reduction"],
            attrs["smoothing"],
        )
    else:  # (a signature the backward op took before: its kernel, undispatched)
        dx = direct(SOFTMAX_CROSS_ENTROPY_BACKWARD, x, target, *weight, g, **attrs)
        if dx is None:
            dx = apply(SOFTMAX_CROSS_ENTROPY_BACKWARD, x, target, *weight, g, **attrs)
    return (dx, None) + (None,) * len(weight)


def _cost(in_types, out_types, attrs) -> Cost:
    """About six operations per logit (max, subtract, exp, sum, the pick); the logits read."""
    return Cost(6 * numel(in_types[0].shape), io_bytes(in_types, out_types))


class _OnnxTerms:
    """What both directions of the cross-entropy compose in ONNX (the module docstring's
    formula): the class axis ``d``, the kept positions, the safe targets, each position's
    target weight ``wt`` (0 where ignored), the class weights ``w`` and their sum."""

    def __init__(self, e, weight):
        target = e.inputs[1]
        t = e.in_types[0]
        self.d = d = 0 if len(t.shape) == 1 else 1
        self.dtype = dtype = t.dtype
        self.classes = t.shape[d]
        if not isinstance(self.classes, int):
            e.unsupported("with a symbolic number of classes")
        target = e.cast(target, dt.int64) if e.in_types[1].dtype is not dt.int64 else target
        ignore = e.scalar(e.attrs["ignore_index"], dt.int64)
        self.kept = e.node("Not", [e.node("Equal", [target, ignore])])
        self.safe = e.node("Where", [self.kept, target, e.scalar(0, dt.int64)])
        kept = e.cast(self.kept, dtype)
        if weight is None:
            self.w, self.w_sum = None, e.scalar(float(self.classes), dtype)
            self.wt = kept
        else:
            self.w = weight
            self.w_sum = e.node("ReduceSum", [weight, e.ints([0])], keepdims=0)
            self.wt = e.node("Mul", [e.node("Gather", [weight, self.safe], axis=0), kept])
        shape = [1] * len(t.shape)
        shape[d] = self.classes
        self.class_shape = shape

    def along(self, e, name):
        """A per-position value broadcast against the logits (the class axis inserted)."""
        return e.node("Unsqueeze", [name, e.ints([self.d])])

    def class_weights(self, e):
        return e.node("Reshape", [self.w, e.ints(self.class_shape)])

    def one_hot(self, e):
        classes = e.constant(np.arange(self.classes, dtype=np.int64).reshape(self.class_shape))
        return e.cast(e.node("Equal", [classes, self.along(e, self.safe)]), self.dtype)


def _onnx_softmax_cross_entropy(e):
    x, _, *weight = e.inputs
    a = e.attrs
    terms = _OnnxTerms(e, weight[0] if weight else None)
    dtype, d, smoothing = terms.dtype, terms.d, float(a["smoothing"])
    neg_logp = e.node("Neg", [e.node("LogSoftmax", [x], axis=d)])
    picked = e.node("GatherElements", [neg_logp, terms.along(e, terms.safe)], axis=d)
    picked = e.node("Squeeze", [picked, e.ints([d])])
    loss = e.node("Mul", [e.node("Mul", [picked, terms.wt]), e.scalar(1 - smoothing, dtype)])
    if smoothing:
        spread = neg_logp if terms.w is None else e.node("Mul", [neg_logp, terms.class_weights(e)])
        spread = e.node("ReduceSum", [spread, e.ints([d])], keepdims=0)
        spread = e.node("Mul", [spread, e.scalar(smoothing / terms.classes, dtype)])
        loss = e.node("Add", [loss, spread])
    zero = e.scalar(0, dtype)
    loss = e.node("Where", [terms.kept, loss, zero])
    if a["reduction"] == "none":
        return loss
    total = e.node("ReduceSum", [loss], keepdims=0)
    if a["reduction"] == "sum":
        return total
    return e.node("Div", [total, e.node("ReduceSum", [terms.wt], keepdims=0)])


def _onnx_softmax_cross_entropy_backward(e):
    x, *rest = e.inputs
    *weight, g = rest[1:]
    a = e.attrs
    terms = _OnnxTerms(e, weight[0] if weight else None)
    dtype, d, smoothing = terms.dtype, terms.d, float(a["smoothing"])
    p = e.node("Softmax", [x], axis=d)
    coeff = e.node("Mul", [terms.wt, e.scalar(1 - smoothing, dtype)])
    spread = e.node("Mul", [terms.w_sum, e.scalar(smoothing / terms.classes, dtype)])
    dx = e.node("Mul", [p, terms.along(e, e.node("Add", [coeff, spread]))])
    if smoothing:
        w = terms.class_weights(e) if terms.w is not None else e.scalar(1, dtype)
        dx = e.node("Sub", [dx, e.node("Mul", [w, e.scalar(smoothing / terms.classes, dtype)])])
    dx = e.node("Sub", [dx, e.node("Mul", [terms.one_hot(e), terms.along(e, coeff)])])
    if a["reduction"] == "none":
        scale = g
    elif a["reduction"] == "sum":
        scale = e.node("Expand", [g, e.node("Shape", [terms.kept])])
    else:
        total = e.node("ReduceSum", [terms.wt], keepdims=0)
        scale = e.node("Expand", [e.node("Div", [g, total]), e.node("Shape", [terms.kept])])
    scale = e.node("Where", [terms.kept, scale, e.scalar(0, dtype)])
    return e.node("Mul", [dx, terms.along(e, scale)])


SOFTMAX_CROSS_ENTROPY_BACKWARD = register(
    OpDef(
        name="softmax_cross_entropy_backward",
        onnx=_onnx_softmax_cross_entropy_backward,
        kind="nn",
        infer=_grad_infer,
        cached_infer=True,
        kernel=_grad_kernel,
        fast=_grad_fast,
        cost=elementwise_cost(8),
        doc="softmax_cross_entropy_backward(x, target[, weight], g): the gradient of "
        "softmax_cross_entropy for x",
    )
)

SOFTMAX_CROSS_ENTROPY = register(
    OpDef(
        name="softmax_cross_entropy",
        # (PyTorch's label smoothing adds its smoothing term to the nll last)
        grad_fn=lambda attrs, in_types: (
            "AddBackward0" if attrs["smoothing"] else nll_node_name(attrs, in_types)
        ),
        autocast=Autocast.FP32,
        onnx=_onnx_softmax_cross_entropy,
        kind="nn",
        infer=_infer,
        cached_infer=True,
        kernel=_kernel,
        fast=_fast,
        vjp=_vjp,
        cost=_cost,
        doc="softmax_cross_entropy(x, target[, weight]; ignore_index, reduction, smoothing): "
        "cross-entropy of logits x against class indices, PyTorch's semantics",
    )
)


def applies(x, target, weight) -> bool:
    """Whether F.cross_entropy runs these ops: eagerly, class-index targets, float32 or
    float64 logits, and class weights that need no gradient (PyTorch gives them none either,
    but the composite's weights are differentiable)."""
    return (
        not building_graph()
        and x.dtype.np in (np.dtype(np.float32), np.dtype(np.float64))
        and target.dtype.is_integer
        and (weight is None or not getattr(weight, "requires_grad", False))
    )
