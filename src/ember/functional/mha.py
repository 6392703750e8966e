"""Multi-head attention's arithmetic: PyTorch's ``F.multi_head_attention_forward`` and the
body of ``nn.MultiheadAttention`` (nn/attention/__init__.py holds the parameters and calls
`attend`).

Inputs are (L, N, E) (unbatched (L, E) in the functional form); the projections are one
packed ``in_proj_weight`` (3E, E) or three separate ones, ``in_proj_bias`` (3E,). Mask
conventions are PyTorch's for this module: in a boolean ``attn_mask`` or ``key_padding_mask``
True means "may NOT attend"; float masks are added to the scores. ``bias_k``/``bias_v`` add
one learned key/value position, ``add_zero_attn`` one zero position, ``static_k``/``static_v``
((N * heads, S, head_dim)) replace the projected keys/values.

Where no gradient and no weights are wanted and there is no dropout, the arithmetic is one
``attention`` op (ops/attention.py), the heads permuted views of the projections.
"""

from __future__ import annotations

import math

from ..errors import ArgumentError, DTypeError, ShapeError
from ..ops import _torch_flops
from ..ops import api as E
from ..ops._registry import apply, export
from ..ops._util import fmt_shape
from ..ops.attention import ATTENTION
from ..ops.linalg import linear
from ..ops.pad import pad
from .attention import without_grad
from .dropout import dropout
from .softmax import softmax, stable_softmax

_OP = "multi_head_attention_forward"


def additive_mask(mask, dtype, what: str, op: str = _OP):
    """A bool mask (True = masked) becomes 0 / -inf in ``dtype``; a float mask is kept."""
    if mask is None:
        return None
    if mask.dtype.is_bool:
        return E.where(mask, float("-inf"), E.zeros((), dtype=dtype))
    if not mask.dtype.is_floating_point:
        raise DTypeError(f"{what} must be a bool or floating-point tensor, got {mask.dtype}", op=op)
    return mask if mask.dtype is dtype else mask.to(dtype)


def _check(cond: bool, message: str, op: str) -> None:
    if not cond:
        raise ShapeError(message, op=op)


def project(query, key, value, in_proj_weight, in_proj_bias, separate):
    """The query, key and value projections: ``separate`` is None (one packed weight) or the
    (q, k, v) weights."""
    e = query.shape[-1]
    b = in_proj_bias
    bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e : 2 * e], b[2 * e :])
    if separate is not None:
        wq, wk, wv = separate
        return linear(query, wq, bq), linear(key, wk, bk), linear(value, wv, bv)
    w = in_proj_weight
    if query is key and key is value:  # self-attention: one matmul for all three
        return tuple(linear(query, w, b).chunk(3, -1))
    return linear(query, w[:e], bq), linear(key, w[e : 2 * e], bk), linear(value, w[2 * e :], bv)


def attend(
    query,
    key,
    value,
    *,
    num_heads: int,
    in_proj_weight,
    in_proj_bias,
    separate,
    bias_k,
    bias_v,
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight,
    out_proj_bias,
    key_padding_mask=None,
    need_weights: bool = True,
    attn_mask=None,
    average_attn_weights: bool = True,
    static_k=None,
    static_v=None,
    fully_masked_nan: bool = False,
    op: str = _OP,
):
    """Batched (L, N, E) attention: ``(output (L, N, E), weights or None)``. Without weights a
    fully masked row gives zeros (PyTorch attends by scaled_dot_product_attention there),
    unless ``fully_masked_nan`` (the module's call PyTorch runs on its fused inference kernel,
    which gives NaN there, as the softmax with weights does)."""
    safe = not (need_weights or fully_masked_nan)
    tgt_len, bsz, embed_dim = query.shape
    heads = num_heads
    head_dim = embed_dim // heads
    _check(
        key.shape[:2] == value.shape[:2] and key.shape[1] == bsz,
        f"key {fmt_shape(key.shape)} and value {fmt_shape(value.shape)} must share their "
        f"sequence and batch sizes with each other and the batch size {bsz} of the query",
        op,
    )
    padding = additive_mask(key_padding_mask, query.dtype, "key_padding_mask", op)
    mask = additive_mask(attn_mask, query.dtype, "attn_mask", op)
    q, k, v = project(query, key, value, in_proj_weight, in_proj_bias, separate)
    src_len = k.shape[0] if static_k is None else static_k.shape[1]
    if mask is not None:
        if mask.ndim == 2:
            _check(
                tuple(mask.shape) == (tgt_len, src_len),
                f"the 2-D attn_mask has shape {fmt_shape(mask.shape)}, but should be "
                f"{fmt_shape((tgt_len, src_len))}",
                op,
            )
            mask = mask.unsqueeze(0)
        else:
            _check(
                tuple(mask.shape) == (bsz * heads, tgt_len, src_len),
                f"the attn_mask has shape {fmt_shape(mask.shape)}, but should be "
                f"{fmt_shape((tgt_len, src_len))} or "
                f"{fmt_shape((bsz * heads, tgt_len, src_len))}",
                op,
            )
    fused = (
        not need_weights
        and dropout_p == 0.0
        and bias_k is None
        and not add_zero_attn
        and static_k is None
        and static_v is None
    )
    if fused and without_grad(q, k, v, mask, padding):
        out = _attend_fused(q, k, v, mask, padding, heads, out_proj_weight, out_proj_bias, safe, op)
        if out is not None:
            return out, None
    if bias_k is not None:  # one extra learned key/value position
        _check(static_k is None, "bias cannot be added to static key", op)
        _check(static_v is None, "bias cannot be added to static value", op)
        k = E.cat([k, bias_k.expand((1, bsz, embed_dim))])
        v = E.cat([v, bias_v.expand((1, bsz, embed_dim))])
        mask = None if mask is None else pad(mask, (0, 1))
        padding = None if padding is None else pad(padding, (0, 1))
    # (S, N, E) -> (N * heads, S, head_dim)
    q = q.reshape(tgt_len, bsz * heads, head_dim).transpose(0, 1)
    k = (
        k.reshape(k.shape[0], bsz * heads, head_dim).transpose(0, 1)
        if static_k is None
        else static_k
    )
    v = (
        v.reshape(v.shape[0], bsz * heads, head_dim).transpose(0, 1)
        if static_v is None
        else static_v
    )
    k = k if static_k is None else static_k
    v = v if static_v is None else static_v
    for what, t in (("static_k", static_k), ("static_v", static_v)):
        if t is not None:
            _check(
                tuple(t.shape[::2]) == (bsz * heads, head_dim),
                f"{what} has shape {fmt_shape(t.shape)}, but should be "
                f"{fmt_shape((bsz * heads, '*', head_dim))}",
                op,
            )
    if add_zero_attn:  # one extra all-zero key/value position
        zeros = E.zeros((bsz * heads, 1, head_dim), dtype=k.dtype)
        k, v = E.cat([k, zeros], 1), E.cat([v, zeros], 1)
        mask = None if mask is None else pad(mask, (0, 1))
        padding = None if padding is None else pad(padding, (0, 1))
    src_len = k.shape[1]
    if padding is not None:
        _check(
            tuple(padding.shape) == (bsz, src_len),
            f"key_padding_mask has shape {fmt_shape(padding.shape)}, but should be "
            f"{fmt_shape((bsz, src_len))}",
            op,
        )
        padding = (
            padding.reshape(bsz, 1, 1, src_len)
            .expand((bsz, heads, 1, src_len))
            .reshape(bsz * heads, 1, src_len)
        )
        mask = padding if mask is None else mask + padding
    if fused and _torch_flops.REGIONS.watchers:
        # (PyTorch runs these through scaled_dot_product_attention's CPU flash kernel, which
        # its FlopCounterMode does not count)
        with _torch_flops.counted_as(None):
            weights, out = _weighted(q, k, v, mask, dropout_p, head_dim, safe)
    else:
        weights, out = _weighted(q, k, v, mask, dropout_p, head_dim, safe)
    out = out.transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias)
    out = out.reshape(tgt_len, bsz, embed_dim)
    if not need_weights:
        return out, None
    weights = weights.reshape(bsz, heads, tgt_len, src_len)
    if average_attn_weights:
        weights = weights.mean(1)
    return out, weights


def _weighted(q, k, v, mask, dropout_p, head_dim, safe):
    """The attention weights and their average of the values, per (batch * head)."""
    scores = E.matmul(q * math.sqrt(1.0 / head_dim), k.transpose(-2, -1))
    if mask is not None:
        scores = scores + mask
    # without weights PyTorch attends by scaled_dot_product_attention, whose fully masked rows
    # (a sample whose every key is padding) give zeros, not NaN: a NaN there would reach every
    # parameter's gradient; with weights it takes the plain softmax, NaN rows and all
    weights = stable_softmax(scores, 2, safe=True) if safe else softmax(scores, -1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return weights, E.matmul(weights, v)


def _attend_fused(q, k, v, mask, padding, heads, out_proj_weight, out_proj_bias, safe, op):
    """`attend`'s arithmetic as one ``attention`` op where no gradient and no weights are
    wanted: the heads are permuted views of the projections (the kernel reads them in place),
    the masks reshaped to (N, heads, L, S) and added as the composite adds them. None where
    the masks do not fit the op (the composite then runs)."""
    tgt_len, bsz, embed_dim = q.shape
    src_len, head_dim = k.shape[0], embed_dim // heads
    if padding is not None:
        _check(
            tuple(padding.shape) == (bsz, src_len),
            f"key_padding_mask has shape {fmt_shape(padding.shape)}, but should be "
            f"{fmt_shape((bsz, src_len))}",
            op,
        )
    for m in (mask, padding):
        if m is not None and m.dtype is not q.dtype:
            return None

    def split(t, length):  # (S, N, E) -> (N, heads, S, head_dim), a view
        return t.reshape(length, bsz, heads, head_dim).permute(1, 2, 0, 3)

    operands = [split(q, tgt_len), split(k, src_len), split(v, src_len)]
    if mask is not None:  # (1 or N * heads, L, S)
        lead = (bsz, heads) if mask.shape[0] > 1 else (1, 1)
        mask = mask.reshape(lead + (tgt_len, src_len))
    if padding is not None:
        padding = padding.reshape(bsz, 1, 1, src_len)
        mask = padding if mask is None else mask + padding
    if mask is not None:
        operands.append(mask)
    scale = math.sqrt(1.0 / head_dim)
    out = apply(ATTENTION, *operands, scale=scale, causal=False, safe=safe)  # (see `attend`)
    out = out.permute(2, 0, 1, 3).reshape(tgt_len * bsz, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias)
    return out.reshape(tgt_len, bsz, embed_dim)


@export(functional=True, toplevel=False)
def multi_head_attention_forward(
    query,
    key,
    value,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight,
    in_proj_bias,
    bias_k,
    bias_v,
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight,
    out_proj_bias,
    training: bool = True,
    key_padding_mask=None,
    need_weights: bool = True,
    attn_mask=None,
    use_separate_proj_weight: bool = False,
    q_proj_weight=None,
    k_proj_weight=None,
    v_proj_weight=None,
    static_k=None,
    static_v=None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
):
    """PyTorch's functional multi-head attention (the module docstring's conventions): query
    (L, N, E) or unbatched (L, E), key/value (S, N, E) or (S, E). Returns the output and, with
    ``need_weights``, the attention weights (averaged over heads unless
    ``average_attn_weights=False``). ``is_causal`` is a hint that ``attn_mask`` is causal, which
    must then be given, as PyTorch requires."""
    batched = query.ndim == 3
    _check(
        query.ndim in (2, 3) and key.ndim == query.ndim and value.ndim == query.ndim,
        f"query, key and value must all be 3-D (batched) or 2-D (unbatched), got shapes "
        f"{fmt_shape(query.shape)}, {fmt_shape(key.shape)}, {fmt_shape(value.shape)}",
        _OP,
    )
    embed_dim = query.shape[-1]
    _check(
        embed_dim == embed_dim_to_check,
        f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}",
        _OP,
    )
    _check(
        embed_dim % num_heads == 0,
        f"embed_dim {embed_dim} not divisible by num_heads {num_heads}",
        _OP,
    )
    if is_causal and attn_mask is None:
        raise RuntimeError(
            f"{_OP}: need attn_mask if specifying the is_causal hint (e.g. "
            "nn.Transformer.generate_square_subsequent_mask)"
        )
    separate = None
    if use_separate_proj_weight:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise ArgumentError(
                f"{_OP}: use_separate_proj_weight is True but q_proj_weight, k_proj_weight or "
                "v_proj_weight is None"
            )
        separate = (q_proj_weight, k_proj_weight, v_proj_weight)
    elif in_proj_weight is None:
        raise ArgumentError(f"{_OP}: use_separate_proj_weight is False but in_proj_weight is None")
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    out, weights = attend(
        query,
        key,
        value,
        num_heads=num_heads,
        in_proj_weight=in_proj_weight,
        in_proj_bias=in_proj_bias,
        separate=separate,
        bias_k=bias_k,
        bias_v=bias_v,
        add_zero_attn=add_zero_attn,
        dropout_p=dropout_p if training else 0.0,
        out_proj_weight=out_proj_weight,
        out_proj_bias=out_proj_bias,
        key_padding_mask=key_padding_mask,
        need_weights=need_weights,
        attn_mask=attn_mask,
        average_attn_weights=average_attn_weights,
        static_k=static_k,
        static_v=static_v,
    )
    if not batched:
        out = out.squeeze(1)
        weights = None if weights is None else weights.squeeze(0)
    return out, weights
