"""`default_collate`: merge a list of samples into one batch.

Leaves become tensors with a new leading batch dimension: ember Tensors and NumPy arrays are
stacked (dtypes promote as in `ember.stack`); Python bools, ints and floats become bool, int64
and float32 tensors; NumPy scalars keep their dtype. Containers recurse position by position:
tuples (named tuples included) and lists keep their type, mappings keep their keys. Strings and
bytes are kept as a list. Anything else is refused with the path of the offending element.
"""

from __future__ import annotations

import collections.abc
import numbers

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor

_OP = "default_collate"


def default_collate(batch):
    """Merge a list of samples (all with one structure) into a batch."""
    if not isinstance(batch, collections.abc.Sequence) or isinstance(batch, (str, bytes)):
        raise DTypeError(
            f"expects a list of samples, got {type(batch).__name__}; a DataLoader passes the "
            "list of dataset items that form one batch",
            op=_OP,
        )
    if len(batch) == 0:
        raise ShapeError("cannot collate an empty batch", op=_OP)
    return _collate(list(batch), "batch")


def _collate(samples: list, where: str):
    elem = samples[0]
    if isinstance(elem, Tensor):
        return _stack_tensors(samples, where)
    if isinstance(elem, np.ndarray):
        return _stack_arrays([_as_array(s, where, i) for i, s in enumerate(samples)], where)
    if isinstance(elem, np.generic) and elem.dtype.kind in "biuf":
        return Tensor(_stack_arrays([np.asarray(s) for s in samples], where))
    if isinstance(elem, numbers.Real):
        return _collate_numbers(samples, where)
    if isinstance(elem, (str, bytes)):
        return list(samples)
    if isinstance(elem, collections.abc.Mapping):
        return _collate_mapping(samples, where)
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a named tuple
        columns = _transpose(samples, where)
        return type(elem)(*(_collate(c, f"{where}.{f}") for c, f in zip(columns, elem._fields)))
    if isinstance(elem, (tuple, list)):
        columns = _transpose(samples, where)
        return type(elem)(_collate(c, f"{where}[{i}]") for i, c in enumerate(columns))
    raise DTypeError(
        f"cannot collate {where} of type {type(elem).__name__}; samples may hold tensors, NumPy "
        "arrays, numbers, strings, and tuples, lists or dicts of those (pass collate_fn= to the "
        "DataLoader for anything else)",
        op=_OP,
    )


def _stack_tensors(samples: list, where: str):
    for i, s in enumerate(samples):
        if not isinstance(s, Tensor):
            raise DTypeError(
                f"{where}: sample 0 is a Tensor but sample {i} is a {type(s).__name__}", op=_OP
            )
    if any(s.requires_grad for s in samples):  # keep the graph: stack with the ember op
        _check_shapes([s.shape for s in samples], where)
        from ..ops.shape import stack

        return stack(samples)
    return _stack_arrays([s.numpy() for s in samples], where)


def _stack_arrays(arrays: list, where: str) -> Tensor:
    _check_shapes([a.shape for a in arrays], where)
    dtype = dt.result_type(*(dt.from_numpy_dtype(a.dtype) for a in arrays))
    return Tensor(np.stack(arrays).astype(dtype.np, copy=False))


def _as_array(sample, where: str, i: int) -> np.ndarray:
    if not isinstance(sample, np.ndarray):
        raise DTypeError(
            f"{where}: sample 0 is a NumPy array but sample {i} is a {type(sample).__name__}",
            op=_OP,
        )
    if sample.dtype.kind not in "biuf":
        raise DTypeError(
            f"{where}: NumPy arrays of dtype {sample.dtype} cannot become tensors", op=_OP
        )
    return sample


def _check_shapes(shapes: list, where: str) -> None:
    first = tuple(shapes[0])
    for i, shape in enumerate(shapes):
        if tuple(shape) != first:
            raise ShapeError(
                f"{where}: sample {i} has shape {tuple(shape)} but sample 0 has {first}; samples "
                "in one batch must have one shape (resize them in a transform, or pass a "
                "collate_fn that pads)",
                op=_OP,
            )


def _collate_numbers(samples: list, where: str) -> Tensor:
    """Python numbers: all bools -> bool, all integers -> int64, otherwise -> float32."""
    for i, s in enumerate(samples):
        if not isinstance(s, numbers.Real):
            raise DTypeError(
                f"{where}: sample 0 is a {type(samples[0]).__name__} but sample {i} is a "
                f"{type(s).__name__}",
                op=_OP,
            )
    if all(isinstance(s, bool) for s in samples):
        return Tensor(np.array(samples, dtype=np.bool_))
    if all(isinstance(s, numbers.Integral) for s in samples):
        return Tensor(np.array(samples, dtype=np.int64))
    return Tensor(np.array(samples, dtype=np.float32))


def _transpose(samples: list, where: str) -> list:
    size = len(samples[0])
    for i, s in enumerate(samples):
        if not isinstance(s, (tuple, list)) or len(s) != size:
            got = len(s) if isinstance(s, (tuple, list)) else type(s).__name__
            raise ShapeError(
                f"{where}: sample 0 has {size} elements but sample {i} has {got}; every sample "
                "must have the same structure",
                op=_OP,
            )
    return [list(column) for column in zip(*samples)]


def _collate_mapping(samples: list, where: str):
    elem = samples[0]
    keys = list(elem.keys())
    for i, s in enumerate(samples):
        if not isinstance(s, collections.abc.Mapping) or set(s.keys()) != set(keys):
            got = sorted(map(str, s.keys())) if isinstance(s, collections.abc.Mapping) else s
            raise ShapeError(
                f"{where}: sample 0 has keys {sorted(map(str, keys))} but sample {i} has {got}",
                op=_OP,
            )
    merged = {k: _collate([s[k] for s in samples], f"{where}[{k!r}]") for k in keys}
    if type(elem) is dict:
        return merged
    try:  # keep OrderedDict and other dict types that can be built from a dict
        return type(elem)(merged)
    except TypeError:
        return merged
