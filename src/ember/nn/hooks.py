"""Module forward hooks: registration, the hook-running ``__call__`` of every Module, and the
handles whose ``remove()`` (or leaving a ``with handle:`` block) unregisters a hook.

Hooks live in per-module dicts keyed by handle id (``_forward_pre_hooks``, ``_forward_hooks``,
plus marker dicts for ``with_kwargs`` / ``always_call``), created by ``Module.__init__``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from .. import _meta
from ..errors import NotInEmberError
from ..graph import scope as _scope
from ..ops._registry import _state as _reg_state
from ._global_hooks import (
    _global_backward_hooks,
    _global_backward_pre_hooks,
    _global_forward_hooks,
    _global_forward_hooks_always_called,
    _global_forward_hooks_with_kwargs,
    _global_forward_pre_hooks,
)

_ids = itertools.count()


class RemovableHandle:
    """Returned by ``register_forward_hook`` and friends, as in PyTorch."""

    def __init__(self, *tables: dict):
        self.id = next(_ids)
        # the tables are plain dicts (which cannot be weakly referenced); holding them is cheap
        self._tables = tables

    def remove(self) -> None:
        for table in self._tables:
            table.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def _insert(table: dict, key, hook, prepend: bool) -> None:
    table[key] = hook
    if prepend:
        items = [(key, table.pop(key))] + list(table.items())
        table.clear()
        table.update(items)


def register_module_forward_pre_hook(hook: Callable) -> RemovableHandle:
    """``hook(module, args)`` runs before the ``forward`` of every module, before the module's
    own pre-hooks; it may return replacement args."""
    handle = RemovableHandle(_global_forward_pre_hooks)
    _global_forward_pre_hooks[handle.id] = hook
    return handle


def register_module_forward_hook(
    hook: Callable, *, with_kwargs: bool = False, always_call: bool = False
) -> RemovableHandle:
    """``hook(module, args, output)`` (``hook(module, args, kwargs, output)`` with
    ``with_kwargs``) runs after the ``forward`` of every module, before the module's own
    hooks; it may return a replacement output."""
    handle = RemovableHandle(
        _global_forward_hooks,
        _global_forward_hooks_with_kwargs,
        _global_forward_hooks_always_called,
    )
    _global_forward_hooks[handle.id] = hook
    if with_kwargs:
        _global_forward_hooks_with_kwargs[handle.id] = True
    if always_call:
        _global_forward_hooks_always_called[handle.id] = True
    return handle


def register_module_full_backward_pre_hook(hook: Callable) -> RemovableHandle:
    """``hook(module, grad_output)`` for every module, before the module's own backward
    pre-hooks (see `HooksMixin.register_full_backward_pre_hook`)."""
    handle = RemovableHandle(_global_backward_pre_hooks)
    _global_backward_pre_hooks[handle.id] = hook
    return handle


def register_module_full_backward_hook(hook: Callable) -> RemovableHandle:
    """``hook(module, grad_input, grad_output)`` for every module, before the module's own
    backward hooks (see `HooksMixin.register_full_backward_hook`)."""
    handle = RemovableHandle(_global_backward_hooks)
    _global_backward_hooks[handle.id] = hook
    return handle


class HooksMixin:
    """Forward pre-hooks and hooks of a Module, and ``__call__`` running them around forward."""

    def register_forward_pre_hook(
        self, hook: Callable, *, prepend: bool = False, with_kwargs: bool = False
    ) -> RemovableHandle:
        """``hook(module, args)`` (or ``hook(module, args, kwargs)`` with ``with_kwargs``) runs
        before ``forward``; it may return replacement args (or ``(args, kwargs)``)."""
        handle = RemovableHandle(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs)
        _insert(self._forward_pre_hooks, handle.id, hook, prepend)
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs[handle.id] = True
        return handle

    def register_forward_hook(
        self,
        hook: Callable,
        *,
        prepend: bool = False,
        with_kwargs: bool = False,
        always_call: bool = False,
    ) -> RemovableHandle:
        """``hook(module, args, output)`` (or ``hook(module, args, kwargs, output)``) runs after
        ``forward``; it may return a replacement output."""
        handle = RemovableHandle(
            self._forward_hooks,
            self._forward_hooks_with_kwargs,
            self._forward_hooks_always_called,
        )
        _insert(self._forward_hooks, handle.id, hook, prepend)
        if with_kwargs:
            self._forward_hooks_with_kwargs[handle.id] = True
        if always_call:
            self._forward_hooks_always_called[handle.id] = True
        return handle

    def register_full_backward_pre_hook(
        self, hook: Callable, prepend: bool = False
    ) -> RemovableHandle:
        """``hook(module, grad_output)`` runs when the gradients of the module's outputs are
        known; it may return a replacement ``grad_output`` (see nn/backward_hooks.py)."""
        handle = RemovableHandle(self._backward_pre_hooks)
        _insert(self._backward_pre_hooks, handle.id, hook, prepend)
        return handle

    def register_backward_hook(self, hook: Callable) -> RemovableHandle:
        """Refused with `NotInEmberError`: PyTorch's deprecated hook sees the gradients of the
        last autograd op of the forward (a Linear's are addmm's three), not the module's;
        ember's tape has other ops, so it would see other tensors."""
        raise NotInEmberError(
            "PyTorch's deprecated hook, whose grad_input belongs to the forward's last op "
            "rather than to the module, is not in ember; use "
            "register_full_backward_hook(hook), whose hook(module, grad_input, grad_output) "
            "gets the gradients of the module's inputs (the same tensors for a module of one "
            "op, an activation's)",
            name="register_backward_hook",
            op="Module.register_backward_hook",
        )

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_input, grad_output)`` runs when the gradients of the module's
        inputs are known; it may return a replacement ``grad_input`` (see
        nn/backward_hooks.py)."""
        handle = RemovableHandle(self._backward_hooks)
        _insert(self._backward_hooks, handle.id, hook, prepend)
        return handle

    def __call__(self, *args, **kwargs):
        if _meta.active[0]:  # (a model on the meta device given CPU data, or the other way)
            _meta.refuse_mixed(type(self).__name__, _own_tensors(self, args))
        if _reg_state.modes:  # a graph is being built (`_scope.recording()`, inlined): its
            with _scope.module(self):  # nodes record this module's scope
                return self._call(*args, **kwargs)
        if (
            self._forward_hooks
            or self._forward_pre_hooks
            or self._backward_hooks
            or self._backward_pre_hooks
            or _global_forward_hooks
            or _global_forward_pre_hooks
            or _global_backward_hooks
            or _global_backward_pre_hooks
        ):
            return self._call(*args, **kwargs)
        return self.forward(*args, **kwargs)  # (no hooks: `_call`'s first branch, inlined)

    def _call(self, *args, **kwargs):
        backward = (
            self._backward_hooks
            or self._backward_pre_hooks
            or _global_backward_hooks
            or _global_backward_pre_hooks
        )
        if not (
            self._forward_hooks
            or self._forward_pre_hooks
            or backward
            or _global_forward_hooks
            or _global_forward_pre_hooks
        ):
            return self.forward(*args, **kwargs)
        pre_hooks = [*_global_forward_pre_hooks.items(), *self._forward_pre_hooks.items()]
        for key, hook in pre_hooks:
            if key in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError(
                            "a forward pre-hook registered with with_kwargs=True must return "
                            f"None or a tuple (args, kwargs), got {result!r}"
                        )
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        if backward:
            from .backward_hooks import BackwardHookState

            state = BackwardHookState(self)
            args = state.setup_inputs(args)
        hooks = [*_global_forward_hooks.items(), *self._forward_hooks.items()]
        try:
            output = self.forward(*args, **kwargs)
        except Exception:
            for key, hook in hooks:
                if (
                    key in self._forward_hooks_always_called
                    or key in _global_forward_hooks_always_called
                ):
                    self._run_forward_hook(key, hook, args, kwargs, None)
            raise
        for key, hook in hooks:
            result = self._run_forward_hook(key, hook, args, kwargs, output)
            if result is not None:
                output = result
        if backward:
            output = state.setup_outputs(output)
        return output

    def _run_forward_hook(self, key, hook, args, kwargs, output):
        if key in self._forward_hooks_with_kwargs or key in _global_forward_hooks_with_kwargs:
            return hook(self, args, kwargs, output)
        return hook(self, args, output)


def _own_tensors(module, args):
    """The call's positional tensors, then the module's own parameters and buffers (not its
    children's: each child checks its own call), the order PyTorch's layers meet them in."""
    yield from args
    yield from module.__dict__.get("_parameters", {}).values()
    yield from module.__dict__.get("_buffers", {}).values()
