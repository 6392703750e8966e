"""``ember.script``: capture tensor-dependent Python control flow by rewriting a function's source.

``ember.trace`` runs a function once, so an ``if`` on a traced tensor cannot be recorded (it
raises `TraceError`). ``ember.script(fn)`` instead reads ``fn``'s source, rewrites its ``if`` /
``while`` / ``for`` statements (and ``break`` / ``continue`` / ``return`` inside them) into
calls of run-time helpers (capture/script_rewrite.py), and compiles the result. The helpers
(capture/script_runtime.py) decide at each run, like TF AutoGraph: a condition or ``range``
bound that is a traced tensor records ``ember.cond`` / ``ember.while_loop`` /
``ember.fori_loop``; anything else runs as the original Python. So a scripted function called
eagerly behaves as the original, and ``ember.trace(scripted, x)`` / ``ember.function(scripted)``
give one graph that handles inputs taking either branch.

Invariants of the converted function:

* it is compiled with the original file name and line numbers, so tracebacks and error
  locations point at the user's source;
* it runs in the original's globals, with the original's closure cells (so a nonlocal read sees
  the current value, and ``super()`` in a method works), defaults and signature;
* ``.source`` shows the converted code; ``.__wrapped__`` is the original function.

``ember.script(module)`` converts ``type(module).forward`` and binds it on that module (in
place, returning the module); ``@ember.script`` on a ``forward`` method (or any function or
method) converts it once, at definition. Conversions are cached per code object.
"""

from __future__ import annotations

import ast
import inspect
import types
import weakref

from ..errors import ScriptError
from . import script_runtime
from .script_rewrite import RT, _def, rewrite

__all__ = ["script", "is_scripted"]

_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # code -> (code, source)


def is_scripted(fn) -> bool:
    return getattr(fn, "__ember_script__", False) is True


def script(fn=None):
    """Convert ``fn``'s tensor-dependent ``if`` / ``while`` / ``for`` into graph control flow.

    ``fn`` is a Python function, a method, or an ``ember.nn.Module`` (its ``forward`` is
    converted and bound on the module, which is returned). Usable as ``@ember.script``. Raises
    `ScriptError` (naming the construct and file:line) for what it cannot convert: generators,
    ``global`` writes, ``nonlocal`` writes in converted blocks, lambdas and functions without
    source; and, when run, for tensor-dependent control flow inside ``try`` or branches that
    leave a variable with different kinds of values. See the module docstring.
    """
    if fn is None:
        return script
    from ..nn import Module

    if isinstance(fn, Module):
        bound = fn.__dict__.get("forward")
        if bound is not None and is_scripted(getattr(bound, "__func__", None)):
            return fn
        forward = type(fn).forward
        converted = forward if is_scripted(forward) else _convert(forward)
        object.__setattr__(fn, "forward", types.MethodType(converted, fn))
        return fn
    if isinstance(fn, types.MethodType):
        return types.MethodType(script(fn.__func__), fn.__self__)
    if isinstance(fn, (staticmethod, classmethod)):
        return type(fn)(script(fn.__func__))
    if is_scripted(fn):
        return fn
    if not isinstance(fn, types.FunctionType):
        raise ScriptError(
            f"ember.script takes a Python function, a method or an ember.nn.Module, got "
            f"{type(fn).__name__}",
            op="script",
        )
    return _convert(fn)


def _location(fn) -> str:
    return f"{fn.__code__.co_filename}:{fn.__code__.co_firstlineno}"


def _parse(fn) -> ast.FunctionDef:
    """``fn``'s definition, with the original file's line and column numbers."""
    if fn.__name__ == "<lambda>":
        raise ScriptError(
            "a lambda cannot be scripted (its source is part of a larger expression); define "
            "it with def",
            op="script",
            location=_location(fn),
        )
    try:
        lines, start = inspect.getsourcelines(fn)
    except (OSError, TypeError) as e:
        raise ScriptError(
            f"{fn.__qualname__} has no source to convert ({e}); ember.script needs a function "
            "defined in a file",
            op="script",
            location=_location(fn),
        ) from None
    source = "".join(lines)
    if lines[0][:1].isspace():  # indented (a method, a nested def): keep the columns
        tree = ast.parse("if 1:\n" + source)
        ast.increment_lineno(tree, start - 2)
        node = tree.body[0].body[0]
    else:
        tree = ast.parse(source)
        ast.increment_lineno(tree, start - 1)
        node = tree.body[0]
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name != fn.__name__:
        raise ScriptError(
            f"could not find the definition of {fn.__qualname__} in its source",
            op="script",
            location=_location(fn),
        )
    return node


def _class_of(fn) -> str | None:
    """The class ``fn`` was defined in (for private-name mangling), from its qualified name."""
    parts = fn.__qualname__.split(".")
    if len(parts) >= 2 and parts[-2] != "<locals>":
        return parts[-2]
    return None


def _compile(fn) -> tuple[types.CodeType, str]:
    cached = _CACHE.get(fn.__code__)
    if cached is not None:
        return cached
    filename = fn.__code__.co_filename
    node = rewrite(_parse(fn), filename)
    source = ast.unparse(node)
    inner = node
    owner = _class_of(fn)
    if owner is not None:  # compile inside a class of the same name: mangling, super()
        inner = ast.ClassDef(name=owner, bases=[], keywords=[], body=[node], decorator_list=[])
        if "type_params" in ast.ClassDef._fields:
            inner.type_params = []
    outer = [v for v in fn.__code__.co_freevars if v != "__class__"]
    factory = _def("_ember_factory", [*outer, RT], [inner, ast.Return(ast.Constant(None))])
    module = ast.Module(body=[factory], type_ignores=[])
    for n in (factory, inner, *ast.walk(factory.args)):
        ast.copy_location(n, node)
    ast.fix_missing_locations(module)
    code = compile(module, filename, "exec", dont_inherit=True)
    found = _child(_child(code, "_ember_factory"), owner) if owner else None
    target = _child(found or _child(code, "_ember_factory"), fn.__name__)
    _CACHE[fn.__code__] = (target, source)
    return target, source


def _child(code: types.CodeType, name: str) -> types.CodeType:
    for const in code.co_consts:
        if isinstance(const, types.CodeType) and const.co_name == name:
            return const
    raise AssertionError(f"compiled script has no code object {name!r}")


def _convert(fn: types.FunctionType) -> types.FunctionType:
    code, source = _compile(fn)
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    closure = []
    for name in code.co_freevars:
        if name == RT:
            closure.append(types.CellType(script_runtime))
        elif name in cells:
            closure.append(cells[name])  # the original cell: nonlocal reads see updates
        else:  # __class__ of a method that did not use it before conversion
            closure.append(types.CellType())
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, tuple(closure))
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__doc__ = fn.__doc__
    new.__module__ = fn.__module__
    new.__annotations__ = dict(getattr(fn, "__annotations__", {}))
    new.__dict__.update(fn.__dict__)
    new.__wrapped__ = fn
    new.__ember_script__ = True
    new.source = source
    return new
