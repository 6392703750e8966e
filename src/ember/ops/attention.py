"""``attention``: ``softmax(q @ k^T * scale + mask) @ v`` over the last two dimensions as one
primitive, for inference. functional.scaled_dot_product_attention and nn.MultiheadAttention
emit it where no gradient is wanted (the composite they otherwise record is what training
differentiates); its C kernel (kernels/cattention.py) keeps each block of query rows' scores in
cache from the first product to the second, and reads a head split's permuted views in place.

Inputs: q (..., L, E), k (..., S, E), v (..., S, Ev), and optionally a mask broadcasting to
(..., L, S): float (q's dtype) added to the scores, or bool marking the kept positions (the
others get -inf). Leading dimensions broadcast. Attributes: ``scale`` (multiplies q before the
product, as the composites do), ``causal`` (query i sees keys j <= i, top-left aligned, as
PyTorch's is_causal), ``safe`` (a row whose every score is -inf gives zeros, PyTorch's
attention, rather than NaN: softmax's ``safe``).

The NumPy kernel below is the specification: the composite's arithmetic step by step. The VJP
recomputes the weights from the inputs in ember ops (nothing is saved but the inputs).
"""

from __future__ import annotations

import functools

import numpy as np

from .. import _meta
from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..types import TensorType
from . import _onnx, _torch_flops
from . import api as E
from ._attention_pattern import attention_pattern
from ._half import via_float32
from ._registry import Cost, OpDef, apply, building_graph, eager_constant, register
from ._rules import Autocast
from ._util import broadcast_shapes, fmt_shape, io_bytes, numel
from .softmax import SOFTMAX, _softmax_kernel

_OP = "attention"


def _infer(q, k, v, mask=None, *, scale, causal, safe):
    for name, t in (("query", q), ("key", k), ("value", v)):
        if not t.dtype.is_floating_point:
            raise DTypeError(f"{name} must be a float tensor, got {t.dtype}", op=_OP)
        if t.ndim < 2:
            raise ShapeError(
                f"{name} needs at least 2 dimensions (..., length, embedding), got shape "
                f"{fmt_shape(t.shape)}",
                op=_OP,
            )
    if not (q.dtype is k.dtype is v.dtype):
        raise DTypeError(
            f"query, key and value must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}",
            op=_OP,
        )
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ShapeError(
            f"query {fmt_shape(q.shape)}, key {fmt_shape(k.shape)} and value "
            f"{fmt_shape(v.shape)} do not fit: query and key share the embedding size, key "
            "and value the sequence length",
            op=_OP,
        )
    batch = broadcast_shapes(_OP, q.shape[:-2], k.shape[:-2], v.shape[:-2])
    scores = tuple(batch) + (q.shape[-2], k.shape[-2])
    if mask is not None:
        if mask.dtype is not dt.bool_ and mask.dtype is not q.dtype:
            raise DTypeError(
                f"the mask must be bool or {q.dtype} like the query, got {mask.dtype}", op=_OP
            )
        if tuple(broadcast_shapes(_OP, mask.shape, scores)) != scores:
            raise ShapeError(
                f"the mask {fmt_shape(mask.shape)} does not broadcast to the scores' shape "
                f"{fmt_shape(scores)}",
                op=_OP,
            )
    return TensorType(tuple(batch) + (q.shape[-2], v.shape[-1]), q.dtype)


def _kernel(q, k, v, *mask, scale, causal, safe):
    if q.dtype in _HALF:  # (in float32, rounded once, as PyTorch's CPU attention)
        wide = [a.astype(np.float32) if a.dtype == q.dtype else a for a in (q, k, v, *mask)]
        return _kernel(*wide, scale=scale, causal=causal, safe=safe).astype(q.dtype)
    scores = np.matmul(q * q.dtype.type(scale), np.swapaxes(k, -1, -2))
    if mask:
        m = mask[0]
        scores = np.where(m, scores, -np.inf) if m.dtype == np.bool_ else scores + m
    if causal:
        keep = np.tri(scores.shape[-2], scores.shape[-1], dtype=bool)
        scores = np.where(keep, scores, -np.inf)
    weights = _softmax_kernel(scores.astype(q.dtype, copy=False), axis=-1, safe=safe)
    return np.matmul(weights, v).astype(q.dtype, copy=False)


@functools.cache
def _cattention():
    """kernels/cattention.py, imported at the first call (an import statement costs each
    small call half a microsecond)."""
    from ..kernels import cattention

    return cattention


def _fast(q, k, v, *mask, scale, causal, safe):
    cattention = _cattention()
    if q.dtype in _HALF:  # (the float32 kernel on widened copies, its result rounded once)
        return _wide_fast(q, k, v, *mask, scale=scale, causal=causal, safe=safe)
    return cattention.attention(
        q, k, v, mask[0] if mask else None, scale=scale, causal=causal, safe=safe
    )


_HALF = (dt.bfloat16.np, dt.float16.np)
_wide_fast = via_float32(_fast)


def _c_step(node):
    from ..kernels import cattention

    q, k, v, *mask = (t.type for t in node.inputs)
    a = node.attrs
    return cattention.attention_step(
        q, k, v, mask[0] if mask else None, node.outputs[0].type,
        scale=a["scale"], causal=a["causal"], safe=a["safe"],
    )  # fmt: skip


# eager causal masks by (rows, columns): read-only arrays, at most `_CAUSAL_KEPT` of them and
# none past `_CAUSAL_LARGEST` elements (a larger attention's products outweigh making its mask)
_CAUSAL: dict = {}
_CAUSAL_KEPT = 16
_CAUSAL_LARGEST = 1 << 20


def causal_keep(rows, cols):
    """The causal attention mask, True where key j <= query i (top-left aligned, as PyTorch's
    is_causal), a (rows, cols) bool tensor: eagerly a kept array wrapped, read-only (the
    composite and the VJP make one at every call, two dispatches for nothing); while a graph
    is built, or meta tensors live, ``tril(ones)``, recorded as ops."""
    if (
        type(rows) is int
        and type(cols) is int
        and rows * cols <= _CAUSAL_LARGEST
        and not _meta.active[0]
        and not building_graph()
    ):
        keep = _CAUSAL.get((rows, cols))
        if keep is None:
            if len(_CAUSAL) >= _CAUSAL_KEPT:
                _CAUSAL.clear()
            keep = np.tri(rows, cols, dtype=bool)
            keep.flags.writeable = False
            _CAUSAL[(rows, cols)] = keep
        return eager_constant(keep)
    return E.tril(E.ones((rows, cols), dtype=dt.bool_))


def _weights(q, k, mask, scale, causal, safe):
    """The attention weights in ember ops (the composite's), for the VJP."""
    scores = E.matmul(q * scale, E.transpose(k, -2, -1))
    if mask is not None:
        if mask.dtype is dt.bool_:
            scores = E.where(mask, scores, float("-inf"))
        else:
            scores = scores + mask
    if causal:
        scores = E.where(causal_keep(q.shape[-2], k.shape[-2]), scores, float("-inf"))
    return apply(SOFTMAX, scores, axis=scores.ndim - 1, safe=safe)


def _vjp(c, g):
    q, k, v, *rest = c.inputs
    mask = rest[0] if rest else None
    a = c.attrs
    need = c.needs_input_grad
    w = _weights(q, k, mask, a["scale"], a["causal"], a["safe"])
    gv = E.sum_to(E.matmul(E.transpose(w, -2, -1), g), v.shape) if need[2] else None
    gw = E.matmul(g, E.transpose(v, -2, -1))
    gs = w * (gw - E.sum(gw * w, -1, keepdim=True))  # softmax's VJP
    gq = E.sum_to(E.matmul(gs, k) * a["scale"], q.shape) if need[0] else None
    gk = E.sum_to(E.matmul(E.transpose(gs, -2, -1), q * a["scale"]), k.shape) if need[1] else None
    grads = (gq, gk, gv)
    if mask is not None:
        floating = mask.dtype is not dt.bool_
        grads += (E.sum_to(gs, mask.shape) if need[3] and floating else None,)
    return grads


def _cost(in_types, out_types, attrs) -> Cost:
    q, k, v = in_types[:3]
    rows = numel(out_types[0].shape) // max(v.shape[-1], 1)  # batch * L
    pairs = rows * k.shape[-2]
    # the two products, 2 FLOPs a multiply-add (torch.utils.flop_counter's count of
    # scaled_dot_product_attention; the softmax, like linear's bias, is not counted)
    return Cost(2 * pairs * (q.shape[-1] + v.shape[-1]), io_bytes(in_types, out_types))


def _onnx_attention(e):
    q, k, v, *mask = e.inputs
    a = e.attrs
    dtype = e.in_types[0].dtype
    nd = len(e.in_types[1].shape)
    perm = list(range(nd - 2)) + [nd - 1, nd - 2]
    scaled = e.node("Mul", [q, _onnx.scalar(e, a["scale"], dtype)])
    scores = e.node("MatMul", [scaled, e.node("Transpose", [k], perm=perm)])
    minus_inf = _onnx.scalar(e, -np.inf, dtype)
    if mask:
        if e.in_types[3].dtype is dt.bool_:
            scores = e.node("Where", [mask[0], scores, minus_inf])
        else:
            scores = e.node("Add", [scores, mask[0]])
    if a["causal"]:
        rows, cols = e.in_types[0].shape[-2], e.in_types[1].shape[-2]
        keep = _onnx.tri_mask(e, rows, cols)
        scores = e.node("Where", [keep, scores, minus_inf])
    out = e.out_types[0]
    score_type = TensorType(tuple(out.shape[:-1]) + (e.in_types[1].shape[-2],), dtype)
    attrs = {"axis": len(out.shape) - 1, "safe": a["safe"]}
    weights = e.call(SOFTMAX, [scores], attrs, in_types=[score_type])[0]
    return e.node("MatMul", [weights, v])


ATTENTION = register(
    OpDef(
        name=_OP,
        onnx=_onnx_attention,
        kind="nn",
        infer=_infer,
        cached_infer=True,
        kernel=_kernel,
        fast=_fast,
        c_step=_c_step,
        vjp=_vjp,
        cost=_cost,
        torch_flops=_torch_flops.attention,
        flop_family="attention",
        pattern=attention_pattern(),
        autocast=Autocast.LOWER,
        doc="attention(q, k, v[, mask], scale, causal, safe): softmax(q k^T scale + mask) v "
        "over the last two dimensions; a bool mask keeps its True positions; causal keeps "
        "key j <= query i; safe: a fully masked row gives zeros",
    )
)
