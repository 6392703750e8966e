"""``ember.backends.openmp``."""


def is_available() -> bool:
    """False: ember's kernels share work through its own thread pool (kernels/cpool.py), not
    the OpenMP runtime."""
    return False
