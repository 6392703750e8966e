"""``varlen_attention``: attention within each sequence of a packed batch (no padding).

Operands: query (Tq, H, D), key (Tk, H, D), value (Tk, H, Dv), the sequences packed one after
another (``Tq``, ``Tk``: total lengths), and their row splits ``cu_seq_q`` (R + 1,) and
``cu_seq_k`` (R + 1,) (PyTorch's ``torch.nn.attention.varlen.varlen_attn`` layout). Sequence
``r``'s queries ``query[cu_seq_q[r]:cu_seq_q[r + 1]]`` attend to its own keys and values only:
``softmax(q_r k_r^T * scale) v_r`` per head, so the scores are the block diagonal of the packed
batch's and nothing of one sequence reaches another. A sequence with queries but no keys gives
zeros (as PyTorch's attention gives for rows that see no key). Result: (Tq, H, Dv).

The NumPy kernel loops over the sequences (each a batched product over the heads); half
precision computes in float32 and rounds once. The VJP is the companion op
``varlen_attention_grad`` (the same loop, PyTorch's attention backward per sequence:
dV = P^T dO, dS = P * (dO V^T - rowsum(dO * O)), dQ = dS K * scale, dK = dS^T Q * scale);
it has no gradient itself.
"""

from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..types import TensorType
from ._registry import Cost, OpDef, apply, register
from ._util import fmt_shape, io_bytes, numel
from .segment import check_splits

_OP = "varlen_attention"


def _infer(q, k, v, cu_q, cu_k, *, scale):
    for name, t in (("query", q), ("key", k), ("value", v)):
        if not t.dtype.is_floating_point:
            raise DTypeError(f"{name} must be a float tensor, got {t.dtype}", op=_OP)
        if t.ndim != 3:
            raise ShapeError(
                f"{name} must be 3-D (total length, heads, head size), got shape "
                f"{fmt_shape(t.shape)}",
                op=_OP,
            )
    if not (q.dtype is k.dtype is v.dtype):
        raise DTypeError(
            f"query, key and value must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}",
            op=_OP,
        )
    if q.shape[1] != k.shape[1] or k.shape[1] != v.shape[1] or q.shape[2] != k.shape[2]:
        raise ShapeError(
            f"query {fmt_shape(q.shape)}, key {fmt_shape(k.shape)} and value "
            f"{fmt_shape(v.shape)} must share the heads, query and key the head size",
            op=_OP,
        )
    if k.shape[0] != v.shape[0]:
        raise ShapeError(
            f"key {fmt_shape(k.shape)} and value {fmt_shape(v.shape)} differ in length", op=_OP
        )
    for name, s in (("cu_seq_q", cu_q), ("cu_seq_k", cu_k)):
        if not s.dtype.is_integer or s.ndim != 1:
            raise DTypeError(
                f"{name} must be 1-D integers, got {s.dtype} {fmt_shape(s.shape)}", op=_OP
            )
    if cu_q.shape[0] != cu_k.shape[0]:
        raise ShapeError(
            f"cu_seq_q has {cu_q.shape[0]} entries and cu_seq_k {cu_k.shape[0]}: one per "
            "sequence boundary each",
            op=_OP,
        )
    return TensorType((q.shape[0], q.shape[1], v.shape[2]), q.dtype)


def _segments(q, k, cu_q, cu_k):
    check_splits(_OP, cu_q, q.shape[0], "cu_seq_q")
    check_splits(_OP, cu_k, k.shape[0], "cu_seq_k")
    return zip(cu_q[:-1].tolist(), cu_q[1:].tolist(), cu_k[:-1].tolist(), cu_k[1:].tolist())


def _work(*arrays):
    return [a.astype(np.float32) if a.dtype.itemsize < 4 else a for a in arrays]


def _weights(qs, ks, scale):
    """(H, Lq, Lk) softmax weights of one sequence's (L, H, D) queries and keys."""
    s = np.matmul(qs.transpose(1, 0, 2) * scale, ks.transpose(1, 2, 0))
    s = s - s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return s


def _kernel(q, k, v, cu_q, cu_k, *, scale):
    wq, wk, wv = _work(q, k, v)
    out = np.zeros((q.shape[0], q.shape[1], v.shape[2]), wq.dtype)
    for a, b, c, d in _segments(q, k, cu_q, cu_k):
        if a == b or c == d:
            continue
        p = _weights(wq[a:b], wk[c:d], scale)
        out[a:b] = np.matmul(p, wv[c:d].transpose(1, 0, 2)).transpose(1, 0, 2)
    return out.astype(q.dtype, copy=False)


def _grad_infer(q, k, v, cu_q, cu_k, g, *, scale):
    return (
        TensorType(tuple(q.shape), q.dtype),
        TensorType(tuple(k.shape), k.dtype),
        TensorType(tuple(v.shape), v.dtype),
    )


def _grad_kernel(q, k, v, cu_q, cu_k, g, *, scale):
    wq, wk, wv, wg = _work(q, k, v, g)
    dq, dk, dv = np.zeros_like(wq), np.zeros_like(wk), np.zeros_like(wv)
    for a, b, c, d in _segments(q, k, cu_q, cu_k):
        if a == b or c == d:
            continue
        qs, ks, vs = (t.transpose(1, 0, 2) for t in (wq[a:b], wk[c:d], wv[c:d]))  # (H, L, D)
        gs = wg[a:b].transpose(1, 0, 2)
        p = _weights(wq[a:b], wk[c:d], scale)
        dv[c:d] = np.matmul(p.transpose(0, 2, 1), gs).transpose(1, 0, 2)
        dp = np.matmul(gs, vs.transpose(0, 2, 1))
        ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
        dq[a:b] = (np.matmul(ds, ks) * scale).transpose(1, 0, 2)
        dk[c:d] = (np.matmul(ds.transpose(0, 2, 1), qs) * scale).transpose(1, 0, 2)
    return tuple(t.astype(s.dtype, copy=False) for t, s in ((dq, q), (dk, k), (dv, v)))


def _vjp(c, g):
    q, k, v, cu_q, cu_k = c.inputs
    dq, dk, dv = apply(VARLEN_ATTENTION_GRAD, q, k, v, cu_q, cu_k, g, scale=c.attrs["scale"])
    return dq, dk, dv, None, None


def _cost(in_types, out_types, attrs) -> Cost:
    # the block diagonal's size depends on the splits' values, which a type does not hold:
    # counted as if the R sequences had equal lengths (Tq / R queries against Tk / R keys)
    q, k, v, cu_q = in_types[:4]
    rows = max(cu_q.shape[0] - 1, 1) if isinstance(cu_q.shape[0], int) else 1
    per_pair = q.shape[1] * (q.shape[2] + v.shape[2])
    try:
        flops = 2 * numel(q.shape[:1]) * numel(k.shape[:1]) // rows * per_pair
    except TypeError:  # (symbolic totals)
        flops = 0
    return Cost(flops, io_bytes(in_types, out_types))


VARLEN_ATTENTION = register(
    OpDef(
        name="varlen_attention",
        kind="nn",
        infer=_infer,
        kernel=_kernel,
        vjp=_vjp,
        cost=_cost,
        batch=None,
        doc="varlen_attention(q, k, v, cu_seq_q, cu_seq_k, scale): softmax(q k^T scale) v "
        "within each packed sequence",
    )
)

VARLEN_ATTENTION_GRAD = register(
    OpDef(
        name="varlen_attention_grad",
        kind="nn",
        infer=_grad_infer,
        kernel=_grad_kernel,
        num_outputs=3,
        cost=lambda i, o, a: Cost(2 * _cost(i[:5], o[:1], a).flops, io_bytes(i, o)),
        batch=None,
        doc="varlen_attention_grad(q, k, v, cu_seq_q, cu_seq_k, grad, scale): the gradients "
        "of varlen_attention's three float operands",
    )
)


def varlen_attention(query, key, value, cu_seq_q, cu_seq_k=None, *, scale=None):
    """Attention within each packed sequence (see the module). ``scale`` defaults to
    ``1 / sqrt(head size)``; ``cu_seq_k`` to ``cu_seq_q`` (self-attention)."""
    if cu_seq_k is None:
        cu_seq_k = cu_seq_q
    if scale is None:
        scale = 1.0 / float(np.sqrt(query.shape[-1]))
    return apply(VARLEN_ATTENTION, query, key, value, cu_seq_q, cu_seq_k, scale=float(scale))
