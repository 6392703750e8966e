"""``ember.compiler``: PyTorch's ``torch.compiler`` names, on `ember.compile`.

``is_compiling`` (and ``is_dynamo_compiling``) say whether a graph is being captured right now;
``disable`` runs a function eagerly even when called inside a captured one (its ops are then
recorded as the ops they call: ember captures by recording ops, so "eagerly" means the
function is not traced by `ember.compile` as a unit of its own; it is the identity wrapper
PyTorch programs expect); ``allow_in_graph`` and ``assume_constant_result`` return what they
decorate. ``reset`` empties every `ember.function` and `ember.compile` object's cache of
captured programs (and retries captures that failed): each captures afresh at its next call.
"""

from __future__ import annotations

from ._missing import module_getattr
from .ops import _registry

__all__ = [
    "allow_in_graph",
    "assume_constant_result",
    "compile",
    "disable",
    "is_compiling",
    "is_dynamo_compiling",
    "reset",
]


def compile(*args, **kwargs):  # noqa: A001 (torch.compiler.compile)
    """``torch.compiler.compile``: `ember.compile`."""
    from .capture.compiled import compile as compile_

    return compile_(*args, **kwargs)


def reset() -> None:
    """``torch.compiler.reset``: every compiled function and module captures afresh."""
    from .capture.compiled import reset_all

    reset_all()


def is_compiling() -> bool:
    """Whether ops are being captured into a graph right now."""
    return _registry.building_graph()


is_dynamo_compiling = is_compiling


def disable(fn=None, recursive: bool = True, *, reason: str | None = None):
    """``@torch.compiler.disable``: the function, unchanged (see the module docstring)."""
    if fn is None:
        return lambda f: f
    return fn


def allow_in_graph(fn):
    return fn


def assume_constant_result(fn):
    return fn


__getattr__ = module_getattr(__name__, globals())
