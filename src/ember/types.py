"""`TensorType`: the abstract value of a tensor, its shape and dtype with no data.

Shape rules, graph values, the planners and the C kernel generators all speak in these. A
dimension is an int or a `SymDim` (ember/symbolic.py: a size known only by name, the batch N).
"""

from __future__ import annotations

from typing import NamedTuple

from .dtypes import DType, as_dtype

__all__ = ["TensorType", "as_types"]


class TensorType(NamedTuple):
    """The abstract value of a tensor: its shape and dtype, no data."""

    shape: tuple
    dtype: DType

    @property
    def ndim(self) -> int:
        return len(self.shape)


def as_types(pairs) -> tuple:
    """`TensorType`s from (shape, dtype) pairs: a graph file stores types as plain pairs, and
    dtypes may come as names."""
    return tuple(TensorType(tuple(shape), as_dtype(dtype)) for shape, dtype in pairs)
