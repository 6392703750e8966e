"""``ember.accelerator``: PyTorch's device-generic accelerator API (``torch.accelerator``),
answered for a CPU-only framework as PyTorch's CPU-only build answers it.

PyTorch's tutorials pick their device with
``torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"``:
``is_available()`` is False, ``current_accelerator()`` None and ``device_count()`` 0, so such
code runs on the CPU. The functions that address an accelerator device (its index, streams,
memory, synchronization) raise `DeviceError`, as PyTorch's raise a RuntimeError there.
"""

from __future__ import annotations

from contextlib import contextmanager

from . import cpu, cuda
from .errors import DeviceError

__all__ = [
    "current_accelerator",
    "current_device_idx",
    "current_device_index",
    "current_stream",
    "device_count",
    "device_index",
    "empty_cache",
    "get_device_module",
    "get_memory_info",
    "is_available",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
    "set_device_idx",
    "set_device_index",
    "set_stream",
    "synchronize",
]


def is_available() -> bool:
    """False: ember drives no accelerator."""
    return False


def current_accelerator(check_available: bool = False):
    """None: there is no accelerator (PyTorch's CPU-only answer, whatever ``check_available``
    says)."""
    return None


def device_count() -> int:
    """0: no accelerator devices."""
    return 0


def _no_device(name: str):
    def refuse(*args, **kwargs):
        raise DeviceError(
            "cannot access an accelerator device when none is available (ember runs on the "
            "CPU only; ember.accelerator.is_available() is False)",
            op=f"ember.accelerator.{name}",
        )

    refuse.__name__ = refuse.__qualname__ = name
    refuse.__doc__ = f"Raises `DeviceError`: ``torch.accelerator.{name}`` needs a device."
    return refuse


current_device_index = _no_device("current_device_index")
current_device_idx = _no_device("current_device_idx")
set_device_index = _no_device("set_device_index")
set_device_idx = _no_device("set_device_idx")
current_stream = _no_device("current_stream")
set_stream = _no_device("set_stream")
synchronize = _no_device("synchronize")
empty_cache = _no_device("empty_cache")
get_memory_info = _no_device("get_memory_info")
memory_allocated = _no_device("memory_allocated")
max_memory_allocated = _no_device("max_memory_allocated")
memory_reserved = _no_device("memory_reserved")
max_memory_reserved = _no_device("max_memory_reserved")
memory_stats = _no_device("memory_stats")
reset_accumulated_memory_stats = _no_device("reset_accumulated_memory_stats")
reset_peak_memory_stats = _no_device("reset_peak_memory_stats")


@contextmanager
def device_index(device, /):
    """``with device_index(None)``: nothing to switch (PyTorch's does nothing for None); any
    index raises `DeviceError`, there being no device."""
    if device is not None:
        _no_device("device_index")()
    yield


def get_device_module(device=None):
    """``torch.get_device_module``: the module of a device's type, ``ember.cpu`` for the CPU
    (and for None, the current accelerator's, which is the CPU's here), ``ember.cuda`` for
    CUDA (whose ``is_available()`` is False); `DeviceError` for a type ember has no module
    for."""
    kind = "cpu" if device is None else getattr(device, "type", None) or str(device)
    kind = kind.partition(":")[0]
    modules = {"cpu": cpu, "cuda": cuda}
    if kind not in modules:
        raise DeviceError(
            f"ember has no device module for {kind!r} (it runs on the CPU only)",
            op="get_device_module",
        )
    return modules[kind]
