"""PyTorch's dtype queries: ``ember.finfo`` / ``ember.iinfo`` (a dtype's limits),
``ember.promote_types`` and ``ember.can_cast``. They accept ember dtypes (and anything
``dtypes.as_dtype`` takes: a NumPy dtype, a name).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from . import dtypes as dt
from .errors import DTypeError


class finfo:  # noqa: N801 - PyTorch's (and NumPy's) name
    """A floating dtype's limits: ``bits``, ``eps`` (the gap above 1), ``max``, ``min`` (the
    lowest finite value), ``tiny`` and ``smallest_normal`` (the smallest positive normal),
    ``resolution`` (10 ** -precision) and ``dtype`` (its name, as PyTorch's). Without an
    argument, the default float dtype's."""

    def __init__(self, type=None):  # noqa: A002
        d = dt.get_default_dtype() if type is None else dt.as_dtype(type)
        if not d.is_floating_point:
            raise DTypeError(f"finfo takes a floating dtype, got {d}; use iinfo", op="finfo")
        info = ml_dtypes.finfo(d.np)
        self.bits = int(info.bits)
        # (float8_e5m2fnuz: PyTorch's constant is 2**-3, where ml_dtypes has its ulp at 1, 2**-2)
        self.eps = 0.125 if d is dt.float8_e5m2fnuz else float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = float(info.tiny)
        self.smallest_normal = float(info.smallest_normal)
        # PyTorch's: 10 ** -digits10, digits10 = floor(mantissa bits * log10(2)) (ml_dtypes'
        # precision rounds float8's up to 1)
        self.resolution = 10.0 ** -math.floor(int(info.nmant) * math.log10(2))
        self.dtype = d.name

    def __repr__(self) -> str:
        return (
            f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
            f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, "
            f"dtype={self.dtype})"
        )


class iinfo:  # noqa: N801
    """An integer (or bool) dtype's limits: ``bits``, ``max``, ``min`` and ``dtype``."""

    def __init__(self, type):  # noqa: A002
        d = dt.as_dtype(type)
        if d.is_floating_point:
            raise DTypeError(f"iinfo takes an integer dtype, got {d}; use finfo", op="iinfo")
        if d.is_bool:
            self.bits, self.min, self.max = 8, 0, 1
        else:
            info = np.iinfo(d.np)
            self.bits, self.min, self.max = int(info.bits), int(info.min), int(info.max)
        self.dtype = d.name

    def __repr__(self) -> str:
        # PyTorch formats the bounds with %g: int32's as -2.14748e+09
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


def promote_types(type1, type2) -> dt.DType:
    """The dtype two tensors of these dtypes promote to (PyTorch's rules)."""
    return dt.result_type(dt.as_dtype(type1), dt.as_dtype(type2))


def can_cast(from_, to) -> bool:
    """Whether PyTorch's casting rules allow ``from_`` to ``to``: never to a lower category
    (float to integer, integer or float to bool); within a category, always."""
    a, b = dt.as_dtype(from_), dt.as_dtype(to)
    return a.category <= b.category
