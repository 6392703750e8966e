"""``ember.overrides``: PyTorch's ``torch.overrides`` entry points that library code calls
before its own work (``if has_torch_function(args): return handle_torch_function(...)``), and
the ``torch.sym_*`` helpers for sizes that may be symbolic (``torch.sym_int``, ``sym_float``,
``sym_max``, ``sym_min``, ``sym_not``, ``sym_ite``, ``sym_sqrt``).

ember has no ``__torch_function__`` protocol: its tensors never override a function, so
`has_torch_function` is False for them and for plain values; an argument of another class that
defines ``__torch_function__`` is honoured by `handle_torch_function` as PyTorch does (called
with the function, the overriding types, the arguments and the keyword arguments). The sym
helpers act on Python numbers as PyTorch's do on them (sym_int truncates; sym_max and sym_min
give a float where either is one) and give ember's symbolic sizes (``SymDim``) unchanged where
they are one of the values.
"""

from __future__ import annotations

import builtins
import math

from .ops._registry import TensorBase
from .symbolic import SymDim

__all__ = [
    "handle_torch_function",
    "has_torch_function",
    "has_torch_function_unary",
    "has_torch_function_variadic",
    "is_tensor_like",
    "sym_float",
    "sym_int",
    "sym_ite",
    "sym_max",
    "sym_min",
    "sym_not",
    "sym_sqrt",
]


def _overrides(obj) -> bool:
    return not isinstance(obj, TensorBase) and hasattr(type(obj), "__torch_function__")


def has_torch_function(relevant_args) -> bool:
    """Whether an argument overrides functions through ``__torch_function__`` (never an ember
    tensor: ember has no such protocol)."""
    return any(_overrides(a) for a in relevant_args)


def has_torch_function_unary(obj) -> bool:
    return _overrides(obj)


def has_torch_function_variadic(*args) -> bool:
    return has_torch_function(args)


def handle_torch_function(public_api, relevant_args, *args, **kwargs):
    """``public_api(*args, **kwargs)`` through the ``__torch_function__`` of the overriding
    arguments, in order, until one returns something other than NotImplemented."""
    overloaded = [a for a in relevant_args if _overrides(a)]
    types = tuple(type(a) for a in overloaded)
    for arg in overloaded:
        result = type(arg).__torch_function__(public_api, types, args, kwargs)
        if result is not NotImplemented:
            return result
    names = ", ".join(t.__name__ for t in types) or "none"
    raise TypeError(
        f"no implementation found for '{getattr(public_api, '__name__', public_api)}' on types "
        f"that implement __torch_function__: [{names}]"
    )


def is_tensor_like(obj) -> bool:
    """Whether ``obj`` is an ember tensor or overrides functions like one."""
    return isinstance(obj, TensorBase) or _overrides(obj)


def _number(name: str, *values) -> None:
    for v in values:
        if not isinstance(v, (int, float, SymDim)):
            raise TypeError(f"{name}: expected a Python int or float, got {type(v).__name__}")


def sym_int(a):
    """``int(a)`` (truncated toward zero); a symbolic size as it is."""
    if isinstance(a, SymDim):
        return a
    return builtins.int(math.trunc(a)) if isinstance(a, float) else builtins.int(a)


def sym_float(a):
    """``float(a)``."""
    return builtins.float(a)


def sym_max(a, b):
    """The larger of ``a`` and ``b``, a float where either is one (PyTorch's promotion)."""
    return _extreme("sym_max", builtins.max, a, b)


def sym_min(a, b):
    """The smaller of ``a`` and ``b``, a float where either is one (PyTorch's promotion)."""
    return _extreme("sym_min", builtins.min, a, b)


def _extreme(name: str, pick, a, b):
    _number(name, a, b)
    if isinstance(a, SymDim) or isinstance(b, SymDim):
        return a if a is b else _symbolic(name, a, b)
    if isinstance(a, float) or isinstance(b, float):
        return builtins.float(pick(a, b))
    return pick(a, b)


def _symbolic(name: str, a, b):
    raise TypeError(
        f"{name}({a!r}, {b!r}): comparing a symbolic size with another value needs its number, "
        "which a graph with symbolic sizes does not have while it is built"
    )


def sym_not(a) -> bool:
    return not a


def sym_ite(b, t, f):
    """``t if b else f``."""
    return t if b else f


def sym_sqrt(a) -> float:
    return math.sqrt(a)
