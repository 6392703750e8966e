"""An optimizer's hooks, PyTorch's: around ``step`` (``register_step_pre_hook``,
``register_step_post_hook``, and every optimizer's, ``register_optimizer_step_pre_hook`` /
``..._post_hook`` of ``torch.optim.optimizer``), around ``state_dict`` and ``load_state_dict``.

`Optimizer.__init_subclass__` wraps each class's own ``step``, ``state_dict`` and
``load_state_dict`` with `hooked`, so a program's optimizer (a subclass writing its own ``step``)
runs the hooks too, as PyTorch patches its subclasses' ``step``. A ``step`` calling
``super().step()`` runs them once: only the outermost call of an instance runs them.

Step pre-hooks ``hook(optimizer, args, kwargs)`` may return new ``(args, kwargs)``; post-hooks
``hook(optimizer, args, kwargs)``. ``state_dict`` pre-hooks ``hook(optimizer)``, post-hooks
``hook(optimizer, state_dict)`` returning a replacement or None; ``load_state_dict`` pre-hooks
``hook(optimizer, state_dict)`` returning a replacement or None, post-hooks ``hook(optimizer)``.
"""

from __future__ import annotations

import functools

from ..errors import ArgumentTypeError

_GLOBAL_STEP_PRE: dict = {}
_GLOBAL_STEP_POST: dict = {}


class RemovableHandle:
    def __init__(self, table: dict, key):
        self._table, self._key = table, key

    def remove(self) -> None:
        self._table.pop(self._key, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def add(table: dict, hook, prepend: bool = False) -> RemovableHandle:
    key = object()
    if prepend:
        items = list(table.items())
        table.clear()
        table[key] = hook
        table.update(items)
    else:
        table[key] = hook
    return RemovableHandle(table, key)


def table(optimizer, name: str) -> dict:
    """The instance's hook table ``name`` (made on first use: a subclass's ``__init__`` need
    not know of it)."""
    found = optimizer.__dict__.get(name)
    if found is None:
        found = optimizer.__dict__[name] = {}
    return found


def register_optimizer_step_pre_hook(hook) -> RemovableHandle:
    """A hook run before every optimizer's ``step``."""
    return add(_GLOBAL_STEP_PRE, hook)


def register_optimizer_step_post_hook(hook) -> RemovableHandle:
    """A hook run after every optimizer's ``step``."""
    return add(_GLOBAL_STEP_POST, hook)


def _step(method):
    @functools.wraps(method)
    def step(self, *args, **kwargs):
        if self.__dict__.get("_hooks_running"):
            return method(self, *args, **kwargs)
        pre = [*_GLOBAL_STEP_PRE.values(), *table(self, "_step_pre_hooks").values()]
        post = [*table(self, "_step_post_hooks").values(), *_GLOBAL_STEP_POST.values()]
        if not pre and not post:
            return method(self, *args, **kwargs)
        self.__dict__["_hooks_running"] = True
        try:
            for hook in pre:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise ArgumentTypeError(
                            "a step pre-hook must return None or (args, kwargs), got "
                            f"{result!r:.80}",
                            op="optimizer.step",
                        )
                    args, kwargs = result
            out = method(self, *args, **kwargs)
            for hook in post:
                hook(self, args, kwargs)
            return out
        finally:
            self.__dict__["_hooks_running"] = False

    step._hooked = True
    return step


def _state_dict(method):
    @functools.wraps(method)
    def state_dict(self, *args, **kwargs):
        if self.__dict__.get("_hooks_running"):
            return method(self, *args, **kwargs)
        for hook in list(table(self, "_state_dict_pre_hooks").values()):
            hook(self)
        self.__dict__["_hooks_running"] = True
        try:
            out = method(self, *args, **kwargs)
        finally:
            self.__dict__["_hooks_running"] = False
        for hook in list(table(self, "_state_dict_post_hooks").values()):
            result = hook(self, out)
            if result is not None:
                out = result
        return out

    state_dict._hooked = True
    return state_dict


def _load_state_dict(method):
    @functools.wraps(method)
    def load_state_dict(self, state_dict, *args, **kwargs):
        if self.__dict__.get("_hooks_running"):
            return method(self, state_dict, *args, **kwargs)
        for hook in list(table(self, "_load_state_dict_pre_hooks").values()):
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        self.__dict__["_hooks_running"] = True
        try:
            out = method(self, state_dict, *args, **kwargs)
        finally:
            self.__dict__["_hooks_running"] = False
        for hook in list(table(self, "_load_state_dict_post_hooks").values()):
            hook(self)
        return out

    load_state_dict._hooked = True
    return load_state_dict


WRAPPERS = {"step": _step, "state_dict": _state_dict, "load_state_dict": _load_state_dict}


def wrap_class(cls) -> None:
    """Wrap the hookable methods ``cls`` defines itself (once)."""
    for name, wrapper in WRAPPERS.items():
        method = cls.__dict__.get(name)
        if callable(method) and not getattr(method, "_hooked", False):
            setattr(cls, name, wrapper(method))


class HookMethods:
    """The registration methods, mixed into `Optimizer`."""

    def register_step_pre_hook(self, hook) -> RemovableHandle:
        return add(table(self, "_step_pre_hooks"), hook)

    def register_step_post_hook(self, hook) -> RemovableHandle:
        return add(table(self, "_step_post_hooks"), hook)

    def register_state_dict_pre_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        return add(table(self, "_state_dict_pre_hooks"), hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        return add(table(self, "_state_dict_post_hooks"), hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        return add(table(self, "_load_state_dict_pre_hooks"), hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend: bool = False) -> RemovableHandle:
        return add(table(self, "_load_state_dict_post_hooks"), hook, prepend)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        wrap_class(cls)
