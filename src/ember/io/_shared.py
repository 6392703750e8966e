"""Tensors of one checkpoint that share memory, as PyTorch's storages: saved once, loaded as
views of one array.

`shared_views(tensors)` finds the ember Tensors among a saved object's leaves whose arrays are
views of one NumPy buffer (``a`` and ``a[2:4]``; the outputs of ``chunk``), two or more distinct
tensors to a buffer, and gives each group the span of the buffer its tensors cover (the
*storage*, saved as one flat array) and each tensor its place in it: ``[offset, shape,
strides]`` in elements. `view_of(storage, place)` rebuilds a tensor's array from a loaded
storage after checking that place against it (files are hostile: every element the view
reaches must lie inside the storage). Tensors whose dtype is stored in another form (complex
parts, bytes) are saved as copies, as before.
"""

from __future__ import annotations

import numpy as np


def _root(arr: np.ndarray) -> np.ndarray:
    while isinstance(arr.base, np.ndarray):
        arr = arr.base
    return arr


def _plain(dtype: np.dtype) -> bool:
    """A NumPy-native real dtype (not complex, not one of ml_dtypes' float8/bfloat16, which
    strided views cannot be made of)."""
    try:
        return dtype.kind in "biuf" and np.dtype(dtype.str) == dtype
    except TypeError:  # (ml_dtypes' float8_e5m2 names itself "<f1", which NumPy refuses)
        return False


def _address(arr: np.ndarray) -> int:
    return arr.__array_interface__["data"][0]


def shared_views(tensors: list) -> dict[int, tuple]:
    """id(tensor) -> (group key, storage (a flat array, shared by the group), [offset, shape,
    strides]) for the tensors that share a buffer with another of ``tensors``."""
    groups: dict[int, dict[int, object]] = {}
    for t in tensors:
        arr = t._data
        if not _plain(arr.dtype) or arr.size == 0:
            continue
        groups.setdefault(id(_root(arr)), {})[id(t)] = t
    out: dict[int, tuple] = {}
    for key, members in groups.items():
        if len(members) < 2:
            continue
        arrays = [t._data for t in members.values()]
        root = _root(arrays[0])
        item = arrays[0].dtype.itemsize
        if not root.flags.c_contiguous or any(a.dtype != arrays[0].dtype for a in arrays):
            continue
        places, lo, hi = [], None, None
        for a in arrays:
            start = _address(a) - _address(root)
            if start % item or any(s % item for s in a.strides):
                break
            strides = [s // item for s in a.strides]
            first = start // item + sum(min(0, (n - 1) * s) for n, s in zip(a.shape, strides))
            last = start // item + sum(max(0, (n - 1) * s) for n, s in zip(a.shape, strides))
            lo = first if lo is None else min(lo, first)
            hi = last + 1 if hi is None else max(hi, last + 1)
            places.append([start // item, list(a.shape), strides])
        else:
            raw = root.reshape(-1).view(np.uint8)
            storage = raw[lo * item : hi * item].view(arrays[0].dtype)
            for tid, place in zip(members, places):
                out[tid] = (key, storage, [place[0] - lo, place[1], place[2]])
    return out


def view_of(storage: np.ndarray, place, bad) -> np.ndarray:
    """The array at ``place`` (``[offset, shape, strides]`` in elements) in ``storage``, a
    flat array from the file; ``bad(what)`` makes the error for a place that does not fit."""
    if not _plain(storage.dtype):
        raise bad(f"a view of a shared storage of dtype {storage.dtype} is not supported")
    if storage.ndim != 1:
        raise bad(f"a shared storage should be one-dimensional, got shape {storage.shape}")
    if not (isinstance(place, list) and len(place) == 3):
        raise bad("a view should be [offset, shape, strides]")
    offset, shape, strides = place
    ints = [offset, *(shape if isinstance(shape, list) else [None])]
    ints += strides if isinstance(strides, list) else [None]
    if not all(type(v) is int for v in ints) or len(shape) != len(strides):
        raise bad("a view's offset, shape and strides should be integers, one stride a dim")
    if offset < 0 or any(n < 0 for n in shape) or len(shape) > 64:
        raise bad(f"a view has a negative offset or size: {offset}, {shape}")
    if 0 not in shape:
        first = offset + sum(min(0, (n - 1) * s) for n, s in zip(shape, strides))
        last = offset + sum(max(0, (n - 1) * s) for n, s in zip(shape, strides))
        if first < 0 or last >= storage.size:
            raise bad(
                f"a view (offset {offset}, shape {shape}, strides {strides}) reaches outside "
                f"its storage of {storage.size} elements"
            )
    elif offset > storage.size:
        raise bad(f"a view's offset {offset} is past its storage of {storage.size} elements")
    item = storage.dtype.itemsize
    storage = np.ascontiguousarray(storage)
    return np.ndarray(
        tuple(shape),
        storage.dtype,
        buffer=storage,
        offset=offset * item if 0 not in shape else 0,
        strides=tuple(s * item for s in strides),
    )
