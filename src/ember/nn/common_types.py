"""``torch.nn.common_types``: the type aliases of size and ratio arguments (``_size_2_t``,
``_ratio_any_t``, ...) that layers written against PyTorch annotate their signatures with,
defined as PyTorch defines them, so ``from torch.nn.common_types import _size_2_t`` imports."""

# ruff: noqa: PYI042, PYI047
from __future__ import annotations

from typing import TypeAlias, TypeVar

from ..tensor import Tensor

T = TypeVar("T")
_scalar_or_tuple_any_t: TypeAlias = T | tuple[T, ...]
_scalar_or_tuple_1_t: TypeAlias = T | tuple[T]
_scalar_or_tuple_2_t: TypeAlias = T | tuple[T, T]
_scalar_or_tuple_3_t: TypeAlias = T | tuple[T, T, T]
_scalar_or_tuple_4_t: TypeAlias = T | tuple[T, T, T, T]
_scalar_or_tuple_5_t: TypeAlias = T | tuple[T, T, T, T, T]
_scalar_or_tuple_6_t: TypeAlias = T | tuple[T, T, T, T, T, T]

# size arguments (kernel sizes, paddings): a number or a tuple of one per spatial dimension
_size_any_t: TypeAlias = _scalar_or_tuple_any_t[int]
_size_1_t: TypeAlias = _scalar_or_tuple_1_t[int]
_size_2_t: TypeAlias = _scalar_or_tuple_2_t[int]
_size_3_t: TypeAlias = _scalar_or_tuple_3_t[int]
_size_4_t: TypeAlias = _scalar_or_tuple_4_t[int]
_size_5_t: TypeAlias = _scalar_or_tuple_5_t[int]
_size_6_t: TypeAlias = _scalar_or_tuple_6_t[int]

# optional sizes (adaptive pooling's None keeps a dimension)
_size_any_opt_t: TypeAlias = _scalar_or_tuple_any_t[int | None]
_size_2_opt_t: TypeAlias = _scalar_or_tuple_2_t[int | None]
_size_3_opt_t: TypeAlias = _scalar_or_tuple_3_t[int | None]

# per-dimension ratios (upsampling's scale factors)
_ratio_2_t: TypeAlias = _scalar_or_tuple_2_t[float]
_ratio_3_t: TypeAlias = _scalar_or_tuple_3_t[float]
_ratio_any_t: TypeAlias = _scalar_or_tuple_any_t[float]

_tensor_list_t: TypeAlias = _scalar_or_tuple_any_t[Tensor]

# max pooling's result: the values, or the values and their indices
_maybe_indices_t: TypeAlias = _scalar_or_tuple_2_t[Tensor]
