"""``torch.utils.data._utils.collate``: ember.data's collate functions under PyTorch's path:
`default_collate`, `default_convert`, the general `collate` and `default_collate_fn_map`
(the same dict `default_collate` reads, so a type added to it changes what DataLoaders do)."""

from ....data.collate import (
    collate,
    collate_float_fn,
    collate_int_fn,
    collate_numpy_array_fn,
    collate_numpy_scalar_fn,
    collate_str_fn,
    collate_tensor_fn,
    default_collate,
    default_collate_fn_map,
    default_convert,
)

__all__ = [
    "collate",
    "collate_float_fn",
    "collate_int_fn",
    "collate_numpy_array_fn",
    "collate_numpy_scalar_fn",
    "collate_str_fn",
    "collate_tensor_fn",
    "default_collate",
    "default_collate_fn_map",
    "default_convert",
]
