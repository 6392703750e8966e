"""The module hooks in a captured function's cache key (capture/state.py): a graph holds what
the hooks of the modules it ran did, so registering or removing one retraces. The hook tables
are nn/_tables.py `Table`s, so a change also sends a call past its guard (call_guard.py)."""

from __future__ import annotations

from ..nn import _global_hooks

__all__ = ["hooks_of"]

_HOOK_TABLES = (
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
    "_backward_pre_hooks",
    "_backward_hooks",
)
_GLOBAL_HOOK_TABLES = (
    _global_hooks._global_forward_pre_hooks,
    _global_hooks._global_forward_hooks,
    _global_hooks._global_forward_hooks_with_kwargs,
    _global_hooks._global_forward_hooks_always_called,
    _global_hooks._global_backward_pre_hooks,
    _global_hooks._global_backward_hooks,
)


def hooks_of(modules: list) -> tuple:
    """The hooks of ``modules`` and the global module hooks, for a cache key: per module that
    has any, its position and each table's (handle id, hook) identities."""
    out = []
    for i, sub in enumerate(modules):
        if (
            sub._forward_pre_hooks
            or sub._forward_hooks
            or sub._backward_hooks
            or sub._backward_pre_hooks
        ):
            out.append((i, *(_table_ids(getattr(sub, name)) for name in _HOOK_TABLES)))
    if any(_GLOBAL_HOOK_TABLES):
        out.append(tuple(map(_table_ids, _GLOBAL_HOOK_TABLES)))
    return tuple(out)


def _table_ids(table: dict) -> tuple:
    return tuple((k, id(v)) for k, v in table.items())
