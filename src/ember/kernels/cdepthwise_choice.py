"""Which depthwise kernels an eager forward or input gradient runs, measured: the row-wide ones
(kernels/cdepthwise.py) or the channels-wide ones (kernels/cdepthwise_wide.py), timed on the
first call of each geometry.

`cdepthwise_wide.wins` counts the two ways' vector loads, stores and multiply-adds as if every
access hit the L1 cache. Where a row is a whole number of vectors (a 32x32 plane at stride 1:
two 16-lane vectors, no remainder) the row-wide loops run at their best, while a block of V
channels' zero-framed scratch (34 x 34 vectors of 64 bytes: 74 KB) outgrows the L1 data cache,
so the channels-wide taps stream from L2: the count picked them on MobileNetV2's 16-, 96- and
240-channel 32x32 planes, measured 1.2-1.6x slower. So the eager forward and input gradient
time both on the first call's own operands, alternating (kernels/timing.py's `interleaved`,
the calling thread's CPU time on one thread, wall time on more), and keep for the geometry,
for the rest of the process, the counted choice unless the other kernel is clearly faster
(`timing.choose`). Both ways sum every output in the same order (bit-identical results,
tested), so the choice changes the time only; the weight gradient, whose two ways round
differently, and the graph runner's steps keep the count (``EMBER_CONV_LAYOUT=count`` keeps
it everywhere, as for kernels/cconv_choice.py).
"""

from __future__ import annotations

import time

from .timing import choose, interleaved

__all__ = ["chosen", "wide_runs"]

_SAMPLES = 5
# (each timing repeats a call to last about this long, as kernels/gemm_tune.py's: single calls
# of a call of tens of microseconds measured a kernel's cold first calls and the load's
# bursts, and could hold the slower kernels)
_SAMPLE_S = 3e-4
# (op, geometry key, threads) -> whether the channels-wide kernels run
_CHOSEN: dict = {}


def chosen(key: tuple) -> bool | None:
    """The measured choice for ``key`` (True: channels-wide), or None: not measured yet."""
    return _CHOSEN.get(key)


def wide_runs(key: tuple, counted: bool, run_wide, run_rows, threads: int) -> bool:
    """Whether the channels-wide kernels run for ``key`` (an op and its geometry): the
    counted choice ``counted`` unless the other way, timed here once per key, is clearly
    faster. ``run_wide()`` runs the channels-wide kernels and says whether they ran (they may
    decline); ``run_rows()`` the row-wide ones; both write the call's own result."""
    from .cconv_choice import counted_only

    if counted_only():
        return counted
    found = _CHOSEN.get(key)
    if found is not None:
        return found
    if not run_wide():  # (declined: the row-wide kernels run, and are kept)
        _CHOSEN[key] = False
        return False
    clock = time.thread_time if threads == 1 else time.perf_counter
    times = interleaved([run_rows, run_wide], _SAMPLES, clock=clock, sample_s=_SAMPLE_S)
    found = _CHOSEN[key] = choose(times, int(counted)) == 1
    return found
