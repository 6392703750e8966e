"""Global switches PyTorch programs set: ``ember.use_deterministic_algorithms`` and
``ember.set_float32_matmul_precision`` (with their getters).

Both are recorded and read back, and change no result: ember has no nondeterministic
alternative kernels to switch off (PyTorch's are mostly CUDA atomics), and its float32 matmuls
always accumulate in float32 (there is no TF32 or bfloat16 fast path that "high" / "medium"
would allow).
"""

from __future__ import annotations

__all__ = [
    "are_deterministic_algorithms_enabled",
    "get_float32_matmul_precision",
    "is_deterministic_algorithms_warn_only_enabled",
    "set_float32_matmul_precision",
    "use_deterministic_algorithms",
]

_deterministic = False
_warn_only = False
_matmul_precision = "highest"
_PRECISIONS = ("highest", "high", "medium")


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Record the switch (see the module docstring); ``mode`` must be a bool, as in PyTorch."""
    global _deterministic, _warn_only
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms expects a bool, got {mode!r}")
    _deterministic, _warn_only = mode, bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    return _deterministic


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _warn_only


def set_float32_matmul_precision(precision: str) -> None:
    """``"highest"``, ``"high"`` or ``"medium"``: recorded; ember's float32 matmul is always
    computed in float32 ("highest")."""
    if precision not in _PRECISIONS:
        raise ValueError(
            f"set_float32_matmul_precision: precision must be one of {_PRECISIONS}, got "
            f"{precision!r}"
        )
    global _matmul_precision
    _matmul_precision = precision


def get_float32_matmul_precision() -> str:
    return _matmul_precision
