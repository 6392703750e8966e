"""What an optimizer's state_dict holds, as values: a parameter's step count (a float32 0-d
tensor, as PyTorch keeps it) and the checks `Optimizer.load_state_dict` makes of each saved
value (its shape against the parameter's state, its dtype cast as PyTorch casts it)."""

from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes as dt
from ..autograd import no_grad
from ..errors import StateDictError
from ..tensor import Tensor


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def new_step_counter(count: float = 0.0) -> Tensor:
    """A parameter's step count: a float32 0-d tensor, as PyTorch keeps it."""
    return Tensor(float(count), dtype=dt.float32)


def _load_value(op: str, key, name: str, value, param: Tensor, shape: tuple):
    """One saved state value, checked against its parameter (``shape``: what the optimizer's
    `Optimizer.state_shape` says the entry has). As PyTorch's ``load_state_dict``: cast to a
    floating-point parameter's dtype (``Tensor.to``: the value itself when it matches), kept
    as it is for any other parameter, never copied, and detached."""
    if isinstance(value, np.ndarray):
        value = Tensor(value)
    if not isinstance(value, Tensor):
        return value
    if tuple(value.shape) != tuple(shape):
        expected = (
            "must be 0-d"
            if shape == ()
            else f"the parameter has shape {tuple(param.shape)}"
            if tuple(shape) == tuple(param.shape)
            else f"must have shape {tuple(shape)} for a parameter of shape {tuple(param.shape)}"
        )
        raise StateDictError(
            f"parameter {key!r}: state {name!r} has shape {tuple(value.shape)} but "
            + expected
            + "; the state dict belongs to a different model",
            op=op,
        )
    with no_grad():
        if param.dtype.is_floating_point:
            value = value.to(param.dtype)
        return value if not value.requires_grad else value.detach()


def _load_step(op: str, key, value, device_step: bool):
    """A saved step count as PyTorch's ``load_state_dict`` takes it: a tensor is kept as it is
    (the same tensor, shared with the dict, its dtype kept), cast to float32 where the group is
    ``capturable`` or ``fused`` (a copy only if its dtype differs); a number becomes a float32
    0-d tensor, as PyTorch's optimizers' ``__setstate__`` make it."""
    if isinstance(value, Tensor):
        if value.ndim != 0 or not (value.dtype.is_floating_point or value.dtype.is_integer):
            raise StateDictError(
                f"parameter {key!r}: 'step' must be a real 0-d tensor, got shape "
                f"{tuple(value.shape)} and dtype {value.dtype}",
                op=op,
            )
        return value.to(dt.float32) if device_step else value
    if not _is_number(value):
        raise StateDictError(
            f"parameter {key!r}: 'step' must be a number or a 0-d tensor, got {value!r}", op=op
        )
    return new_step_counter(value)
