"""PyTorch's ``torch.nn.attention.bias``: `CausalBias`, a causal mask given to
``scaled_dot_product_attention`` as its ``attn_mask`` without materializing it, in two
alignments (`CausalVariant`): UPPER_LEFT, query i attending keys j <= i (``is_causal=True``), and
LOWER_RIGHT, the diagonal ending at the last key, query i attending keys
j <= i + (seq_len_kv - seq_len_q) (a decoding step's queries at the end of the cache).

It lives with the attention function that reads it (functional/attention.py, which runs an
upper-left one, or one of equal lengths, as ``is_causal=True`` and a lower-right one on its
materialized boolean mask, as PyTorch's CPU path does); ``ember.nn.attention.bias`` re-exports
it. PyTorch's is a Tensor subclass refusing every function but attention; ember's is a plain
object with the same fields, ``_materialize`` and repr.
"""

from __future__ import annotations

import warnings
from enum import IntEnum

from .. import dtypes as dt
from ..errors import ArgumentError
from ..ops import api as E

__all__ = ["CausalBias", "CausalVariant", "causal_lower_right", "causal_upper_left"]


class CausalVariant(IntEnum):
    """Where a causal mask's diagonal starts (PyTorch's values)."""

    UPPER_LEFT = 1
    LOWER_RIGHT = 2


class CausalBias:
    """A causal ``attn_mask`` of ``seq_len_q`` queries over ``seq_len_kv`` keys (see the module
    docstring)."""

    def __init__(self, variant: CausalVariant, seq_len_q: int, seq_len_kv: int) -> None:
        if not isinstance(variant, CausalVariant):
            raise ArgumentError(
                f"variant must be a CausalVariant, got {type(variant).__name__}", op="CausalBias"
            )
        self.variant = variant
        self.seq_len_q = seq_len_q
        self.seq_len_kv = seq_len_kv
        if seq_len_q > seq_len_kv and variant == CausalVariant.LOWER_RIGHT:
            warnings.warn(
                "Lower right causal bias will produce NaNs in the output when seq_len_q > "
                "seq_len_kv!",
                stacklevel=2,
            )

    def _materialize(self, device=None):
        """The boolean (seq_len_q, seq_len_kv) mask: True where a query attends a key."""
        offset = 0 if self.variant == CausalVariant.UPPER_LEFT else self.seq_len_kv - self.seq_len_q
        ones = E.ones((self.seq_len_q, self.seq_len_kv), dtype=dt.bool_)
        return E.tril(ones, diagonal=offset)

    @property
    def shape(self) -> tuple:
        return (self.seq_len_q, self.seq_len_kv)

    def attention_arguments(self, is_causal: bool) -> tuple:
        """``(attn_mask, is_causal)`` for scaled_dot_product_attention to run this bias with."""
        if is_causal:
            raise ArgumentError(
                "CausalBias should not be used with causal=True",
                op="scaled_dot_product_attention",
            )
        if self.seq_len_q == self.seq_len_kv or self.variant == CausalVariant.UPPER_LEFT:
            return None, True
        return self._materialize(), False

    def __repr__(self) -> str:
        return repr(self._materialize())


def _two_sizes(name: str, size: tuple) -> tuple[int, int]:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    if len(size) != 2:
        raise ArgumentError(f"{name} only supports 2D tensors", op=name)
    return size[0], size[1]


def causal_upper_left(*size) -> CausalBias:
    """The UPPER_LEFT causal bias of (seq_len_q, seq_len_kv): ``is_causal=True``'s mask."""
    return CausalBias(CausalVariant.UPPER_LEFT, *_two_sizes("causal_upper_left", size))


def causal_lower_right(*size) -> CausalBias:
    """The LOWER_RIGHT causal bias of (seq_len_q, seq_len_kv): the diagonal ends at the last
    key."""
    return CausalBias(CausalVariant.LOWER_RIGHT, *_two_sizes("causal_lower_right", size))
