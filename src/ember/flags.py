"""Global switches PyTorch programs set: ``ember.use_deterministic_algorithms`` and
``ember.set_float32_matmul_precision`` (with their getters), ``set_num_interop_threads``,
``set_warn_always`` and ``set_flush_denormal``.

The first two are recorded and read back, and change no result: ember has no nondeterministic
alternative kernels to switch off (PyTorch's are mostly CUDA atomics), and its float32 matmuls
always accumulate in float32 (there is no TF32 or bfloat16 fast path that "high" / "medium"
would allow). ember has no inter-op thread pool (its ops run one after another; the parallel
executor sizes its own threads), so the inter-op thread count is recorded and read back too,
as is ``warn_always`` (ember's warnings go through Python's ``warnings`` filters). Flushing
denormals is not configured: ``set_flush_denormal`` answers False, PyTorch's answer where it
cannot.
"""

from __future__ import annotations

import os

__all__ = [
    "are_deterministic_algorithms_enabled",
    "get_float32_matmul_precision",
    "is_deterministic_algorithms_warn_only_enabled",
    "set_float32_matmul_precision",
    "use_deterministic_algorithms",
    "get_num_interop_threads",
    "set_num_interop_threads",
    "set_warn_always",
    "is_warn_always_enabled",
    "set_flush_denormal",
    "get_deterministic_debug_mode",
    "set_deterministic_debug_mode",
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


_interop_threads: int | None = None
_warn_always = False


def set_num_interop_threads(n: int) -> None:
    """Recorded (see the module docstring); ``n`` must be a positive int, as in PyTorch."""
    global _interop_threads
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_interop_threads: expected a positive int, got {n!r}")
    _interop_threads = n


def get_num_interop_threads() -> int:
    """The recorded count, else PyTorch's default: the number of cores."""
    return _interop_threads or os.cpu_count() or 1


def set_warn_always(b: bool) -> None:
    global _warn_always
    _warn_always = bool(b)


def is_warn_always_enabled() -> bool:
    return _warn_always


def set_flush_denormal(mode: bool) -> bool:
    """False: ember does not configure the FPU to flush denormals (PyTorch answers False where
    it cannot); values keep IEEE subnormals."""
    return False


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode) -> None:
    """PyTorch's other spelling of `use_deterministic_algorithms`: 0 or ``"default"`` (off),
    1 or ``"warn"`` (on, warn only), 2 or ``"error"`` (on)."""
    mode = _DEBUG_MODES.get(debug_mode, debug_mode) if isinstance(debug_mode, str) else debug_mode
    if isinstance(mode, bool) or mode not in (0, 1, 2):
        raise ValueError(
            "set_deterministic_debug_mode: debug_mode must be 0, 1, 2, 'default', 'warn' or "
            f"'error', got {debug_mode!r}"
        )
    use_deterministic_algorithms(mode != 0, warn_only=mode == 1)


def get_deterministic_debug_mode() -> int:
    """0 (off), 1 (warn only) or 2 (on), as `set_deterministic_debug_mode` sets it."""
    if not _deterministic:
        return 0
    return 1 if _warn_only else 2
