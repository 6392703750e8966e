"""The NumPy kernels of the binary arithmetic ops that are more than one ufunc (floor division,
PyTorch's remainder, PyTorch's powers) and the operand checks the public functions make before
promotion (bool subtraction, integer powers, division by zero). ops/binary.py defines the ops
with them."""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import DivisionByZeroError, DTypeError, KernelDTypeError
from ._created_nan import positive_created_nan
from .promotion import _is_tensor

__all__ = [
    "check_divisor",
    "floor_div_kernel",
    "mod_kernel",
    "no_bool",
    "pow_backward_refusal",
    "pow_check",
    "pow_kernel",
]


def check_divisor(name, x, y):
    """Integer division by zero has no value: NumPy's 0 would pass silently (PyTorch raises)."""
    # (an empty result divides nothing, as in PyTorch)
    if x.dtype.kind in "iub" and np.broadcast(x, y).size and not np.all(y):
        raise DivisionByZeroError("integer division by zero", op=name)


def floor_div_kernel(x, y):
    check_divisor("floor_div", x, y)
    return np.floor_divide(x, y)


def mod_kernel(x, y):
    check_divisor("mod", x, y)
    if x.dtype.kind != "f":
        return np.mod(x, y)
    # PyTorch's formula: fmod, moved by y where the signs differ; an exact zero keeps x's
    # sign (NumPy's mod gives it y's), which 1 / result and copysign can see
    with np.errstate(invalid="ignore"):
        out = np.fmod(x, y)
        fix = (out != 0) & ((y < 0) != (out < 0))
    return np.where(fix, out + y, out).astype(out.dtype, copy=False)


def no_bool(name, message):
    """Refuses a bool operand, a tensor or a Python bool (PyTorch's subtraction)."""

    def check(x, y):
        for v in (x, y):  # (every subtraction passes here: no generator)
            if type(v) is bool or (_is_tensor(v) and v.dtype is dt.bool_):
                raise DTypeError(message, op=name)

    return check


def pow_backward_refusal(x, y):
    """PyTorch's pow backward computes ``exponent - 1``, which a bool exponent tensor refuses
    (only when backward runs: the forward is allowed)."""
    if _is_tensor(y) and y.dtype is dt.bool_ and _is_tensor(x):
        return (
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
            "trying to invert a mask, use the `~` or `logical_not()` operator instead."
        )
    return None


def pow_check(x, y):
    if (
        _is_tensor(y)
        and y.dtype is dt.bool_
        and (isinstance(x, bool) or (_is_tensor(x) and x.dtype is dt.bool_))
    ):
        raise KernelDTypeError("not defined for a bool exponent tensor of a bool", op="pow")
    if (
        type(y) is int
        and y < 0
        and _is_tensor(x)
        and not (x.dtype.is_floating_point or x.dtype.is_complex)
    ):
        raise DTypeError("integers to negative integer powers are not allowed", op="pow")
    if type(y) is int and _is_tensor(x) and x.dtype.is_integer:
        # PyTorch converts the exponent to the tensor's integer type, checking its range (where
        # the other arithmetic ops wrap a Python int)
        info = np.iinfo(x.dtype.np)
        if not info.min <= y <= info.max:
            raise DTypeError(
                f"the exponent {y} cannot be converted to the base's type {x.dtype.name} "
                f"without overflow (shape {tuple(x.shape)})",
                op="pow",
            )


# PyTorch's CPU pow of a float32/float64 tensor by a scalar exponent computes these exponents
# with the arithmetic below, not std::pow (ATen's pow_tensor_scalar_optimized_kernel): x ** 3
# is x * x * x, rounded twice, and about 60 times faster than NumPy's powf per element
_SCALAR_POWERS = {
    2.0: lambda x: x * x,
    3.0: lambda x: x * x * x,
    0.5: positive_created_nan(np.sqrt),
    -0.5: lambda x: np.divide(1, np.sqrt(x), dtype=x.dtype),
    -1.0: lambda x: np.divide(1, x, dtype=x.dtype),
    -2.0: lambda x: np.divide(1, x * x, dtype=x.dtype),
}
_WIDE_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def pow_kernel(x, y):
    """np.power; a float32/float64 ``x`` to a 0-d exponent 2, 3, 0.5, -0.5, -1 or -2 (a
    Python number's constant) by PyTorch's arithmetic for it (`_SCALAR_POWERS`: sqrt at 0.5,
    so -0.0 ** 0.5 is -0.0, -inf ** 0.5 NaN, -2 ** 0.5 +NaN and -2 ** -0.5 -NaN, as PyTorch
    gives: ops/_created_nan.py); an integer to a negative integer power (a tensor exponent) is
    PyTorch's truncated result, 1 / x rounded toward zero: 1 for 1, +-1 for -1, else 0 (NumPy
    refuses)."""
    if y.ndim == 0 and x.dtype in _WIDE_FLOATS:
        special = _SCALAR_POWERS.get(float(y))
        if special is not None:
            return special(x)
    if x.dtype.kind in "iu" and (y < 0).any():
        negative = y < 0
        power = np.power(x, np.where(negative, 0, y))
        odd = np.where(np.remainder(y, 2) == 1, -1, 1).astype(x.dtype)
        inverse = np.where(x == 1, 1, np.where(x == -1, odd, 0)).astype(x.dtype)
        return np.where(negative, inverse, power)
    if x.dtype == np.bool_:  # (NumPy's bool power is int8)
        return np.power(x, y).astype(np.bool_)
    # (elsewhere PyTorch's sign for a NaN it creates depends on the element's position: its
    # vector loop's +NaN, its scalar tail's -NaN, NumPy's everywhere)
    return np.power(x, y)
