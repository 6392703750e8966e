"""Whether an elementwise op whose C expression calls the vector math library (exp, log, tanh,
erf: sigmoid, SiLU, ELU, softplus, Mish and their gradients) runs its compiled loop eagerly on
large float32/float64 operands, measured once per machine and kept on disk.

Such a loop does not give NumPy's bits (glibc's vector functions round otherwise than NumPy's
by a few ulps, as the fused loops of compiled graphs and the softmax kernel already do), so
unlike an exact loop (ops/_half.py `_loop_wins`, measured per process, free to change its mind
because either way the bits are the same) its choice must not change from one process to the
next: a machine's eager results would then depend on a timing. So the choice is made once per
(op, dtype, thread count) on the first large call's own operands (the faster of the loop and
the NumPy kernel, interleaved, the slower quartile of one below the faster quartile of the
other; a close call keeps NumPy's kernel) and written to ember's cache directory, keyed by the
machine (kernels/gemm_tune.py's `machine_key`: CPU, cores, NumPy, the compiler's flags). Where
the NumPy kernel makes several passes over memory (SiLU: a negation, an exponential, an
addition, a division), the loop's one pass wins; where the loop's function has no vector
version on this machine's C library (a scalar libm call per element), NumPy's SIMD kernel wins
and keeps the op.

The file is read as untrusted data: anything but a JSON object of string keys and boolean
values, for this machine's key, is ignored and measured again.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time

from .._files import OWN_FILE_MODE, read_own_file, write_atomic
from ..kernels.timing import clearly_faster, interleaved

__all__ = ["loop_chosen"]

_FORMAT = 1
_SAMPLES = 7
_lock = threading.Lock()
# choice key -> whether the loop runs; None until the file is read
_choices: dict | None = None


def _path():
    from ..kernels.ccompile import cache_dir
    from ..kernels.gemm_tune import machine_key

    digest = hashlib.sha256(f"{machine_key()}|loops v{_FORMAT}".encode()).hexdigest()[:16]
    return cache_dir() / f"vector-loops-{digest}.json"


def _read() -> dict:
    raw = read_own_file(_path())  # (a cache file someone else could write is not read)
    if raw is None:
        return {}
    try:
        data = json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, bool)}


def loop_chosen(name: str, dtype, call_loop, call_numpy) -> bool:
    """Whether the op ``name``'s compiled loop runs on operands of ``dtype`` (``call_loop()``
    and ``call_numpy()`` compute this call's result each way): this machine's kept choice,
    else measured now and kept."""
    global _choices
    from ..kernels.cpool import get_num_threads

    threads = get_num_threads()
    key = f"{name}|{dtype}|{threads}"
    with _lock:
        if _choices is None:
            _choices = _read()
        chosen = _choices.get(key)
    if chosen is not None:
        return chosen
    # (one thread: the calling thread's CPU time, which other processes' load inflates less;
    # more: wall time, the loop's threads sharing the work)
    clock = time.thread_time if threads == 1 else time.perf_counter
    loop_times, numpy_times = interleaved([call_loop, call_numpy], _SAMPLES, clock=clock)
    chosen = clearly_faster(loop_times, numpy_times)
    with _lock:
        _choices = {**_read(), **_choices, key: chosen}
        try:
            write_atomic(_path(), json.dumps(_choices, sort_keys=True), OWN_FILE_MODE)
        except OSError:  # (a read-only cache: the choice holds for this process)
            pass
    return chosen
