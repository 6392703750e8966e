"""Trees: nests of tuples, lists and dicts whose leaves are tensors (a traced function's arguments
and results, a loop's carries, a Session's fetches). This module owns their one representation:

* `flatten`: the leaves in depth-first order, a readable path per leaf (``[0]['h']``, for error
  messages) and the *structure*, a hashable nest of `LEAF`, ``(type, (structure, ...))`` for a
  tuple or list, ``(dict, ((key, structure), ...))`` for a dict (a `DictKind` in place of
  ``dict`` for an OrderedDict or defaultdict) and ``(DataclassKind, (structure, ...))`` for a
  dataclass instance's fields; with ``item_leaves``, a
  traced ``.item()`` or ``.tolist()`` (graph/traced_item.py) is the leaf of its tensor, marked
  `ITEM` or `LIST`;
* `unflatten`: the tree of a structure with given leaves in place (an `ITEM` leaf's number, a
  `LIST` leaf's list);
* `describe`: a structure as text for error messages (``(tensor, [tensor])``);
* `tensor_leaves` / `replace_leaves`: the tensors among any values of a nest (a call's
  arguments, where Python values stay as they are; a sparse tensor's are its indices and
  values), and the nest with them replaced.
"""

from __future__ import annotations

import copy
import dataclasses

from ..errors import EmberError
from ..ops._registry import TensorBase
from ..ops.sparse_tensor import SparseTensor
from .traced_item import TracedItem, TracedList

__all__ = [
    "ITEM",
    "LEAF",
    "LIST",
    "Constant",
    "describe",
    "flatten",
    "is_tensor",
    "replace_leaves",
    "tensor_leaves",
    "unflatten",
]

LEAF = ("leaf",)
ITEM = ("item",)  # a leaf returned as its Python number (``loss.item()`` in a traced function)
LIST = ("list",)  # a leaf returned as its nested list (``preds.tolist()`` in a traced function)


def is_tensor(obj) -> bool:
    """An eager or symbolic ember tensor."""
    return isinstance(obj, TensorBase)


class Constant:
    """A structure's non-tensor leaf kept as it is (`flatten` with ``constants``): a traced
    function's result may hold None or Python values, which each call returns unchanged."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __eq__(self, other) -> bool:
        return (
            isinstance(other, Constant)
            and type(other.value) is type(self.value)
            and (other.value is self.value or other.value == self.value)
        )

    def __hash__(self) -> int:
        try:
            return hash((type(self.value), self.value))
        except TypeError:
            return id(self.value)

    def __repr__(self) -> str:
        return repr(self.value)


class DictKind:
    """A dict subclass's kind in a structure (an OrderedDict; a defaultdict, with its factory),
    so `unflatten` gives back what the function returned, not a plain dict."""

    __slots__ = ("cls", "factory")

    def __init__(self, obj: dict):
        self.cls = type(obj)
        self.factory = getattr(obj, "default_factory", None)

    def build(self, pairs: list) -> dict:
        return self.cls(pairs) if self.factory is None else self.cls(self.factory, pairs)

    def __eq__(self, other) -> bool:
        return isinstance(other, DictKind) and (self.cls, self.factory) == (
            other.cls,
            other.factory,
        )

    def __hash__(self) -> int:
        return hash((self.cls, self.factory))


class DataclassKind:
    """A dataclass instance's kind in a structure: its fields are the children; `unflatten`
    gives a copy of the returned instance with the fields' new values (a function returning
    ``StepOutput(loss=..., logits=...)``)."""

    __slots__ = ("cls", "names", "template")

    def __init__(self, obj):
        self.cls = type(obj)
        self.names = tuple(f.name for f in dataclasses.fields(obj))
        self.template = obj

    def build(self, values: list):
        out = copy.copy(self.template)
        for name, value in zip(self.names, values):
            object.__setattr__(out, name, value)  # (a frozen dataclass too)
        return out

    def __eq__(self, other) -> bool:
        return isinstance(other, DataclassKind) and (self.cls, self.names) == (
            other.cls,
            other.names,
        )

    def __hash__(self) -> int:
        return hash((self.cls, self.names))


def is_dataclass_instance(obj) -> bool:
    return dataclasses.is_dataclass(obj) and not isinstance(obj, type)


def flatten(
    tree,
    what: str = "the values",
    *,
    is_leaf=is_tensor,
    numbers: bool = False,
    constants: bool = False,
    item_leaves: bool = False,
    op: str | None = None,
    path: str = "",
) -> tuple[list, list[str], tuple]:
    """(leaves, a path per leaf, structure) of ``tree``. A leaf is what ``is_leaf`` accepts
    (a tensor, by default); with ``numbers``, Python numbers become constant tensors of the
    current mode (as ``ember.tensor`` makes them); with ``constants``, any other value stays in
    the structure as a `Constant` (no leaf); with ``item_leaves``, a `TracedItem` (a
    `TracedList`) is the leaf of its tensor, marked `ITEM` (`LIST`: ``unflatten`` gives that
    leaf's ``.item()``, ``.tolist()``). Anything else raises `EmberError` naming ``what`` and
    where it is (``op``: the error's op); a `TracedItem` or `TracedList` elsewhere raises its
    `TraceError` (its value is needed)."""
    leaves: list = []
    paths: list[str] = []

    def walk(obj, where):
        if isinstance(obj, (tuple, list)):
            return (type(obj), tuple(walk(o, f"{where}[{i}]") for i, o in enumerate(items(obj))))
        if isinstance(obj, dict):
            kind = dict if type(obj) is dict else DictKind(obj)
            return (kind, tuple((k, walk(v, f"{where}[{k!r}]")) for k, v in obj.items()))
        if is_dataclass_instance(obj) and not is_leaf(obj):
            kind = DataclassKind(obj)
            return (kind, tuple(walk(getattr(obj, n), f"{where}.{n}") for n in kind.names))
        if is_leaf(obj):
            leaves.append(obj)
        elif isinstance(obj, (TracedItem, TracedList)):
            if not item_leaves:
                obj._refuse(f"{what} holding an .item() or .tolist() (at {where or 'the top'})")
            leaves.append(obj.tensor)
            paths.append(where)
            return ITEM if isinstance(obj, TracedItem) else LIST
        elif numbers and isinstance(obj, (bool, int, float)):
            from ..ops.creation import tensor

            leaves.append(tensor(obj))
        elif constants and not isinstance(obj, SparseTensor):
            return Constant(obj)
        else:
            raise EmberError(
                f"{what} must be tensors (or tuples, lists, dicts of them), got "
                f"{type(obj).__name__} at {where or 'the top'}",
                op=op,
            )
        paths.append(where)
        return LEAF

    spec = walk(tree, path)
    return leaves, paths, spec


def unflatten(spec, leaves):
    """The nest of structure ``spec`` with ``leaves`` (an iterator or a sequence) in place."""
    it = iter(leaves)

    def build(s):
        if isinstance(s, Constant):
            return s.value
        if s == LEAF:
            return next(it)
        if s == ITEM:
            return next(it).item()
        if s == LIST:
            return next(it).tolist()
        kind, inner = s
        if kind is dict:
            return {k: build(v) for k, v in inner}
        if isinstance(kind, DictKind):
            return kind.build([(k, build(v)) for k, v in inner])
        if isinstance(kind, DataclassKind):
            return kind.build([build(x) for x in inner])
        return _rebuild(kind, [build(x) for x in inner])

    return build(spec)


def describe(spec) -> str:
    """A structure as text: ``tensor``, ``(tensor, [tensor])``, ``{'h': tensor}``."""
    if isinstance(spec, Constant):
        return repr(spec.value)
    if spec == LEAF:
        return "tensor"
    if spec == ITEM:
        return "number"
    if spec == LIST:
        return "list"
    kind, inner = spec
    if kind is dict or isinstance(kind, DictKind):
        return "{" + ", ".join(f"{k!r}: {describe(v)}" for k, v in inner) + "}"
    if isinstance(kind, DataclassKind):
        fields = ", ".join(f"{n}={describe(v)}" for n, v in zip(kind.names, inner))
        return f"{kind.cls.__name__}({fields})"
    parts = [describe(s) for s in inner]
    return ("[%s]" if kind is list else "(%s)") % ", ".join(parts)


def tensor_leaves(tree) -> list:
    """The tensors of a nest of tuples, lists and dicts, in `flatten`'s order; other values
    (Python numbers, strings, objects) are skipped."""
    leaves: list = []

    def walk(obj):
        if isinstance(obj, TensorBase):
            leaves.append(obj)
        elif isinstance(obj, SparseTensor):
            leaves.extend(obj._tree_leaves())
        elif isinstance(obj, (tuple, list)):
            for o in items(obj):
                walk(o)
        elif isinstance(obj, dict):
            for v in obj.values():
                walk(v)

    walk(tree)
    return leaves


def replace_leaves(tree, replacements):
    """``tree`` with each tensor replaced by the next of ``replacements`` (an iterator), in
    `tensor_leaves`' order; other values stay as they are."""

    def walk(obj):
        if isinstance(obj, TensorBase):
            return next(replacements)
        if isinstance(obj, SparseTensor):
            return obj._tree_rebuild([next(replacements) for _ in obj._tree_leaves()])
        if isinstance(obj, (tuple, list)):
            return _rebuild(type(obj), [walk(o) for o in items(obj)])
        if isinstance(obj, dict):
            return {k: walk(v) for k, v in obj.items()}
        return obj

    return walk(tree)


def items(node):
    """A tuple's or list's own items: a subclass may iterate as something else (a
    RaggedTensor, a pair of tensors, iterates over its rows)."""
    return tuple.__iter__(node) if isinstance(node, tuple) else list.__iter__(node)


def _rebuild(kind, items: list):
    """A tuple or list of ``kind`` holding ``items``; a named tuple takes them as arguments."""
    return kind(*items) if hasattr(kind, "_fields") else kind(items)
