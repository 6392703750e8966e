"""``ember.autograd.graph``: PyTorch's ``torch.autograd.graph`` namespace for the eager tape:
saved-tensor hooks (``saved_tensors_hooks``, ``save_on_cpu``, ``disable_saved_tensors_hooks``)
and the tape's ``Node``. autograd.py exposes it as ``ember.autograd.graph`` (and registers it
as that module, so ``from ember.autograd.graph import saved_tensors_hooks`` works too)."""

from __future__ import annotations

import contextlib

from . import saved_hooks
from .errors import AutogradError

__all__ = [
    "allow_mutation_on_saved_tensors",
    "disable_saved_tensors_hooks",
    "save_on_cpu",
    "saved_tensors_hooks",
]


@contextlib.contextmanager
def saved_tensors_hooks(pack_hook, unpack_hook, *, _check_version: bool = False):
    """PyTorch's ``torch.autograd.graph.saved_tensors_hooks`` (ember/saved_hooks.py): while
    active, the tape keeps ``pack_hook(tensor)`` for each tensor a gradient will read and calls
    ``unpack_hook`` on it in the backward; an in-place change of a saved tensor afterwards is
    no error, as in PyTorch (``_check_version``: ember's checkpointing, which recomputes from
    the originals, keeps the check)."""
    if _disabled:
        raise AutogradError(_disabled[-1], op="saved_tensors_hooks")
    with saved_hooks.saved_tensors_hooks(pack_hook, unpack_hook, _check_version):
        yield


class save_on_cpu(contextlib.ContextDecorator):
    """PyTorch's ``save_on_cpu(pin_memory=False)``: saved tensors are kept in CPU memory, where
    every ember tensor already is, so they are kept as they are (``pin_memory`` has no effect
    without an accelerator)."""

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda"):
        self.pin_memory = bool(pin_memory)
        self._context = None

    def __enter__(self):
        self._context = saved_tensors_hooks(lambda t: t, lambda t: t)
        return self._context.__enter__()

    def __exit__(self, *exc):
        context, self._context = self._context, None
        return context.__exit__(*exc)


class _AllowMutationOnSavedContext:
    """What `allow_mutation_on_saved_tensors` yields (PyTorch's class of that name)."""


@contextlib.contextmanager
def allow_mutation_on_saved_tensors():
    """PyTorch's ``allow_mutation_on_saved_tensors``: inside it, a tensor saved for the backward
    may be changed in place afterwards, and the backward reads it as it was saved. Each saved
    tensor is kept with a copy of its values as saved (PyTorch copies lazily, on the change);
    the backward reads the tensor itself while its version is unchanged (so a higher-order
    gradient still reaches its history), else the copy."""

    def pack(t):
        return t, t._version, t.detach().clone()

    def unpack(packed):
        t, version, copy = packed
        return t if t._version == version else copy

    with saved_tensors_hooks(pack, unpack):
        yield _AllowMutationOnSavedContext()


# the messages of the active disable_saved_tensors_hooks, innermost last
_disabled: list = []


@contextlib.contextmanager
def disable_saved_tensors_hooks(error_message: str):
    """PyTorch's ``disable_saved_tensors_hooks``: while active, entering
    ``saved_tensors_hooks`` raises an error with ``error_message``."""
    _disabled.append(str(error_message))
    try:
        yield
    finally:
        _disabled.pop()
