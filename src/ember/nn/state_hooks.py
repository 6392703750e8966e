"""State-dict hooks of a Module, with PyTorch's names and calling conventions, and the
``_load_from_state_dict`` override point (nn/_state.py calls them).

* ``register_state_dict_pre_hook(hook)``: ``hook(module, prefix, keep_vars)`` before the module's
  entries are saved; ``register_state_dict_post_hook(hook)`` (and the older private
  ``_register_state_dict_hook``): ``hook(module, state_dict, prefix, local_metadata)`` after
  them (the private one may return a replacement dict).
* ``register_load_state_dict_pre_hook(hook)``: ``hook(module, state_dict, prefix,
  local_metadata, strict, missing_keys, unexpected_keys, error_msgs)``, run by
  ``_load_from_state_dict``; ``register_load_state_dict_post_hook(hook)``: ``hook(module,
  incompatible_keys)`` after loading, which may edit the key lists (clearing a missing key
  keeps a strict load from failing on it).
* ``_load_from_state_dict(state_dict, prefix, ...)``: a module may override it (as PyTorch code
  does to rename or convert old entries, then calling ``super()``); ember runs the overrides
  and pre-hooks on a copy of the state_dict first, then validates and loads the result in one
  pass, so the default implementation only runs the pre-hooks.

Hook tables are created on first registration (``__dict__``), so modules that never register one
pay nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from .hooks import RemovableHandle

_TABLES = (
    "_state_dict_pre_hooks",
    "_state_dict_hooks",
    "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
)


def hooks(module, table: str) -> list:
    """The hooks registered in ``table`` of ``module`` (empty when none ever were)."""
    found = module.__dict__.get(table)
    return list(found.values()) if found else []


def _register(module, table: str, hook: Callable) -> RemovableHandle:
    entries = module.__dict__.setdefault(table, {})
    handle = RemovableHandle(entries)
    entries[handle.id] = hook
    return handle


def overrides_load(module) -> bool:
    """Whether loading must call ``module._load_from_state_dict`` (an override, or pre-hooks)."""
    own = type(module)._load_from_state_dict is not StateDictHooksMixin._load_from_state_dict
    return own or bool(module.__dict__.get("_load_state_dict_pre_hooks"))


class StateDictHooksMixin:
    """The state-dict hooks of a Module (see the module docstring)."""

    def register_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        return _register(self, "_state_dict_pre_hooks", hook)

    def register_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        return _register(self, "_state_dict_hooks", hook)

    _register_state_dict_hook = register_state_dict_post_hook

    def register_load_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        return _register(self, "_load_state_dict_pre_hooks", hook)

    def _register_load_state_dict_pre_hook(
        self, hook: Callable, with_module: bool = False
    ) -> RemovableHandle:
        """PyTorch's older form: ``hook(state_dict, prefix, ...)`` (``with_module``: the
        module first)."""
        if with_module:
            return self.register_load_state_dict_pre_hook(hook)
        return self.register_load_state_dict_pre_hook(lambda module, *args: hook(*args))

    def register_load_state_dict_post_hook(self, hook: Callable) -> RemovableHandle:
        return _register(self, "_load_state_dict_post_hooks", hook)

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ) -> None:
        """Runs the load pre-hooks; ember then loads every module's entries in one validated
        pass (nn/_state.py). Override it to rename, convert, add or pop entries under
        ``prefix`` before calling ``super()._load_from_state_dict(...)``, as in PyTorch."""
        for hook in hooks(self, "_load_state_dict_pre_hooks"):
            hook(
                self,
                state_dict,
                prefix,
                local_metadata,
                strict,
                missing_keys,
                unexpected_keys,
                error_msgs,
            )
