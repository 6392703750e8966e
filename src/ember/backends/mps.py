"""``ember.backends.mps``: Apple's Metal backend, which ember does not have."""


def is_available() -> bool:
    """False: ember runs on the CPU only."""
    return False


def is_built() -> bool:
    """False: ember is not built with MPS."""
    return False
