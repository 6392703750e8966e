"""The structure of a checkpoint: nested containers as JSON, tensors pulled out by name.

`encode(obj)` turns a tree of dicts, lists, tuples, None, bools, ints, floats, strings, ember
DTypes, ember Tensors and NumPy arrays/scalars into a JSON-able *structure* plus a dict of
contiguous NumPy arrays named after their place in the tree (``model.fc.weight``), which is what
a safetensors reader sees. `decode(structure, arrays)` inverts it. Tags keep what JSON cannot
express: ``{"$tuple": [...]}``, ``{"$dict": {...}}`` (string keys), ``{"$items": [[k, v], ...]}``
(other keys, e.g. an optimizer's integer parameter ids), ``{"$float": "nan"}``,
``{"$complex": [re, im]}``, ``{"$dtype": "float32"}``, ``{"$meta": {"id", "dtype", "shape",
"requires_grad"}}`` (a meta tensor: no data, as PyTorch saves one; ``id`` tells one apart from
another of the same type) and ``{"$tensor": name, ...}`` (with
``"complex": true`` for a complex tensor stored as its real and imaginary parts, a last axis
of 2: safetensors has no complex128; with ``"view": [offset, shape, strides]`` for one of
several tensors that share memory, a view of their storage, `ember.io._shared`). Every JSON
object in a structure is a tag, so a user's dict can never be mistaken for one.

An object that appears twice (the same Tensor, a module registered under two names, a list
held by two dicts) is stored once and loads as one object, as pickle's memo makes PyTorch's:
a tensor by its name, a dict, list or program object met again as ``{"$ref": n}``, the n-th of
them in the order the structure is written (and read: both walk it depth first, counting each
when they reach it, before its contents); containers that contain themselves are refused. A
program's own object is saved as its class name and its attributes (``{"$object": ...}``), a
whole ``nn.Module`` too (its class's ``_saved_whole``: ``torch.save(model)``), a Parameter as a
tensor of kind "parameter" (`TENSOR_KINDS`, also where it is a view of a storage it shares with
another tensor); loading builds them only for classes the program allowed, or, with
``weights_only=False``, imported (io/safe_globals.py).
"""

from __future__ import annotations

import enum
import math
import types

import numpy as np

from .. import _meta
from .. import dtypes as dt
from ..errors import CheckpointError, CheckpointRefusedError, EmberError
from ..ops._factory_kwargs import sparse_coo
from ..tensor import Tensor
from . import _quantized, safe_globals
from ._shared import shared_views, view_of


class CheckpointTypeError(CheckpointError, TypeError):
    """An object that a checkpoint cannot hold."""


_KEY_TYPES = (str, int, float, bool, type(None))

# the tensor classes a checkpoint rebuilds by their "kind" (a class's ``_checkpoint_kind``), each
# registered by the layer that defines it: nn/parameter.py's "parameter", so a Parameter (in a
# whole saved module, or a state_dict(keep_vars=True)) loads as one, as PyTorch's
TENSOR_KINDS: dict = {}


def encode(obj) -> tuple[object, dict[str, np.ndarray]]:
    encoder = _Encoder()
    encoder.shared = shared_views(_tensor_leaves(obj))
    return encoder.encode(obj, ""), encoder.arrays


class _Encoder:
    """One `encode` call: the arrays named so far (a tensor met twice is stored once) and the
    containers being walked (a container holding itself is refused)."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}
        self.memo: dict[int, str] = {}
        self.keep_alive: list = []  # objects whose id() is in memo must outlive the encoding
        self.active: set[int] = set()
        self.shared: dict[int, tuple] = {}  # tensors sharing memory (`ember.io._shared`)
        self.storages: dict[int, str] = {}  # a shared storage's name, by its group key
        self.refs: dict[int, int] = {}  # a dict's, list's or object's number, for "$ref"

    def reference(self, x) -> dict | None:
        """``{"$ref": n}`` for a dict, list or object written before; else None, and ``x``
        numbered (tuples and sets are values: PyTorch's identity of them matters to nobody)."""
        if isinstance(x, (tuple, set, frozenset)):
            return None
        if id(x) in self.refs:
            return {"$ref": self.refs[id(x)]}
        self.refs[id(x)] = len(self.refs)
        self.keep_alive.append(x)  # (a state made for this call must keep its id unique)
        return None

    def leaf_name(self, path: str) -> str:
        name = path or "tensor"
        k = 1
        while name in self.arrays:
            k += 1
            name = f"{path or 'tensor'}#{k}"
        return name

    def shared_node(self, x, path: str, kind: str | None) -> dict:
        key, storage, place = self.shared[id(x)]
        if key not in self.storages:
            self.storages[key] = name = self.leaf_name(f"{path or 'tensor'}#storage")
            self.arrays[name] = storage
        node = {"$tensor": self.storages[key], "view": place}
        if kind:  # (a Parameter sharing memory with its state_dict's entry stays a Parameter)
            node["kind"] = kind
        if x.requires_grad:
            node["requires_grad"] = True
        return node

    def array_node(self, x, arr: np.ndarray, path: str, kind: str | None) -> dict:
        if id(x) in self.shared:
            return self.shared_node(x, path, kind)
        quantized = None
        if arr.dtype.metadata and dt.QUANTIZED_KEY in arr.dtype.metadata:
            # (its integers, with its parameters in the node: io/_quantized.py)
            quantized = _quantized.encode(arr)
            arr = _quantized.integers(arr)
        is_complex = arr.dtype.kind == "c"
        bytes_of = _AS_BYTES.get(arr.dtype)
        if id(x) not in self.memo:
            if dt._BY_NP.get(arr.dtype) is None:
                raise CheckpointTypeError(
                    f"{_where(path)} is an array of dtype {arr.dtype}, which ember does not "
                    "support; convert it to one of " + ", ".join(d.name for d in dt.ALL_DTYPES),
                    op="save",
                )
            name = self.leaf_name(path)
            arr = arr if arr.flags.c_contiguous else arr.copy(order="C")
            if is_complex:  # (safetensors has no complex128: real and imaginary parts as a
                arr = _parts(arr)  # last axis of 2, and "complex" in the node)
            if bytes_of:  # (a dtype safetensors has no name for)
                arr = arr.view(np.uint8)
            self.arrays[name] = arr
            self.memo[id(x)] = name
            self.keep_alive.append(x)
        node = {"$tensor": self.memo[id(x)]}
        if kind:
            node["kind"] = kind
        if is_complex:
            node["complex"] = True
        if bytes_of:
            node["bytes_of"] = bytes_of
        if quantized is not None:
            node["quantized"] = quantized
        if isinstance(x, Tensor) and x.requires_grad:
            node["requires_grad"] = True
        return node

    def meta_node(self, x) -> dict:
        if id(x) not in self.memo:
            self.memo[id(x)] = len(self.memo)
            self.keep_alive.append(x)
        return {
            "$meta": {
                "id": self.memo[id(x)],
                "dtype": x.dtype.name,
                "shape": list(x.shape),
                "requires_grad": x.requires_grad,
            }
        }

    def encode(self, x, path: str):
        if x is None or isinstance(x, (bool, str)):
            return x
        if isinstance(x, int):
            return int(x)
        if isinstance(x, float):
            return float(x) if math.isfinite(x) else {"$float": repr(float(x))}
        if isinstance(x, complex):  # (parts as floats: "nan" and "inf" tagged as above)
            return {"$complex": [self.encode(x.real, path), self.encode(x.imag, path)]}
        if isinstance(x, Tensor):
            if _meta.is_meta(x._data):
                return self.meta_node(x)
            kind = getattr(type(x), "_checkpoint_kind", None)  # (nn.Parameter: "parameter")
            return self.array_node(x, x._data, path, kind)  # (read, not handed out)
        if isinstance(x, np.ndarray):
            return self.array_node(x, x, path, "ndarray")
        if isinstance(x, np.generic):
            return self.array_node(x, np.asarray(x), path, "numpy_scalar")
        if isinstance(x, dt.DType):
            return {"$dtype": x.name}
        if isinstance(x, (set, frozenset)):
            tag = "$set" if isinstance(x, set) else "$frozenset"
            return {tag: [self.encode(v, _join(path, i)) for i, v in enumerate(x)]}
        if getattr(x, "layout", None) is sparse_coo and hasattr(x, "_indices"):
            return {
                "$sparse_coo": {
                    "indices": self.encode(x._indices(), _join(path, "indices")),
                    "values": self.encode(x._values(), _join(path, "values")),
                    "size": list(x.shape),
                    "coalesced": x.is_coalesced(),
                }
            }
        if isinstance(x, (dict, list, tuple)):
            if id(x) in self.active:
                raise CheckpointTypeError(f"{_where(path)} contains itself", op="save")
            ref = self.reference(x)
            if ref is not None:
                return ref
            self.active.add(id(x))
            try:
                return self.container(x, path)
            finally:
                self.active.discard(id(x))
        hint = "convert it, e.g. to a state_dict"
        state = _object_state(x)
        whole = getattr(type(x), "_saved_whole", False) is True  # (a Module: nn/module.py)
        if state is not None and (whole or not callable(getattr(x, "state_dict", None))):
            if id(x) in self.active:
                raise CheckpointTypeError(f"{_where(path)} contains itself", op="save")
            ref = self.reference(x)
            if ref is not None:
                return ref
            self.active.add(id(x))
            try:
                fields = {k: self.encode(v, path) for k, v in state}
            finally:
                self.active.discard(id(x))
            return {"$object": {"class": safe_globals.global_name(type(x)), **fields}}
        if callable(getattr(x, "state_dict", None)):  # a whole Module or Optimizer
            hint = (
                f"save its state_dict() instead and load that with load_state_dict() into a new "
                f"{type(x).__name__}: ember never pickles objects, as torch.load's default "
                "weights_only=True (PyTorch 2.6+) would refuse a pickled model too"
            )
        raise CheckpointTypeError(
            f"{_where(path)} is a {type(x).__name__}, which a checkpoint cannot hold (it holds "
            "dicts, lists, tuples, sets, None, bool, int, float, complex, str, dtypes, Tensors, "
            f"sparse COO tensors and NumPy arrays); {hint}",
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


MAX_DEPTH = 200  # of a structure's nesting (a training state nests under 10 deep)
_TENSOR_KEYS = frozenset(
    {"$tensor", "kind", "requires_grad", "complex", "bytes_of", "view", "quantized"}
)
# dtypes stored as their bytes (uint8), "bytes_of" naming them in the node
_AS_BYTES = {
    np.dtype(dt.float8_e4m3fnuz.np): "float8_e4m3fnuz",
    np.dtype(dt.float8_e5m2fnuz.np): "float8_e5m2fnuz",
}
_FROM_BYTES = {name: dtype for dtype, name in _AS_BYTES.items()}


def _tensor_leaves(obj) -> list:
    """The ember Tensors among ``obj``'s leaves (containers walked once each)."""
    out, seen, stack = [], set(), [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, Tensor):
            if id(x) not in seen and not _meta.is_meta(x._data):  # (no memory to share)
                seen.add(id(x))
                out.append(x)
        elif isinstance(x, (dict, list, tuple, set, frozenset)) and id(x) not in seen:
            seen.add(id(x))
            stack.extend(x.values() if isinstance(x, dict) else x)
    return out


def _parts(arr: np.ndarray) -> np.ndarray:
    """A complex array's real and imaginary parts as a last axis of 2 (a view)."""
    return arr.reshape(-1).view(arr.real.dtype).reshape(*arr.shape, 2)


def decode(structure, arrays: dict[str, np.ndarray], path: str, trusted: bool = False):
    """Rebuild the object tree; ``path`` (the file) is named in errors about a bad structure,
    with the place in the tree where the problem is. ``trusted`` (``load(weights_only=False)``):
    objects of classes the program has imported are built too, not only registered ones."""
    made: dict[str, object] = {}
    numbered: list = []  # the dicts, lists and objects read so far, by number, for "$ref"
    pending = object()  # (the slot of one still being read: a reference to it is a cycle)

    def numbering():
        numbered.append(pending)
        return len(numbered) - 1

    def referenced(value, where: str):
        if type(value) is not int or not 0 <= value < len(numbered):
            raise bad(f"a reference to object {_short(value)}, which was not read before", where)
        if numbered[value] is pending:
            raise bad(f"a reference to object {value}, which contains it", where)
        return numbered[value]

    def bad(what: str, where: str) -> CheckpointError:
        place = f" at {where!r}" if where else ""
        return CheckpointError(f"{path}: corrupt checkpoint structure{place}: {what}", op="load")

    def tensor(node: dict, where: str):
        name = node["$tensor"]
        if not isinstance(name, str):
            raise bad(f"a tensor reference should be a name, got {_short(name)}", where)
        if not set(node) <= _TENSOR_KEYS:
            raise bad(
                f"a tensor reference has unknown keys {sorted(set(node) - _TENSOR_KEYS)}", where
            )
        if name not in arrays:
            raise bad(f"it refers to a tensor {_short(name)} that the file does not contain", where)
        kind = node.get("kind")
        requires_grad = node.get("requires_grad", False)
        if not isinstance(requires_grad, bool):
            raise bad(f"requires_grad should be true or false, got {_short(requires_grad)}", where)
        is_complex = node.get("complex", False)
        if not isinstance(is_complex, bool):
            raise bad(f"complex should be true or false, got {_short(is_complex)}", where)
        bytes_of = node.get("bytes_of")
        if bytes_of is not None and (
            not isinstance(bytes_of, str) or bytes_of not in _FROM_BYTES or is_complex
        ):
            raise bad(f"unknown dtype {_short(bytes_of)} stored as bytes", where)
        view = node.get("view")
        quantized = node.get("quantized")
        if quantized is not None and (kind is not None or view is not None or is_complex):
            raise bad("a quantized tensor is a plain tensor of its own storage", where)
        key = f"{name}\0{kind}\0{requires_grad}\0{is_complex}\0{bytes_of}\0{view}\0{quantized}"
        if key not in made and quantized is not None:
            made[key] = _quantized.decode(arrays[name], quantized, lambda what: bad(what, where))
        if key not in made:
            arr = arrays[name]
            if view is not None:
                if kind in ("ndarray", "numpy_scalar") or is_complex or bytes_of is not None:
                    raise bad("a view of a shared storage is a plain tensor or a kind of it", where)
                arr = view_of(arr, view, lambda what: bad(what, where))
            if bytes_of is not None:
                if arr.dtype != np.uint8:
                    raise bad(f"{bytes_of} tensor {name!r} should be stored as uint8", where)
                arr = arr.view(_FROM_BYTES[bytes_of])
            if is_complex:
                if arr.dtype not in (np.float32, np.float64) or arr.ndim < 1 or arr.shape[-1] != 2:
                    raise bad(
                        f"complex tensor {name!r} should be float32 or float64 parts of a last "
                        f"axis of 2, got {arr.dtype} of shape {arr.shape}",
                        where,
                    )
                complex_dtype = np.complex64 if arr.dtype == np.float32 else np.complex128
                arr = np.ascontiguousarray(arr).view(complex_dtype)[..., 0]
            if kind == "ndarray":
                made[key] = arr
            elif kind == "numpy_scalar":
                if arr.size != 1:
                    raise bad(f"the NumPy scalar {name!r} holds {arr.size} values", where)
                made[key] = arr.reshape(())[()]
            elif kind is None or (isinstance(kind, str) and kind in TENSOR_KINDS):
                t = Tensor(arr)
                if requires_grad and not (t.dtype.is_floating_point or t.dtype.is_complex):
                    raise bad(f"tensor {name!r} of dtype {t.dtype} cannot require grad", where)
                if kind is not None:
                    made[key] = TENSOR_KINDS[kind](t, requires_grad)
                else:
                    made[key] = t.requires_grad_() if requires_grad else t
            else:
                raise bad(f"unknown tensor kind {_short(kind)}", where)
        return made[key]

    def meta(value: dict, where: str):
        if set(value) != {"id", "dtype", "shape", "requires_grad"} or type(value["id"]) is not int:
            raise bad(f"a meta tensor with fields {_short(value)}", where)
        shape, requires_grad = value["shape"], value["requires_grad"]
        try:
            dtype = dt.as_dtype(value["dtype"])
        except TypeError:
            raise bad(f"a meta tensor of unknown dtype {_short(value['dtype'])}", where) from None
        if not (
            isinstance(shape, list)
            and len(shape) <= 64
            and all(type(d) is int and 0 <= d < 2**63 for d in shape)
        ):
            raise bad(
                f"a meta tensor's shape should be a list of sizes, got {_short(shape)}", where
            )
        if not isinstance(requires_grad, bool) or (
            requires_grad and not (dtype.is_floating_point or dtype.is_complex)
        ):
            raise bad(f"a meta tensor of dtype {dtype} with requires_grad {requires_grad}", where)
        key = f"$meta\0{value['id']}"
        if key not in made:  # (no data: a stand-in of its shape, as PyTorch loads one)
            try:
                t = Tensor(_meta.stand_in(tuple(shape), dtype.np))
            except EmberError as exc:  # (a size no storage could have)
                raise bad(f"a meta tensor: {exc.detail}", where) from None
            made[key] = t.requires_grad_() if requires_grad else t
        return made[key]

    def sparse(value: dict, where: str, depth: int):
        from ..ops.sparse_tensor import sparse_coo_tensor

        if set(value) != {"indices", "values", "size", "coalesced"}:
            raise bad(f"a sparse tensor with keys {_short(sorted(value))}", where)
        indices = dec(value["indices"], _join(where, "indices"), depth + 1)
        values = dec(value["values"], _join(where, "values"), depth + 1)
        size, coalesced = value["size"], value["coalesced"]
        if not (isinstance(indices, Tensor) and isinstance(values, Tensor)):
            raise bad("a sparse tensor's indices and values should be tensors", where)
        if not (
            isinstance(size, list)
            and len(size) <= 64
            and all(type(d) is int and 0 <= d < 2**63 for d in size)
        ):
            raise bad(
                f"a sparse tensor's size should be a list of sizes, got {_short(size)}", where
            )
        if not isinstance(coalesced, bool):
            raise bad(f"coalesced should be true or false, got {_short(coalesced)}", where)
        try:  # (its invariants checked: indices within the size, nnz agreeing)
            return sparse_coo_tensor(
                indices, values, tuple(size), check_invariants=True, is_coalesced=coalesced
            )
        except EmberError as exc:
            raise bad(f"an inconsistent sparse tensor: {str(exc).splitlines()[0]}", where) from None

    def user_object(value: dict, where: str, depth: int):
        # a program's own object: built only where the program allowed its class
        name = value["class"]
        cls = safe_globals.lookup(name)
        if cls is None and trusted:
            cls = safe_globals.imported_class(name)
        if not isinstance(cls, type):
            raise CheckpointRefusedError(
                f"{path}: {_where(where)} is a {_short(name)}, a class the program has not "
                "allowed; if you trust the file, allow it with "
                f"ember.serialization.add_safe_globals([{name.rsplit('.', 1)[-1]}]) "
                "(PyTorch's weights-only rule) or load with weights_only=False once its module "
                "is imported (which builds no class with a finalizer or a base implemented in "
                "C: they would run code on the file's state): ember builds no other object "
                "from a file",
                op="load",
            )
        if set(value) == {"class", "value"} and issubclass(cls, enum.Enum):
            member = dec(value["value"], where, depth + 1)
            try:
                return cls(member)
            except Exception:  # noqa: BLE001 (ValueError; TypeError for an enum of no members)
                raise bad(f"{_short(value['value'])} is not a member of {name}", where) from None
        if set(value) != {"class", "state"}:
            raise bad(f"an object of {_short(name)} with fields {_short(sorted(value))}", where)
        state = dec(value["state"], where, depth + 1)
        # the class's own code runs on the file's state (its __new__, its __setstate__, its
        # attributes' setters): whatever it raises (a namedtuple's __new__ wanting its fields,
        # a __class__ or a slot set to a wrong value) is the file's damage, named as such
        try:
            obj = cls.__new__(cls)
            safe_globals.set_state(obj, state)
        except Exception as exc:  # noqa: BLE001
            detail = exc.detail if isinstance(exc, EmberError) else f"{type(exc).__name__}: {exc}"
            what = f"an object of {name} not built from its state ({detail:.200})"
            raise bad(what, where) from exc
        return obj

    def key(k, where: str):
        value = dec(k, where, 0)
        if not isinstance(value, _KEY_TYPES):
            raise bad(
                f"a dict key of type {type(value).__name__} (keys are str, int, "
                "float, bool or None)",
                where,
            )
        return value

    def dec(x, where: str, depth: int):
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        if depth >= MAX_DEPTH:
            raise bad(f"nested more than {MAX_DEPTH} deep", where)
        if isinstance(x, list):
            slot = numbering()
            numbered[slot] = [dec(v, _join(where, i), depth + 1) for i, v in enumerate(x)]
            return numbered[slot]
        if not isinstance(x, dict) or not x:
            raise bad(f"unexpected value {_short(x)}", where)
        if "$tensor" in x:
            return tensor(x, where)
        if len(x) != 1:
            raise bad(f"unexpected object with keys {_short(sorted(x))}", where)
        ((tag, value),) = x.items()
        if tag == "$ref":
            return referenced(value, where)
        if tag == "$dict" and isinstance(value, dict):
            slot = numbering()
            numbered[slot] = {k: dec(v, _join(where, k), depth + 1) for k, v in value.items()}
            return numbered[slot]
        if tag == "$items" and isinstance(value, list):
            if not all(isinstance(kv, list) and len(kv) == 2 for kv in value):
                raise bad("malformed $items (a list of [key, value] pairs expected)", where)
            slot = numbering()
            items = {}
            for k, v in value:
                k = key(k, where)
                items[k] = dec(v, _join(where, k), depth + 1)
            numbered[slot] = items
            return items
        if tag == "$tuple" and isinstance(value, list):
            return tuple(dec(v, _join(where, i), depth + 1) for i, v in enumerate(value))
        if tag == "$float" and value in ("nan", "inf", "-inf"):
            return float(value)
        if tag == "$complex" and isinstance(value, list) and len(value) == 2:
            parts = [dec(v, where, depth + 1) for v in value]
            if not all(type(v) in (int, float) for v in parts):
                raise bad(f"a complex number's parts should be numbers, got {_short(value)}", where)
            try:
                return complex(*parts)
            except OverflowError:  # (an int past a float's range)
                what = f"a complex number's part is out of range: {_short(value)}"
                raise bad(what, where) from None
        if tag in ("$set", "$frozenset") and isinstance(value, list):
            members = [dec(v, _join(where, i), depth + 1) for i, v in enumerate(value)]
            try:
                return set(members) if tag == "$set" else frozenset(members)
            except TypeError:
                raise bad("a set member that cannot be hashed", where) from None
        if tag == "$sparse_coo" and isinstance(value, dict):
            return sparse(value, where, depth)
        if tag == "$object" and isinstance(value, dict) and isinstance(value.get("class"), str):
            slot = numbering()
            numbered[slot] = user_object(value, where, depth)
            return numbered[slot]
        if tag == "$meta" and isinstance(value, dict):
            return meta(value, where)
        if tag == "$dtype" and isinstance(value, str):
            try:
                return dt.as_dtype(value)
            except TypeError:
                raise bad(f"unknown dtype {_short(value)}", where) from None
        raise bad(f"unknown tag {_short(tag)} or a malformed value for it", where)

    return dec(structure, "", 0)


def _object_state(x) -> list | None:
    """The fields a program's own object is saved as: an enum member's value, else its pickle
    state (``__getstate__``: its attributes); None for an object that has neither."""
    if isinstance(x, enum.Enum):
        return [("value", x.value)]
    if isinstance(x, (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType)):
        return None  # (pickle names these; a checkpoint holds values)
    if not hasattr(x, "__dict__") and not hasattr(type(x), "__slots__"):
        return None
    getstate = getattr(x, "__getstate__", None)
    state = getstate() if getstate is not None else x.__dict__
    return [("state", {} if state is None else state)]


def _short(value, limit: int = 60) -> str:
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # an int of too many digits, a deep structure
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _join(path: str, key) -> str:
    return f"{path}.{key}" if path else str(key)


def _where(path: str) -> str:
    return f"the value at {path!r}" if path else "the object"
