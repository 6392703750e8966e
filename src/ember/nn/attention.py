"""`MultiheadAttention` with PyTorch's parameters (``in_proj_weight`` (3E, E) packing the query,
key and value projections, or ``q_proj_weight``/``k_proj_weight``/``v_proj_weight`` when
``kdim``/``vdim`` differ; ``in_proj_bias``; ``out_proj``), masks and outputs.

Mask conventions are PyTorch's for this module: in a boolean ``attn_mask`` or
``key_padding_mask`` True means "may NOT attend"; float masks are added to the scores.
"""

from __future__ import annotations

import math

from ..errors import DTypeError, ShapeError
from ..functional.attention import without_grad
from ..ops import api as E
from ..ops._registry import apply
from ..ops._util import fmt_shape
from ..ops.attention import ATTENTION
from ..tensor import Tensor
from . import functional as F
from . import init
from .linear import NonDynamicallyQuantizableLinear
from .module import Module
from .parameter import new_parameter


def _additive_mask(mask: Tensor | None, dtype, what: str) -> Tensor | None:
    """A bool mask (True = masked) becomes 0 / -inf in ``dtype``; a float mask is kept."""
    if mask is None:
        return None
    if mask.dtype.is_bool:
        return E.where(mask, float("-inf"), E.zeros((), dtype=dtype))
    if not mask.dtype.is_floating_point:
        raise DTypeError(
            f"{what} must be a bool or floating-point tensor, got {mask.dtype}",
            op="MultiheadAttention",
        )
    return mask if mask.dtype is dtype else mask.to(dtype)


def _check(cond: bool, message: str) -> None:
    if not cond:
        raise ShapeError(message, op="MultiheadAttention")


class MultiheadAttention(Module):
    """Attention from a query sequence to key/value sequences with ``num_heads`` heads.

    Inputs are (L, N, E) (or (N, L, E) with ``batch_first``) or unbatched (L, E); returns the
    output and, if ``need_weights``, the attention weights (averaged over heads unless
    ``average_attn_weights=False``)."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} "
                f"and num_heads={num_heads} instead"
            )
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise ValueError(
                f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})"
            )
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = new_parameter((embed_dim, embed_dim), device, dtype)
            self.k_proj_weight = new_parameter((embed_dim, self.kdim), device, dtype)
            self.v_proj_weight = new_parameter((embed_dim, self.vdim), device, dtype)
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = new_parameter((3 * embed_dim, embed_dim), device, dtype)
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = new_parameter((3 * embed_dim,), device, dtype)
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(
            embed_dim, embed_dim, bias=bias, device=device, dtype=dtype
        )
        if add_bias_kv:
            self.bias_k = new_parameter((1, 1, embed_dim), device, dtype)
            self.bias_v = new_parameter((1, 1, embed_dim), device, dtype)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def _project(self, query: Tensor, key: Tensor, value: Tensor) -> tuple:
        e = self.embed_dim
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e : 2 * e], b[2 * e :])
        if not self._qkv_same_embed_dim:
            return (
                F.linear(query, self.q_proj_weight, bq),
                F.linear(key, self.k_proj_weight, bk),
                F.linear(value, self.v_proj_weight, bv),
            )
        w = self.in_proj_weight
        if query is key and key is value:  # self-attention: one matmul for all three
            return tuple(F.linear(query, w, b).chunk(3, -1))
        return (
            F.linear(query, w[:e], bq),
            F.linear(key, w[e : 2 * e], bk),
            F.linear(value, w[2 * e :], bv),
        )

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple:
        batched = query.ndim == 3
        _check(
            query.ndim in (2, 3) and key.ndim == query.ndim and value.ndim == query.ndim,
            f"query, key and value must all be 3-D (batched) or 2-D (unbatched), got shapes "
            f"{fmt_shape(query.shape)}, {fmt_shape(key.shape)}, {fmt_shape(value.shape)}",
        )
        if self.batch_first and batched:
            same_kv, same_qk = key is value, query is key
            query = query.transpose(0, 1)
            key = query if same_qk else key.transpose(0, 1)
            value = key if same_kv else value.transpose(0, 1)
        if not batched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        if is_causal and attn_mask is None:
            raise ValueError(
                "MultiheadAttention: is_causal is a hint that attn_mask is causal; pass the "
                "causal attn_mask too (e.g. Transformer.generate_square_subsequent_mask)"
            )
        out, weights = self._attend(
            query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights
        )
        if not batched:
            out = out.squeeze(1)
            weights = None if weights is None else weights.squeeze(0)
        elif self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def _attend(self, query, key, value, key_padding_mask, need_weights, attn_mask, average):
        tgt_len, bsz, embed_dim = query.shape
        heads, head_dim = self.num_heads, self.head_dim
        _check(
            embed_dim == self.embed_dim,
            f"expected an embedding dimension of {self.embed_dim}, got query of shape "
            f"{fmt_shape(query.shape)}",
        )
        _check(
            key.shape[:2] == value.shape[:2] and key.shape[1] == bsz,
            f"key {fmt_shape(key.shape)} and value {fmt_shape(value.shape)} must share their "
            f"sequence and batch sizes with each other and the batch size {bsz} of the query",
        )
        padding = _additive_mask(key_padding_mask, query.dtype, "key_padding_mask")
        mask = _additive_mask(attn_mask, query.dtype, "attn_mask")
        q, k, v = self._project(query, key, value)
        src_len = k.shape[0]
        if mask is not None:
            if mask.ndim == 2:
                _check(
                    tuple(mask.shape) == (tgt_len, src_len),
                    f"the 2-D attn_mask has shape {fmt_shape(mask.shape)}, but should be "
                    f"{fmt_shape((tgt_len, src_len))}",
                )
                mask = mask.unsqueeze(0)
            else:
                _check(
                    tuple(mask.shape) == (bsz * heads, tgt_len, src_len),
                    f"the attn_mask has shape {fmt_shape(mask.shape)}, but should be "
                    f"{fmt_shape((tgt_len, src_len))} or "
                    f"{fmt_shape((bsz * heads, tgt_len, src_len))}",
                )
        p = self.dropout if self.training else 0.0
        fused = not need_weights and p == 0.0 and self.bias_k is None and not self.add_zero_attn
        if fused and without_grad(q, k, v, mask, padding):
            out = self._attend_fused(q, k, v, mask, padding)
            if out is not None:
                return out, None
        if self.bias_k is not None:  # one extra learned key/value position
            k = E.cat([k, self.bias_k.expand((1, bsz, embed_dim))])
            v = E.cat([v, self.bias_v.expand((1, bsz, embed_dim))])
            mask = None if mask is None else F.pad(mask, (0, 1))
            padding = None if padding is None else F.pad(padding, (0, 1))
        # (S, N, E) -> (N * heads, S, head_dim)
        q = q.reshape(tgt_len, bsz * heads, head_dim).transpose(0, 1)
        k = k.reshape(k.shape[0], bsz * heads, head_dim).transpose(0, 1)
        v = v.reshape(v.shape[0], bsz * heads, head_dim).transpose(0, 1)
        if self.add_zero_attn:  # one extra all-zero key/value position
            zeros = E.zeros((bsz * heads, 1, head_dim), dtype=k.dtype)
            k, v = E.cat([k, zeros], 1), E.cat([v, zeros], 1)
            mask = None if mask is None else F.pad(mask, (0, 1))
            padding = None if padding is None else F.pad(padding, (0, 1))
        src_len = k.shape[1]
        if padding is not None:
            _check(
                tuple(padding.shape) == (bsz, src_len),
                f"key_padding_mask has shape {fmt_shape(padding.shape)}, but should be "
                f"{fmt_shape((bsz, src_len))}",
            )
            padding = (
                padding.reshape(bsz, 1, 1, src_len)
                .expand((bsz, heads, 1, src_len))
                .reshape(bsz * heads, 1, src_len)
            )
            mask = padding if mask is None else mask + padding
        scores = E.matmul(q * math.sqrt(1.0 / head_dim), k.transpose(-2, -1))
        if mask is not None:
            scores = scores + mask
        weights = F.softmax(scores, -1)
        if p > 0.0:
            weights = F.dropout(weights, p)
        out = E.matmul(weights, v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = F.linear(out, self.out_proj.weight, self.out_proj.bias)
        out = out.reshape(tgt_len, bsz, embed_dim)
        if not need_weights:
            return out, None
        weights = weights.reshape(bsz, heads, tgt_len, src_len)
        if average:
            weights = weights.mean(1)
        return out, weights

    def _attend_fused(self, q, k, v, mask, padding):
        """`_attend`'s arithmetic as one ``attention`` op where no gradient and no weights are
        wanted: the heads are permuted views of the projections (the kernel reads them in
        place), the masks reshaped to (N, heads, L, S) and added as the composite adds them.
        None where the masks do not fit the op (the composite then runs)."""
        tgt_len, bsz, embed_dim = q.shape
        src_len, heads, head_dim = k.shape[0], self.num_heads, self.head_dim
        if padding is not None:
            _check(
                tuple(padding.shape) == (bsz, src_len),
                f"key_padding_mask has shape {fmt_shape(padding.shape)}, but should be "
                f"{fmt_shape((bsz, src_len))}",
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
        out = apply(ATTENTION, *operands, scale=scale, causal=False, safe=False)
        out = out.permute(2, 0, 1, 3).reshape(tgt_len * bsz, embed_dim)
        out = F.linear(out, self.out_proj.weight, self.out_proj.bias)
        return out.reshape(tgt_len, bsz, embed_dim)
