"""User data to arrays: what ``ember.tensor``, ``as_tensor``, Python scalars met by ops and
``nn.Parameter`` accept, converted with ember's dtype rules (Python floats become the default
float dtype, ints int64, bools bool; NumPy arrays keep a dtype ember has)."""

from __future__ import annotations

import numbers

import numpy as np

from .. import dtypes as _dt
from ..errors import ArgumentError, DTypeError, ShapeError
from ._registry import TensorBase
from ._util import _overflows

__all__ = ["to_array"]


def _is_eager(x) -> bool:
    """An eager tensor (symbolic ones hold no data)."""
    return isinstance(x, TensorBase) and hasattr(x, "_data")


def to_array(data, dtype) -> np.ndarray:
    """Convert user data to an array of an ember dtype.

    Python scalars and (nested) lists are converted straight to ``dtype`` when one is given,
    else to the dtype PyTorch infers (floats: the default float dtype, ints: int64, bools:
    bool), rounding each value once: ``tensor(0.7, dtype=float64)`` holds the double 0.7, never
    a float32 rounding of it. Arrays and tensors keep their dtype or are cast to ``dtype``."""
    target = None if dtype is None else _dt.as_dtype(dtype)
    if _is_eager(data):
        arr = data._data
    elif isinstance(data, np.ndarray):
        arr = data
    elif isinstance(data, np.generic):
        arr = np.asarray(data)
    elif getattr(type(data), "ember_sparse", False) is True:  # (ops/sparse_tensor.py's classes)
        raise DTypeError(
            "a sparse tensor where a dense one is needed: this function takes dense tensors "
            "(sparse ones go through mm, matmul, addmm, mv, cat, stack, their elementwise "
            "methods and ember.sparse); convert it with .to_dense()",
            op="tensor",
        )
    else:
        arr = _from_python(data, target)
    if target is not None:
        if arr.dtype != target.np:
            arr = _dt.astype(arr, target)
    elif _dt._BY_NP.get(arr.dtype) is None:
        arr = arr.astype(_dt.as_dtype(arr.dtype.type).np) if arr.dtype.kind in "biuf" else arr
        if _dt._BY_NP.get(arr.dtype) is None:
            raise DTypeError(f"cannot make a tensor from data of dtype {arr.dtype}", op="tensor")
    return arr


def _from_python(data, target=None) -> np.ndarray:
    """Python scalars and nested lists as an array of ``target`` (an ember DType), converted
    directly from the Python values; without a target: floats -> the default float dtype,
    ints -> int64, bools -> bool, complex numbers -> the default complex dtype (lists holding
    NumPy float64 or complex128 values stay float64 or complex128)."""
    if target is not None and target.float8:
        return _dt.astype(np.asarray(_from_python(data)), target)  # (saturating, as PyTorch's)
    if target is not None and not isinstance(data, (list, tuple)):
        return _as_target(data, target)
    if isinstance(data, bool):
        return np.asarray(data, dtype=np.bool_)
    if isinstance(data, numbers.Integral):
        if type(data) is int and not -(2**63) <= data < 2**63:
            raise ArgumentError("Overflow when unpacking long long", op="tensor")
        return np.asarray(data, dtype=np.int64)
    if isinstance(data, numbers.Real):
        return np.asarray(data, dtype=_dt.get_default_dtype().np)
    if isinstance(data, numbers.Complex):
        return np.asarray(data, dtype=_dt.get_default_complex_dtype().np)
    if isinstance(data, (list, tuple)):
        if any(_is_eager(x) for x in _flatten(data)):
            data = _unwrap(data)
        try:
            arr = _as_int64(data) if target is None else _as_target(data, target)
        except ArgumentError:
            raise  # (a number out of range: a ValueError too, not a ragged list)
        except ValueError as exc:  # nested sequences of unequal lengths (ragged)
            raise ShapeError(
                f"cannot make a tensor from nested sequences of unequal lengths: {_ragged(data)}",
                op="tensor",
            ) from exc
        if target is not None:
            return arr
        if arr.dtype == np.float64 and not _has_numpy_float64(data):
            arr = arr.astype(_dt.get_default_dtype().np)
        elif arr.dtype == np.complex128 and not _has_numpy_float64(data, np.complex128):
            arr = arr.astype(_dt.get_default_complex_dtype().np)
        return arr
    return np.asarray(data)


def _as_target(data, target) -> np.ndarray:
    """Python numbers (nested lists of them) as an array of the ember dtype ``target``,
    checked and converted as PyTorch's ``tensor(data, dtype=...)`` does: into an integer dtype,
    a number outside its range (an unsigned one's ints down to minus its maximum, which wrap)
    is refused, where NumPy would raise its own OverflowError or cast a float silently."""
    if not target.is_integer or target.is_bool or (target.special and not target.limited):
        return np.asarray(data, dtype=target.np)
    info = np.iinfo(target.np)
    arr = np.asarray(data)
    kind = arr.dtype.kind
    if kind in "iub" or (kind == "f" and not (arr.size and np.abs(arr).max() >= 2.0**53)):
        # (NumPy's inferred dtype holds every number exactly: checked by its extremes)
        if arr.size and kind != "b":
            # (c10's lowest: an unsigned type's is minus its maximum for ints, which wrap)
            lowest = -int(info.max) if info.min == 0 and kind != "f" else int(info.min)
            high, low = arr.max(), arr.min()
            if kind == "f" and not np.isfinite(arr).all():
                _refuse_number(arr[~np.isfinite(arr)].reshape(-1)[0].item(), target)
            if high > info.max:
                _refuse_number(high.item(), target)
            if low < lowest:
                _refuse_number(low.item(), target)
        return arr.astype(target.np)  # (an unsigned dtype: a negative int wraps)
    for v in _flatten(data) if isinstance(data, (list, tuple)) else (data,):
        if type(v) in (int, float) and _overflows(v, info):
            _refuse_number(v, target)
    modulus = int(info.max) + 1
    wrapped = _mapped(data, lambda v: v % modulus if type(v) is int and v < 0 else v)
    return np.asarray(wrapped, dtype=target.np)


def _refuse_number(value, target):
    raise ArgumentError(
        f"value cannot be converted to type {target.name} without overflow (value {value!r})",
        op="tensor",
    )


def _mapped(data, f):
    if isinstance(data, (list, tuple)):
        return [_mapped(x, f) for x in data]
    return f(data)


def _as_int64(data) -> np.ndarray:
    """Nested lists without a dtype, as NumPy infers it, but for ints past int64's range, which
    PyTorch refuses (NumPy would pick uint64 or an object array)."""
    arr = np.asarray(data)
    wide = arr.dtype.kind == "f" and arr.size and not np.abs(arr).max() < 2.0**63
    if arr.dtype == np.uint64 or arr.dtype == object or wide:  # (else every int fits)
        for v in _flatten(data):
            if type(v) is int and not -(2**63) <= v < 2**63:
                raise ArgumentError("Overflow when unpacking long long", op="tensor")
    return arr


def _unwrap(data):
    """Nested lists with the eager tensors in them replaced by their arrays."""
    if isinstance(data, (list, tuple)):
        return [_unwrap(x) for x in data]
    return data._data if _is_eager(data) else data


def _ragged(data) -> str:
    """Where ``data`` first stops being rectangular, for the error message."""
    level, path = [data], ""
    while level:
        kinds = {isinstance(x, (list, tuple)) for x in level}
        if len(kinds) > 1:
            return f"at depth {path.count('[')} some items are sequences and some are not"
        if kinds != {True}:
            break
        lengths = sorted({len(x) for x in level})
        if len(lengths) > 1:
            return f"at depth {path.count('[') + 1} the lengths are {lengths}"
        level, path = [y for x in level for y in x], path + "[]"
    return "an item NumPy cannot hold"


def _flatten(data):
    for x in data:
        if isinstance(x, (list, tuple)):
            yield from _flatten(x)
        else:
            yield x


def _has_numpy_float64(data, dtype=np.float64) -> bool:
    return any(
        isinstance(x, (np.ndarray, np.generic)) and getattr(x, "dtype", None) == dtype
        for x in _flatten(data)
    )
