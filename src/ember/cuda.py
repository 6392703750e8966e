"""``ember.cuda``: what PyTorch programs ask about CUDA, answered for a CPU-only framework.

``is_available()`` is False and ``device_count()`` 0, so code that picks its device with
``"cuda" if torch.cuda.is_available() else "cpu"`` runs on the CPU; seeding every GPU
(``manual_seed``, ``manual_seed_all``, ``seed``, ``seed_all``) is accepted and does nothing,
since there is none. What PyTorch's CPU-only build answers without CUDA, ember answers alike:
``empty_cache()`` does nothing, ``memory_allocated``, ``max_memory_allocated``,
``memory_reserved`` and ``max_memory_reserved`` are 0, ``memory_stats`` is empty (a training
script's memory log). Anything else (``ember.cuda.synchronize()``, ``set_device``, ``amp``, ...)
raises `DeviceError`: it would need a GPU ember does not drive.
"""

from __future__ import annotations

from collections import OrderedDict

from .errors import DeviceError
from .errors import OutOfMemoryError as OutOfMemoryError  # (torch.cuda's name of it)

__all__ = [
    "device_count",
    "empty_cache",
    "is_available",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory_allocated",
    "memory_reserved",
    "memory_stats",
    "seed",
    "seed_all",
]


def is_available() -> bool:
    """False: ember runs on the CPU only."""
    return False


def device_count() -> int:
    """0: ember drives no GPU."""
    return 0


def is_initialized() -> bool:
    """False: there is no CUDA state to initialize."""
    return False


def manual_seed(seed: int) -> None:
    """Accepted and ignored (there is no GPU generator to seed); ``ember.manual_seed`` seeds
    ember's generator."""
    int(seed)  # a non-number is refused as in PyTorch


def manual_seed_all(seed: int) -> None:
    """Accepted and ignored, as `manual_seed`."""
    int(seed)


def seed() -> None:
    """Accepted and ignored (no GPU generator)."""


def seed_all() -> None:
    """Accepted and ignored (no GPU generator)."""


def empty_cache() -> None:
    """Nothing to release (PyTorch's does nothing while CUDA is not initialized)."""


def memory_stats(device=None) -> OrderedDict:
    """Empty, as PyTorch's before CUDA is initialized."""
    return OrderedDict()


def memory_allocated(device=None) -> int:
    """0 bytes: no GPU memory (as PyTorch's CPU-only build)."""
    return 0


def max_memory_allocated(device=None) -> int:
    """0 bytes, as `memory_allocated`."""
    return 0


def memory_reserved(device=None) -> int:
    """0 bytes, as `memory_allocated`."""
    return 0


def max_memory_reserved(device=None) -> int:
    """0 bytes, as `memory_allocated`."""
    return 0


class CudaNameError(DeviceError, AttributeError):
    """A name of ``torch.cuda`` that needs a GPU: a `DeviceError`, and an AttributeError as
    Python's attribute protocol expects of a module's ``__getattr__`` (``hasattr`` answers
    False, and ``pickle.whichmodule``, which looks a name up in every loaded module, as
    torch.compile's cache keys do, goes on to the next module instead of failing)."""


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    raise CudaNameError(
        "this needs a CUDA GPU; ember runs on the CPU only (ember.cuda.is_available() is False)",
        op=f"ember.cuda.{name}",
    )
