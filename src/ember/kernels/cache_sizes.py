"""The CPU's data cache sizes, as the system reports them, for kernels that size their blocks
or choose their stores from the caches (never from a constant tuned on one CPU): one core's L2
(`l2_bytes`), its L1 data cache (`l1_data_bytes`) and the last level shared by the cores
(`last_level_bytes`).

The C library's ``sysconf`` answers first; where it says nothing (some virtual machines, musl)
Linux's ``/sys/devices/system/cpu/cpu0/cache/index*`` files; where neither does, the smallest
sizes current x86 server cores have, so a kernel errs towards blocks that fit.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

_L1_FALLBACK = 32 << 10
_L2_FALLBACK = 256 << 10
_LAST_LEVEL_FALLBACK = 8 << 20
_SYSFS = Path("/sys/devices/system/cpu/cpu0/cache")


def _sysconf(name: str) -> int:
    try:
        size = os.sysconf(name)
    except (ValueError, OSError, AttributeError):
        return 0
    return int(size) if size and size > 0 else 0


def _parse_size(text: str) -> int:
    """Bytes of a sysfs size such as ``1024K`` or ``32M`` (0 where it cannot be read)."""
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    try:
        return int(text.rstrip("KMG")) * scale
    except ValueError:
        return 0


def _sysfs_levels() -> dict[int, int]:
    """Each cache level holding data (data or unified caches) -> its size in bytes."""
    sizes: dict[int, int] = {}
    try:
        entries = sorted(_SYSFS.glob("index*"))
    except OSError:
        return sizes
    for entry in entries:
        try:
            kind = (entry / "type").read_text().strip()
            level = int((entry / "level").read_text().strip())
            size = _parse_size((entry / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and size > 0:
            sizes[level] = max(size, sizes.get(level, 0))
    return sizes


@functools.cache
def l1_data_bytes() -> int:
    """One core's L1 data cache in bytes."""
    return _sysconf("SC_LEVEL1_DCACHE_SIZE") or _sysfs_levels().get(1) or _L1_FALLBACK


@functools.cache
def l2_bytes() -> int:
    """One core's L2 cache in bytes."""
    return _sysconf("SC_LEVEL2_CACHE_SIZE") or _sysfs_levels().get(2) or _L2_FALLBACK


@functools.cache
def last_level_bytes() -> int:
    """The last-level cache in bytes (L3 where there is one, else L2)."""
    size = _sysconf("SC_LEVEL3_CACHE_SIZE")
    if size:
        return size
    levels = _sysfs_levels()
    if levels:
        return levels[max(levels)]
    return max(_LAST_LEVEL_FALLBACK, l2_bytes())
