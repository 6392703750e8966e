"""``ember.backends.opt_einsum``: PyTorch's switch for opt_einsum's contraction order.

ember's ``einsum`` orders multi-operand contractions itself, so the flags are kept as set and
``is_available()`` says whether the opt_einsum package is installed, as in PyTorch.
"""

import importlib.util

enabled = True
strategy = "auto"


def is_available() -> bool:
    return importlib.util.find_spec("opt_einsum") is not None


def get_opt_einsum():
    """The opt_einsum module, or None when it is not installed."""
    if not is_available():
        return None
    import opt_einsum

    return opt_einsum
