"""The classes and switches of ``torch.jit`` that programs test against or call for their
effect on TorchScript's compiler, for `ember.jit`.

ember does not compile Python into TorchScript, so ``torch.jit.script(model)`` returns the model
itself (its forward converted) and ``torch.jit.trace`` a captured module or function. Programs
still ask ``isinstance(m, torch.jit.ScriptModule)`` (to call ``m.save``, or to skip scripting
twice): `mark` records on what `ember.jit` returns how it was made, and each class here answers
isinstance from that record, as PyTorch's class of that result would (``script`` of a module: a
RecursiveScriptModule; ``trace`` of one: a TopLevelTracedModule; both ScriptModules; ``script``
or ``trace`` of a function: a ScriptFunction). ``ScriptModule`` can also be subclassed, as
TorchScript's older API did (``@script_method`` on its methods): the subclass is an ordinary
``nn.Module`` run as Python.
"""

from __future__ import annotations

import contextlib
import types
import typing

from .errors import EmberError
from .nn.module import Module

__all__ = [
    "Attribute",
    "Error",
    "RecursiveScriptModule",
    "ScriptFunction",
    "ScriptModule",
    "TopLevelTracedModule",
    "TracedModule",
    "TracerWarning",
    "enable_onednn_fusion",
    "isinstance",
    "mark",
    "onednn_fusion_enabled",
    "script_if_tracing",
    "script_method",
    "set_fusion_strategy",
    "strict_fusion",
]

_MARK = "_ember_jit_made_by"  # the attribute `mark` sets: which ember.jit call made the object


def mark(obj, made_by: str):
    """Record that ``obj`` is what ``ember.jit.<made_by>`` returned ("script", "trace",
    "load"), for the isinstance checks of the classes below; returns ``obj``."""
    try:
        object.__setattr__(obj, _MARK, made_by)
    except (AttributeError, TypeError):  # (a builtin: nothing to record on)
        pass
    return obj


class _MadeBy(type):
    """isinstance(obj, cls) is true for real instances (subclasses of ScriptModule), and for a
    module or function that one of ``cls._made_by``'s ember.jit calls returned."""

    _made_by: tuple = ()
    _modules: bool = True

    def __instancecheck__(cls, obj) -> bool:
        if type.__instancecheck__(cls, obj):
            return True
        made_by = getattr(obj, _MARK, None)
        return made_by in cls._made_by and type.__instancecheck__(Module, obj) is cls._modules


class ScriptModule(Module, metaclass=_MadeBy):
    """``torch.jit.ScriptModule``: a module made by ``jit.script``, ``jit.trace`` or
    ``jit.load``, or a subclass of this class (an ``nn.Module`` here)."""

    _made_by = ("script", "trace", "load")

    def __init__(self, *args, **kwargs):
        super().__init__()

    def __setattr__(self, name: str, value) -> None:
        if type(value) is Attribute:  # (the declared type is TorchScript's)
            value = value.value
        super().__setattr__(name, value)


class RecursiveScriptModule(ScriptModule):
    """What ``torch.jit.script(module)`` and ``torch.jit.load`` return."""

    _made_by = ("script", "load")


class TracedModule(ScriptModule):
    """What ``torch.jit.trace(module)`` returns."""

    _made_by = ("trace",)


class TopLevelTracedModule(TracedModule):
    """What ``torch.jit.trace(module)`` returns (its top level)."""


class ScriptFunction(metaclass=_MadeBy):
    """``torch.jit.ScriptFunction``: what ``jit.script`` or ``jit.trace`` of a function returns."""

    _made_by = ("script", "trace")
    _modules = False


class TracerWarning(Warning):
    """``torch.jit.TracerWarning``: the category of the warnings a trace raises (programs
    filter it: ``warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)``)."""


class Error(EmberError):
    """``torch.jit.Error``: a TorchScript runtime error (a RuntimeError); ember raises its own
    errors, so this only serves ``except`` clauses."""


def script_method(fn):
    """``@torch.jit.script_method`` on a `ScriptModule` subclass's method: the method itself,
    run as Python."""
    return fn


def script_if_tracing(fn):
    """``@torch.jit.script_if_tracing``: the function itself (ember's capture follows its
    Python whether or not it is scripted)."""
    return fn


class Attribute(typing.NamedTuple):
    """``torch.jit.Attribute(value, type)``: the pair, which a `ScriptModule` unwraps when
    assigned as an attribute (TorchScript's declaration of the attribute's type)."""

    value: typing.Any
    type: typing.Any = None


def isinstance(obj, target_type) -> bool:  # noqa: A001  (PyTorch's name)
    """``torch.jit.isinstance``: whether ``obj`` has the type ``target_type``, container types
    included (``list[int]``, ``dict[str, Tensor]``, ``int | None``, ``tuple[...]``, or their
    ``typing`` spellings),
    checking every element as TorchScript's refinement does."""
    import builtins

    origin = typing.get_origin(target_type)
    args = typing.get_args(target_type)
    if target_type is typing.Any:
        return True
    if origin is None:
        return builtins.isinstance(obj, target_type)
    if origin is typing.Union or origin is types.UnionType:
        return any(isinstance(obj, arg) for arg in args)
    if origin in (list, tuple, dict) and not builtins.isinstance(obj, origin):
        return False
    if origin is list:
        return not args or all(isinstance(v, args[0]) for v in obj)
    if origin is dict:
        return not args or all(
            isinstance(k, args[0]) and isinstance(v, args[1]) for k, v in obj.items()
        )
    if origin is tuple:
        if not args:
            return True
        if len(args) == 2 and args[1] is Ellipsis:
            return all(isinstance(v, args[0]) for v in obj)
        return len(obj) == len(args) and all(isinstance(v, a) for v, a in zip(obj, args))
    return builtins.isinstance(obj, origin)


_fusion = {"strategy": [("STATIC", 2), ("DYNAMIC", 10)], "onednn": False}


def set_fusion_strategy(strategy: list) -> list:
    """``torch.jit.set_fusion_strategy``: kept and the previous one returned; ember's passes
    fuse whatever the shapes (TorchScript's profiling executor is what the strategy tunes)."""
    previous, _fusion["strategy"] = _fusion["strategy"], list(strategy)
    return previous


def enable_onednn_fusion(enabled: bool) -> None:
    """``torch.jit.enable_onednn_fusion``: recorded (ember's fusion is its own, always on)."""
    _fusion["onednn"] = bool(enabled)


def onednn_fusion_enabled() -> bool:
    return _fusion["onednn"]


@contextlib.contextmanager
def strict_fusion():
    """``with torch.jit.strict_fusion():``: runs the block (TorchScript checks there that
    everything fused; ember's passes report what they fused in ``fn.stats`` instead)."""
    yield
