"""PyTorch's ``out=`` for ember's public functions: ``ember.add(a, b, out=c)`` computes the
result as without it, then writes it into ``c`` and returns ``c`` (a tuple of tensors for a
function returning several, as ``torch.sort(x, out=(values, indices))``).

PyTorch's rules, which this follows: the result's dtype must cast to ``out``'s under
PyTorch's casting rule (`can_cast`: no float into an integer, no complex into a real; a
narrower or equal kind is written converted); an ``out`` of another shape is resized, with
PyTorch's warning unless it was empty or the function takes no tensor (a factory); and no
``out=`` call is differentiable: with grad mode on, an operand or ``out`` requiring grad is an
error naming the function. ember computes the
result into a new array and copies it (``out`` is a destination, not a saving), so a result
that views an input is copied like any other. A function whose result is not a tensor (or a
tuple of tensors) refuses ``out=`` as Python refuses an unknown keyword.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np

from .. import dtypes as dt
from ..errors import ArgumentTypeError, EmberError, user_stacklevel
from ._overlap import ANY, refuse_partial_overlap
from ._registry import TensorBase as Tensor
from ._registry import is_grad_enabled, set_grad_enabled_flag

__all__ = ["taking_out"]


def taking_out(fn, name: str, rename=None):
    """``fn`` also taking ``out=`` (see the module docstring). ``rename(kwargs)``: renames
    PyTorch's keywords to ``fn``'s in place first (ops/_torch_keywords.py), in this one wrapper
    rather than a second one around ``fn``."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if not kwargs:  # (the common call: no keyword to rename, no out)
            return fn(*args)
        if rename is not None:
            rename(kwargs)
        if "out" not in kwargs:
            return fn(*args, **kwargs)
        out = kwargs.pop("out")
        if out is None:
            return fn(*args, **kwargs)
        refused = getattr(fn, "out_overlap_refused", False)
        if refused:
            _refuse_overlap(name, out, (*args, *kwargs.values()), refused is ANY)
        # (a function of no tensor, a factory, resizes ``out`` silently, as PyTorch's do)
        made = not any(isinstance(a, Tensor) for a in (*args, *kwargs.values()))
        return _write(name, fn(*args, **kwargs), out, warn=not made)

    return call


def _refuse_overlap(name: str, out, operands, full: bool) -> None:
    """PyTorch's refusal of an operand (or one in a list of them, cat's) partly overlapping
    ``out`` (or one of a tuple of them, sort's), with ``full`` overlapping it at all
    (ops/_overlap.py)."""
    arrays = [a for a in map(_array, _flat(operands)) if a is not None]
    for written in map(_array, _flat((out,))):
        if written is not None:
            refuse_partial_overlap(name, written, arrays, full)


def _flat(values) -> list:
    flat = []
    for v in values:
        flat.extend(v if isinstance(v, (list, tuple)) else (v,))
    return flat


def _array(value):
    data = getattr(value, "_data", None) if isinstance(value, Tensor) else None
    return data if isinstance(data, np.ndarray) else None


def _write(name: str, result, out, *, warn: bool):
    if isinstance(result, Tensor):
        if isinstance(out, (tuple, list)) and len(out) == 1:
            out = out[0]
        if not isinstance(out, Tensor):
            raise ArgumentTypeError(
                f"{name}(): argument 'out' must be a Tensor, not {type(out).__name__}"
            )
        _check_grad(name, [result], [out])
        _write_one(name, result, out, warn)
        return out
    if isinstance(result, tuple) and result and all(isinstance(r, Tensor) for r in result):
        if not isinstance(out, (tuple, list)) or len(out) != len(result):
            raise ArgumentTypeError(
                f"{name}(): argument 'out' must be a tuple of {len(result)} Tensors"
            )
        if not all(isinstance(o, Tensor) for o in out):
            raise ArgumentTypeError(f"{name}(): argument 'out' must be a tuple of Tensors")
        _check_grad(name, list(result), list(out))
        for r, o in zip(result, out):
            _write_one(name, r, o, warn)
        fields = getattr(type(result), "_fields", None)
        return type(result)(*out) if fields else tuple(out)
    raise ArgumentTypeError(f"{name}() got an unexpected keyword argument 'out'")


def _check_grad(name: str, results: list, outs: list) -> None:
    if is_grad_enabled() and any(t.requires_grad for t in results + outs):
        raise EmberError(
            f"{name}(): functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad.",
            op=name,
        )


def _write_one(name: str, result, out, warn: bool) -> None:
    # (PyTorch's casting rule, typeinfo.can_cast: never into a lower category)
    if dt.as_dtype(result.dtype).category > dt.as_dtype(out.dtype).category:
        raise EmberError(
            f"{name}(): result type {_torch_name(result.dtype)} can't be cast to the desired "
            f"output type {_torch_name(out.dtype)}",
            op=name,
        )
    shape = tuple(result.shape)
    previous = set_grad_enabled_flag(False)  # (a write, not a recorded op)
    try:
        if tuple(out.shape) != shape:
            if warn and out.numel() != 0:
                warnings.warn(
                    f"An output with one or more elements was resized since it had shape "
                    f"{list(out.shape)}, which does not match the required output shape "
                    f"{list(shape)}. This behavior is deprecated, and in a future PyTorch "
                    "release outputs will not be resized unless they have zero elements. You "
                    "can explicitly reuse an out tensor t by resizing it, inplace, to zero "
                    "elements with t.resize_(0).",
                    UserWarning,
                    stacklevel=user_stacklevel(),
                )
            out.resize_(*shape)
        out.copy_(result)
    finally:
        set_grad_enabled_flag(previous)


def _torch_name(dtype) -> str:
    """PyTorch's scalar-type name of ``dtype`` in its messages (Float, Long, ...)."""
    names = {
        "float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
        "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
        "bool": "Bool", "complex64": "ComplexFloat", "complex128": "ComplexDouble",
    }  # fmt: skip
    return names.get(str(dtype).removeprefix("ember."), str(dtype))
