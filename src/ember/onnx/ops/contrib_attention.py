"""ONNX Runtime's contrib attention operators (``com.microsoft``), which its transformer
optimizer (onnxruntime.transformers.optimizer) writes into BERT- and GPT-style models:
Attention (the input projection, heads, masks and the key/value cache in one node),
MultiHeadAttention (projected query, key and value, packed or not) and EmbedLayerNormalization
(word, position and segment embeddings summed and layer-normalized, with the mask's lengths);
and their 8-bit forms from its quantizer, QAttention (input and weight dequantized, the weight
per tensor or per column) and QEmbedLayerNormalization (each table dequantized).

Written after ONNX Runtime's contrib operator documentation and its CPU kernels' semantics:
masks are additive, ``mask_filter_value`` (-10000 by default) at each masked (query, key) pair,
the causal frontier (``unidirectional``) replacing the future keys' scores by the dtype's lowest
value; a mask given as lengths (1-D: the end of each sequence's keys; 2-D ``[2B]``: ends, then
starts) or as ones and zeros (2-D ``(B, L)``, 3-D ``(B, S, L)``). Rotary embeddings inside
Attention (``do_rotary``) and a shared past/present buffer are refused by name.
"""

from __future__ import annotations

import math

import numpy as np

from ... import dtypes as _dt
from .._convert import converter
from ._common import E, F, constant, given

_MS = "com.microsoft"


def _heads(t, heads: int):
    """(B, L, heads * H) -> (B, heads, L, H)."""
    b, length, hidden = t.shape
    return E.permute(E.reshape(t, (b, length, heads, hidden // heads)), (0, 2, 1, 3))


def _merge(t):
    """(B, N, S, H) -> (B, S, N * H)."""
    b, n, s, h = t.shape
    return E.reshape(E.permute(t, (0, 2, 1, 3)), (b, s, n * h))


def _num_heads(ctx) -> int:
    heads = int(ctx.attr("num_heads"))
    if heads <= 0:
        raise ctx.error(f"num_heads must be positive, got {heads}")
    return heads


def _key_mask(ctx, mask, batch: int, q_len: int, kv_len: int):
    """A bool, broadcasting to (B, 1, S, L), of the masked (query, key) pairs, from ``mask`` in
    any of the forms the module docstring lists; None where nothing is masked."""
    if not given(mask):
        return None
    m = ctx.tensor(mask)
    j = E.arange(kv_len)
    if m.ndim == 1 and m.shape[0] == batch:  # the end of each sequence's keys
        ends = E.reshape(E.cast(m, _dt.int64), (batch, 1, 1, 1))
        return j >= ends
    if m.ndim == 1 and m.shape[0] == 2 * batch:  # ends, then starts
        ends = E.reshape(E.cast(m[:batch], _dt.int64), (batch, 1, 1, 1))
        starts = E.reshape(E.cast(m[batch:], _dt.int64), (batch, 1, 1, 1))
        return E.logical_or(j >= ends, j < starts)
    if m.ndim == 2 and tuple(m.shape) == (batch, kv_len):
        return E.reshape(m == 0, (batch, 1, 1, kv_len))
    if m.ndim == 3 and tuple(m.shape) == (batch, q_len, kv_len):
        return E.reshape(m == 0, (batch, 1, q_len, kv_len))
    raise ctx.error(
        f"a mask of shape {tuple(m.shape)} for batch {batch}, {q_len} queries and {kv_len} keys "
        "is none of the forms read here ((B), (2B), (B, L), (B, S, L))"
    )


def _attend(ctx, q, k, v, mask, bias, past_len: int):
    """softmax(Q K^T * scale + bias + the masks) V over (B, N, S, H) heads."""
    dtype = q.dtype
    scale = ctx.attr("scale", None)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale in (None, 0.0) else float(scale)
    scores = E.matmul(q, E.transpose(k, -1, -2)) * scale
    if given(bias):
        scores = scores + ctx.tensor(bias, dtype)
    fill = float(ctx.attr("mask_filter_value", -10000.0))
    batch, q_len, kv_len = q.shape[0], q.shape[2], k.shape[2]
    masked = _key_mask(ctx, mask, batch, q_len, kv_len)
    if masked is not None:
        scores = scores + E.where(masked, fill, 0.0).to(dtype)
    if ctx.attr("unidirectional", 0):
        # the future keys set to the dtype's lowest value, replacing whatever else masked
        # them (onnxruntime's PrepareMask): a query whose every key the padding masks still
        # attends to its past keys alone
        i = np.arange(q_len).reshape(q_len, 1) + past_len
        future = np.arange(kv_len).reshape(1, kv_len) > i
        lowest = float(np.finfo(dtype.np).min)
        scores = E.where(constant(future), lowest, scores)
    return E.matmul(F.softmax(scores, dim=-1), v)


@converter("Attention", 1, domain=_MS)
def _attention(ctx, x, weights, bias=None, mask=None, past=None, attention_bias=None,
               past_sequence_length=None):  # fmt: skip
    if ctx.attr("do_rotary", 0):
        raise ctx.error("rotary embeddings inside Attention (do_rotary) are not read")
    if ctx.attr("past_present_share_buffer", 0):
        raise ctx.error("a past/present buffer shared in place is not read")
    x = ctx.tensor(x)
    qkv = E.matmul(x, ctx.tensor(weights, x.dtype))
    if given(bias):
        qkv = qkv + ctx.tensor(bias, x.dtype)
    return _attention_of(ctx, qkv, mask, past, attention_bias)


def _attention_of(ctx, qkv, mask, past, attention_bias):
    """Attention's and QAttention's heads, masks, key/value cache and output from the
    projected (B, S, 3 hidden) queries, keys and values."""
    heads = _num_heads(ctx)
    sizes = list(ctx.attr("qkv_hidden_sizes", []))
    if not sizes:
        sizes = [qkv.shape[-1] // 3] * 3
    if len(sizes) != 3 or sum(sizes) != qkv.shape[-1] or any(s % heads for s in sizes):
        raise ctx.error(
            f"qkv_hidden_sizes {sizes} do not split {qkv.shape[-1]} projected features into "
            f"three multiples of {heads} heads"
        )
    q, k, v = (_heads(t, heads) for t in E.split(qkv, sizes, -1))
    past_len = 0
    if given(past):
        past = ctx.tensor(past, qkv.dtype)  # (2, B, N, P, H)
        past_len = past.shape[3]
        k, v = E.cat([past[0], k], 2), E.cat([past[1], v], 2)
    out = _merge(_attend(ctx, q, k, v, mask, attention_bias, past_len))
    if ctx.output_used(1):
        return out, E.stack([k, v], 0)
    return out


def _projected(ctx, t, bias_part, heads: int, what: str):
    """A BSD input, with its slice of the bias, split into heads; a BNSH one as it is."""
    if t.ndim == 3:
        if bias_part is not None:
            t = t + bias_part
        return _heads(t, heads)
    if t.ndim == 4:
        if bias_part is not None:
            raise ctx.error(f"a bias with a 4-D (BNSH) {what} is not read")
        return t
    raise ctx.error(f"{what} must be 3-D (B, L, D) or 4-D (B, N, L, H), got {tuple(t.shape)}")


@converter("MultiHeadAttention", 1, domain=_MS)
def _multi_head_attention(ctx, query, key=None, value=None, bias=None, key_padding_mask=None,
                          attention_bias=None, past_key=None, past_value=None,
                          past_sequence_length=None, cache_indirection=None):  # fmt: skip
    if given(cache_indirection):
        raise ctx.error("cache_indirection (beam search) is not read")
    heads = _num_heads(ctx)
    q = ctx.tensor(query)
    dtype = q.dtype
    biases = [None, None, None]
    if q.ndim == 5:  # packed QKV: (B, S, N, 3, H)
        if given(key) or given(value):
            raise ctx.error("packed QKV takes no key or value inputs")
        q, k, v = (E.permute(q[:, :, :, i], (0, 2, 1, 3)) for i in range(3))
    else:
        if not given(key):
            raise ctx.error("a 3-D query needs key (and value) inputs")
        k = ctx.tensor(key, dtype)
        if given(bias):
            b = ctx.tensor(bias, dtype)
            d = q.shape[-1]
            biases = [b[:d], b[d : 2 * d], b[2 * d :]]
        q = _projected(ctx, q, biases[0], heads, "query")
        if k.ndim == 5:  # packed KV: (B, L, N, 2, H)
            if given(value):
                raise ctx.error("packed KV takes no value input")
            k, v = (E.permute(k[:, :, :, i], (0, 2, 1, 3)) for i in range(2))
        else:
            if not given(value):
                raise ctx.error("a key needs a value input")
            k = _projected(ctx, k, biases[1], heads, "key")
            v = _projected(ctx, ctx.tensor(value, dtype), biases[2], heads, "value")
    past_len = 0
    if given(past_key) and given(past_value):
        past_len = ctx.tensor(past_key).shape[2]
        k = E.cat([ctx.tensor(past_key, dtype), k], 2)
        v = E.cat([ctx.tensor(past_value, dtype), v], 2)
    out = _merge(_attend(ctx, q, k, v, key_padding_mask, attention_bias, past_len))
    if ctx.output_used(1) or ctx.output_used(2):
        return out, k, v
    return out


def _dequantized(ctx, q, scale, zero_point, axis_last: bool = False):
    """``(q - zero_point) * scale`` in float32: a scalar scale and zero point, or (with
    ``axis_last``) one per column of the last axis, as QAttention's weight may have."""
    values = E.cast(ctx.tensor(q), _dt.float32)
    scale = E.cast(ctx.tensor(scale), _dt.float32)
    zero = E.cast(ctx.tensor(zero_point), _dt.float32) if given(zero_point) else None
    for name, v in (("scale", scale), ("zero point", zero)):
        if v is None:
            continue
        size = int(np.prod(v.shape))
        if size != 1 and not (axis_last and v.ndim == 1 and size == values.shape[-1]):
            raise ctx.error(
                f"a {name} of shape {tuple(v.shape)} for a quantized tensor of shape "
                f"{tuple(values.shape)}: expected one value"
                + (" or one per column of the last axis" if axis_last else "")
            )
    if zero is not None:
        values = values - (E.reshape(zero, ()) if zero.ndim and zero.shape[0] == 1 else zero)
    return values * (E.reshape(scale, ()) if scale.ndim and scale.shape[0] == 1 else scale)


@converter("QAttention", 1, domain=_MS)
def _q_attention(ctx, x, weight, bias, x_scale, w_scale, mask=None, x_zero_point=None,
                 w_zero_point=None, past=None):  # fmt: skip
    """Attention on 8-bit input and weight (ONNX Runtime's quantized BERT): both dequantized
    (the weight's scale and zero point per tensor or per output column), then Attention's
    float computation; onnxruntime sums the integer products exactly and scales once, so the
    two differ by float32 rounding only."""
    if ctx.attr("do_rotary", 0):
        raise ctx.error("rotary embeddings inside QAttention (do_rotary) are not read")
    if ctx.attr("past_present_share_buffer", 0):
        raise ctx.error("a past/present buffer shared in place is not read")
    xf = _dequantized(ctx, x, x_scale, x_zero_point)
    wf = _dequantized(ctx, weight, w_scale, w_zero_point, axis_last=True)
    qkv = E.matmul(xf, wf) + ctx.tensor(bias, _dt.float32)
    return _attention_of(ctx, qkv, mask, past, None)


@converter("EmbedLayerNormalization", 1, domain=_MS)
def _embed_layer_norm(ctx, input_ids, segment_ids, word, position, segment=None, gamma=None,
                      beta=None, mask=None, position_ids=None):  # fmt: skip
    return _embedded_and_normalized(
        ctx, input_ids, segment_ids, ctx.tensor(word), position, segment, gamma, beta, mask,
        position_ids,
    )  # fmt: skip


@converter("QEmbedLayerNormalization", 1, domain=_MS)
def _q_embed_layer_norm(ctx, input_ids, segment_ids, word, position, segment, gamma, beta,
                        mask, word_scale, position_scale, segment_scale, gamma_scale,
                        beta_scale, word_zp, position_zp, segment_zp, gamma_zp,
                        beta_zp):  # fmt: skip
    """EmbedLayerNormalization over 8-bit tables, the embeddings, gamma and beta each
    dequantized with its own scale and zero point."""
    tables = [
        _dequantized(ctx, q, scale, zp) if given(q) else None
        for q, scale, zp in (
            (word, word_scale, word_zp),
            (position, position_scale, position_zp),
            (segment, segment_scale, segment_zp),
            (gamma, gamma_scale, gamma_zp),
            (beta, beta_scale, beta_zp),
        )
    ]
    out = _embedded_and_normalized(ctx, input_ids, segment_ids, *tables, mask, None)
    return out[:2] if isinstance(out, tuple) else out


def _embedded_and_normalized(ctx, input_ids, segment_ids, word, position, segment, gamma, beta,
                             mask, position_ids):  # fmt: skip
    """The embeddings summed and layer-normalized, and the mask's lengths; ``position``,
    ``segment``, ``gamma`` and ``beta`` are graph names or (dequantized) tensors."""

    def table(v, dtype):
        return v if v is None or hasattr(v, "shape") else ctx.tensor(v, dtype)

    ids = E.cast(ctx.tensor(input_ids), _dt.int64)
    batch, length = ids.shape
    total = F.embedding(ids, word)
    if given(position_ids):
        positions = E.cast(ctx.tensor(position_ids), _dt.int64)
        positions = E.broadcast_to(positions, (batch, length))
    else:
        positions = E.broadcast_to(E.arange(length), (batch, length))
    total = total + F.embedding(positions, table(position, word.dtype))
    if given(segment_ids) and _present(segment):
        segments = E.cast(ctx.tensor(segment_ids), _dt.int64)
        total = total + F.embedding(segments, table(segment, word.dtype))
    if not _present(gamma):
        raise ctx.error("EmbedLayerNormalization needs gamma")
    eps = float(ctx.attr("epsilon", 1e-12))
    beta_t = table(beta, word.dtype) if _present(beta) else None
    out = F.layer_norm(total, (total.shape[-1],), table(gamma, word.dtype), beta_t, eps)
    if given(mask):
        if ctx.attr("mask_index_type", 1) != 1:
            raise ctx.error("mask_index_type other than 1 (the lengths) is not read")
        lengths = E.cast(E.sum(E.cast(ctx.tensor(mask), _dt.int64), 1), _dt.int32)
    else:
        lengths = E.zeros((batch,), dtype=_dt.int32)
    if ctx.output_used(2):
        return out, lengths, total
    return (out, lengths) if ctx.output_used(1) else out


def _present(v) -> bool:
    """A given graph name, or a tensor computed here."""
    return hasattr(v, "shape") or given(v)
