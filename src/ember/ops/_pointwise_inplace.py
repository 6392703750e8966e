"""The direct in-place routes of addcmul_, addcdiv_ and lerp_ (an optimizer's updates, under
no_grad): where nothing is recorded, the composite's own NumPy steps written into the tensor's
memory, skipping its three dispatches, the copy of the old value and the write back.

Each route computes what ops/pointwise_composite.py's composite computes on the same operands,
op by op in the same order and dtype (NumPy's ufuncs are the ops' kernels; lerp's fused
multiply-add is ops/add_alpha.py's op), so its bits are the general route's. It takes the
calls an eager update makes: float32/float64 operands of the tensor's dtype and shape, a
Python number for value/weight. Anything else returns False and Tensor._inplace's general
route runs (and says why a call is refused). Its caller (Tensor._inplace, through the
function's ``direct_inplace``) has refused partial overlaps and memory that repeats, and
checked that no graph is built nor profiler records.
"""

from __future__ import annotations

import numpy as np

from ..kernels import cadd_alpha
from ._registry import TensorBase, _state
from ._util import check_fill_value

_KERNEL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_NUMBERS = (int, float)


def _operands(t, tensors) -> list | None:
    """The arrays of ``t`` and ``tensors`` where the direct route takes them (see the module
    docstring), else None."""
    a = t._data
    if type(a) is not np.ndarray or a.dtype not in _KERNEL_DTYPES or not a.flags.writeable:
        return None
    recording = _state.grad_enabled and t._requires_grad
    arrays = [a]
    for x in tensors:
        if not isinstance(x, TensorBase):
            return None
        b = x._data
        if type(b) is not np.ndarray or b.dtype != a.dtype or b.shape != a.shape:
            return None
        recording = recording or (_state.grad_enabled and x._requires_grad)
        arrays.append(b)
    return None if recording else arrays


def _pair(name: str, ufunc, value_of):
    """The direct route of ``t.<name>(t1, t2, value=v)``: ``t + t1 op t2`` (value 1), else
    ``t + (t1 * v) op t2``, as the composite computes it."""

    def direct(t, args: tuple, kwargs: dict) -> bool:
        if len(args) != 2 or (kwargs and set(kwargs) != {"value"}):
            return False
        value = kwargs.get("value", 1)
        if type(value) not in _NUMBERS:
            return False
        arrays = _operands(t, args)
        if arrays is None:
            return False
        x, a, b = arrays
        value = value_of(name[:-1], value, t.dtype)  # (its range checked, as the composite's)
        if value != 1:
            a = np.multiply(a, value)
        np.add(x, ufunc(a, b), out=x)
        return True

    return direct


def lerp_direct(t, args: tuple, kwargs: dict) -> bool:
    """The direct route of ``t.lerp_(end, w)`` with a real number ``w``: the composite's
    ``lerp_fused`` (``end - t`` then add with alpha's one rounding: ops/add_alpha.py's op)."""
    if len(args) != 2 or kwargs:
        return False
    end, weight = args
    if type(weight) not in _NUMBERS:
        return False
    arrays = _operands(t, (end,))
    if arrays is None:
        return False
    a, b = arrays
    w = float(weight)
    check_fill_value("lerp", w, t.dtype)  # (the composite's check of the weight's range)
    diff = np.subtract(b, a)
    start = a
    if abs(w) >= 0.5:
        start, w = b, float(np.asarray(w, a.dtype) - a.dtype.type(1))
    # (the one C call, into a's memory; else the op's own run: its fast rule or NumPy kernel)
    if cadd_alpha.add_alpha(start, diff, w, out=a) is None:
        from .add_alpha import ADD_ALPHA  # (it imports the elementwise family: bound late)

        np.copyto(a, ADD_ALPHA.run(start, diff, alpha=w))
    return True


def attach(addcmul, addcdiv, lerp, value_of) -> None:
    """Give the public functions their direct in-place routes (read by Tensor._inplace)."""
    addcmul.direct_inplace = _pair("addcmul_", np.multiply, value_of)
    addcdiv.direct_inplace = _pair("addcdiv_", np.divide, value_of)
    lerp.direct_inplace = lerp_direct
