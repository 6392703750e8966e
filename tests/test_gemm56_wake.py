"""kernels/gemm_tune.py's pool wake cost, from which products are shared over two threads, is
the typical cost: a few calls in which another process held a core (a loaded machine at
calibration time) must not fix a threshold that keeps medium products on one thread for as
long as the cached file lives."""

from __future__ import annotations

import types

import numpy as np
import pytest

from ember.kernels import cgemm, cpool, gemm_tune


def _clocked_kernels(monkeypatch, shared_s: float, stalls: set):
    """A stand-in `_blocked` on a fake clock: alone 5 us, shared 5 us + ``shared_s``, and the
    shared calls numbered in ``stalls`` held up 50 ms (another process on the pool's core)."""
    now = [0.0]
    calls = {"shared": 0}

    def blocked(functions, a, b, out, batch, *, blas, threaded):
        now[0] += 5e-6
        if threaded:
            now[0] += shared_s
            if calls["shared"] in stalls:
                now[0] += 0.05
            calls["shared"] += 1

    monkeypatch.setattr(gemm_tune, "_kernels", (None, blocked, None))
    monkeypatch.setattr(gemm_tune, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(cpool, "cpu_count", lambda: 2)


@pytest.mark.parametrize("shared_s", [0.0, 3e-6, 2e-5])
def test_the_wake_cost_is_the_typical_one_not_the_stalls(monkeypatch, shared_s):
    _clocked_kernels(monkeypatch, shared_s, stalls={3, 40})
    wake = gemm_tune._measure_wake((None, None, None, None, object()))
    # (two 50 ms stalls in 64 calls made the mean 1.6 ms: a split from 0.7 GFLOP)
    assert wake == pytest.approx(shared_s, abs=1e-9)


def test_a_machine_whose_every_split_waits_still_measures_that_wait(monkeypatch):
    """The median follows a cost that most calls pay: a pool that always waits is measured."""
    _clocked_kernels(monkeypatch, 0.0, stalls=set(range(40)))
    assert gemm_tune._measure_wake((None, None, None, None, object())) == pytest.approx(0.05)


@pytest.mark.skipif(not cgemm.available(np.float32), reason="no C compiler")
def test_the_real_measurement_is_a_small_non_negative_time():
    wake = gemm_tune._measure_wake(cgemm._functions(np.dtype(np.float32)))
    assert 0.0 <= wake < 0.01
