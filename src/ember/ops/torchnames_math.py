"""Elementwise functions of PyTorch that ember lacked, with PyTorch's names and semantics:
fmax and fmin (NaN-ignoring; composites of where, so they differentiate as PyTorch's: ties to
the first operand), gcd and lcm (integer primitives), nextafter (a primitive whose gradient is
PyTorch's: the identity in the input where it differs from the direction, none in the
direction), frexp (a primitive for the exponent, the mantissa ``x / 2**e`` in
ember ops, whose gradient is PyTorch's ``g / 2**e``), and the in-place Tensor methods of
existing functions: the comparisons ``eq_ ... ge_``, ``logical_*_``, ``cumsum_``,
``heaviside_``.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from .. import return_types
from ..errors import DTypeError
from ..types import TensorType
from . import api as E
from ._registry import INPLACE, PUBLIC, OpDef, apply, export, register
from ._util import broadcast_shapes, elementwise_cost, require_same_dtype
from .promotion import promote, to_tensor

# ------------------------------------------------------------------------------ fmax / fmin


def _fminmax(name, keep_first):
    def fn(input, other):
        x, y = promote(input, other)
        if x.dtype.is_floating_point:
            take = E.logical_or(keep_first(x, y), E.isnan(y))
        else:
            take = keep_first(x, y)
        return E.where(take, x, y)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (
        f"Elementwise {name[1:]}imum of two tensors ignoring NaN: where one is NaN the other is "
        "the result (NaN only where both are). Broadcasting and type promotion as in PyTorch; "
        "the gradient goes to the input where it is chosen (at ties to ``input``)."
    )
    export(fn, name=name, method=True)
    return fn


fmax = _fminmax("fmax", lambda x, y: x >= y)
fmin = _fminmax("fmin", lambda x, y: x <= y)


# --------------------------------------------------------------------------------- gcd / lcm


def _integer_infer(name):
    def infer(x, y):
        if x.dtype.is_floating_point or x.dtype is dt.bool_ or y.dtype is dt.bool_:
            raise DTypeError(f"defined for integer tensors only, got {x.dtype}", op=name)
        dtype = require_same_dtype(name, x, y)
        return TensorType(broadcast_shapes(name, x.shape, y.shape), dtype)

    return infer


def _lcm_kernel(x, y):
    g = np.gcd(x, y)
    with np.errstate(all="ignore"):  # (wraps on overflow, as PyTorch's integer arithmetic)
        out = np.abs((x // np.where(g == 0, 1, g)) * y)
    return np.where(g == 0, np.zeros((), x.dtype), out).astype(x.dtype, copy=False)


def _integer_binary(name, kernel, doc):
    op = register(
        OpDef(
            name=name,
            kind="elementwise",
            infer=_integer_infer(name),
            kernel=lambda x, y: np.asarray(kernel(x, y)).astype(x.dtype, copy=False),
            cost=elementwise_cost(8),
            doc=doc,
        )
    )

    def fn(input, other):
        return apply(op, *promote(input, other))

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc + " Broadcasting and type promotion as in PyTorch; no gradient."
    export(fn, name=name, method=True, inplace=True)
    return fn


gcd = _integer_binary(
    "gcd",
    np.gcd,
    "gcd(x, y): the greatest common divisor of integer tensors, non-negative (gcd(0, 0) = 0).",
)
lcm = _integer_binary(
    "lcm",
    _lcm_kernel,
    "lcm(x, y): the least common multiple of integer tensors, non-negative (0 where either is 0).",
)


# -------------------------------------------------------------------------------- nextafter


def _nextafter_kernel(x, y):
    if x.dtype.name != "bfloat16":
        return np.nextafter(x, y)
    # bfloat16 (no NumPy ufunc loop): one step of the bit pattern, as IEEE's nextafter
    xf, yf = x.astype(np.float32), y.astype(np.float32)
    bits = x.view(np.int16).astype(np.int32)
    away = (yf > xf) == (xf > 0)  # moving away from zero: the magnitude's bits grow
    stepped = np.where(away, bits + 1, bits - 1).astype(np.int16).view(x.dtype)
    tiny = np.where(yf > 0, 1, 0x8001).astype(np.int16).view(x.dtype)  # ±smallest subnormal
    out = np.where(xf == 0, tiny, stepped)
    out = np.where(xf == yf, y, out)
    return np.where(np.isnan(xf) | np.isnan(yf), np.float32("nan").astype(x.dtype), out)


def _nextafter_infer(x, y):
    if not x.dtype.is_floating_point:
        raise DTypeError(f"defined for floating-point tensors only, got {x.dtype}", op="nextafter")
    dtype = require_same_dtype("nextafter", x, y)
    return TensorType(broadcast_shapes("nextafter", x.shape, y.shape), dtype)


def _nextafter_vjp(c, g):
    # PyTorch's derivative: the identity in x (one step is no change to first order) except
    # where x == y (the result is y there), none in y
    x, y = c.inputs
    return E.sum_to(E.where(E.ne(x, y), g, 0.0), tuple(c.in_types[0].shape)), None


_NEXTAFTER = register(
    OpDef(
        name="nextafter",
        kind="elementwise",
        infer=_nextafter_infer,
        kernel=lambda x, y: np.asarray(_nextafter_kernel(x, y)).astype(x.dtype, copy=False),
        cost=elementwise_cost(2),
        vjp=_nextafter_vjp,
        doc="nextafter(x, y): the next representable value after x towards y",
    )
)


@export(method=True, inplace=True)
def nextafter(input, other):
    """The next floating-point value after ``input`` in the direction of ``other`` (``other``
    where they are equal, NaN where either is NaN), in the promoted floating dtype. Its
    gradient is PyTorch's: the identity in ``input`` where it differs from ``other``, zero in
    ``other``."""
    return apply(_NEXTAFTER, *promote(input, other))


# ------------------------------------------------------------------------------------ frexp


def _exponent_kernel(x):
    if x.dtype.name == "bfloat16":
        x = x.astype(np.float32)  # (exact: every bfloat16 is a float32)
    return np.frexp(x)[1].astype(np.int32)


def _exponent_infer(x):
    if not x.dtype.is_floating_point:
        raise DTypeError(
            f"frexp only supports floating-point dtypes, got {x.dtype}", op="frexp_exponent"
        )
    return TensorType(tuple(x.shape), dt.int32)


_EXPONENT = register(
    OpDef(
        name="frexp_exponent",
        kind="elementwise",
        infer=_exponent_infer,
        kernel=_exponent_kernel,
        cost=elementwise_cost(1),
        doc="frexp_exponent(x): the binary exponent e of x = m * 2**e, 0.5 <= |m| < 1 (int32; "
        "0 at zero, infinity and NaN)",
    )
)


@export(method=True)
def frexp(input):
    """``(mantissa, exponent)`` with ``input = mantissa * 2**exponent`` and
    ``0.5 <= |mantissa| < 1`` (mantissa 0 at 0; infinities and NaN keep the mantissa, exponent
    0): the mantissa in the input's dtype, the exponent int32. Floating inputs only, as in
    PyTorch; the mantissa's gradient is ``g / 2**exponent``."""
    x = to_tensor(input)
    if not x.dtype.is_floating_point:
        raise DTypeError(f"frexp only supports floating-point dtypes, got {x.dtype}", op="frexp")
    exponent = apply(_EXPONENT, x)
    # half precision divides in float32: 2**16 (65504's exponent) overflows float16, and the
    # mantissa, exact in any float dtype, rounds back unchanged
    wide = x.to(dt.float32) if x.dtype.itemsize == 2 else x
    mantissa = (wide / E.exp2(exponent.to(wide.dtype))).to(x.dtype)
    return return_types.frexp(mantissa, exponent)


# ---------------------------------------------------------------- in-place forms of existing

for _name in (
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "logical_xor",
    "logical_not",
    "heaviside",
):
    # the same function under the same names: only the in-place method ``x.<name>_`` is new
    export(PUBLIC[_name], name=_name, method=True, inplace=True)


def _cumsum_inplace(input, dim, *, dtype=None):
    """``x.cumsum_(dim, dtype=None)``: as PyTorch, a ``dtype`` other than x's is refused (the
    sums are written into x)."""
    if dtype is not None and dt.as_dtype(dtype) != input.dtype:
        raise DTypeError(
            f"cumsum_: dtype {dt.as_dtype(dtype)} must match the tensor's dtype {input.dtype}",
            op="cumsum_",
        )
    return E.cumsum(input, dim)


# (registered as the in-place method only: ember.cumsum and x.cumsum keep their function)
INPLACE["cumsum_"] = _cumsum_inplace
