"""PyTorch's ``torch.nn.attention.bias`` names: the causal masks scaled_dot_product_attention
takes as its ``attn_mask`` (defined in functional/causal_bias.py, beside the function that
reads them)."""

from ...functional.causal_bias import (
    CausalBias,
    CausalVariant,
    causal_lower_right,
    causal_upper_left,
)

__all__ = ["CausalBias", "CausalVariant", "causal_lower_right", "causal_upper_left"]
