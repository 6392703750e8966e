"""`default_collate`: merge a list of samples into one batch; `default_convert`: convert one
sample's NumPy arrays to tensors (what a DataLoader with ``batch_size=None`` applies).

Leaves become tensors with a new leading batch dimension: ember Tensors and NumPy arrays are
stacked (dtypes promote as in `ember.stack`); Python numbers as PyTorch's: a column whose first
value is a float becomes float64, otherwise bool, int64 or (a float among integers) the default
float dtype; NumPy scalars keep their dtype. Containers recurse position by position:
named tuples and lists keep their type, a plain tuple becomes a list (as PyTorch's
``default_collate`` returns it: ``for x, y in loader`` unpacks either), mappings keep their
keys. Strings and bytes are kept as a list. Anything else is refused with the path of the
offending element.
"""

from __future__ import annotations

import collections.abc
import copy
import numbers

import numpy as np

from .. import dtypes as dt
from ..errors import DTypeError, EmberError, ShapeError
from ..tensor import Tensor

_OP = "default_collate"


def default_convert(data):
    """PyTorch's ``default_convert``: NumPy arrays and NumPy scalars become tensors (sharing the
    array's memory, as ``torch.as_tensor`` does), recursively inside mappings, named tuples,
    tuples and other sequences; everything else is returned as is. Arrays of strings or objects
    stay arrays. As in PyTorch, a plain tuple comes back as a list, and a mutable mapping or
    sequence is converted in a shallow copy of itself. Differs from PyTorch: NumPy dtypes ember
    has no tensors of (complex, uint16/32/64) raise a `DTypeError` naming the place."""
    return _convert(data, "sample")


def _convert(data, where: str):
    if isinstance(data, Tensor):
        return data
    if isinstance(data, (np.ndarray, np.generic)) and not isinstance(data, (np.str_, np.bytes_)):
        if data.dtype.kind in "SaUO":  # strings and objects: no tensor holds them
            return data
        from ..ops.creation import as_tensor

        try:
            dt.from_numpy_dtype(data.dtype)
        except (EmberError, TypeError):
            raise DTypeError(
                f"{where}: NumPy data of dtype {data.dtype} cannot become a tensor (ember has no "
                "such dtype); convert it in the dataset or pass a collate_fn",
                op="default_convert",
            ) from None
        return as_tensor(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        converted = {k: _convert(v, f"{where}[{k!r}]") for k, v in data.items()}
        try:
            if isinstance(data, collections.abc.MutableMapping):
                clone = copy.copy(data)
                clone.update(converted)
                return clone
            return type(data)(converted)
        except TypeError:
            return converted
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # a named tuple
        return type(data)(*(_convert(d, f"{where}.{f}") for d, f in zip(data, data._fields)))
    if isinstance(data, tuple):
        return [_convert(d, f"{where}[{i}]") for i, d in enumerate(data)]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        converted = [_convert(d, f"{where}[{i}]") for i, d in enumerate(data)]
        try:
            if isinstance(data, collections.abc.MutableSequence):
                clone = copy.copy(data)
                for i, d in enumerate(converted):
                    clone[i] = d
                return clone
            return type(data)(converted)
        except TypeError:
            return converted
    return data


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
        merged = [_collate(c, f"{where}[{i}]") for i, c in enumerate(columns)]
        if isinstance(elem, tuple) or type(elem) is list:
            return merged
        try:  # a list subclass that can be built from a list
            return type(elem)(merged)
        except TypeError:
            return merged
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
        from ..ops.concat import stack

        return stack(samples)
    return _stack_arrays([s.numpy(force=True) for s in samples], where)


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
    """Python numbers, as PyTorch: a float first -> float64; else all bools -> bool, all
    integers -> int64, otherwise the default float dtype (float32)."""
    for i, s in enumerate(samples):
        if not isinstance(s, numbers.Real):
            raise DTypeError(
                f"{where}: sample 0 is a {type(samples[0]).__name__} but sample {i} is a "
                f"{type(s).__name__}",
                op=_OP,
            )
    if isinstance(samples[0], float):  # PyTorch's torch.tensor(batch, dtype=torch.float64)
        return Tensor(np.array(samples, dtype=np.float64))
    # otherwise PyTorch's torch.tensor(batch): its dtype inferred from all the values
    if all(isinstance(s, bool) for s in samples):
        return Tensor(np.array(samples, dtype=np.bool_))
    if all(isinstance(s, numbers.Integral) for s in samples):
        return Tensor(np.array(samples, dtype=np.int64))
    return Tensor(np.array(samples, dtype=dt.get_default_dtype().np))


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
