"""ember's kernels raise no floating-point warnings, as PyTorch's raise none (log(0) is -inf,
0/0 is NaN, overflow is inf, silently), while the user's own NumPy calls keep theirs. Checked
in a fresh interpreter run with ``-W error::RuntimeWarning`` (pytest replaces the warning
filters around each test and collection, so an import-time filter cannot be seen here)."""

import os
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")

PROGRAM = """
import numpy as np
import ember
x = ember.tensor([0.0, -1.0, 1e38, 2.0], requires_grad=True)
y = ember.log(x) + x / 0 + x * 1e38 + ember.sqrt(x) + ember.exp(x * 100)
y.sum().backward()
ember.function(lambda t: ember.log(t) / t)(ember.tensor([0.0, -1.0]))
print("ember quiet")
try:
    np.log(np.zeros(1))
except RuntimeWarning:
    print("user warned")
"""


def test_floating_point_events_inside_ember_are_silent_but_the_users_numpy_warns():
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-c", PROGRAM],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["ember", "quiet", "user", "warned"], done.stdout
