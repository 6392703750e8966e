"""The structure of a checkpoint: nested containers as JSON, tensors pulled out by name.

`encode(obj)` turns a tree of dicts, lists, tuples, None, bools, ints, floats, strings, ember
DTypes, ember Tensors and NumPy arrays/scalars into a JSON-able *structure* plus a dict of
contiguous NumPy arrays named after their place in the tree (``model.fc.weight``), which is what
a safetensors reader sees. `decode(structure, arrays)` inverts it. Tags keep what JSON cannot
express: ``{"$tuple": [...]}``, ``{"$dict": {...}}`` (string keys), ``{"$items": [[k, v], ...]}``
(other keys, e.g. an optimizer's integer parameter ids), ``{"$float": "nan"}``,
``{"$dtype": "float32"}`` and ``{"$tensor": name, ...}``. Every JSON object in a structure is a
tag, so a user's dict can never be mistaken for one.

An object that appears twice (the same Tensor, say) is stored once and loads as one object;
containers that contain themselves are refused.
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as dt
from ..errors import CheckpointError
from ..tensor import Tensor


class CheckpointTypeError(CheckpointError, TypeError):
    """An object that a checkpoint cannot hold."""


_KEY_TYPES = (str, int, float, bool, type(None))


def encode(obj) -> tuple[object, dict[str, np.ndarray]]:
    encoder = _Encoder()
    return encoder.encode(obj, ""), encoder.arrays


class _Encoder:
    """One `encode` call: the arrays named so far (a tensor met twice is stored once) and the
    containers being walked (a container holding itself is refused)."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}
        self.memo: dict[int, str] = {}
        self.keep_alive: list = []  # objects whose id() is in memo must outlive the encoding
        self.active: set[int] = set()

    def leaf_name(self, path: str) -> str:
        name = path or "tensor"
        k = 1
        while name in self.arrays:
            k += 1
            name = f"{path or 'tensor'}#{k}"
        return name

    def array_node(self, x, arr: np.ndarray, path: str, kind: str | None) -> dict:
        if id(x) not in self.memo:
            if dt._BY_NP.get(arr.dtype) is None:
                raise CheckpointTypeError(
                    f"{_where(path)} is an array of dtype {arr.dtype}, which ember does not "
                    "support; convert it to one of " + ", ".join(d.name for d in dt.ALL_DTYPES),
                    op="save",
                )
            name = self.leaf_name(path)
            self.arrays[name] = arr if arr.flags.c_contiguous else arr.copy(order="C")
            self.memo[id(x)] = name
            self.keep_alive.append(x)
        node = {"$tensor": self.memo[id(x)]}
        if kind:
            node["kind"] = kind
        if isinstance(x, Tensor) and x.requires_grad:
            node["requires_grad"] = True
        return node

    def encode(self, x, path: str):
        if x is None or isinstance(x, (bool, str)):
            return x
        if isinstance(x, int):
            return int(x)
        if isinstance(x, float):
            return float(x) if math.isfinite(x) else {"$float": repr(float(x))}
        if isinstance(x, Tensor):
            return self.array_node(x, x.numpy(), path, None)
        if isinstance(x, np.ndarray):
            return self.array_node(x, x, path, "ndarray")
        if isinstance(x, np.generic):
            return self.array_node(x, np.asarray(x), path, "numpy_scalar")
        if isinstance(x, dt.DType):
            return {"$dtype": x.name}
        if isinstance(x, (dict, list, tuple)):
            if id(x) in self.active:
                raise CheckpointTypeError(f"{_where(path)} contains itself", op="save")
            self.active.add(id(x))
            try:
                return self.container(x, path)
            finally:
                self.active.discard(id(x))
        raise CheckpointTypeError(
            f"{_where(path)} is a {type(x).__name__}, which a checkpoint cannot hold (it holds "
            "dicts, lists, tuples, None, bool, int, float, str, dtypes, Tensors and NumPy "
            "arrays; convert it, e.g. to a state_dict)",
            op="save",
        )

    def container(self, x, path: str):
        if isinstance(x, list):
            return [self.encode(v, _join(path, i)) for i, v in enumerate(x)]
        if isinstance(x, tuple):
            return {"$tuple": [self.encode(v, _join(path, i)) for i, v in enumerate(x)]}
        if all(type(k) is str for k in x):
            return {"$dict": {k: self.encode(v, _join(path, k)) for k, v in x.items()}}
        items = []
        for k, v in x.items():
            if not isinstance(k, _KEY_TYPES):
                raise CheckpointTypeError(
                    f"{_where(path)} has a key of type {type(k).__name__}; dict keys must be "
                    "str, int, float, bool or None",
                    op="save",
                )
            items.append([self.encode(k, path), self.encode(v, _join(path, k))])
        return {"$items": items}


def decode(structure, arrays: dict[str, np.ndarray], path: str):
    """Rebuild the object tree; ``path`` (the file) is named in errors about a bad structure."""
    made: dict[str, object] = {}

    def bad(what: str) -> CheckpointError:
        return CheckpointError(f"{path}: corrupt checkpoint structure: {what}", op="load")

    def tensor(node: dict):
        name = node["$tensor"]
        if name not in arrays:
            raise bad(f"it refers to a tensor {name!r} that the file does not contain")
        kind = node.get("kind")
        key = f"{name}\0{kind}"
        if key not in made:
            arr = arrays[name]
            if kind == "ndarray":
                made[key] = arr
            elif kind == "numpy_scalar":
                made[key] = arr.reshape(())[()]
            elif kind is None:
                t = Tensor(arr)
                made[key] = t.requires_grad_() if node.get("requires_grad") else t
            else:
                raise bad(f"unknown tensor kind {kind!r}")
        return made[key]

    def dec(x):
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        if isinstance(x, list):
            return [dec(v) for v in x]
        if not isinstance(x, dict) or not x:
            raise bad(f"unexpected value {x!r}")
        if "$tensor" in x:
            return tensor(x)
        if len(x) != 1:
            raise bad(f"unexpected object with keys {sorted(x)}")
        ((tag, value),) = x.items()
        if tag == "$dict" and isinstance(value, dict):
            return {k: dec(v) for k, v in value.items()}
        if tag == "$items" and isinstance(value, list):
            if not all(isinstance(kv, list) and len(kv) == 2 for kv in value):
                raise bad("malformed $items")
            return {dec(k): dec(v) for k, v in value}
        if tag == "$tuple" and isinstance(value, list):
            return tuple(dec(v) for v in value)
        if tag == "$float" and value in ("nan", "inf", "-inf"):
            return float(value)
        if tag == "$dtype" and isinstance(value, str):
            try:
                return dt.as_dtype(value)
            except TypeError:
                raise bad(f"unknown dtype {value!r}") from None
        raise bad(f"unknown tag {tag!r}")

    return dec(structure)


def _join(path: str, key) -> str:
    return f"{path}.{key}" if path else str(key)


def _where(path: str) -> str:
    return f"the value at {path!r}" if path else "the object"
