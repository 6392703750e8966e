"""`MultiheadAttention` with PyTorch's parameters (``in_proj_weight`` (3E, E) packing the query,
key and value projections, or ``q_proj_weight``/``k_proj_weight``/``v_proj_weight`` when
``kdim``/``vdim`` differ; ``in_proj_bias``; ``out_proj``), masks and outputs. Its arithmetic is
``F.multi_head_attention_forward``'s (functional/mha.py `attend`).

Mask conventions are PyTorch's for this module: in a boolean ``attn_mask`` or
``key_padding_mask`` True means "may NOT attend"; float masks are added to the scores.

It also holds PyTorch's ``torch.nn.attention`` names for choosing the attention kernel,
`SDPBackend` and `sdpa_kernel`, whose switches live in ``ember.backends.cuda``.
"""

from __future__ import annotations

from ...backends.cuda import SDPBackend, sdpa_kernel
from ...errors import ArgumentError, ShapeError
from ...functional.mha import attend
from ...grad_mode import is_grad_enabled
from ...ops import _torch_flops
from ...ops._util import fmt_shape
from ...tensor import Tensor
from .. import init
from ..linear import NonDynamicallyQuantizableLinear
from ..module import Module
from ..parameter import new_parameter

__all__ = ["MultiheadAttention", "SDPBackend", "sdpa_kernel"]


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
            raise ArgumentError(
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
            raise ArgumentError(
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
        fused_kernel = self._pytorch_fused_kernel(query, key, value, key_padding_mask, attn_mask)
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
            raise ArgumentError(
                "MultiheadAttention: is_causal is a hint that attn_mask is causal; pass the "
                "causal attn_mask too (e.g. Transformer.generate_square_subsequent_mask)"
            )
        args = (query, key, value, key_padding_mask, need_weights, attn_mask)
        if _torch_flops.REGIONS.watchers and fused_kernel:
            # (PyTorch runs this call as _native_multi_head_attention, which its
            # FlopCounterMode does not count)
            with _torch_flops.counted_as(None):
                out, weights = self._attend(*args, average_attn_weights, fused_kernel)
        else:
            out, weights = self._attend(*args, average_attn_weights, fused_kernel)
        if not batched:
            out = out.squeeze(1)
            weights = None if weights is None else weights.squeeze(0)
        elif self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def _pytorch_fused_kernel(self, query, key, value, key_padding_mask, attn_mask) -> bool:
        """Whether PyTorch runs this call on its fused inference kernel
        (``_native_multi_head_attention``, its conditions in MultiheadAttention.forward): the
        same arithmetic but for a fully masked row (a sample whose every key is padding),
        NaN there where the unfused path without weights gives zeros; and which its
        FlopCounterMode does not count."""
        from ...amp import is_autocast_enabled

        float_mask = any(
            m is not None and m.dtype.is_floating_point for m in (attn_mask, key_padding_mask)
        )
        params = (self.in_proj_weight, self.in_proj_bias, self.out_proj.weight, self.out_proj.bias)
        return not (
            float_mask
            or query.ndim != 3
            or query is not key
            or key is not value
            or self.training
            or self.num_heads % 2
            or not self.batch_first
            or self.bias_k is not None
            or self.bias_v is not None
            or self.in_proj_weight is None
            or self.in_proj_bias is None
            or not (query.dtype is self.in_proj_weight.dtype is self.in_proj_bias.dtype)
            or self.add_zero_attn
            or not self._qkv_same_embed_dim
            or is_autocast_enabled()
            or (
                is_grad_enabled()
                and any(t is not None and t.requires_grad for t in (query, *params))
            )
        )

    def _attend(
        self, query, key, value, key_padding_mask, need_weights, attn_mask, average, fused=False
    ):
        _check(
            query.shape[-1] == self.embed_dim,
            f"expected an embedding dimension of {self.embed_dim}, got query of shape "
            f"{fmt_shape(query.shape)}",
        )
        separate = None
        if not self._qkv_same_embed_dim:
            separate = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        return attend(
            query,
            key,
            value,
            num_heads=self.num_heads,
            in_proj_weight=self.in_proj_weight,
            in_proj_bias=self.in_proj_bias,
            separate=separate,
            bias_k=self.bias_k,
            bias_v=self.bias_v,
            add_zero_attn=self.add_zero_attn,
            dropout_p=self.dropout if self.training else 0.0,
            out_proj_weight=self.out_proj.weight,
            out_proj_bias=self.out_proj.bias,
            key_padding_mask=key_padding_mask,
            need_weights=need_weights,
            attn_mask=attn_mask,
            average_attn_weights=average,
            fully_masked_nan=fused,
            op="MultiheadAttention",
        )


# (PyTorch's torch.nn.attention submodules; importing one sets it on this package)
from . import bias as _bias  # noqa: E402, F401
from . import flex_attention  # noqa: E402
