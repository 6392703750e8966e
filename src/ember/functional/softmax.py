"""softmax, log_softmax and softmin along one dimension, with PyTorch's arguments.

The computation is the ``softmax`` / ``log_softmax`` primitives of ember.ops.softmax (shifted by
the maximum, exact gradients for large logits); this module resolves ``dim`` and ``dtype``.
"""

from __future__ import annotations

import warnings

from ..errors import user_stacklevel
from ..ops._registry import apply, export
from ..ops.cast import requested_cast
from ..ops.softmax import LOG_SOFTMAX, SOFTMAX
from ._common import dim_arg, float_input


def _implicit_dim(op: str, ndim: int) -> int:
    # PyTorch's legacy choice when dim is omitted (deprecated there too)
    warnings.warn(
        f"{op}: implicit dimension choice is deprecated; pass dim explicitly",
        UserWarning,
        stacklevel=user_stacklevel(),
    )
    return 0 if ndim in (0, 1, 3) else 1


def _prepare(op: str, x, dim, dtype):
    if dtype is not None:  # (asked for: complex to real keeps the real part, warned, as PyTorch)
        x = requested_cast(x, dtype)
    x = float_input(op, x)
    if dim is None:
        dim = _implicit_dim(op, x.ndim)
    return x, dim_arg(op, dim, max(x.ndim, 1))


def stable_softmax(x, dim: int, *, safe: bool = False):
    """softmax of a float tensor along a normalised ``dim``. With ``safe=True`` a slice that is
    entirely -inf (a fully masked attention row) gives zeros instead of NaN, as PyTorch's
    attention does."""
    return apply(SOFTMAX, x, axis=dim, safe=safe)


@export(method=True, functional=True)
def softmax(input, dim: int | None = None, _stacklevel: int = 3, dtype=None):
    """``exp(x) / sum(exp(x))`` along ``dim`` (computed stably); ``dtype`` casts the input first."""
    x, d = _prepare("softmax", input, dim, dtype)
    return stable_softmax(x, d)


@export(method=True, functional=True)
def log_softmax(input, dim: int | None = None, _stacklevel: int = 3, dtype=None):
    """``x - logsumexp(x)`` along ``dim``, stable and with an exact gradient for large logits."""
    x, d = _prepare("log_softmax", input, dim, dtype)
    return apply(LOG_SOFTMAX, x, axis=d)


@export(functional=True, toplevel=False)
def softmin(input, dim: int | None = None, _stacklevel: int = 3, dtype=None):
    """``softmax(-x)`` along ``dim``."""
    x, d = _prepare("softmin", input, dim, dtype)
    return stable_softmax(-x, d)
