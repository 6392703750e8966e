"""Containers: `Sequential`, `ModuleList`, `ModuleDict`, `ParameterList`, `ParameterDict`.

Children are registered under the keys PyTorch uses (``"0"``, ``"1"``, ... for the sequences; the
user's keys for the dicts), so state_dict keys such as ``features.0.weight`` match. Deleting from
a sequence renumbers the remaining entries, as PyTorch does.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping

from ..errors import ArgumentTypeError
from ..tensor import Tensor
from ._tables import Table
from .module import Module, _addindent
from .parameter import Parameter


def index_arg(idx, size: int, what: str) -> int:
    """A container index, negative allowed, checked against ``size``."""
    idx = operator.index(idx)
    if not -size <= idx < size:
        raise IndexError(f"index {idx} is out of range for a {what} of length {size}")
    return idx % size


class _ModuleSequence(Module):
    """Shared behaviour of Sequential and ModuleList: integer-keyed children in order."""

    def _renumber(self, modules: list) -> None:
        object.__setattr__(self, "_modules", Table((str(i), m) for i, m in enumerate(modules)))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)._from_list(list(self._modules.values())[idx])
        return list(self._modules.values())[index_arg(idx, len(self), type(self).__name__)]

    def __setitem__(self, idx, module: Module) -> None:
        key = list(self._modules)[index_arg(idx, len(self), type(self).__name__)]
        self.add_module(key, module)

    def __delitem__(self, idx) -> None:
        modules = list(self._modules.values())
        if isinstance(idx, slice):
            del modules[idx]
        else:
            del modules[index_arg(idx, len(self), type(self).__name__)]
        self._renumber(modules)

    def append(self, module: Module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules: Iterable[Module]):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        modules = list(self._modules.values())
        modules.insert(index, module)
        for m in modules:
            if not isinstance(m, Module):
                raise ArgumentTypeError(f"{type(m).__name__} is not a Module subclass")
        self._renumber(modules)

    def pop(self, index: int = -1) -> Module:
        module = self[index]
        del self[index]
        return module

    def __add__(self, other):
        result = type(self)._from_list(list(self) + list(other))
        return result

    def __iadd__(self, other):
        return self.extend(other)

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        if "_size" not in self.__dict__:  # (saved whole before non-tensor values were kept)
            object.__setattr__(self, "_size", len(self._parameters))


class Sequential(_ModuleSequence):
    """Modules applied in order: ``Sequential(a, b)(x) == b(a(x))``. Also accepts one
    OrderedDict of named modules."""

    def __init__(self, *args: Module) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    @classmethod
    def _from_list(cls, modules: list) -> Sequential:
        return cls(*modules)

    def __getitem__(self, idx):
        if isinstance(idx, slice):  # keep the children's names, as PyTorch does
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        return super().__getitem__(idx)

    def forward(self, input):
        for module in self:
            input = module(input)
        return input


class ModuleList(_ModuleSequence):
    """A list of modules whose parameters are registered (no forward of its own)."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    @classmethod
    def _from_list(cls, modules: list) -> ModuleList:
        return cls(modules)

    def __repr__(self) -> str:
        # runs of identical children are printed once, as PyTorch does: "(0-2): 3 x Linear(...)"
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        blocks: list[list] = []
        for i, text in enumerate(reprs):
            if blocks and blocks[-1][2] == text:
                blocks[-1][1] = i
            else:
                blocks.append([i, i, text])
        lines = []
        for start, end, text in blocks:
            if start == end:
                line = f"({start}): {text}"
            else:
                line = f"({start}-{end}): {end - start + 1} x {text}"
            lines.append(_addindent(line, 2))
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


class ModuleDict(Module):
    """A dict of modules whose parameters are registered, in insertion order."""

    def __init__(self, modules: Mapping | Iterable | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        self._modules.clear()

    def pop(self, key: str) -> Module:
        value = self[key]
        del self[key]
        return value

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules) -> None:
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for key, module in pairs:
            self[key] = module


def _as_parameter(value):
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


def _describe(p, by_type: bool = False) -> str:
    """A parameter's line in a container's repr: PyTorch's ParameterList names the dtype
    ("torch.float32"), its ParameterDict the tensor type (``by_type``: "torch.FloatTensor")."""
    kind = "Parameter containing" if isinstance(p, Parameter) else "Object of type"
    if not isinstance(p, Tensor):
        return f"{kind}: {type(p).__name__}"
    size = "x".join(str(s) for s in p.shape)
    return f"{kind}: [{p.type() if by_type else p.dtype} of size {size}]"


class ParameterList(Module):
    """A list held as attributes ``"0"``, ``"1"``, ...: tensors are wrapped as Parameters and
    registered, any other object (a number, a string, None) is kept as a plain attribute, as
    PyTorch's ParameterList keeps it."""

    def __init__(self, values: Iterable | None = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator:
        return (self[i] for i in range(len(self)))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList(list(self)[idx])
        return getattr(self, str(index_arg(idx, len(self), "ParameterList")))

    def __setitem__(self, idx, value) -> None:
        key = str(index_arg(idx, len(self), "ParameterList"))
        setattr(self, key, _as_parameter(value))

    def append(self, value) -> ParameterList:
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values: Iterable) -> ParameterList:
        for v in values:
            self.append(v)
        return self

    def __iadd__(self, values: Iterable) -> ParameterList:
        return self.extend(values)

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        if "_size" not in self.__dict__:  # (saved whole before non-tensor values were kept)
            object.__setattr__(self, "_size", len(self._parameters))

    def extra_repr(self) -> str:
        # (each line indented by two, which Module's repr indents again: PyTorch's layout)
        return "\n".join(f"  ({i}): {_describe(p)}" for i, p in enumerate(self))


class ParameterDict(Module):
    """A dict held as attributes named by its keys, in insertion order (a plain mapping given to
    the constructor or `update` is added sorted by key, as PyTorch adds it): tensors are
    wrapped as Parameters and registered, any other object is kept as a plain attribute, as
    PyTorch's ParameterDict keeps it."""

    def __init__(self, parameters: Mapping | Iterable | None = None) -> None:
        super().__init__()
        self._keys: dict[str, None] = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str):
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value) -> None:
        if not isinstance(key, str):
            raise ArgumentTypeError(
                f"ParameterDict keys are strings, got {type(key).__name__}", op="ParameterDict"
            )
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __reversed__(self) -> Iterator[str]:
        return reversed(list(self._keys))

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def items(self):
        return [(k, self[k]) for k in self._keys]

    def values(self):
        return [self[k] for k in self._keys]

    def pop(self, key: str):
        value = self[key]
        del self[key]
        return value

    def get(self, key: str, default=None):
        return self[key] if key in self else default

    def setdefault(self, key: str, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def popitem(self) -> tuple:
        key = next(reversed(self._keys))
        return key, self.pop(key)

    def clear(self) -> None:
        for key in list(self._keys):
            del self[key]

    def copy(self) -> ParameterDict:
        """A new ParameterDict holding the same parameters (not copies), as in PyTorch."""
        return ParameterDict(OrderedDict(self.items()))

    def fromkeys(self, keys: Iterable, default=None) -> ParameterDict:
        return ParameterDict((k, default) for k in keys)

    def update(self, parameters) -> None:
        """Add ``parameters``: a ParameterDict's or OrderedDict's items in their order, a plain
        mapping's sorted by key (PyTorch's rule, which parameters()' order follows), pairs in
        theirs."""
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            pairs = parameters.items()
        elif isinstance(parameters, Mapping):
            pairs = sorted(parameters.items())
        else:
            pairs = parameters
        for key, value in pairs:
            self[key] = value

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        if "_keys" not in self.__dict__:  # (saved whole before non-tensor values were kept)
            object.__setattr__(self, "_keys", dict.fromkeys(self._parameters))

    def __or__(self, other: ParameterDict) -> ParameterDict:
        merged = self.copy()
        merged.update(other)
        return merged

    def __ior__(self, other: ParameterDict) -> ParameterDict:
        self.update(other)
        return self

    def extra_repr(self) -> str:
        return "\n".join(f"  ({k}): {_describe(p, by_type=True)}" for k, p in self.items())
