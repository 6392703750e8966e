"""Type promotion for elementwise ops: ``promote`` brings operands to one dtype by
``dtypes.result_type`` (Python scalars are weak, so ``float32_tensor * 2.5`` stays float32;
true division and float math promote integers to the default float dtype, as in PyTorch),
``to_tensor`` makes a tensor of a tensor, array, list, scalar or symbolic size, and
``scalar_array`` a Python value as an array of a dtype (ints wrap into narrower integer
dtypes, as PyTorch's). The primitives themselves are strict: one dtype per op.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..symbolic import SymDim
from . import api as E
from ._data import to_array
from ._registry import (
    TensorBase,
    apply,
    constant,
    eager_constant,
    is_traced,
)
from ._registry import _state as _reg_state


def _is_tensor(x) -> bool:
    return isinstance(x, TensorBase)


def scalar_array(value, dtype) -> np.ndarray:
    """A Python value as an array of ``dtype``. An int wraps around into a narrower integer
    dtype (``uint8_tensor - 1`` subtracts 255's bits, as PyTorch does; NumPy 2 refuses)."""
    if type(value) is int and dtype.is_integer:
        return np.asarray(value).astype(dtype.np)
    return np.asarray(value, dtype=dtype.np)


# (value, its type, id of its ember dtype) -> (its read-only 0-d array, the tensor around it),
# for eager operands: `np.asarray` and the wrapping cost a weak scalar's op (``x * 0.5``) a
# fifth of its dispatch. Not kept: a zero (0.0 and -0.0 are one key) and NaN (never equal to
# a key)
_SCALARS: dict = {}
_MAX_SCALARS = 1024


def _weak_scalar(value, dtype):
    """The tensor of Python number ``value`` as an operand of ``dtype``'s tensors (a weak
    scalar): while eager, kept per value and dtype around a read-only 0-d array (ember's
    kernels only read their operands). The tensor is shared by the calls that use the value,
    which see only its array (a node saves it, its VJP reads it); one that something changed
    since (a gradient asked of it, its data replaced, an inference mode's counter) is made
    anew."""
    if _reg_state.modes or not value or value != value:
        return constant(scalar_array(value, dtype))
    key = (value, type(value), id(dtype))
    kept = _SCALARS.get(key)
    if kept is not None:
        array, tensor = kept
        if (
            tensor._data is array
            and not tensor._requires_grad
            and tensor.grad_fn is None
            and type(tensor._vc) is list
            and not tensor._vc[0]
        ):
            return tensor
    else:
        array = scalar_array(value, dtype)
        array.flags.writeable = False
    tensor = eager_constant(array)
    if len(_SCALARS) >= _MAX_SCALARS:
        _SCALARS.clear()
    _SCALARS[key] = (array, tensor)
    return tensor


def to_tensor(x, dtype=None):
    """A Tensor from a tensor, array, list or scalar (cast to ``dtype`` if given)."""
    if _is_tensor(x):
        return x if dtype is None or x.dtype is dtype else E.cast(x, dtype)
    if is_traced(x):
        # a traced .item(): the graph value its number is read from, as a weak scalar is typed
        return x.tensor_for(dtype)
    if isinstance(x, SymDim):  # a symbolic size (mean over a batch N): filled in at run time
        from .creation import _FULL

        return apply(_FULL, shape=(), value=x, dtype=dtype or dt.int64)
    if dtype is not None:
        return constant(scalar_array(x, dtype))
    return constant(to_array(x, None))


def _keeps_dtype(dtype, scalar, floating: bool) -> bool:
    """Whether a Python scalar leaves a tensor's dtype as it is (it is weak and not of a higher
    category): a float with a floating tensor, an int with a floating or integer one (unless
    the op needs floating point)."""
    kind = type(scalar)
    if kind is float or floating:
        return kind in (float, int) and dtype.is_floating_point
    return kind is int and (dtype.is_floating_point or dtype.is_integer)


def promote(*operands, floating: bool = False):
    """Bring operands to one dtype by the promotion rules; scalars become weak constants.

    ``floating=True`` (true division, float math): an integer or bool result becomes the default
    float dtype, as in PyTorch.
    """
    if len(operands) == 2:  # fast paths: two tensors of one dtype; a tensor and a weak scalar
        x, y = operands
        if isinstance(x, TensorBase):
            dtype = x.dtype
            if isinstance(y, TensorBase):
                if y.dtype is dtype and (
                    not floating or dtype.is_floating_point or dtype.is_complex
                ):
                    return operands
            elif _keeps_dtype(dtype, y, floating):
                return x, _weak_scalar(y, dtype)
        elif isinstance(y, TensorBase) and _keeps_dtype(y.dtype, x, floating):
            return _weak_scalar(x, y.dtype), y
    elif operands and isinstance(operands[0], TensorBase):  # (torch.cat of many: one dtype)
        dtype = operands[0].dtype
        same = not floating or dtype.is_floating_point or dtype.is_complex
        for x in operands:
            if not same:
                break
            same = isinstance(x, TensorBase) and x.dtype is dtype
        if same:
            return list(operands)
    operands = [
        x
        if _is_tensor(x)
        or isinstance(x, (bool, int, float, complex, SymDim))
        or is_traced(x)  # (a traced .item(): a weak scalar, typed below)
        else to_tensor(x)
        for x in operands
    ]
    # a symbolic size is a weak int, like the Python int it will be when the graph runs
    target = dt.result_type(*[1 if isinstance(x, SymDim) else x for x in operands])
    if floating and not (target.is_floating_point or target.is_complex):
        target = dt.get_default_dtype()
    return [to_tensor(x, target) for x in operands]
