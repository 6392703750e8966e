"""Call signatures of `ember.function`: `TensorSpec`, and the cache key of one call.

A call's key has one *component* per thing a trace depends on, each with a label that says what
it is: every tensor argument (shape, dtype, requires_grad; or the `TensorSpec` it matches), every
Python-valued argument (its value), and the state the function reads (see capture/state.py).
Two calls with equal keys can share one compiled graph. When a key is new, `explain` compares it
with the previous one and names the first component that differs, which is what
``fn.stats.retrace_reasons`` reports ("argument x: dimension 0 changed from 32 to 64").

`split_args` takes a call's arguments apart for its key: the tensor leaves, each named after its
parameter (`parameter_names`), and the rest as a hashable structure.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from .. import dtypes as dt
from ..errors import EmberError, ShapeError
from ..graph.tree import LEAF
from ..graph.tree import items as tree_items
from ..ops._registry import TensorBase
from ..ops.sparse_tensor import SparseTensor
from ..symbolic import SymDim, sym

__all__ = ["TensorSpec", "CallKey", "explain", "parameter_names", "split_args"]


@dataclass(frozen=True)
class TensorSpec:
    """The shape and dtype a tensor argument may have. A ``None`` dimension takes any size: the
    graph is traced once with a symbolic size there (dimension 0 is called ``N``, the batch, and
    is shared by all arguments; others get their own names); a string names the symbol."""

    shape: tuple
    dtype: dt.DType = dt.float32
    name: str | None = None

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(self.shape))
        object.__setattr__(self, "dtype", dt.as_dtype(self.dtype))
        for d in self.shape:
            if not (d is None or isinstance(d, (int, str, SymDim))):
                raise TypeError(f"TensorSpec dimensions are ints, None or names, got {d!r}")

    def symbolic_shape(self, arg_name: str) -> tuple:
        dims = []
        for axis, d in enumerate(self.shape):
            if d is None:
                d = "N" if axis == 0 else f"{arg_name}_{axis}"
            dims.append(sym(d) if isinstance(d, str) else d)
        return tuple(dims)

    def check(self, tensor, where: str) -> None:
        """Raise a clear error unless ``tensor`` fits this spec."""
        ok = tensor.ndim == len(self.shape) and all(
            not isinstance(want, int) or want == got for want, got in zip(self.shape, tensor.shape)
        )
        if not ok:
            raise ShapeError(
                f"{where} has shape {tuple(tensor.shape)}, which does not fit the input "
                f"signature {self}",
                op="function",
            )
        if tensor.dtype != self.dtype:
            raise EmberError(
                f"{where} has dtype {tensor.dtype}, but the input signature says {self.dtype}",
                op="function",
            )

    def __str__(self) -> str:
        dims = ", ".join("None" if d is None else str(d) for d in self.shape)
        return f"TensorSpec(({dims}{',' if len(self.shape) == 1 else ''}), {self.dtype})"


class CallKey:
    """The hashable key of a call: ``values`` (compared) with parallel ``labels`` (explained).
    ``labels`` may be a function giving them: they are built only when read (an explanation
    of a retrace), not on every call."""

    __slots__ = ("_labels", "values", "_hash")

    def __init__(self, labels, values: list):
        self._labels = labels
        self.values = tuple(values)
        self._hash = hash(self.values)

    @property
    def labels(self) -> tuple:
        if not isinstance(self._labels, tuple):
            self._labels = tuple(self._labels() if callable(self._labels) else self._labels)
        return self._labels

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return isinstance(other, CallKey) and self.values == other.values


def tensor_component(t: TensorBase, spec: TensorSpec | None):
    if spec is not None:
        # (a spec fixes the sizes it names, not whether the argument requires grad: a graph
        # traced for one that does not has no gradient for it)
        return ("spec", spec, bool(t.requires_grad))
    return ("tensor", tuple(t.shape), t.dtype.name, bool(t.requires_grad))


def python_component(value):
    """A hashable stand-in for a Python-valued argument: equal values give equal keys."""
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(python_component(v) for v in tree_items(value)))
    if isinstance(value, dict):
        return ("dict", tuple((k, python_component(v)) for k, v in value.items()))
    if isinstance(value, (int, float, str, bool, bytes, type(None), complex)):
        return (type(value).__name__, value)
    try:
        hash(value)
    except TypeError:
        return ("object", id(value))
    return ("value", value) if type(value).__eq__ is not object.__eq__ else ("object", id(value))


def parameter_names(fn, count: int | None = None) -> list[str]:
    """The names of ``fn``'s positional parameters (``arg<i>`` where unknown), ``count`` many
    (all of them when None)."""
    try:
        target = fn.forward if hasattr(fn, "forward") else fn
        params = [
            p.name
            for p in inspect.signature(target).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
    except (TypeError, ValueError):
        params = []
    if count is None:
        return params
    return [params[i] if i < len(params) else f"arg{i}" for i in range(count)]


def split_args(args: tuple, kwargs: dict, arg_names: list[str]):
    """Tensor leaves of the arguments with a name for each (the parameter's name, with an
    index or key inside containers), and the rest as a hashable structure (Python values by
    `python_component`)."""
    leaves: list = []
    names: list[str] = []

    def walk(obj, name):
        if isinstance(obj, TensorBase):
            leaves.append(obj)
            names.append(name)
            return LEAF
        if isinstance(obj, (tuple, list)):
            return (
                type(obj).__name__,
                tuple(walk(o, f"{name}_{i}") for i, o in enumerate(tree_items(obj))),
            )
        if isinstance(obj, dict):
            return ("dict", tuple((k, walk(v, f"{name}_{k}")) for k, v in obj.items()))
        if isinstance(obj, SparseTensor):  # its two tensors, its size and coalesced flag
            parts = zip(obj._tree_leaves(), ("indices", "values"))
            return ("sparse", obj._tree_key(), tuple(walk(t, f"{name}_{p}") for t, p in parts))
        return python_component(obj)

    positional = tuple(
        walk(a, arg_names[i] if i < len(arg_names) else f"arg{i}") for i, a in enumerate(args)
    )
    keywords = tuple((k, walk(v, k)) for k, v in kwargs.items())
    return leaves, names, (positional, keywords)


def _describe_change(label: str, old, new) -> str:
    if isinstance(old, bool) and isinstance(new, bool):  # a yes/no component ("has a .grad")
        return f"{label} changed from {'yes' if old else 'no'} to {'yes' if new else 'no'}"
    if isinstance(old, tuple) and isinstance(new, tuple) and old[0] == new[0] == "tensor":
        (_, old_shape, old_dtype, old_rg), (_, new_shape, new_dtype, new_rg) = old, new
        if old_dtype != new_dtype:
            return f"{label}: dtype changed from {old_dtype} to {new_dtype}"
        if old_rg != new_rg:
            return f"{label}: requires_grad changed from {old_rg} to {new_rg}"
        if len(old_shape) != len(new_shape):
            return f"{label}: rank changed from {len(old_shape)} to {len(new_shape)}"
        dims = [i for i, (a, b) in enumerate(zip(old_shape, new_shape)) if a != b]
        changes = ", ".join(
            f"dimension {i} changed from {old_shape[i]} to {new_shape[i]}" for i in dims
        )
        return f"{label}: {changes}"
    if label.startswith("the Python arguments") and isinstance(old, tuple) and len(old) == 2:
        where = _first_difference(old[0], new[0], "positional argument")
        if where is None:
            where = _first_difference(dict(old[1]), dict(new[1]), "keyword argument")
        if where is not None:
            return where
    return f"{label} changed from {_short(old)} to {_short(new)}"


def _first_difference(old, new, what: str) -> str | None:
    """Which of the call's Python arguments changed (``old``/``new``: the positional parts or
    the keyword parts of two structures), and how; None when none did."""
    keys = (
        range(max(len(old), len(new)))
        if isinstance(old, tuple)
        else list(dict.fromkeys([*old, *new]))
    )
    for k in keys:
        a = old[k] if (k < len(old) if isinstance(old, tuple) else k in old) else None
        b = new[k] if (k < len(new) if isinstance(new, tuple) else k in new) else None
        if a != b:
            return f"{what} {k} changed from {_short(a)} to {_short(b)}"
    return None


def _short(component) -> str:
    text = repr(component[1] if isinstance(component, tuple) and len(component) == 2 else component)
    return text if len(text) <= 60 else text[:57] + "..."


def explain(new: CallKey, previous: CallKey | None) -> str:
    """Why ``new`` needed a trace of its own, compared with the ``previous`` key: the first
    component that changed, else the components that appeared or disappeared."""
    if previous is None:
        return "first call"
    old = dict(zip(previous.labels, previous.values))
    for label, value in zip(new.labels, new.values):
        if label in old and old[label] != value:
            return _describe_change(label, old[label], value)
    added = [label for label in new.labels if label not in old]
    removed = [label for label in previous.labels if label not in set(new.labels)]
    parts = []
    for word, labels in (("new", added), ("gone", removed)):
        if labels:
            names = ", ".join(label.split(" (")[0] for label in labels[:4])
            more = f" and {len(labels) - 4} more" if len(labels) > 4 else ""
            parts.append(f"{word}: {names}{more}")
    return "; ".join(parts) or "no difference"
