"""PyTorch's ``__torch_function__`` protocol for subclasses of ember.Tensor.

A program that subclasses the tensor class (a tensor carrying units or metadata, a logging
tensor, a tensor that overrides ``torch.mean``) expects PyTorch's behaviour: calling a public
function (``torch.add``, ``F.relu``) or a tensor method (``x.sum()``, ``x + y``, ``x[0]``) with
an instance of such a subclass among the arguments calls the subclass's
``__torch_function__(func, types, args, kwargs)`` instead, ``func`` being the function the
program called; the default one (`Tensor.__torch_function__`) runs the function with the
protocol off and gives tensor results the subclass (``as_subclass``), so a plain subclass's
results stay of its class. ``nn.Parameter`` opts out (`disabled_torch_function_impl`), as
PyTorch's does.

Nothing is wrapped until the first subclass other than ember's own is defined
(``Tensor.__init_subclass__`` calls `enable`): from then on the public namespaces
(``ember``, ``ember.nn.functional``) and the tensor methods dispatch, which costs a scan of the
arguments per call; programs without subclasses never pay it. Calls made inside ember's ops and
eager layers (its composites, ``ember.ops.api``, ``as_subclass``) do not dispatch, as PyTorch's
C++ internals do not; its library (``nn``, ``functional``, ``optim``) does, as PyTorch's Python.
"""

from __future__ import annotations

import functools
import sys
import threading

from .tensor import Tensor

__all__ = ["disabled_torch_function_impl", "enable", "torch_function"]

_state = threading.local()
_enabled = [False]
# names of Tensor's methods that are not functions of the tensor's values
_NOT_DISPATCHED = frozenset(
    {"__torch_function__", "as_subclass", "__init__", "__new__", "__repr__", "__format__"}
)
_DUNDERS = frozenset(
    f"__{n}__"
    for n in (
        "add radd sub rsub mul rmul truediv rtruediv floordiv rfloordiv mod rmod pow rpow "
        "matmul rmatmul and or xor neg pos abs invert eq ne lt le gt ge getitem setitem "
        "iadd isub imul itruediv"
    ).split()
)


# ember's layers below its PyTorch-named library: their calls are PyTorch's C++ internals,
# which do not dispatch (nn, functional, optim and the rest do, as PyTorch's Python does)
_INTERNAL = (
    "ember.ops",
    "ember.kernels",
    "ember.tensor",
    "ember._",
    "ember.autograd",
    "ember.eager",
    "ember.grad_mode",
    "ember.printing",
    "ember.io",
    "ember.graph",
    "ember.capture",
    "ember.runtime",
    "ember.transforms",
    "ember.plan",
)


def _off() -> bool:
    return getattr(_state, "depth", 0) > 0


class _Disabled:
    """The protocol off within the block (the default implementation's own call)."""

    def __enter__(self):
        _state.depth = getattr(_state, "depth", 0) + 1

    def __exit__(self, *exc):
        _state.depth -= 1


def _overloaded(args, kwargs) -> list:
    """The argument types that override (subclasses before their bases, else in argument
    order), looking one level into lists and tuples, as PyTorch does."""
    found: list = []

    def see(a):
        t = type(a)
        if t is not Tensor and isinstance(a, Tensor):
            if t.__torch_function__ is not disabled_torch_function_impl and t not in found:
                at = next((i for i, s in enumerate(found) if issubclass(t, s)), len(found))
                found.insert(at, t)

    for a in (*args, *kwargs.values()):
        if isinstance(a, (list, tuple)):
            for b in a:
                see(b)
        else:
            see(a)
    return found


def torch_function(func, dispatched, args, kwargs):
    """``func`` (the original) called as PyTorch would: through the overriding types'
    ``__torch_function__``, which receives ``dispatched`` (the function the program called)."""
    if _off():
        return func(*args, **kwargs)
    types = _overloaded(args, kwargs)
    if not types:
        return func(*args, **kwargs)
    for t in types:
        result = t.__torch_function__(dispatched, tuple(types), args, kwargs)
        if result is not NotImplemented:
            return result
    names = ", ".join(t.__name__ for t in types)
    raise TypeError(
        f"no implementation found for '{getattr(func, '__name__', func)}' on types that "
        f"implement __torch_function__: [{names}]"
    )


def _convert(value, cls):
    if isinstance(value, Tensor) and not isinstance(value, cls):
        return value.as_subclass(cls)
    if isinstance(value, (tuple, list)) and not hasattr(value, "_fields"):
        return type(value)(_convert(v, cls) for v in value)
    if isinstance(value, tuple):  # (a named tuple: sort's values and indices)
        return type(value)(*(_convert(v, cls) for v in value))
    return value


def _default(cls, func, types, args=(), kwargs=None):
    """PyTorch's ``Tensor.__torch_function__``: ``func`` with the protocol off, its tensor
    results of ``cls`` (unless another overriding type is not a base of ``cls``)."""
    if not all(issubclass(cls, t) for t in types):
        return NotImplemented
    with _Disabled():
        result = func(*args, **(kwargs or {}))
    return _convert(result, cls)


def disabled_torch_function_impl(func, types, args=(), kwargs=None):
    """``torch._C._disabled_torch_function_impl``: a class whose calls do not dispatch."""
    with _Disabled():
        return func(*args, **(kwargs or {}))


_DUNDER_NAMES = {
    "__add__": "add",
    "__sub__": "sub",
    "__mul__": "mul",
    "__truediv__": "div",
    "__floordiv__": "floor_divide",
    "__mod__": "remainder",
    "__pow__": "pow",
    "__matmul__": "matmul",
    "__and__": "bitwise_and",
    "__or__": "bitwise_or",
    "__xor__": "bitwise_xor",
    "__neg__": "neg",
    "__abs__": "abs",
    "__invert__": "bitwise_not",
    **{f"__{c}__": c for c in ("eq", "ne", "lt", "le", "gt", "ge")},
}


def _wrap(func, name: str = ""):
    if getattr(func, "_dispatches", False):
        return func

    @functools.wraps(func)
    def dispatching(*args, **kwargs):
        if _off() or sys._getframe(1).f_globals.get("__name__", "").startswith(_INTERNAL):
            return func(*args, **kwargs)
        return torch_function(func, dispatching, args, kwargs)

    dispatching._dispatches = True
    if name in _DUNDER_NAMES:  # (PyTorch names ``x * 2``'s function ``mul``)
        dispatching.__name__ = dispatching.__qualname__ = _DUNDER_NAMES[name]
    return dispatching


def subclass_defined(cls, namespaces) -> None:
    """``Tensor.__init_subclass__``'s hook: a program's own subclass switches dispatch on;
    ember's own (Parameter, Buffer, the optimizers' hyperparameters) never dispatch, as
    PyTorch's Parameter."""
    if cls.__module__.startswith("ember.") or cls.__module__ == "ember":
        if "__torch_function__" not in vars(cls):
            cls.__torch_function__ = disabled_torch_function_impl
        return
    enable(namespaces)


def _ember_subclasses(cls=Tensor):
    for sub in cls.__subclasses__():
        if sub.__module__.startswith("ember"):
            yield sub
        yield from _ember_subclasses(sub)


def enable(namespaces) -> None:
    """Make the public functions of ``namespaces`` (modules) and Tensor's methods dispatch;
    once, at the first subclass."""
    if _enabled[0]:
        return
    _enabled[0] = True
    for sub in set(_ember_subclasses()):
        if "__torch_function__" not in vars(sub):
            sub.__torch_function__ = disabled_torch_function_impl
    # one wrapper per function, whichever namespaces hold it: ``ember.relu is F.relu`` stays
    wrappers: dict[int, object] = {}
    for module in namespaces:
        for name in getattr(module, "__all__", None) or list(vars(module)):
            value = getattr(module, name, None)
            if callable(value) and not isinstance(value, type) and not name.startswith("_"):
                if getattr(value, "__module__", "") and not str(value.__module__).startswith(
                    ("ember", "functools")
                ):
                    continue  # (a re-exported library function: not ember's to dispatch)
                if id(value) not in wrappers:
                    wrappers[id(value)] = _wrap(value)
                setattr(module, name, wrappers[id(value)])
    for name, value in list(vars(Tensor).items()):
        if (
            name in _NOT_DISPATCHED
            or not callable(value)
            or isinstance(value, (type, classmethod, staticmethod))
        ):
            continue
        if name.startswith("_") and name not in _DUNDERS:
            continue
        setattr(Tensor, name, _wrap(value, name))


Tensor.__torch_function__ = classmethod(_default)
