"""kernels/cpool.py: how long an idle pool thread polls is measured, not set: nothing before
a few wake-ups of a blocked worker are measured, then SPIN_RATIO times the least of them
(none while the machine's load average exceeds its CPUs)."""

import os
import subprocess
import sys
import textwrap

import pytest

from ember.kernels import ccompile

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")

_PROGRAM = textwrap.dedent(
    """
    import time
    import numpy as np
    import ember
    from ember.kernels import cpool

    assert cpool.wake_ns() == 0 and cpool.spin_ns() == 0, "measured before any job"
    step = ember.function(lambda x, w: (x * w).tanh() + x)
    x = ember.tensor(np.ones((1 << 19) + 3, np.float32))  # (above the pool's threshold)
    want = float(np.tanh(1.0) + 1.0)
    for _ in range(8):
        out = step(x, x)
        assert abs(float(out[5]) - want) < 1e-6
        time.sleep(0.05)  # (longer than any poll: the worker blocks and is woken again)
    wake, spin = cpool.wake_ns(), cpool.spin_ns()
    print(wake, spin)
    assert wake > 0, "no wake-up measured"
    assert spin == (0 if cpool.machine_busy() else 10 * wake), (wake, spin)
    """
)


def test_spin_time_is_measured_from_wake_ups():
    env = dict(os.environ, EMBER_NUM_THREADS="2")
    done = subprocess.run(
        [sys.executable, "-c", _PROGRAM], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
