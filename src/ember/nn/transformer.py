"""`TransformerEncoderLayer` and `TransformerEncoder` (PyTorch's submodule names, so state_dicts
move between the two), plus ``generate_square_subsequent_mask``.

PyTorch's fused fast path is an inference optimisation that changes results in two places,
both reproduced while ember always runs the plain composition: its nested-tensor conversion
(`TransformerEncoder._takes_nested_path`: in inference with a padding mask, the padded
positions of the encoder's output are zeros, before the final norm), and its fused attention
kernel, which gives NaN for a sample whose every key is padding where the unfused path gives
zeros (`MultiheadAttention._pytorch_fused_kernel`).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from .. import dtypes as dt
from ..ops import api as E
from ..tensor import Tensor
from . import functional as F
from .attention import MultiheadAttention
from .container import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm


def generate_square_subsequent_mask(sz, dtype=None) -> Tensor:
    """The (sz, sz) causal mask: 0 on and below the diagonal, -inf above it. Built of ember
    ops, as PyTorch builds it, so ``sz`` may be a symbolic size (a target length a graph or
    an ONNX export keeps dynamic)."""
    d = dt.get_default_dtype() if dtype is None else dt.as_dtype(dtype)
    return E.triu(E.full((sz, sz), float("-inf"), dtype=d), 1)


def _undispatched(fn):
    """``fn`` without the ``__torch_function__`` dispatch that a program's first Tensor subclass
    puts on ember's public functions (_torch_function.enable, for the rest of the process): a
    layer built before then holds ``F.relu`` itself, one built after it the dispatching
    wrapper, and both are ReLU."""
    return fn.__wrapped__ if getattr(fn, "_dispatches", False) else fn


def _relu_or_gelu() -> tuple:  # (read at each check: F's names may be wrapped since)
    return _undispatched(F.relu), _undispatched(F.gelu)


def _activation(activation) -> Callable:
    if not isinstance(activation, str):
        return activation
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward block, each with a residual connection and layer
    norm (after the residual by default; before it with ``norm_first=True``)."""

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable = F.relu,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **factory
        )
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal) -> Tensor:
        x = self.self_attn(
            x,
            x,
            x,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            need_weights=False,
            is_causal=is_causal,
        )[0]
        return self.dropout1(x)

    def _ff_block(self, x: Tensor) -> Tensor:
        x = self.linear2(self.dropout(self.activation(self.linear1(x))))
        return self.dropout2(x)


class TransformerEncoder(Module):
    """``num_layers`` independent copies of ``encoder_layer`` applied in turn, then ``norm``."""

    def __init__(
        self,
        encoder_layer: TransformerEncoderLayer,
        num_layers: int,
        norm: Module | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ) -> None:
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check
        # PyTorch's conditions, fixed at construction, for converting to nested tensors
        attn = getattr(encoder_layer, "self_attn", None)
        self.use_nested_tensor = bool(
            enable_nested_tensor
            and isinstance(encoder_layer, TransformerEncoderLayer)
            and not encoder_layer.norm_first
            and attn.batch_first
            and attn._qkv_same_embed_dim
            and attn.in_proj_bias is not None
            and (_undispatched(encoder_layer.activation) in _relu_or_gelu() or
                 type(encoder_layer.activation).__name__ in ("ReLU", "GELU"))
            and encoder_layer.norm1.eps == encoder_layer.norm2.eps
            and attn.num_heads % 2 == 0
        )  # fmt: skip

    def _takes_nested_path(self, src, mask, src_key_padding_mask) -> bool:
        """Whether PyTorch's TransformerEncoder would run this call on nested tensors (in
        inference, batched, with a padding mask only, padding at the ends of the rows), whose
        padded positions then come out as zeros. While a graph is recorded its check of the
        mask (``mask_check``) needs data, and PyTorch skips the path under torch.compile too."""
        from ..amp import is_autocast_enabled
        from ..grad_mode import is_grad_enabled
        from ..ops._registry import building_graph

        layer = self.layers[0] if len(self.layers) else None
        if not (getattr(self, "use_nested_tensor", False) and layer is not None):
            return False
        if layer.training or src.ndim != 3 or src_key_padding_mask is None or mask is not None:
            return False
        if is_autocast_enabled() or (
            is_grad_enabled()
            and (src.requires_grad or any(p.requires_grad for p in layer.parameters()))
        ):
            return False
        if self.mask_check:
            if building_graph():
                return False
            valid = (src_key_padding_mask == 0).numpy(
                force=True
            )  # bool True, or a float -inf, pads
            if (valid[:, 1:] & ~valid[:, :-1]).any():
                return False  # not left aligned
        return True

    def forward(
        self,
        src: Tensor,
        mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool | None = None,
    ) -> Tensor:
        output = src
        nested = self._takes_nested_path(src, mask, src_key_padding_mask)
        for layer in self.layers:
            output = layer(
                output,
                src_mask=mask,
                is_causal=bool(is_causal),
                src_key_padding_mask=src_key_padding_mask,
            )
        if nested:  # PyTorch's to_padded_tensor(0.0): padded positions are zeros
            padded = (src_key_padding_mask != 0).unsqueeze(-1)
            output = output.masked_fill(padded, 0.0)
        if self.norm is not None:
            output = self.norm(output)
        return output
