"""Timing a callable for the cost models (runtime/parallel_measure.py, runtime/cgraph.py)."""

from __future__ import annotations

import statistics
import time

__all__ = ["_best_time", "_median_time", "_times"]


def _median_time(fn, samples: int) -> float:
    return statistics.median(_times(fn, samples))


def _best_time(fn, samples: int) -> float:
    """The fastest of ``samples`` runs: other processes on the machine only ever add time."""
    return min(_times(fn, samples))


def _times(fn, samples: int) -> list[float]:
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times
