"""``ember.backends.cpu``."""

import platform


def get_cpu_capability() -> str:
    """The machine's architecture (PyTorch reports its SIMD level, e.g. ``"AVX2"``; ember
    compiles its kernels for the host with the C compiler and reports the machine)."""
    return platform.machine() or "unknown"
