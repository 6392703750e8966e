"""Process memory tuning: keep freed array memory in the heap instead of returning it to the OS.

Eager execution allocates and frees the same large arrays every training step (activations,
gradients, optimizer temporaries). With glibc's defaults, blocks above the mmap threshold are
mapped and unmapped per allocation, and freed heap tops are trimmed, so every step pays page
faults to re-fault memory it just gave back (on the MLP benchmark, benchmarks/train_step.py,
the page faults took over a third of the step and most of the optimizer's update: the README's
tables have the figures).

``tune()`` sets glibc's mmap threshold to its 32 MiB maximum and the trim threshold to 1 GiB, so
memory freed in one step is reused by the next (the resident size then follows the peak, as with
PyTorch's caching allocators). It is process-wide, done once at import, only on glibc, and off
when the environment sets ``EMBER_MALLOC_TUNING=0``.
"""

from __future__ import annotations

import ctypes
import os

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 1024 * 1024  # glibc's largest allowed value on 64-bit
TRIM_THRESHOLD = 1 << 30

tuned = False


def tune() -> bool:
    """Apply the malloc settings; True when they are in effect."""
    global tuned
    if tuned or os.environ.get("EMBER_MALLOC_TUNING", "1") == "0":
        return tuned
    if not _is_glibc():
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    tuned = bool(
        mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
    return tuned


def _is_glibc() -> bool:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")
    except (ValueError, OSError, AttributeError):  # not a GNU system
        return False
