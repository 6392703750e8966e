"""This machine's peaks and the roofline view: is a call compute- or memory-bound?

`machine_peaks()` measures, once per machine, the float32 matrix-multiply rate (GFLOP/s, a
1024x1024 product through NumPy's BLAS) and the memory bandwidth (GB/s, ``np.add`` on 32 MB
float32 arrays into a preallocated output, counting both reads and the write, as the ops' cost
rules count bytes), each from the fastest of a few runs after a warm-up, in well under a second.
The fastest, not the median: on a shared machine a run is only ever slowed (by other
processes, a core waking up), so the fastest run is the estimate of what the machine can do.
The result is cached in ``machine_peaks.json`` in ember's cache folder (``$EMBER_CACHE_DIR``,
else ``$XDG_CACHE_HOME/ember`` or ``~/.cache/ember``), keyed by machine, and in the process;
``machine_peaks(remeasure=True)`` measures again and replaces it; so is an entry that is
damaged (not positive finite numbers, even in valid JSON) or a file that is not JSON.

Roofline classification: a call with arithmetic intensity ``flops / bytes`` at or above the
ridge point ``peak GFLOP/s / peak GB/s`` can at best run at the compute peak (compute-bound);
below it, at ``intensity * bandwidth`` (memory-bound). It depends on the cost rules and the
machine, not on how long the call happened to take.
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .._files import OWN_FILE_MODE, read_own_file, write_atomic

__all__ = ["Peaks", "bound", "cache_path", "machine_peaks", "measure_peaks"]

_MATMUL_N = 1024
_STREAM_ELEMENTS = 8 * 1024 * 1024  # 32 MB per float32 array: past the caches
_RUNS = 7


class Peaks(NamedTuple):
    gflops: float  # float32 matmul, GFLOP/s
    gbps: float  # streaming add, GB/s (reads + writes)

    @property
    def ridge(self) -> float:
        """The arithmetic intensity (FLOP per byte) where the two roofs meet."""
        return self.gflops / self.gbps


def _fastest_seconds(run, runs: int) -> float:
    run()  # warm-up: page faults, BLAS threads, caches
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def measure_peaks(runs: int = _RUNS) -> Peaks:
    """Measure this machine's float32 matmul GFLOP/s and streaming GB/s now (no caching)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((_MATMUL_N, _MATMUL_N), dtype=np.float32)
    b = rng.standard_normal((_MATMUL_N, _MATMUL_N), dtype=np.float32)
    c = np.empty_like(a)
    seconds = _fastest_seconds(lambda: np.matmul(a, b, out=c), runs)
    gflops = 2 * _MATMUL_N**3 / seconds / 1e9
    x = np.ones(_STREAM_ELEMENTS, dtype=np.float32)
    y = np.ones(_STREAM_ELEMENTS, dtype=np.float32)
    z = np.empty_like(x)
    seconds = _fastest_seconds(lambda: np.add(x, y, out=z), runs)
    gbps = 3 * x.nbytes / seconds / 1e9
    return Peaks(gflops, gbps)


def cache_path() -> Path:
    """The peaks cache file (its folder is created when the peaks are first saved)."""
    if os.environ.get("EMBER_CACHE_DIR"):
        base = Path(os.environ["EMBER_CACHE_DIR"])
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ember"
    return base / "machine_peaks.json"


def _machine_key() -> str:
    """What identifies this machine's peaks: host, CPU model, cores this process may use, and
    NumPy (its BLAS sets the matmul rate)."""
    from ..kernels.cpool import cpu_count, cpu_model

    model, cores = cpu_model(), cpu_count()
    return f"{platform.node()}|{platform.machine()}|{model}|{cores} cores|numpy {np.__version__}"


_memory: dict[tuple, Peaks] = {}  # (cache file, machine key) -> peaks, for this process


def machine_peaks(remeasure: bool = False) -> Peaks:
    """This machine's `Peaks`: from the process, else from the cache file, else measured (and
    saved). ``remeasure=True`` measures again and replaces the cached value."""
    path, key = cache_path(), _machine_key()
    if not remeasure:
        if (path, key) in _memory:
            return _memory[(path, key)]
        peaks = _stored(_read(path).get(key))
        if peaks is not None:
            _memory[(path, key)] = peaks
            return peaks
    peaks = _memory[(path, key)] = measure_peaks()
    table = _read(path)
    table[key] = {"gflops": peaks.gflops, "gbps": peaks.gbps, "measured": time.time()}
    _write(path, table)
    return peaks


def _read(path: Path) -> dict:
    raw = read_own_file(path)  # (a file someone else could write is not read: measured anew)
    if raw is None:
        return {}
    try:
        table = json.loads(raw)
        return table if isinstance(table, dict) else {}
    except (ValueError, RecursionError):
        return {}  # damaged: measure again


def _stored(entry) -> Peaks | None:
    """The peaks of a table entry, or None (measure again) when it is damaged: not an object
    with positive finite ``gflops`` and ``gbps`` (valid JSON of the wrong kinds included)."""
    if not isinstance(entry, dict):
        return None
    values = [entry.get("gflops"), entry.get("gbps")]
    ok = all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
        for v in values
    )
    return Peaks(float(values[0]), float(values[1])) if ok else None


def _write(path: Path, table: dict) -> None:
    """Replace the file whole (a concurrent reader sees the old or the new table)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(table, indent=1), OWN_FILE_MODE)
    except OSError:
        pass  # an unwritable cache costs a measurement per process, nothing else


def bound(flops: int, nbytes: int, peaks: Peaks) -> str:
    """``"compute"`` or ``"memory"`` by the roofline (see the module docstring); ``""`` for a
    call that moves and computes nothing."""
    if flops <= 0 and nbytes <= 0:
        return ""
    if nbytes <= 0:
        return "compute"
    return "compute" if flops / nbytes >= peaks.ridge else "memory"
