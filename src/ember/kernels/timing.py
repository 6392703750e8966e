"""Timing candidate kernels against each other for the kernels' cached choices
(kernels/gemm_tune.py's GEMM and BLAS choices, kernels/cconv_choice.py's convolution layouts),
and the rule that picks among them on a loaded machine.

Candidates are timed in turn (interleaved, so a burst of load elsewhere touches them alike),
by default in this thread's CPU time (`time.thread_time`: the time other processes hold the
core is not counted; a kernel that runs on the pool's threads needs wall time instead)."""

from __future__ import annotations

import time

import numpy as np

__all__ = ["choose", "clearly_faster", "interleaved", "median"]


def interleaved(fns, samples: int, *, clock=time.thread_time, sample_s: float = 0.0):
    """``samples`` timings of each of ``fns`` (one list each), taken in turn after one warm-up
    call each; each timing repeats its function to last about ``sample_s`` seconds (at most 50
    times; once where ``sample_s`` is 0) and is the time of one call."""
    reps = []
    for fn in fns:
        fn()
        if sample_s > 0:
            start = clock()
            fn()
            once = clock() - start
            reps.append(max(1, min(50, int(sample_s / max(once, 1e-7)))))
        else:
            reps.append(1)
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(samples):
        for i, fn in enumerate(fns):
            start = clock()
            for _ in range(reps[i]):
                fn()
            times[i].append((clock() - start) / reps[i])
    return times


def median(times) -> float:
    return float(np.median(times))


def clearly_faster(x, y) -> bool:
    """Whether timings ``x`` are clearly faster than timings ``y``: the slower quartile of x
    below the faster quartile of y (their middle halves apart, so a spread that load widens
    needs a larger difference)."""
    return float(np.percentile(x, 75)) < float(np.percentile(y, 25))


def choose(times, default: int) -> int:
    """Which of the candidates timed in ``times`` (one list of timings each) to run: ``default``
    (the choice held before, or the one that does least work) unless another is
    `clearly_faster`; then, of those, the one of the lowest median."""
    better = [i for i, t in enumerate(times) if i != default and clearly_faster(t, times[default])]
    return min(better, key=lambda i: median(times[i])) if better else default
