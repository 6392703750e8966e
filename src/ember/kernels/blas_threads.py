"""One thread's share of NumPy's BLAS: run the calling thread's BLAS calls on that thread alone.

Two threads calling a multi-threaded OpenBLAS at once fight over its worker threads: on 2 cores
a pair of 128x128 matmuls ran 10-20x slower than one after the other, and a busy machine made
single calls take a whole scheduler tick. The parallel executor therefore runs its workers'
BLAS calls single-threaded, each worker on its own core, with OpenBLAS's per-thread setting
(``openblas_set_num_threads_local``, OpenBLAS 0.3.27 and later), which leaves every other
thread of the process, and the process-wide count, as they were. Some builds (NumPy's own
pthreads wheels) keep that setting process-wide despite its name (`per_thread` tells): there the
calling thread sets it around the workers' whole run (`single_threaded`) and the workers leave
it alone, so it is the same before and after.

The library is the OpenBLAS NumPy loaded, found among the process's mapped files (Linux
``/proc/self/maps``). Where there is none (another BLAS, an older OpenBLAS, another OS),
`available()` is False and `single_threaded()` changes nothing: the cost model's calibration then
measures BLAS as it runs.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import threading

import numpy as np

__all__ = ["available", "library", "per_thread", "pin_this_thread", "single_threaded"]


@functools.cache
def library() -> ctypes.CDLL | None:
    """NumPy's OpenBLAS, if it has the per-thread setting, else None."""
    np.dot(np.ones((2, 2)), np.ones((2, 2)))  # NumPy maps its BLAS when it loads
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line.lower()})
    except OSError:
        return None
    for path in paths:
        try:
            found = ctypes.CDLL(path)
            found.openblas_set_num_threads_local  # noqa: B018 - raises where it is missing
        except (OSError, AttributeError):
            continue
        return found
    return None


@functools.cache
def _setter():
    """``openblas_set_num_threads_local`` (returns the previous count), or None."""
    found = library()
    if found is None:
        return None
    function = found.openblas_set_num_threads_local
    function.restype, function.argtypes = ctypes.c_int, [ctypes.c_int]
    return function


def available() -> bool:
    """Whether this process's BLAS can be made single-threaded for one thread."""
    return _setter() is not None


@functools.cache
def per_thread() -> bool:
    """Whether the setting is the calling thread's own. Some OpenBLAS builds (NumPy's
    pthreads wheels among them) keep one value for the whole process under the per-thread
    name; there, setting it in a worker would leave every thread single-threaded for good.
    (The probe only ever sets one thread, so a BLAS call running meanwhile elsewhere is at
    worst single-threaded for a moment; where the process runs one BLAS thread anyway, the
    answer is False, which is then harmless.)"""
    setter = _setter()
    if setter is None:
        return False
    previous = setter(1)
    seen = []

    def probe():
        old = setter(1)
        seen.append(old)
        setter(old)

    thread = threading.Thread(target=probe)
    thread.start()
    thread.join()
    setter(previous)
    return seen[0] != 1


def pin_this_thread() -> None:
    """From now on, BLAS calls made by the calling thread run on it alone (for threads ember
    owns, such as the parallel executor's workers). Where the setting is process-wide this
    does nothing: the thread that hands the workers their work holds `single_threaded` while
    they run."""
    setter = _setter()
    if setter is not None and per_thread():
        setter(1)


@contextlib.contextmanager
def single_threaded():
    """Within the block, BLAS calls made by the calling thread run on it alone."""
    setter = _setter()
    if setter is None:
        yield
        return
    previous = setter(1)
    try:
        yield
    finally:
        setter(previous)
