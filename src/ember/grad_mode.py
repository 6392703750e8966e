"""Gradient-recording switches: ``no_grad``, ``enable_grad``, ``set_grad_enabled`` and
``is_grad_enabled`` (re-exported by ember.autograd and ember, as PyTorch's are). The flag itself
lives with the dispatcher (ops/_registry.py), which every mode reads."""

from __future__ import annotations

import functools

from .ops import _registry as _reg

__all__ = ["enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled"]


def is_grad_enabled() -> bool:
    return _reg.is_grad_enabled()


class set_grad_enabled:
    """Context manager (and function) that switches gradient recording on or off."""

    def __init__(self, mode: bool):
        self.prev = _reg.set_grad_enabled_flag(mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _reg.set_grad_enabled_flag(self.prev)
        return False


class _GradModeContext:
    enabled: bool

    def __enter__(self):
        self.prev = _reg.set_grad_enabled_flag(self.enabled)
        return self

    def __exit__(self, *exc):
        _reg.set_grad_enabled_flag(self.prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradModeContext):
    """Disable gradient recording in a ``with`` block or a decorated function."""

    enabled = False


class enable_grad(_GradModeContext):
    """Re-enable gradient recording inside a ``no_grad`` region."""

    enabled = True
