"""ONNX operators: attention. Attention (opsets 23 to 25: masks, causal and sliding-window
frontiers, key/value caches, grouped heads, softcap, the scores output), FlexAttention
(ai.onnx.preview), LinearAttention and CausalConvWithState (27), RotaryEmbedding (23) and
SwiGLU (28).

Written in ember ops; where nothing but ember's own attention is asked for (float32/float64, no
softcap, no scores output) it runs as ``F.scaled_dot_product_attention`` (one fused op when no
gradient is wanted). Masks that depend only on the lengths are NumPy constants; the recurrent
LinearAttention is one ``ember.scan`` over the time steps.
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes as _dt
from .._convert import converter, ember_dtype
from ._common import E, F, constant, given, np_dtype

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
        return constant(allowed_fn(i + offset - j))
    diff = E.reshape(offset, (-1, 1, 1, 1)) + constant((i - j).astype(np.int64))
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
    if given(past_key):
        k = E.cat([ctx.tensor(past_key, dtype), k], 2)
    if given(past_value):
        v = E.cat([ctx.tensor(past_value, dtype), v], 2)
    present_k, present_v = k, v
    q_len, kv_len = q.shape[2], k.shape[2]
    past_len = ctx.tensor(past_key).shape[2] if given(past_key) else 0

    # the additive bias: mask, causal frontier, sliding window, padding (None: all zero)
    bias = None
    if given(mask):
        mask = ctx.tensor(mask)
        pad = kv_len - mask.shape[-1]
        if pad > 0:
            fill = False if mask.dtype is _dt.bool_ else float("-inf")
            mask = E.pad(mask, (0, pad), value=fill)
        if mask.dtype is _dt.bool_:
            bias = E.where(mask, constant(0.0, q), constant(-np.inf, q))
        else:
            bias = E.cast(mask, dtype) if mask.dtype is not dtype else mask
    nonpad_t = ctx.tensor(nonpad) if given(nonpad) else None
    if nonpad_t is not None and given(past_key):
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
    # causal alone over a query block that starts at key 0 is PyTorch's is_causal
    plain_causal = (
        bool(ctx.attr("is_causal", 0))
        and len(restrictions) == 1
        and bias is None
        and nonpad_t is None
        and past_len == 0
    )
    for allowed_fn in restrictions:
        allowed = _offset_mask(q_len, kv_len, offset, allowed_fn)
        term = E.where(allowed, constant(0.0, q), constant(-np.inf, q))
        bias = term if bias is None else bias + term
    if nonpad_t is not None:
        keep = constant(np.arange(kv_len)) < E.reshape(E.cast(nonpad_t, _dt.int64), (-1, 1))
        term = E.where(E.reshape(keep, (-1, 1, 1, kv_len)), constant(0.0, q), constant(-np.inf, q))
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
        if plain_causal:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)
        else:
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
    if given(position_ids):
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


# ---------------------------------------------------------------------------------------------
# FlexAttention (ai.onnx.preview 1), LinearAttention (27), CausalConvWithState (27)


def _work_dtype(dtype):
    """float32 for half precision (and anything narrower), else the dtype itself."""
    return _dt.float64 if dtype is _dt.float64 else _dt.float32


def _precision(ctx, default):
    code = ctx.attr("softmax_precision", None)
    if code is None:
        return default
    return ember_dtype(np_dtype(code, ctx.label), ctx.label)


@converter("FlexAttention", 1, domain="ai.onnx.preview")
def _flex_attention(ctx, q, k, v):
    q, k, v = ctx.tensor(q), ctx.tensor(k), ctx.tensor(v)
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ctx.error("Q, K and V must be 4-D (batch, heads, sequence, head size)")
    hq, hk = q.shape[1], k.shape[1]
    if v.shape[1] != hk or v.shape[2] != k.shape[2] or k.shape[3] != q.shape[3]:
        raise ctx.error(f"Q {tuple(q.shape)}, K {tuple(k.shape)}, V {tuple(v.shape)} do not fit")
    if hq != hk:
        if hq % hk:
            raise ctx.error(f"{hq} query heads cannot share {hk} key/value heads")
        k = E.repeat_interleave(k, hq // hk, dim=1)
        v = E.repeat_interleave(v, hq // hk, dim=1)
    scale = ctx.attr("scale", None)
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[3])
    root = float(np.asarray(np.sqrt(np.float32(scale)), dtype=q.dtype.np))
    scores = E.matmul(q * root, E.transpose(k * root, 2, 3))
    work = _precision(ctx, _work_dtype(q.dtype))
    scores = E.cast(scores, work) if scores.dtype is not work else scores
    if ctx.has_attr("score_mod"):
        (scores,) = ctx.run(ctx.subgraph("score_mod"), [scores])
        scores = ctx.tensor(scores, work)
    m = E.amax(scores, dim=-1, keepdim=True)
    e = E.exp(scores - m)
    probs = e / E.sum(e, dim=-1, keepdim=True)
    if ctx.has_attr("prob_mod"):
        (probs,) = ctx.run(ctx.subgraph("prob_mod"), [probs])
        probs = ctx.tensor(probs, work)
    out = E.matmul(probs, E.cast(v, work) if v.dtype is not work else v)
    return out if out.dtype is v.dtype else E.cast(out, v.dtype)


def _heads_time_major(t, heads):
    """(B, T, heads * D) -> (T, B, heads, D)."""
    b, steps, hidden = t.shape
    return E.permute(E.reshape(t, (b, steps, heads, hidden // heads)), (1, 0, 2, 3))


@converter("LinearAttention", 27)
def _linear_attention(ctx, q, k, v, past_state=None, decay=None, beta=None):
    rule = ctx.attr("update_rule", "gated_delta")
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise ctx.error(f"unknown update_rule {rule!r}")
    hq, hk = ctx.attr("q_num_heads", 0), ctx.attr("kv_num_heads", 0)
    if hq <= 0 or hk <= 0 or hq % hk:
        raise ctx.error(f"q_num_heads ({hq}) must be a positive multiple of kv_num_heads ({hk})")
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gated != given(decay) or delta != given(beta):
        raise ctx.error(
            f"update_rule {rule!r} {'needs' if gated else 'forbids'} decay and "
            f"{'needs' if delta else 'forbids'} beta"
        )
    q, k, v = ctx.tensor(q), ctx.tensor(k), ctx.tensor(v)
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
        raise ctx.error("query, key and value must be 3-D (B, T, heads * D)")
    out_dtype = q.dtype
    f32 = _dt.float32
    b, steps = q.shape[0], q.shape[1]
    dk, dv = q.shape[2] // hq, v.shape[2] // hk
    xs = [E.cast(_heads_time_major(t, h), f32) for t, h in ((q, hq), (k, hk), (v, hk))]
    if gated:
        g = ctx.tensor(decay)
        if g.ndim != 3 or g.shape[2] not in (hk, hk * dk):
            raise ctx.error(f"decay's last dimension must be {hk} or {hk * dk}")
        xs.append(E.cast(_heads_time_major(g, hk), f32))  # (T, B, H, 1 or dk)
    if delta:
        be = ctx.tensor(beta)
        if be.ndim != 3 or be.shape[2] not in (hk, 1):
            raise ctx.error(f"beta's last dimension must be {hk} or 1")
        xs.append(E.cast(_heads_time_major(be, be.shape[2]), f32))  # (T, B, H or 1, 1)
    if given(past_state):
        past = ctx.tensor(past_state)
        if tuple(past.shape) != (b, hk, dk, dv):
            raise ctx.error(f"past_state must have shape {(b, hk, dk, dv)}")
        state_dtype, state = past.dtype, E.cast(past, f32)
    else:
        state_dtype, state = out_dtype, E.zeros((b, hk, dk, dv), dtype=f32)
    scale = ctx.attr("scale", 0.0) or 1.0 / math.sqrt(dk)
    group = hq // hk

    def step(s, inputs):
        q_t, k_t, v_t = inputs[:3]
        rest = list(inputs[3:])
        if gated:
            s = s * E.unsqueeze(E.exp(rest.pop(0)), -1)
        if delta:
            retrieved = E.squeeze(E.matmul(E.unsqueeze(k_t, 2), s), 2)
            v_t = rest.pop(0) * (v_t - retrieved)
        s = s + E.unsqueeze(k_t, -1) * E.unsqueeze(v_t, -2)
        read = s if group == 1 else E.repeat_interleave(s, group, dim=1)
        return s, E.squeeze(E.matmul(E.unsqueeze(q_t, 2), read), 2) * scale

    if steps == 0:
        out = E.zeros((b, 0, hq * dv), dtype=f32)
    else:
        state, outs = E.scan(step, state, tuple(xs))  # outs (T, B, Hq, dv)
        out = E.reshape(E.permute(outs, (1, 0, 2, 3)), (b, steps, hq * dv))
    out = out if out.dtype is out_dtype else E.cast(out, out_dtype)
    return out, state if state.dtype is state_dtype else E.cast(state, state_dtype)


@converter("CausalConvWithState", 27)
def _causal_conv_with_state(ctx, x, w, bias=None, past_state=None):
    x, w = ctx.tensor(x), ctx.tensor(w)
    activation = ctx.attr("activation", "none")
    if activation not in ("none", "silu", "swish"):
        raise ctx.error(f"unknown activation {activation!r}")
    if x.ndim != 3 or w.ndim != 3 or w.shape[0] != x.shape[1] or w.shape[1] != 1:
        raise ctx.error(
            f"expected input (B, C, L) and weight (C, 1, k), got {tuple(x.shape)} and "
            f"{tuple(w.shape)}"
        )
    b, c = x.shape[0], x.shape[1]
    taps = w.shape[2]
    if given(past_state):
        past = ctx.tensor(past_state, x.dtype)
        if tuple(past.shape) != (b, c, taps - 1):
            raise ctx.error(f"past_state must have shape {(b, c, taps - 1)}")
    else:
        past = E.zeros((b, c, taps - 1), dtype=x.dtype)
    padded = E.cat([past, x], 2)
    work = _work_dtype(x.dtype)
    conv_in = padded if padded.dtype is work else E.cast(padded, work)
    bias_t = None if not given(bias) else ctx.tensor(bias, work)
    y = E.conv1d(conv_in, E.cast(w, work) if w.dtype is not work else w, bias_t, groups=c)
    if activation != "none":
        if x.dtype is not work:  # the reference rounds the convolution to the input's dtype
            y = E.cast(E.cast(y, x.dtype), work)
        y = y * E.sigmoid(y)
    y = y if y.dtype is x.dtype else E.cast(y, x.dtype)
    return y, E.narrow(padded, 2, padded.shape[2] - (taps - 1), taps - 1)
