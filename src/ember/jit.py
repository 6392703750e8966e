"""``ember.jit``: PyTorch's ``torch.jit`` names, for programs and libraries that use them, on
ember's capture.

``script`` is `ember.script` (a function's or module's tensor-dependent ``if``/``while``/``for``
become graph control flow; the result still runs as Python). ``trace`` captures with
`ember.function` (a function) or `ember.compile` (a module) and runs the example inputs once,
so a program that cannot be captured fails here as ``torch.jit.trace`` does; unlike a
TorchScript trace, the capture is redone for inputs of other shapes instead of replaying the
example's. ``is_scripting`` is False (ember never compiles Python into another language);
``is_tracing`` says whether a graph is being captured. The decorators that steer TorchScript's
compiler (``ignore``, ``unused``, ``export``, ``interface``) return what they decorate, and
``fork``/``wait`` run the call at once. TorchScript's serialization (``save``, ``load``) has no
counterpart: save ``state_dict()`` with `ember.save`, or export with `ember.onnx.export`.
"""

from __future__ import annotations

from typing import Final  # noqa: F401  (torch.jit.Final)

from ._missing import module_getattr
from .capture.compiled import compile as _compile
from .capture.function import function as _function
from .capture.script import script as _script
from .ops import _registry

__all__ = [
    "Final",
    "Future",
    "annotate",
    "export",
    "fork",
    "ignore",
    "interface",
    "is_scripting",
    "is_tracing",
    "script",
    "trace",
    "unused",
    "wait",
]


def script(obj=None, optimize=None, _frames_up=0, _rcb=None, example_inputs=None):
    """``torch.jit.script``: `ember.script` on a function or module (usable as a decorator)."""
    if obj is None:
        return _script
    return _script(obj)


def trace(func, example_inputs=None, *args, example_kwarg_inputs=None, **kwargs):
    """``torch.jit.trace``: ``func`` (a function or module) captured, run once on
    ``example_inputs`` (a tensor or a tuple of them) so capture errors show now."""
    from . import nn

    traced = _compile(func) if isinstance(func, nn.Module) else _function(func)
    if example_inputs is not None or example_kwarg_inputs is not None:
        positional = example_inputs if isinstance(example_inputs, tuple) else (example_inputs,)
        if example_inputs is None:
            positional = ()
        traced(*positional, **(example_kwarg_inputs or {}))
    return traced


def is_scripting() -> bool:
    """False: ember runs Python (``torch.jit.is_scripting`` is True only inside TorchScript)."""
    return False


def is_tracing() -> bool:
    """Whether ops are being captured into a graph right now."""
    return _registry.building_graph()


def ignore(drop=False, **kwargs):
    """``@torch.jit.ignore`` / ``@torch.jit.ignore(drop=True)``: the function, unchanged."""
    if callable(drop):
        return drop
    return lambda fn: fn


def unused(fn):
    """``@torch.jit.unused``: the function, unchanged."""
    return fn


def export(fn):
    """``@torch.jit.export``: the method, unchanged."""
    return fn


def interface(obj):
    """``@torch.jit.interface``: the class, unchanged."""
    return obj


def annotate(the_type, the_value):
    """``torch.jit.annotate``: the value (the type is for TorchScript's compiler)."""
    return the_value


class Future:
    """The result of `fork`: already computed; `wait` (or ``value()``) returns it."""

    def __init__(self, value):
        self._value = value

    def wait(self):
        return self._value

    def value(self):
        return self._value

    def done(self) -> bool:
        return True


def fork(func, *args, **kwargs) -> Future:
    """``torch.jit.fork``: runs ``func(*args, **kwargs)`` now (ember's ops use every core
    already) and returns its `Future`."""
    return Future(func(*args, **kwargs))


def wait(future: Future):
    """``torch.jit.wait``: the forked call's result."""
    return future.wait()


__getattr__ = module_getattr(__name__, globals())
