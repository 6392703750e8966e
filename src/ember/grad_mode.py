"""Gradient-recording switches: ``no_grad``, ``enable_grad``, ``set_grad_enabled`` and
``is_grad_enabled`` (re-exported by ember.autograd and ember, as PyTorch's are). The flag itself
lives with the dispatcher (ops/_registry.py), which every mode reads."""

from __future__ import annotations

import functools

from .ops import _registry as _reg

__all__ = [
    "enable_grad",
    "inference_mode",
    "is_grad_enabled",
    "is_inference_mode_enabled",
    "no_grad",
    "set_grad_enabled",
]


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


_inference = [
    False
]  # whether an inference_mode(True) region is active (one flag, as the grad flag)


class inference_mode:
    """``with ember.inference_mode():`` / ``@ember.inference_mode()`` / ``@ember.inference_mode``:
    run without recording gradients, as PyTorch's.

    ``mode=False`` switches inference mode off and records gradients again (PyTorch sets the
    gradient mode to ``not mode``), e.g. inside an inference region. In PyTorch, tensors made in
    inference mode are *inference tensors* that autograd later refuses; ember makes ordinary
    tensors that do not require grad, which is what ``no_grad`` gives, so code correct under
    PyTorch runs unchanged.
    """

    def __new__(cls, mode=True):
        if callable(mode) and not isinstance(mode, bool):  # bare @ember.inference_mode
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)

    def __enter__(self):
        self._prev = (_reg.is_grad_enabled(), _inference[0])
        _inference[0] = self.mode
        _reg.set_grad_enabled_flag(not self.mode)  # PyTorch: grad mode is ``not mode``
        return self

    def __exit__(self, *exc):
        grad, inference = self._prev
        _reg.set_grad_enabled_flag(grad)
        _inference[0] = inference
        return False

    def __call__(self, fn):
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)

        return wrapper

    def clone(self) -> inference_mode:
        return inference_mode(self.mode)


def is_inference_mode_enabled() -> bool:
    """Whether an ``inference_mode(True)`` region is active."""
    return _inference[0]
