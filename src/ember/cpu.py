"""``ember.cpu``: ``torch.cpu``'s names for the one device ember drives.

The CPU is always available, counts as one device and is current; ``synchronize`` has nothing
to wait for (every op has finished when it returns). `Stream` and `Event` are PyTorch's CPU
stand-ins: a stream that runs everything in order and an event that is always complete.
``ember.cpu.amp`` (``autocast``, ``GradScaler``: ``torch.cpu.amp``'s deprecated spellings, with
PyTorch's FutureWarning) is attached by ``ember/__init__.py``, since autocast lives in the eager
layer above this one.
"""

from __future__ import annotations

import contextlib

__all__ = [
    "Event",
    "Stream",
    "StreamContext",
    "current_device",
    "current_stream",
    "device_count",
    "get_capabilities",
    "is_available",
    "is_initialized",
    "set_device",
    "stream",
    "synchronize",
]


def is_available() -> bool:
    """True: ember runs on the CPU."""
    return True


def is_initialized() -> bool:
    """True: the CPU needs no initialization."""
    return True


def device_count() -> int:
    """1, as PyTorch counts the CPU."""
    return 1


def current_device() -> str:
    """``"cpu"``."""
    return "cpu"


def set_device(device) -> None:
    """Accepted and ignored, as in PyTorch (there is one CPU device)."""


def synchronize(device=None) -> None:
    """Returns at once: ember's ops have finished when they return."""


def get_capabilities() -> dict:
    """The instruction-set extensions this CPU reports (``/proc/cpuinfo``'s flags that
    PyTorch's ``get_capabilities`` names: AVX, AVX2, AVX-512, AMX, VNNI, BF16, FP16)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            flags = next(
                (line.split(":", 1)[1].split() for line in f if line.startswith("flags")), []
            )
    except OSError:
        flags = []
    wanted = ("avx", "avx2", "avx512", "amx", "vnni", "bf16", "fp16", "f16c", "fma")
    return {flag: True for flag in flags if any(w in flag for w in wanted)}


class Stream:
    """PyTorch's CPU stream: work runs in order, so waiting is never needed."""

    def __init__(self, priority: int = -1):
        self.priority = priority

    def wait_stream(self, stream) -> None:
        pass

    def wait_event(self, event) -> None:
        pass

    def record_event(self, event=None):
        return event if event is not None else Event()

    def synchronize(self) -> None:
        pass

    def query(self) -> bool:
        return True


class Event:
    """PyTorch's CPU event: always complete."""

    def query(self) -> bool:
        return True

    def record(self, stream=None) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def wait(self, stream=None) -> None:
        pass


_DEFAULT_STREAM = Stream()


def current_stream(device=None) -> Stream:
    return _DEFAULT_STREAM


class StreamContext(contextlib.AbstractContextManager):
    """``with ember.cpu.stream(s):``: nothing changes (there is one in-order stream)."""

    def __init__(self, stream):
        self.stream = stream

    def __exit__(self, *exc):
        return False


def stream(stream) -> StreamContext:
    return StreamContext(stream)
