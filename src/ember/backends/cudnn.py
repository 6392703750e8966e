"""``ember.backends.cudnn``: PyTorch's cuDNN switches; kept as set, ember has no cuDNN."""

import contextlib

enabled = True
benchmark = False
deterministic = False
allow_tf32 = True
benchmark_limit = 10


def is_available() -> bool:
    """False: ember drives no GPU."""
    return False


def version():
    """None: no cuDNN library is loaded (PyTorch's answer on a build without it)."""
    return None


@contextlib.contextmanager
def flags(enabled=False, benchmark=False, deterministic=False, allow_tf32=True):  # noqa: ARG001
    """Set the switches for a ``with`` block and restore them after (they change nothing)."""
    names = ("enabled", "benchmark", "deterministic", "allow_tf32")
    given = dict(zip(names, (enabled, benchmark, deterministic, allow_tf32)))
    before = {n: globals()[n] for n in names}
    globals().update(given)
    try:
        yield
    finally:
        globals().update(before)
