"""``ember.utils._pytree``: PyTorch's ``torch.utils._pytree`` (which libraries and training
code import for nested containers of tensors) with its semantics: a tree's nodes are tuples,
lists, dicts (in insertion order), named tuples (ember's ``return_types`` too), OrderedDicts,
defaultdicts, deques, ``ember.Size`` and the classes given to `register_pytree_node`; anything
else, ``None`` included, is a leaf. A `TreeSpec` is the structure without the leaves: its node
type, its context (a dict's keys, a named tuple's class, a deque's maxlen) and its children's
specs; `tree_unflatten` rebuilds a tree of that structure from leaves.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from typing import Any

from ..errors import ArgumentError, ArgumentTypeError
from ..ops._registry import TensorBase
from ..size import Size
from ..tensor import Tensor

__all__ = [
    "LeafSpec",
    "TreeSpec",
    "register_pytree_node",
    "tree_all",
    "tree_all_only",
    "tree_any",
    "tree_any_only",
    "tree_flatten",
    "tree_iter",
    "tree_leaves",
    "tree_map",
    "tree_map_",
    "tree_map_only",
    "tree_structure",
    "tree_unflatten",
]


@dataclasses.dataclass(frozen=True)
class _Node:
    flatten: Callable  # tree -> (children, context)
    unflatten: Callable  # (children, context) -> tree


def _dict_flatten(d):
    return list(d.values()), list(d.keys())


SUPPORTED_NODES: dict[type, _Node] = {
    tuple: _Node(lambda t: (list(t), None), lambda c, _: tuple(c)),
    list: _Node(lambda t: (list(t), None), lambda c, _: list(c)),
    dict: _Node(_dict_flatten, lambda c, keys: dict(zip(keys, c))),
    collections.OrderedDict: _Node(
        _dict_flatten, lambda c, keys: collections.OrderedDict(zip(keys, c))
    ),
    collections.defaultdict: _Node(
        lambda d: (list(d.values()), [d.default_factory, list(d.keys())]),
        lambda c, ctx: collections.defaultdict(ctx[0], zip(ctx[1], c)),
    ),
    collections.deque: _Node(
        lambda d: (list(d), d.maxlen), lambda c, maxlen: collections.deque(c, maxlen=maxlen)
    ),
    Size: _Node(lambda s: (list(s), None), lambda c, _: Size(c)),
}

_NAMEDTUPLE = _Node(lambda t: (list(t), type(t)), lambda c, cls: cls(*c))


def register_pytree_node(
    cls: type,
    flatten_fn,
    unflatten_fn,
    *,
    serialized_type_name=None,
    to_dumpable_context=None,
    from_dumpable_context=None,
    flatten_with_keys_fn=None,
) -> None:
    """Make ``cls`` a node: ``flatten_fn(obj) -> (children, context)`` and
    ``unflatten_fn(children, context) -> obj`` (PyTorch's signature; the serialization
    arguments are accepted and unused)."""
    if cls in SUPPORTED_NODES:
        raise ArgumentError(f"{cls} is already registered as a pytree node")
    SUPPORTED_NODES[cls] = _Node(flatten_fn, lambda c, ctx: unflatten_fn(c, ctx))


def _node_of(tree):
    node = SUPPORTED_NODES.get(type(tree))
    if node is not None:
        return type(tree), node
    if isinstance(tree, tuple) and hasattr(type(tree), "_fields"):
        return collections.namedtuple, _NAMEDTUPLE
    return None, None


class TreeSpec:
    """The structure of a tree: ``type`` (None for a leaf), ``context`` and the children's
    specs."""

    def __init__(self, type, context, children_specs):  # noqa: A002
        self.type, self.context = type, context
        self.children_specs = list(children_specs)
        self.num_children = len(self.children_specs)
        self.num_leaves = 1 if type is None else sum(c.num_leaves for c in self.children_specs)
        self.num_nodes = 1 + sum(c.num_nodes for c in self.children_specs)

    def is_leaf(self) -> bool:
        return self.type is None

    def children(self) -> list:
        return list(self.children_specs)

    def child(self, index: int) -> TreeSpec:
        return self.children_specs[index]

    def unflatten(self, leaves):
        return tree_unflatten(leaves, self)

    def __eq__(self, other):
        if not isinstance(other, TreeSpec):
            return NotImplemented
        return (self.type, self.context, self.children_specs) == (
            other.type,
            other.context,
            other.children_specs,
        )

    __hash__ = None

    def __repr__(self, indent: int = 0) -> str:
        if self.is_leaf():
            return "*"
        name = "namedtuple" if self.type is collections.namedtuple else self.type.__name__
        pad = " " * (indent + 2)
        inner = (",\n" + pad).join(c.__repr__(indent + 2) for c in self.children_specs)
        return f"TreeSpec({name}, {self.context!r}, [{inner}])"


def LeafSpec() -> TreeSpec:  # noqa: N802 (PyTorch's name)
    """The spec of a leaf."""
    return TreeSpec(None, None, [])


def tree_flatten(tree, is_leaf: Callable | None = None) -> tuple[list, TreeSpec]:
    """The tree's leaves, left to right, and its structure."""
    leaves: list = []

    def walk(t) -> TreeSpec:
        kind, node = (None, None) if is_leaf is not None and is_leaf(t) else _node_of(t)
        if node is None:
            leaves.append(t)
            return LeafSpec()
        children, context = node.flatten(t)
        return TreeSpec(kind, context, [walk(c) for c in children])

    spec = walk(tree)
    return leaves, spec


def tree_unflatten(leaves, treespec: TreeSpec):
    """The tree of ``treespec``'s structure holding ``leaves``."""
    if not isinstance(treespec, TreeSpec):
        raise ArgumentTypeError(
            f"tree_unflatten(leaves, treespec): expected a TreeSpec, got {treespec!r}"
        )
    leaves = list(leaves)
    if len(leaves) != treespec.num_leaves:
        raise ArgumentError(
            f"treespec.unflatten(leaves): `leaves` has length {len(leaves)} but the spec refers "
            f"to a pytree that holds {treespec.num_leaves} items ({treespec!r})."
        )
    it = iter(leaves)

    def build(spec: TreeSpec):
        if spec.is_leaf():
            return next(it)
        children = [build(c) for c in spec.children_specs]
        node = _NAMEDTUPLE if spec.type is collections.namedtuple else SUPPORTED_NODES[spec.type]
        return node.unflatten(children, spec.context)

    return build(treespec)


def tree_leaves(tree, is_leaf=None) -> list:
    return tree_flatten(tree, is_leaf)[0]


def tree_iter(tree, is_leaf=None):
    return iter(tree_leaves(tree, is_leaf))


def tree_structure(tree, is_leaf=None) -> TreeSpec:
    return tree_flatten(tree, is_leaf)[1]


def _flatten_up_to(spec: TreeSpec, tree) -> list:
    """``tree``'s subtrees at ``spec``'s leaves (a tree of spec's structure, or deeper)."""
    if spec.is_leaf():
        return [tree]
    kind, node = _node_of(tree)
    if kind is not spec.type:
        raise ArgumentError(f"Node type mismatch; expected {spec.type}, but got {type(tree)}.")
    children, context = node.flatten(tree)
    if len(children) != spec.num_children:
        raise ArgumentError(
            f"Node arity mismatch; expected {spec.num_children}, but got {len(children)}."
        )
    if kind in (dict, collections.OrderedDict) and context != spec.context:
        if set(context) != set(spec.context):
            raise ArgumentError(f"Node keys mismatch; expected {spec.context}, but got {context}.")
        children = [tree[k] for k in spec.context]
    out: list = []
    for child_spec, child in zip(spec.children_specs, children):
        out.extend(_flatten_up_to(child_spec, child))
    return out


def tree_map(func: Callable, tree, *rests, is_leaf=None):
    """The tree with ``func`` applied to each leaf (with ``rests``: to the leaves of ``tree``
    and the corresponding subtrees of each of ``rests``)."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [_flatten_up_to(spec, r) for r in rests]
    return tree_unflatten([func(*xs) for xs in zip(leaves, *others)], spec)


def tree_map_(func: Callable, tree, *rests, is_leaf=None):
    """``func`` called on each leaf for its effect; the tree itself returned."""
    leaves, spec = tree_flatten(tree, is_leaf)
    others = [_flatten_up_to(spec, r) for r in rests]
    for xs in zip(leaves, *others):
        func(*xs)
    return tree


def _types(type_or_types) -> tuple:
    """The types a ``*_only`` function selects; ``ember.Tensor`` selects the tensors of a graph
    being captured too (symbolic tensors, which are not its instances)."""
    types = type_or_types if isinstance(type_or_types, tuple) else (type_or_types,)
    return types + (TensorBase,) if Tensor in types else types


def tree_map_only(type_or_types, func: Callable, tree, is_leaf=None):
    """``func`` applied to the leaves that are instances of ``type_or_types``, others kept."""
    types = _types(type_or_types)
    return tree_map(lambda x: func(x) if isinstance(x, types) else x, tree, is_leaf=is_leaf)


def tree_all_only(type_or_types, pred: Callable[[Any], bool], tree, is_leaf=None) -> bool:
    types = _types(type_or_types)
    return all(pred(x) for x in tree_leaves(tree, is_leaf) if isinstance(x, types))


def tree_any_only(type_or_types, pred: Callable[[Any], bool], tree, is_leaf=None) -> bool:
    types = _types(type_or_types)
    return any(pred(x) for x in tree_leaves(tree, is_leaf) if isinstance(x, types))


def tree_all(pred: Callable[[Any], bool], tree, is_leaf=None) -> bool:
    return all(map(pred, tree_leaves(tree, is_leaf)))


def tree_any(pred: Callable[[Any], bool], tree, is_leaf=None) -> bool:
    return any(map(pred, tree_leaves(tree, is_leaf)))
