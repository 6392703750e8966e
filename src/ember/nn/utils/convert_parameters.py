"""``ember.nn.utils.convert_parameters``: a parameter list as one flat vector and back, PyTorch's
module of those names (also ``ember.nn.utils.parameters_to_vector``)."""

from __future__ import annotations

from collections.abc import Iterable

from ...errors import ArgumentTypeError, ShapeError
from ...ops import api as E
from ...ops._registry import TensorBase
from ...tensor import Tensor


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """All parameters flattened and concatenated into one vector (differentiable)."""
    return E.cat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Point each parameter's data at its slice of ``vec`` (the inverse of
    ``parameters_to_vector``)."""
    if not isinstance(vec, TensorBase) or vec.ndim != 1:  # (a graph value, when captured)
        raise ArgumentTypeError(f"expected vec to be a 1-D Tensor, but got {type(vec).__name__}")
    pointer = 0
    for p in parameters:
        n = p.numel()
        if pointer + n > vec.shape[0]:
            raise ShapeError(
                f"vec of length {vec.shape[0]} is too short for the parameters",
                op="vector_to_parameters",
            )
        p.data = vec[pointer : pointer + n].reshape(p.shape)
        pointer += n


__all__ = ["parameters_to_vector", "vector_to_parameters"]
