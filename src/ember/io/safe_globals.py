"""The user's allowlist of classes and functions a checkpoint may name: PyTorch's
``torch.serialization.add_safe_globals`` / ``safe_globals``.

ember never runs code that a file chooses. A program may still keep its own objects in a
checkpoint (an ``argparse.Namespace`` of hyperparameters, a config dataclass, an enum): PyTorch
2.6+ loads them with ``weights_only=True`` only once the program has named their classes as
safe, and so does ember. Only what the program itself registered can be built, and only as
pickle builds a plain object: the class's ``__new__``, then its state set by ``__setstate__`` or
into its ``__dict__`` (PyTorch's weights-only rules); a registered function may be called with
the file's arguments (REDUCE), as PyTorch's reader calls it.

With ``load(..., weights_only=False)`` the program trusts the file, and a class it has
already imported (``argparse.Namespace``, its own config class) is built as a registered one
would be (`imported_class`); still no module is imported and no function called by name, and
a class with a finalizer (``__del__``) or a base implemented in C is never built: the
finalizer would run on the file's state.

The registry is per process, as PyTorch's; `safe_globals` adds entries for a ``with`` block
(thread-local in PyTorch; here they are removed again when the block ends).
"""

from __future__ import annotations

import contextlib
import sys
import threading

from ..errors import ArgumentTypeError

_lock = threading.Lock()
_REGISTERED: dict[str, object] = {}  # "module.qualname" -> the class or function


def global_name(obj) -> str:
    """The name pickle writes for a class or function: ``module.qualname``."""
    return f"{obj.__module__}.{obj.__qualname__}"


def _entries(items) -> list[tuple[str, object]]:
    if not isinstance(items, (list, tuple)):
        raise ArgumentTypeError(
            "add_safe_globals: expected a list of classes or functions (or (object, name) "
            f"pairs), got {type(items).__name__}",
            op="add_safe_globals",
        )
    out = []
    for item in items:
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], str):
            obj, name = item
        else:
            obj, name = item, None
        if not callable(obj):
            raise ArgumentTypeError(
                f"add_safe_globals: {obj!r:.80} is not a class or function",
                op="add_safe_globals",
            )
        out.append((name or global_name(obj), obj))
    return out


def add_safe_globals(items) -> None:
    """Allow checkpoints to name these classes and functions (each an object, or an
    ``(object, "module.name")`` pair for one saved under another name)."""
    entries = _entries(items)
    with _lock:
        _REGISTERED.update(entries)


def clear_safe_globals() -> None:
    with _lock:
        _REGISTERED.clear()


def get_safe_globals() -> list:
    """The registered objects (an ``(object, name)`` pair where the name is not its own)."""
    with _lock:
        return [
            obj if global_name(obj) == name else (obj, name) for name, obj in _REGISTERED.items()
        ]


@contextlib.contextmanager
def safe_globals(items):
    """``with safe_globals([Cls]):``: the entries are allowed inside the block only."""
    entries = _entries(items)
    with _lock:
        before = {name: _REGISTERED.get(name) for name, _ in entries}
        _REGISTERED.update(entries)
    try:
        yield
    finally:
        with _lock:
            for name, old in before.items():
                if old is None:
                    _REGISTERED.pop(name, None)
                else:
                    _REGISTERED[name] = old


def lookup(name: str):
    """The registered object called ``name``, or None."""
    with _lock:
        return _REGISTERED.get(name)


def imported_class(name: str):
    """The class called ``name`` ("module.qualname") in a module the program has already
    imported, or None: what ``load(weights_only=False)`` may build, the program having said it
    trusts the file. Nothing is imported (a file never chooses the code that runs)."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is None:
            continue
        obj = module
        for attr in parts[cut:]:
            obj = getattr(obj, attr, None)
            if obj is None:
                return None
        return obj if isinstance(obj, type) and _plain_class(obj) else None
    return None


# built-in bases a plain object's class may have: their instances are data, made empty by
# __new__ (a class implemented in C otherwise keeps state no attribute shows)
_PLAIN_BUILTINS = frozenset({object, dict, list, tuple, set, frozenset, int, float, str, bytes})


def _plain_class(cls: type) -> bool:
    """Whether an imported class may be built from a file's state: defined in Python on plain
    built-in bases, and with no finalizer. A ``__del__`` runs on the file's state when the
    object is collected: tempfile's _TemporaryFileCloser, given a name, deleted that file
    once the loaded checkpoint was dropped."""
    for klass in cls.__mro__:
        if klass in _PLAIN_BUILTINS:
            continue
        if not klass.__flags__ & _HEAP_TYPE or "__del__" in vars(klass):
            return False
    return True


_HEAP_TYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class defined by a class statement


def is_registered_instance(obj) -> bool:
    """Whether ``obj`` is an instance of a registered class (its state may then be set)."""
    cls = type(obj)
    return lookup(global_name(cls)) is cls


def set_state(obj, state) -> None:
    """Pickle's default BUILD of a registered class's instance: ``__setstate__``, else the
    state (or a ``(dict, slots)`` pair) set as attributes."""
    setstate = getattr(obj, "__setstate__", None)
    if setstate is not None:
        setstate(state)
        return
    slots = None
    if isinstance(state, tuple) and len(state) == 2:
        state, slots = state
    if state:
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise ArgumentTypeError(
                f"the state of a {type(obj).__name__} is not a dict of names",
                op="load",
            )
        obj.__dict__.update(state)
    if slots:
        for k, v in slots.items():
            setattr(obj, k, v)
