"""``scaled_dot_product_attention`` (PyTorch's F.scaled_dot_product_attention) as a composite:
``softmax(q @ k^T * scale + mask) @ v`` over the last two dimensions; leading dimensions are
batches and broadcast, so (N, H, L, E) and (N, L, E) inputs both work.

Masks: a bool ``attn_mask`` marks with True the positions that take part in attention (the others
get -inf); a float mask is added to the scores. ``is_causal`` keeps key ``j <= i`` for query ``i``
(the top-left aligned lower triangle, as PyTorch). A query row whose every key is masked out gets
zeros (PyTorch's behaviour) rather than NaN. The scale multiplies the query before the product
(an (L, E) pass instead of an (L, S) one).

Where no gradient is wanted (grad mode off, or no input requiring one) and there is no dropout,
the whole computation is one ``attention`` op (ops/attention.py: the same arithmetic, one C
call that keeps the scores in cache); otherwise the composite is recorded, so training
differentiates the ops it always did.
"""

from __future__ import annotations

import math

from .. import dtypes as dt
from ..backends import cuda as _sdp_switches
from ..errors import ArgumentError, DTypeError, ShapeError
from ..grad_mode import is_grad_enabled
from ..graph import scope as _scope
from ..ops import _item_scalars as _items
from ..ops import _torch_flops
from ..ops import api as E
from ..ops._autocast import Autocast, autocasts
from ..ops._node_names import rename_node
from ..ops._registry import apply, building_graph, export
from ..ops._util import broadcast_shapes, fmt_shape
from ..ops.attention import ATTENTION, causal_keep
from ..ops.promotion import to_tensor
from ._common import float_input
from .causal_bias import CausalBias
from .dropout import dropout
from .softmax import stable_softmax


def _check_shapes(q, k, v, enable_gqa: bool):
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ShapeError(
            f"query, key and value need at least 2 dimensions (..., L, E); got shapes "
            f"{fmt_shape(q.shape)}, {fmt_shape(k.shape)}, {fmt_shape(v.shape)}",
            op="scaled_dot_product_attention",
        )
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ShapeError(
            f"query {fmt_shape(q.shape)}, key {fmt_shape(k.shape)} and value "
            f"{fmt_shape(v.shape)} do not fit: query and key must share the embedding size "
            "(last dimension) and key and value the sequence length (second to last)",
            op="scaled_dot_product_attention",
        )
    if enable_gqa and q.ndim >= 3:
        hq, hk, hv = q.shape[-3], k.shape[-3], v.shape[-3]
        if hk != hv or hq % hk:
            raise ShapeError(
                f"with enable_gqa the query heads ({hq}) must be a multiple of the key/value "
                f"heads ({hk}, {hv}), which must be equal",
                op="scaled_dot_product_attention",
            )


def _repeat_heads(t, times: int):
    return t if times == 1 else E.repeat_interleave(t, times, dim=-3)


def without_grad(*tensors) -> bool:
    """Whether no gradient is wanted through ``tensors`` (None entries ignored): grad mode is
    off, or eagerly none of them requires one. While a graph is recorded with grad mode on, a
    backward may later be taken from any value (a traced training step), so one is wanted.
    Attention then runs as one fused op."""
    if not is_grad_enabled():
        return True
    if building_graph():
        return False
    return not any(t is not None and t.requires_grad for t in tensors)


def _fused(q, k, v, attn_mask, is_causal: bool, s: float):
    """The ``attention`` op on the composite's operands, or None where the composite must run
    (a mask that is not bool or of q's dtype, or that broadcasts beyond the scores' shape)."""
    mask = None
    if attn_mask is not None:
        mask = to_tensor(attn_mask)
        if mask.dtype is not dt.bool_ and mask.dtype is not q.dtype:
            return None
        batch = broadcast_shapes("scaled_dot_product_attention", q.shape[:-2], k.shape[:-2])
        scores = tuple(batch) + (q.shape[-2], k.shape[-2])
        shape = broadcast_shapes("scaled_dot_product_attention", mask.shape, scores)
        if tuple(shape) != scores:
            return None
    operands = (q, k, v) if mask is None else (q, k, v, mask)
    safe = mask is not None  # the composite's: a masked row may be empty, a causal one never
    return apply(ATTENTION, *operands, scale=s, causal=is_causal, safe=safe)


def _mask_bias(attn_mask, scores):
    """The mask as something to combine with the scores: ('keep', bool) or ('add', float)."""
    mask = to_tensor(attn_mask)
    broadcast_shapes("scaled_dot_product_attention", mask.shape, scores.shape)
    if mask.dtype is dt.bool_:
        return "keep", mask
    if not mask.dtype.is_floating_point:
        raise DTypeError(
            f"attn_mask must be a bool or float tensor, got {mask.dtype}",
            op="scaled_dot_product_attention",
        )
    return "add", mask if mask.dtype is scores.dtype else E.cast(mask, scores.dtype)


@export(functional=True, toplevel=False)
@_scope.composite("scaled_dot_product_attention")  # the tools count attention as one call
@autocasts(Autocast.LOWER)
def scaled_dot_product_attention(
    query,
    key,
    value,
    attn_mask=None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    *,
    generator=None,
):
    """``softmax(query @ key^T * scale + mask) @ value`` with PyTorch's arguments and defaults
    (``scale`` defaults to ``1 / sqrt(E)``; dropout on the attention weights when
    ``dropout_p > 0``, always applied as in PyTorch's functional form)."""
    op = "scaled_dot_product_attention"
    if isinstance(attn_mask, CausalBias):  # (torch.nn.attention.bias's causal masks)
        attn_mask, is_causal = attn_mask.attention_arguments(is_causal)
    if not _sdp_switches.sdp_runnable():
        enabled = ", ".join(str(b) for b in _sdp_switches.sdp_backends_enabled()) or "none"
        raise ArgumentError(
            "No viable backend for scaled_dot_product_attention was found: the CPU runs "
            f"SDPBackend.MATH or SDPBackend.FLASH_ATTENTION, and the enabled ones are {enabled} "
            "(see ember.nn.attention.sdpa_kernel)",
            op=op,
        )
    q = float_input(op, query, "query")
    k = float_input(op, key, "key")
    v = float_input(op, value, "value")
    if not (q.dtype is k.dtype is v.dtype):
        raise DTypeError(
            f"query, key and value must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}",
            op=op,
        )
    _check_shapes(q, k, v, enable_gqa)
    if enable_gqa and q.ndim >= 3:
        k = _repeat_heads(k, q.shape[-3] // k.shape[-3])
        v = _repeat_heads(v, q.shape[-3] // v.shape[-3])
    if is_causal and attn_mask is not None:
        raise ArgumentError(f"{op}: give either attn_mask or is_causal=True, not both")
    if _torch_flops.REGIONS.watchers and _takes_flash(q, dropout_p):
        # (PyTorch's FlopCounterMode has no formula for its CPU flash kernel or its backward)
        with _torch_flops.counted_as(None):
            return _run(q, k, v, attn_mask, dropout_p, is_causal, scale, generator)
    return _run(q, k, v, attn_mask, dropout_p, is_causal, scale, generator)


def _takes_flash(q, dropout_p) -> bool:
    """PyTorch's CPU backend choice: its flash kernel for 4-D inputs without dropout (where
    that backend is enabled), else the math path (ember's composite, op for op)."""
    flash = q.ndim == 4 and not (_items.is_item(dropout_p) or dropout_p > 0.0)
    return flash and _sdp_switches.flash_sdp_enabled()


def _run(q, k, v, attn_mask, dropout_p, is_causal, scale, generator):
    if q.dtype is dt.bfloat16 or q.dtype is dt.float16:
        # computed in float32 and rounded once, as PyTorch's CPU attention accumulates its
        # products and takes its softmax in float: 16-bit scores and weights rounded op by op
        # were an ulp off on average, far more where the output cancels (and NumPy has no
        # fast 16-bit product for the fused op's reference kernel to fall back on)
        if attn_mask is not None:
            mask = to_tensor(attn_mask)
            attn_mask = mask.to(dt.float32) if mask.dtype is q.dtype else mask
        wide = (q.to(dt.float32), k.to(dt.float32), v.to(dt.float32))
        out = _attention(*wide, attn_mask, dropout_p, is_causal, scale, generator)
        return _named(out.to(q.dtype), q, dropout_p)
    out = _attention(q, k, v, attn_mask, dropout_p, is_causal, scale, generator)
    return _named(out, q, dropout_p)


def _named(out, q, dropout_p):
    """PyTorch's node: its CPU flash attention kernel's (`_takes_flash`), else the math path's
    last op, which ember's composite shares."""
    if _takes_flash(q, dropout_p):
        return rename_node(out, "ScaledDotProductFlashAttentionForCpuBackward0", q)
    return out


def _attention(q, k, v, attn_mask, dropout_p, is_causal, scale, generator):
    """`scaled_dot_product_attention` on checked operands (heads repeated for GQA)."""
    item_scale = _items.is_item(scale)  # (a traced .item(): q times its tensor)
    s = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale if item_scale else float(scale)
    if dropout_p <= 0.0 and not item_scale and without_grad(q, k, v, attn_mask):
        out = _fused(q, k, v, attn_mask, is_causal, s)
        if out is not None:
            return out
    scores = E.matmul(q * s, E.transpose(k, -2, -1))
    last = scores.ndim - 1
    if is_causal:
        keep = causal_keep(q.shape[-2], k.shape[-2])
        # key 0 is always kept, so no row is fully masked and the plain softmax is safe
        weights = stable_softmax(E.where(keep, scores, float("-inf")), last)
    elif attn_mask is not None:
        how, mask = _mask_bias(attn_mask, scores)
        scores = E.where(mask, scores, float("-inf")) if how == "keep" else scores + mask
        weights = stable_softmax(scores, scores.ndim - 1, safe=True)
    else:
        weights = stable_softmax(scores, last)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, True, generator=generator)
    return E.matmul(weights, v)
