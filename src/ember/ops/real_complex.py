"""PyTorch's complex-number API on ember's real tensors (ember has no complex dtypes), as
PyTorch answers it for a real tensor: ``conj``, ``conj_physical``, ``resolve_conj`` and
``resolve_neg`` return the tensor itself; ``is_conj`` and ``is_neg`` are False; ``real`` is
the tensor (``x.real`` too: tensor_api.py) and ``imag`` raises PyTorch's error; ``angle`` is
pi where the value is negative, 0 elsewhere and NaN at NaN, with a zero gradient. Code
written for complex and real tensors alike (``x.conj()`` before a product, ``x.real`` in a
loss) runs unchanged."""

from __future__ import annotations

import math

from .. import dtypes as dt
from ..errors import DTypeError
from . import api as E
from ._registry import export
from .elementwise import to_tensor


def _itself(name: str):
    def same(input):
        """The tensor itself: for a real tensor, PyTorch's result is the tensor too."""
        return to_tensor(input)

    same.__name__ = same.__qualname__ = name
    return export(same, name=name, method=True)


conj = _itself("conj")
conj_physical = _itself("conj_physical")
resolve_conj = _itself("resolve_conj")
resolve_neg = _itself("resolve_neg")
real = export(lambda input: to_tensor(input), name="real")  # (x.real: a property)
real.__name__ = real.__qualname__ = "real"


@export(method=True)
def is_conj(input) -> bool:
    """False: a real tensor carries no lazy conjugation."""
    to_tensor(input)
    return False


@export(method=True)
def is_neg(input) -> bool:
    """False: a real tensor carries no lazy negation."""
    to_tensor(input)
    return False


@export
def imag(input):
    """PyTorch's error: a real tensor has no imaginary part."""
    raise DTypeError("imag is not implemented for tensors with non-complex dtypes.", op="imag")


@export(method=True)
def angle(input):
    """The argument of each (real) value: pi where it is negative, 0 where it is zero or
    positive (-0.0 included), NaN at NaN; integers give the default float dtype. Its gradient
    is zero everywhere, NaN included, as PyTorch's."""
    x = to_tensor(input)
    if not x.dtype.is_floating_point:
        x = E.cast(x, dt.get_default_dtype())
    # (constants of x's dtype: Python scalars alone would make a default-dtype result)
    zero_or_nan = E.where(x != x, E.full_like(x, math.nan), E.zeros_like(x))
    out = E.where(x < 0, E.full_like(x, math.pi), zero_or_nan)
    if x.requires_grad:  # (PyTorch's has a gradient, zero: a term of zeros attaches it)
        out = out + E.where(E.isfinite(x), x, 0.0) * 0.0
    return out
