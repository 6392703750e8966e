"""ONNX operators: the heavier neural-network family. Attention (opsets 23 to 25),
RotaryEmbedding, SwiGLU; Resize and Upsample; GridSample and AffineGrid; RoiAlign,
NonMaxSuppression, DeformConv. The recurrent layers are in recurrent.py.

Everything is written in ember ops on the node's tensors. Positions, weights and masks that
depend only on shapes and attributes are computed in NumPy once and become constants; only
values that decide a shape (Resize's sizes/scales, NonMaxSuppression's selections) need data,
which makes a captured model run eagerly.
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes as _dt
from .._convert import EMPTY, converter, ember_dtype, to_tensor
from ._common import E, F, dtype_np, np_dtype


def _given(value) -> bool:
    return value is not None and value is not EMPTY


def _const(array, like=None):
    """A constant tensor (in ``like``'s dtype when given)."""
    array = np.asarray(array)
    if like is not None:
        array = array.astype(dtype_np(like))
    return to_tensor(np.ascontiguousarray(array), "a constant")


# ---------------------------------------------------------------------------------------------
# Attention (23: the op; 24: nonpad_kv_seqlen; 25: sliding windows)


def _split_heads(ctx, t, heads, what):
    """(B, L, heads * E) -> (B, heads, L, E)."""
    if heads is None or heads <= 0:
        raise ctx.error(f"3-D {what} needs the q_num_heads and kv_num_heads attributes")
    b, length, hidden = t.shape
    if hidden % heads:
        raise ctx.error(f"{what}'s hidden size {hidden} is not a multiple of {heads} heads")
    return E.permute(E.reshape(t, (b, length, heads, hidden // heads)), (0, 2, 1, 3))


def _safe_softmax(x):
    """Softmax over the last axis with a fully -inf row giving zeros (ONNX's reference)."""
    m = E.amax(x, dim=-1, keepdim=True)
    m = E.where(E.isneginf(m), E.zeros_like(m), m)
    e = E.exp(x - m)
    s = E.sum(e, dim=-1, keepdim=True)
    return e / E.where(s == 0, E.ones_like(s), s)


def _offset_mask(q_len, kv_len, offset, allowed_fn):
    """A bool mask (q, kv) or (B, 1, q, kv) of the (query, key) pairs ``allowed_fn(diff)``
    keeps, where ``diff = i + offset - j``; ``offset`` an int or a (B,) tensor."""
    i = np.arange(q_len).reshape(q_len, 1)
    j = np.arange(kv_len).reshape(1, kv_len)
    if isinstance(offset, int):
        return _const(allowed_fn(i + offset - j))
    diff = E.reshape(offset, (-1, 1, 1, 1)) + _const((i - j).astype(np.int64))
    return allowed_fn(diff)


@converter("Attention", 23)
def _attention(ctx, q, k, v, mask=None, past_key=None, past_value=None, nonpad=None):
    q, k, v = ctx.tensor(q), ctx.tensor(k), ctx.tensor(v)
    if not (q.ndim == k.ndim == v.ndim) or q.ndim not in (3, 4):
        raise ctx.error(
            f"Q, K and V must all be 3-D or all 4-D, got ranks {q.ndim}, {k.ndim}, {v.ndim}"
        )
    three_d = q.ndim == 3
    q_heads = ctx.attr("q_num_heads", None)
    kv_heads = ctx.attr("kv_num_heads", None)
    if three_d:
        q = _split_heads(ctx, q, q_heads, "Q")
        k = _split_heads(ctx, k, kv_heads, "K")
        v = _split_heads(ctx, v, kv_heads, "V")
    dtype = q.dtype
    scale = ctx.attr("scale", None)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[3])
    # the reference scales Q and K by sqrt(scale) each, in the input's dtype
    root = float(np.asarray(math.sqrt(scale), dtype=dtype.np))
    if _given(past_key):
        k = E.cat([ctx.tensor(past_key, dtype), k], 2)
    if _given(past_value):
        v = E.cat([ctx.tensor(past_value, dtype), v], 2)
    present_k, present_v = k, v
    q_len, kv_len = q.shape[2], k.shape[2]
    past_len = ctx.tensor(past_key).shape[2] if _given(past_key) else 0

    # the additive bias: mask, causal frontier, sliding window, padding (None: all zero)
    bias = None
    if _given(mask):
        mask = ctx.tensor(mask)
        pad = kv_len - mask.shape[-1]
        if pad > 0:
            fill = False if mask.dtype is _dt.bool_ else float("-inf")
            mask = E.pad(mask, (0, pad), value=fill)
        if mask.dtype is _dt.bool_:
            bias = E.where(mask, _const(0.0, q), _const(-np.inf, q))
        else:
            bias = E.cast(mask, dtype) if mask.dtype is not dtype else mask
    nonpad_t = ctx.tensor(nonpad) if _given(nonpad) else None
    if nonpad_t is not None and _given(past_key):
        raise ctx.error("nonpad_kv_seqlen cannot be combined with past_key/past_value")
    offset = E.cast(nonpad_t, _dt.int64) - q_len if nonpad_t is not None else past_len
    restrictions = []
    if ctx.attr("is_causal", 0):
        restrictions.append(lambda diff: diff >= 0)
    left = ctx.attr("left_window_size", -1)
    right = ctx.attr("right_window_size", -1)
    if left >= 0:
        restrictions.append(lambda diff: diff <= left)
    if right >= 0:
        restrictions.append(lambda diff: -diff <= right)
    for allowed_fn in restrictions:
        allowed = _offset_mask(q_len, kv_len, offset, allowed_fn)
        term = E.where(allowed, _const(0.0, q), _const(-np.inf, q))
        bias = term if bias is None else bias + term
    if nonpad_t is not None:
        keep = _const(np.arange(kv_len)) < E.reshape(E.cast(nonpad_t, _dt.int64), (-1, 1))
        term = E.where(E.reshape(keep, (-1, 1, 1, kv_len)), _const(0.0, q), _const(-np.inf, q))
        bias = term if bias is None else bias + term

    # grouped-query attention: each K/V head serves q_heads / kv_heads query heads
    hq, hk = q.shape[1], k.shape[1]
    if hq != hk:
        if hq % hk or v.shape[1] != hk:
            raise ctx.error(f"{hq} query heads cannot share {hk} key/value heads")
        k = E.repeat_interleave(k, hq // hk, dim=1)
        v = E.repeat_interleave(v, hq // hk, dim=1)

    softcap = ctx.attr("softcap", 0.0)
    mode = ctx.attr("qk_matmul_output_mode", 0)
    precision = ctx.attr("softmax_precision", None)
    qk_wanted = ctx.output_used(3)
    fast = dtype in (_dt.float32, _dt.float64)
    if softcap <= 0 and not qk_wanted and precision is None and fast:
        # ember's attention (one fused op without gradients); a float bias with a fully -inf
        # row gives zeros there as the reference's guard does (half precision follows the
        # reference's steps, whose roundings the fused op would not repeat)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=scale)
    else:
        scores = E.matmul(q * root, E.transpose(k * root, 2, 3))
        if softcap > 0:
            scores = E.tanh(scores / softcap) * softcap
        qk = scores
        if bias is not None:
            scores = scores + bias
        if mode == 2:
            qk = scores
        if precision is not None:
            scores = E.cast(scores, ember_dtype(np_dtype(precision, ctx.label), ctx.label))
        weights = _safe_softmax(scores)
        if bias is not None:
            # the reference's guard decides on the bias alone (a NaN score stays masked)
            dead = E.isneginf(E.amax(bias, dim=-1, keepdim=True))
            weights = E.where(dead, E.zeros_like(weights), weights)
        if mode == 3:
            qk = weights
        weights = E.cast(weights, dtype) if weights.dtype is not dtype else weights
        y = E.matmul(weights, v)
        if qk.dtype is not dtype:
            qk = E.cast(qk, dtype)
    if three_d:
        b, h, length, e = y.shape
        y = E.reshape(E.permute(y, (0, 2, 1, 3)), (b, length, h * e))
    if not ctx.output_used(3):
        return y, present_k, present_v
    return y, present_k, present_v, qk


@converter("RotaryEmbedding", 23)
def _rotary_embedding(ctx, x, cos, sin, position_ids=None):
    x, cos, sin = ctx.tensor(x), ctx.tensor(cos), ctx.tensor(sin)
    shape = tuple(x.shape)
    if x.ndim == 4:  # (B, heads, L, E) -> (B, L, heads, E)
        x = E.permute(x, (0, 2, 1, 3))
    elif x.ndim == 3:
        heads = ctx.attr("num_heads", 0)
        if heads <= 0 or shape[2] % heads:
            raise ctx.error(f"a 3-D input needs num_heads dividing {shape[2]}, got {heads}")
        x = E.reshape(x, (shape[0], shape[1], heads, shape[2] // heads))
    else:
        raise ctx.error(f"the input must be 3-D or 4-D, got shape {shape}")
    head = x.shape[3]
    dim = ctx.attr("rotary_embedding_dim", 0) or head
    if dim % 2 or dim > head:
        raise ctx.error(f"rotary_embedding_dim {dim} must be even and at most {head}")
    if _given(position_ids):
        ids = ctx.tensor(position_ids)
        cos = E.reshape(E.index_select(cos, 0, E.reshape(ids, (-1,))), (*ids.shape, -1))
        sin = E.reshape(E.index_select(sin, 0, E.reshape(ids, (-1,))), (*ids.shape, -1))
    if cos.shape[-1] != dim // 2 or sin.shape[-1] != dim // 2:
        raise ctx.error(
            f"the caches' last dimension ({cos.shape[-1]}, {sin.shape[-1]}) must be "
            f"rotary_embedding_dim / 2 = {dim // 2}"
        )
    cos, sin = E.unsqueeze(cos, 2), E.unsqueeze(sin, 2)
    rotate = E.narrow(x, 3, 0, dim)
    interleaved = bool(ctx.attr("interleaved", 0))
    if interleaved:
        pairs = E.reshape(rotate, (*rotate.shape[:3], dim // 2, 2))
        x1, x2 = E.select(pairs, 4, 0), E.select(pairs, 4, 1)
    else:
        x1, x2 = E.narrow(rotate, 3, 0, dim // 2), E.narrow(rotate, 3, dim // 2, dim // 2)
    real = cos * x1 - sin * x2
    imag = sin * x1 + cos * x2
    if interleaved:
        rotated = E.reshape(E.stack([real, imag], -1), tuple(rotate.shape))
    else:
        rotated = E.cat([real, imag], 3)
    if dim < head:
        rotated = E.cat([rotated, E.narrow(x, 3, dim, head - dim)], 3)
    if len(shape) == 3:
        return E.reshape(rotated, shape)
    return E.permute(rotated, (0, 2, 1, 3))


@converter("SwiGLU", 28)
def _swiglu(ctx, a, b):
    a, b = ctx.tensor(a), ctx.tensor(b)
    if tuple(a.shape) != tuple(b.shape):
        raise ctx.error(f"A {tuple(a.shape)} and B {tuple(b.shape)} must have one shape")
    return a * E.sigmoid(a * ctx.attr("alpha", 1.0)) * b
