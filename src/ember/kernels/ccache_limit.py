"""The kernel cache's bound (kernels/ccompile.py's folder of compiled libraries):
``$EMBER_KERNEL_CACHE_MB`` MiB, kept by removing the least recently used libraries (by the time
of their hash files, which a load touches) and the temporaries of killed builds.

Checking the bound lists and stats the whole folder, thousands of files: done at every build,
it made a process's builds grow slower as a fresh cache filled. So a process scans a folder at
its first build there, when its own running estimate of the folder's size passes the bound,
and after each 1/`SCANS_PER_LIMIT` of the bound it has written since its last scan. Processes
writing to one folder each scan as often: together they overshoot by at most that fraction
each. Only ember's kernel files are touched."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from .._files import remove_stale_temporaries
from ..errors import user_stacklevel

__all__ = ["DEFAULT_CACHE_MB", "SCANS_PER_LIMIT", "cache_limit_bytes", "keep_within_limit"]

DEFAULT_CACHE_MB = 512  # the kernel cache's bound without $EMBER_KERNEL_CACHE_MB
SCANS_PER_LIMIT = 16
# cache folder -> [its size as this process last scanned it plus what it wrote since, what it
# wrote since]
_estimates: dict[str, list[int]] = {}


def cache_limit_bytes() -> int:
    """The kernel cache's bound: ``$EMBER_KERNEL_CACHE_MB`` MiB (default `DEFAULT_CACHE_MB`;
    a value that is not a positive number is warned about and ignored)."""
    text = os.environ.get("EMBER_KERNEL_CACHE_MB", "")
    if not text:
        return DEFAULT_CACHE_MB * 2**20
    try:
        megabytes = float(text)
        if not megabytes > 0 or megabytes == float("inf"):
            raise ValueError
    except ValueError:
        warnings.warn(
            f"ember: EMBER_KERNEL_CACHE_MB={text!r} is not a positive number of MiB; using "
            f"{DEFAULT_CACHE_MB}",
            stacklevel=user_stacklevel(),
        )
        return DEFAULT_CACHE_MB * 2**20
    return int(megabytes * 2**20)


def keep_within_limit(directory: Path, added: int, keep: Path | None = None) -> int:
    """After a build wrote ``added`` bytes into ``directory``: scan it (`_evict`) when due (see
    the module docstring). Returns how many libraries were removed."""
    estimate = _estimates.get(str(directory))
    limit = cache_limit_bytes()
    if estimate is not None:
        estimate[0] += added
        estimate[1] += added
        if estimate[0] <= limit and estimate[1] * SCANS_PER_LIMIT <= limit:
            return 0
    left, removed = _evict(directory, keep)
    _estimates[str(directory)] = [left, 0]
    return removed


def _evict(directory: Path, keep: Path | None = None) -> tuple[int, int]:
    """Keep the kernel cache within `cache_limit_bytes`: remove the least recently used
    libraries (their hash files' times; failed sources count by their own) and the
    temporaries of killed builds. Returns (the bytes left, how many libraries were
    removed)."""
    remove_stale_temporaries(directory)
    limit = cache_limit_bytes()
    entries, total = [], 0
    try:
        names = os.listdir(directory)
    except OSError:
        return 0, 0
    for name in names:
        path = directory / name
        if name.endswith(".failed.c"):
            files = [path]
        elif name.endswith(".so") and not name.startswith("."):
            files = [path, path.with_suffix(".sha256")]
        else:
            continue
        size, used = 0, 0.0
        for f in files:
            try:
                st = f.lstat()
            except OSError:
                continue
            # (a library built with others is one file under each of their names, hard
            # links, kernels/cbatch.py: each name counts its share, so the bytes count once)
            size += st.st_size // max(st.st_nlink, 1)
            used = max(used, st.st_mtime)
        entries.append((used, path, files, size))
        total += size
    removed = 0
    if total <= limit:
        return total, removed
    for _used, path, files, size in sorted(entries, key=lambda e: e[0]):
        if total <= limit:
            break
        if keep is not None and path == keep:
            continue
        for f in files:
            try:
                f.unlink()
            except OSError:
                pass
        total -= size
        removed += 1
    return total, removed
