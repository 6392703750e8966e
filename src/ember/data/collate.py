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
    """Merge a list of samples (all with one structure) into a batch: `collate` with
    `default_collate_fn_map`, so types a program adds to that map are collated its way, as
    PyTorch's ``default_collate`` does."""
    return collate(batch, collate_fn_map=default_collate_fn_map)


def collate(batch, *, collate_fn_map: dict | None = None):
    """PyTorch's ``torch.utils.data._utils.collate.collate``: a sample's leaves are merged by
    the function ``collate_fn_map`` gives their type (its exact type first, then the first key
    it is an instance of, in the map's order), each called as ``fn(column,
    collate_fn_map=collate_fn_map)``; mappings, named tuples, tuples and lists recurse."""
    if not isinstance(batch, collections.abc.Sequence) or isinstance(batch, (str, bytes)):
        raise DTypeError(
            f"expects a list of samples, got {type(batch).__name__}; a DataLoader passes the "
            "list of dataset items that form one batch",
            op=_OP,
        )
    if len(batch) == 0:
        raise ShapeError("cannot collate an empty batch", op=_OP)
    return _collate(list(batch), "batch", collate_fn_map or {})


def _leaf_function(fn_map: dict, elem):
    fn = fn_map.get(type(elem))
    if fn is not None:
        return fn
    for kind, candidate in fn_map.items():
        if isinstance(elem, kind):
            return candidate
    return None


def _collate(samples: list, where: str, fn_map: dict):
    elem = samples[0]
    fn = _leaf_function(fn_map, elem)
    if fn is not None:
        own = _OWN_LEAVES.get(fn)  # ember's own: told where the column is, for its errors
        return own(samples, where) if own is not None else fn(samples, collate_fn_map=fn_map)
    if isinstance(elem, collections.abc.Mapping):
        return _collate_mapping(samples, where, fn_map)
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a named tuple
        columns = _transpose(samples, where)
        return type(elem)(
            *(_collate(c, f"{where}.{f}", fn_map) for c, f in zip(columns, elem._fields))
        )
    if isinstance(elem, (tuple, list)):
        columns = _transpose(samples, where)
        merged = [_collate(c, f"{where}[{i}]", fn_map) for i, c in enumerate(columns)]
        if isinstance(elem, tuple) or type(elem) is list:
            return merged
        try:  # a list subclass that can be built from a list
            return type(elem)(merged)
        except TypeError:
            return merged
    raise DTypeError(
        f"cannot collate {where} of type {type(elem).__name__}; samples may hold tensors, NumPy "
        "arrays, numbers, strings, and tuples, lists or dicts of those (pass collate_fn= to the "
        "DataLoader, or add the type to default_collate_fn_map, for anything else)",
        op=_OP,
    )


def _collate_tensors(samples: list, where: str):
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


def _collate_arrays(samples: list, where: str) -> Tensor:
    return _stack_arrays([_as_array(s, where, i) for i, s in enumerate(samples)], where)


def _collate_numpy_scalars(samples: list, where: str):
    if samples[0].dtype.kind not in "biuf":
        raise DTypeError(
            f"{where}: NumPy scalars of dtype {samples[0].dtype} cannot become tensors", op=_OP
        )
    return Tensor(_stack_arrays([np.asarray(s) for s in samples], where))


def _collate_strings(samples: list, where: str) -> list:
    return list(samples)


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


def _collate_mapping(samples: list, where: str, fn_map: dict):
    elem = samples[0]
    keys = list(elem.keys())
    for i, s in enumerate(samples):
        if not isinstance(s, collections.abc.Mapping) or set(s.keys()) != set(keys):
            got = sorted(map(str, s.keys())) if isinstance(s, collections.abc.Mapping) else s
            raise ShapeError(
                f"{where}: sample 0 has keys {sorted(map(str, keys))} but sample {i} has {got}",
                op=_OP,
            )
    merged = {k: _collate([s[k] for s in samples], f"{where}[{k!r}]", fn_map) for k in keys}
    if type(elem) is dict:
        return merged
    try:  # keep OrderedDict and other dict types that can be built from a dict
        return type(elem)(merged)
    except TypeError:
        return merged


def _public(own):
    """A leaf function with PyTorch's signature, ``fn(batch, *, collate_fn_map=None)``."""

    def fn(batch, *, collate_fn_map=None):
        return own(list(batch), "batch")

    fn.__name__ = fn.__qualname__ = own.__name__.replace("_collate_", "collate_") + "_fn"
    return fn


collate_tensor_fn = _public(_collate_tensors)
collate_numpy_array_fn = _public(_collate_arrays)
collate_numpy_scalar_fn = _public(_collate_numpy_scalars)
collate_float_fn = _public(_collate_numbers)
collate_int_fn = _public(_collate_numbers)
collate_str_fn = _public(_collate_strings)
_OWN_LEAVES = {
    collate_tensor_fn: _collate_tensors,
    collate_numpy_array_fn: _collate_arrays,
    collate_numpy_scalar_fn: _collate_numpy_scalars,
    collate_float_fn: _collate_numbers,
    collate_int_fn: _collate_numbers,
    collate_str_fn: _collate_strings,
}

# PyTorch's map, in its order (`_leaf_function` tries the keys in order after the exact type)
default_collate_fn_map: dict = {
    Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}
