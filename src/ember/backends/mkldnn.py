"""``ember.backends.mkldnn``: PyTorch's oneDNN switch; kept as set, ember does not use oneDNN."""

enabled = True


def is_available() -> bool:
    """False: ember's CPU kernels are its own (kernels/), not oneDNN."""
    return False
