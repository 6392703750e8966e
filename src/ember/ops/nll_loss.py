"""The negative log-likelihood loss as one op each way, for eager mode.

Eagerly, ``F.nll_loss`` built of unsqueeze, gather, negation, masks and a sum ran five to
eight ops forward and as many backward, each a Python dispatch and a tape entry, about 30x
PyTorch's time on a classifier's batch (``log_softmax`` + ``nll_loss``, the MNIST examples'
loss). These ops pick and scatter the targets' values in one NumPy pass each. In a graph
``F.nll_loss`` keeps the composite, whose loops the passes fuse.

``nll_loss(logp, target[, weight]; ignore_index, reduction)`` follows PyTorch: logp is (C,) or
(N, C, d1, ...) log-probabilities, target the class indices (logp's shape without its class
dimension 1); per position i, kept unless ``target == ignore_index``, with class weights w
(1 without),

    loss_i = -w[t_i] logp_i[t_i],   0 if ignored,

reduced by 'none', 'sum', or 'mean' (divided by the kept positions' total weight
sum_i w[t_i]; NaN when every target is ignored, as in PyTorch), computed in logp's dtype as
the composite computes it. The targets and weights get no gradient.
``nll_loss_backward(logp, target[, weight], g)`` is the gradient for logp: -w[t_i] times g's
share at each target, zero elsewhere; it has no VJP of its own: the forward op's VJP writes the
same gradient in ember ops wherever that gradient is itself recorded (a graph being built, or
``create_graph=True``), so second derivatives work.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..types import TensorType
from . import api as E
from ._node_names import nll_node_name
from ._registry import Cost, OpDef, apply, building_graph, is_grad_enabled, register
from ._rules import Autocast
from ._util import elementwise_cost, fmt_shape, io_bytes, numel
from .cross_entropy import _check, _OnnxTerms  # (the same operands, checked alike)


def _infer(x, target, *weight, ignore_index, reduction):
    _check("nll_loss", x, target, weight, reduction)
    shape = tuple(target.shape) if reduction == "none" else ()
    return TensorType(shape, x.dtype)


def _grad_infer(x, target, *rest, ignore_index, reduction):
    *weight, g = rest
    _check("nll_loss_backward", x, target, weight, reduction)
    want = tuple(target.shape) if reduction == "none" else ()
    if tuple(g.shape) != want or g.dtype != x.dtype:
        raise ShapeError(
            f"the gradient {fmt_shape(g.shape)} {g.dtype} must be {fmt_shape(want)} {x.dtype}",
            op="nll_loss_backward",
        )
    return TensorType(tuple(x.shape), x.dtype)


# ---- the NumPy kernels (the specification, and what runs: a pick and a scatter)


def _rows(x):
    """A 1-D or 2-D x as (positions, C) rows (a view where x is contiguous)."""
    # (the positions counted: -1 is ambiguous where there are no classes)
    return x.reshape(x.size // max(x.shape[-1], 1), x.shape[-1])


def _picks(c, dtype, target, weight, ignore_index):
    """The flat kept mask, the targets made safe to index with, and each position's weight
    (0 where ignored) in ``dtype``, for ``c`` classes."""
    t = target.reshape(-1)
    kept = t != ignore_index
    bad = kept & ((t < 0) | (t >= c))
    if bad.any():
        raise IndexError(
            f"target {int(t[bad][0])} is out of bounds: class indices must lie in [0, {c}) "
            f"or equal ignore_index ({ignore_index})"
        )
    safe = np.where(kept, t, 0)
    if weight:
        wt = np.where(kept, weight[0][safe], 0).astype(dtype)
    else:
        wt = kept.astype(dtype)
    return kept, safe, wt


def _flat_picks(x, safe):
    """Each position's picked element as an index into x's flat C-order elements: the
    positions in (sample, spatial...) order, as `_rows`' rows (no copy of x moving its class
    axis last, which a 4-D input's pick and scatter spent most of their time on)."""
    n, c = x.shape[:2]
    spatial = x.size // max(n * c, 1)
    position = np.arange(safe.size, dtype=np.int64)
    sample, within = np.divmod(position, spatial)
    return (sample * c + safe) * spatial + within


@np.errstate(invalid="ignore", over="ignore", divide="ignore")  # NaN and inf as they come
def _kernel(x, target, *weight, ignore_index, reduction):
    if x.ndim > 2:
        x = np.ascontiguousarray(x)
        c = x.shape[1]
        kept, safe, wt = _picks(c, x.dtype, target, weight, ignore_index)
        picked = np.take(x.reshape(-1), _flat_picks(x, safe))
    else:
        rows = _rows(x)
        kept, safe, wt = _picks(rows.shape[1], x.dtype, target, weight, ignore_index)
        picked = rows[np.arange(len(rows)), safe]
    loss = np.where(kept, -picked * wt, 0).astype(x.dtype, copy=False)
    if reduction == "none":
        return loss.reshape(target.shape)
    total = loss.sum(dtype=x.dtype)
    if reduction == "sum":
        return np.asarray(total, dtype=x.dtype)
    return np.asarray(total / wt.sum(dtype=x.dtype), dtype=x.dtype)


@np.errstate(invalid="ignore", over="ignore", divide="ignore")
def _grad_kernel(x, target, *rest, ignore_index, reduction):
    *weight, g = rest
    c = x.shape[-1] if x.ndim <= 2 else x.shape[1]
    kept, safe, wt = _picks(c, x.dtype, target, weight, ignore_index)
    if reduction == "none":
        share = g.reshape(-1)
    elif reduction == "sum":
        share = g
    else:
        share = g / wt.sum(dtype=x.dtype)
    values = np.where(kept, -(share * wt), 0)
    if x.ndim > 2:  # (scattered straight into the class-second layout)
        dx = np.zeros(x.shape, x.dtype)
        dx.reshape(-1)[_flat_picks(dx, safe)] = values
        return dx
    dx = np.zeros((safe.size, c), x.dtype)
    dx[np.arange(safe.size), safe] = values
    return dx.reshape(x.shape)


# ---- the gradient


def _composite_grad(x, target, weight, g, ignore_index, reduction):
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
    else:
        picked = E.reshape(E.index_select(weight, 0, E.reshape(safe, (-1,))), safe.shape)
        wt = E.where(kept, picked, 0)
    if reduction == "none":
        share = E.unsqueeze(g, d)
    elif reduction == "sum":
        share = g
    else:
        share = g / E.sum(wt)
    return onehot * -(share * wt)


def _vjp(c, g):
    x, target, *weight = c.inputs
    attrs = c.attrs
    if building_graph() or is_grad_enabled():  # recorded: the gradient must differentiate
        dx = _composite_grad(
            x, target, weight[0] if weight else None, g, attrs["ignore_index"], attrs["reduction"]
        )
    else:
        dx = apply(NLL_LOSS_BACKWARD, x, target, *weight, g, **attrs)
    return (dx, None) + (None,) * len(weight)


def _cost(in_types, out_types, attrs) -> Cost:
    """One pick per position: the targets read, and (at most) the log-probabilities."""
    return Cost(2 * numel(in_types[1].shape), io_bytes(in_types, out_types))


# ---- ONNX: the formulas above in ONNX's ops (the cross-entropy's terms without smoothing)


def _onnx_nll_loss(e):
    x, _, *weight = e.inputs
    terms = _OnnxTerms(e, weight[0] if weight else None)
    dtype, d = terms.dtype, terms.d
    picked = e.node("GatherElements", [x, terms.along(e, terms.safe)], axis=d)
    picked = e.node("Squeeze", [picked, e.ints([d])])
    loss = e.node("Neg", [e.node("Mul", [picked, terms.wt])])
    loss = e.node("Where", [terms.kept, loss, e.scalar(0, dtype)])
    if e.attrs["reduction"] == "none":
        return loss
    total = e.node("ReduceSum", [loss], keepdims=0)
    if e.attrs["reduction"] == "sum":
        return total
    return e.node("Div", [total, e.node("ReduceSum", [terms.wt], keepdims=0)])


def _onnx_nll_loss_backward(e):
    *_, g = e.inputs
    weight = e.inputs[2:-1]
    terms = _OnnxTerms(e, weight[0] if weight else None)
    reduction = e.attrs["reduction"]
    if reduction == "none":
        share = g
    elif reduction == "sum":
        share = e.node("Expand", [g, e.node("Shape", [terms.kept])])
    else:
        total = e.node("ReduceSum", [terms.wt], keepdims=0)
        share = e.node("Expand", [e.node("Div", [g, total]), e.node("Shape", [terms.kept])])
    coeff = e.node("Neg", [e.node("Mul", [share, terms.wt])])
    return e.node("Mul", [terms.one_hot(e), terms.along(e, coeff)])


NLL_LOSS_BACKWARD = register(
    OpDef(
        name="nll_loss_backward",
        onnx=_onnx_nll_loss_backward,
        kind="nn",
        infer=_grad_infer,
        kernel=_grad_kernel,
        cost=elementwise_cost(1),
        doc="nll_loss_backward(logp, target[, weight], g): the gradient of nll_loss for logp",
    )
)

NLL_LOSS = register(
    OpDef(
        name="nll_loss",
        grad_fn=nll_node_name,
        autocast=Autocast.FP32,
        onnx=_onnx_nll_loss,
        kind="nn",
        infer=_infer,
        kernel=_kernel,
        vjp=_vjp,
        cost=_cost,
        doc="nll_loss(logp, target[, weight]; ignore_index, reduction): the negative "
        "log-likelihood of class indices under log-probabilities, PyTorch's semantics",
    )
)


def applies(x, target, weight) -> bool:
    """Whether F.nll_loss runs these ops: eagerly, class-index targets, and class weights
    that need no gradient (PyTorch gives them none either, but the composite's weights are
    differentiable)."""
    return (
        not building_graph()
        and target.dtype.is_integer
        and (weight is None or not getattr(weight, "requires_grad", False))
    )
