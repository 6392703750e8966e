"""kernels/cpool.py: the thread pool of the compiled loops: thread counts, loops run from several
Python threads at once, and a forked child (whose parent's workers do not exist in it)."""

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import ember
from ember.kernels import ccompile, cpool

pytestmark = pytest.mark.skipif(not ccompile.compiler_available(), reason="no C compiler")
N = (1 << 19) + 3  # above PARALLEL_MIN: the loop goes to the pool


def _step():
    return ember.function(lambda x, w: (x * w).tanh() + x)


def test_thread_counts_are_validated_and_reported():
    before = ember.get_num_threads()
    try:
        ember.set_num_threads(3)
        assert ember.get_num_threads() == 3
        with pytest.raises(ValueError, match="positive"):
            ember.set_num_threads(0)
    finally:
        ember.set_num_threads(before)
    assert cpool.parallel_for() is not None


def test_loops_started_from_several_python_threads_at_once():
    rng = np.random.default_rng(0)
    step = _step()
    cases = [[rng.standard_normal(N).astype(np.float32) for _ in range(2)] for _ in range(4)]
    step(*map(ember.tensor, cases[0]))  # compile once, before the threads race
    results: dict = {}

    def work(k):
        x, w = cases[k]
        for _ in range(5):  # ctypes drops the GIL: the calls overlap in the pool
            results[k] = step(ember.tensor(x), ember.tensor(w)).numpy()

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for k, (x, w) in enumerate(cases):
        np.testing.assert_allclose(results[k], np.tanh(x * w) + x, rtol=1e-6, atol=1e-6)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_starts_its_own_workers():
    code = textwrap.dedent(
        f"""
        import os, numpy as np, ember
        step = ember.function(lambda x, w: (x * w).tanh() + x)
        x = np.linspace(-3, 3, {N}, dtype=np.float32)
        want = np.tanh(x * x) + x
        assert np.allclose(step(ember.tensor(x), ember.tensor(x)).numpy(), want, atol=1e-6)
        pid = os.fork()  # the parent's pool threads are not copied into the child
        if pid == 0:
            ok = np.allclose(step(ember.tensor(x), ember.tensor(x)).numpy(), want, atol=1e-6)
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        print("ok")
        """
    )
    env = dict(os.environ, EMBER_NUM_THREADS="2")
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr
