"""``ember.backends.cuda``: PyTorch's CUDA switches (``matmul.allow_tf32``, ...); kept as set,
they change nothing in ember (no GPU; float32 matmuls stay float32).

The scaled-dot-product-attention switches are the exception: they are the state that
``ember.nn.attention.sdpa_kernel`` (PyTorch's ``torch.nn.attention.sdpa_kernel``) and the
deprecated ``sdp_kernel`` set, and ``F.scaled_dot_product_attention`` reads them as PyTorch's
CPU build does: ember's one formulation is the math one, which also stands in for the CPU
flash kernel (same values up to rounding), so attention runs while MATH or FLASH_ATTENTION is
enabled and raises, as PyTorch does on the CPU, when only the GPU-only backends are.
"""

import contextlib
import enum
import warnings

from ..errors import user_stacklevel


class _MatmulFlags:
    """``ember.backends.cuda.matmul``: the attributes PyTorch programs assign."""

    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    def __repr__(self) -> str:
        return f"<ember.backends.cuda.matmul {vars(self)}>"


matmul = _MatmulFlags()


def is_built() -> bool:
    """False: ember is not built with CUDA."""
    return False


class SDPBackend(enum.IntEnum):
    """PyTorch's ``torch.nn.attention.SDPBackend``: the kernels scaled dot-product attention may
    choose from (values as PyTorch's)."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4

    def __str__(self) -> str:
        return f"SDPBackend.{self.name}"


# PyTorch's defaults: every backend enabled (the fused ones simply never apply on a CPU)
_SDP_ENABLED = {
    SDPBackend.MATH: True,
    SDPBackend.FLASH_ATTENTION: True,
    SDPBackend.EFFICIENT_ATTENTION: True,
    SDPBackend.CUDNN_ATTENTION: True,
    SDPBackend.OVERRIDEABLE: True,
}
_SDP_PRIORITY = [
    SDPBackend.FLASH_ATTENTION,
    SDPBackend.EFFICIENT_ATTENTION,
    SDPBackend.MATH,
    SDPBackend.CUDNN_ATTENTION,
    SDPBackend.OVERRIDEABLE,
]


def flash_sdp_enabled() -> bool:
    return _SDP_ENABLED[SDPBackend.FLASH_ATTENTION]


def mem_efficient_sdp_enabled() -> bool:
    return _SDP_ENABLED[SDPBackend.EFFICIENT_ATTENTION]


def math_sdp_enabled() -> bool:
    return _SDP_ENABLED[SDPBackend.MATH]


def cudnn_sdp_enabled() -> bool:
    return _SDP_ENABLED[SDPBackend.CUDNN_ATTENTION]


def enable_flash_sdp(enabled: bool) -> None:
    """Enables or disables the flash backend (on a CPU, ember's math formulation serves it)."""
    _SDP_ENABLED[SDPBackend.FLASH_ATTENTION] = bool(enabled)


def enable_mem_efficient_sdp(enabled: bool) -> None:
    """Kept as set; the memory-efficient kernel is CUDA's and never runs here."""
    _SDP_ENABLED[SDPBackend.EFFICIENT_ATTENTION] = bool(enabled)


def enable_math_sdp(enabled: bool) -> None:
    """Enables or disables the math formulation, ember's only one."""
    _SDP_ENABLED[SDPBackend.MATH] = bool(enabled)


def enable_cudnn_sdp(enabled: bool) -> None:
    """Kept as set; the cuDNN kernel never runs here."""
    _SDP_ENABLED[SDPBackend.CUDNN_ATTENTION] = bool(enabled)


def sdp_backends_enabled() -> list[SDPBackend]:
    """The enabled backends, in priority order (what ``sdpa_kernel`` restores on exit)."""
    return [b for b in _SDP_PRIORITY if _SDP_ENABLED[b]]


def sdp_runnable() -> bool:
    """Whether scaled dot-product attention has a kernel on the CPU: MATH or FLASH_ATTENTION."""
    return math_sdp_enabled() or flash_sdp_enabled()


def _set_sdp_backends(backends, set_priority: bool) -> None:
    for b in _SDP_ENABLED:
        _SDP_ENABLED[b] = b in backends
    if set_priority:
        rest = [b for b in _SDP_PRIORITY if b not in backends]
        _SDP_PRIORITY[:] = [b for b in backends if b in _SDP_ENABLED] + rest


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority: bool = False):
    """PyTorch's ``torch.nn.attention.sdpa_kernel``: within the block only ``backends`` (one
    `SDPBackend` or a list) are enabled, in that priority order with ``set_priority``; the
    previous switches are restored on exit. ember computes attention one way, so the choice
    only decides whether attention may run (MATH or FLASH_ATTENTION enabled), as on PyTorch's
    CPU build."""
    if not isinstance(backends, (list, SDPBackend)):
        # PyTorch asserts; an AssertionError is what its programs would catch
        raise AssertionError(
            "Backend must be an instance of SDPBackend or a list of SDPBackend instances, "
            f"got {type(backends).__name__}"
        )
    chosen = [backends] if isinstance(backends, SDPBackend) else list(dict.fromkeys(backends))
    previous = dict(_SDP_ENABLED), list(_SDP_PRIORITY)
    try:
        _set_sdp_backends(chosen, set_priority)
        yield {}
    finally:
        _SDP_ENABLED.update(previous[0])
        _SDP_PRIORITY[:] = previous[1]


@contextlib.contextmanager
def sdp_kernel(
    enable_flash: bool = True,
    enable_math: bool = True,
    enable_mem_efficient: bool = True,
    enable_cudnn: bool = True,
):
    """PyTorch's deprecated ``torch.backends.cuda.sdp_kernel``: ``sdpa_kernel`` with one switch
    per backend (warns, as PyTorch's, with a FutureWarning)."""
    warnings.warn(
        "`torch.backends.cuda.sdp_kernel()` is deprecated. In the future, this context manager "
        "will be removed. Please see `torch.nn.attention.sdpa_kernel()` for the new context "
        "manager, with updated signature.",
        FutureWarning,
        stacklevel=user_stacklevel(),
    )
    chosen = [
        b
        for b, on in (
            (SDPBackend.FLASH_ATTENTION, enable_flash),
            (SDPBackend.EFFICIENT_ATTENTION, enable_mem_efficient),
            (SDPBackend.MATH, enable_math),
            (SDPBackend.CUDNN_ATTENTION, enable_cudnn),
        )
        if on
    ]
    with sdpa_kernel(chosen) as context:
        yield context
