"""Half-precision (bfloat16, float16) fast rules shared by the op families: NumPy has no fast
half-precision arithmetic, so these run ember's C kernels on the 16-bit values.

* `via_float32(fast32)`: an op whose NumPy kernel computes half precision in float32 and
  rounds its results once (gelu, layer norm, softmax and their gradients) runs its float32 C
  kernel on operands widened in C, its results rounded in C (kernels/chalf.py): the
  reference's own arithmetic, to the float32 kernel's rounding, then one rounding.
* `elementwise_fast(name)`: an elementwise op with a C expression runs eagerly as a one-
  instruction fused loop (kernels/cfuse.py) reading and writing the 16-bit values, each result
  rounded as NumPy rounds it; for operands of one shape or 0-d, over a symbolic length, so one
  compiled loop serves every size.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..symbolic import sym
from ..types import TensorType

__all__ = ["HALF", "elementwise_fast", "via_float32"]

HALF = (dt.float16.np, dt.bfloat16.np)
_BY_NP = {dt.float16.np: dt.float16, dt.bfloat16.np: dt.bfloat16}
_FUSABLE = {np.dtype(np.float32): dt.float32, np.dtype(np.float64): dt.float64}
_FUSABLE.update({np.dtype(np.bool_): dt.bool_, **_BY_NP})


def via_float32(fast32):
    """``fast32`` (a float32 C kernel's fast rule, None where it does not apply) extended to
    half-precision operands: those widened to float32, the results rounded back."""
    from ..kernels import chalf

    def fast(*arrays, **attrs):
        dtype = next((a.dtype for a in arrays if isinstance(a, np.ndarray)), None)
        if dtype not in HALF:
            return fast32(*arrays, **attrs)
        wide = [
            chalf.to_float32(a) if isinstance(a, np.ndarray) and a.dtype == dtype else a
            for a in arrays
        ]
        result = fast32(*wide, **attrs)
        if result is None:
            return None
        if isinstance(result, tuple):
            return tuple(chalf.from_float32(np.ascontiguousarray(r), dtype) for r in result)
        return chalf.from_float32(np.ascontiguousarray(result), dtype)

    fast.__name__ = getattr(fast32, "__name__", "fast")
    return fast


# one compiled loop per (op, attributes, operand dtypes, which operands are 0-d)
_LOOPS: dict = {}
_LENGTH = sym("n")


def elementwise_fast(name: str):
    """The fast rule of the elementwise op ``name`` (registered with a C expression) for
    half-precision operands; None (the NumPy kernel runs) for any other dtype, for operands
    that are neither of the result's shape nor 0-d, and without a compiler."""

    def fast(*arrays, **attrs):
        if not any(a.dtype in _BY_NP for a in arrays):
            return None
        shapes = [a.shape for a in arrays if a.ndim]
        if not shapes or any(s != shapes[0] for s in shapes):
            return None  # (0-d operands only, or broadcasting: NumPy's)
        shape = shapes[0]
        if any(a.dtype not in _FUSABLE for a in arrays):
            return None
        scalars = tuple(not a.ndim for a in arrays)
        key = (name, tuple(sorted(attrs.items())), tuple(a.dtype for a in arrays), scalars)
        run = _LOOPS.get(key)
        if run is None:
            run = _LOOPS[key] = _build(name, attrs, arrays, scalars)
        if run is False:
            return None
        n = math.prod(shape)
        flat = [a if s else np.ascontiguousarray(a).reshape(n) for a, s in zip(arrays, scalars)]
        (result,) = run(*flat)
        return result.reshape(shape)

    return fast


def _build(name, attrs, arrays, scalars):
    from ..kernels import cfuse
    from ._registry import REGISTRY
    from .program import Input, Instr

    op = REGISTRY[name]
    in_types = [
        TensorType(() if s else (_LENGTH,), _FUSABLE[a.dtype]) for a, s in zip(arrays, scalars)
    ]
    try:
        out_type = op.infer(*in_types, **attrs)
    except Exception:  # (the eager call's own check raises; here the kernel decides)
        return False
    if out_type.dtype.np not in _FUSABLE:
        return False
    instr = Instr(op, tuple(Input(i) for i in range(len(arrays))), tuple(sorted(attrs.items())))
    run = cfuse.build_program((instr,), (0,), [out_type], in_types)
    return False if run is None else run
