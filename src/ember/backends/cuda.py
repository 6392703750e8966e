"""``ember.backends.cuda``: PyTorch's CUDA switches (``matmul.allow_tf32``, ...); kept as set,
they change nothing in ember (no GPU; float32 matmuls stay float32)."""


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


def flash_sdp_enabled() -> bool:
    return False


def mem_efficient_sdp_enabled() -> bool:
    return False


def math_sdp_enabled() -> bool:
    """True: ember's scaled_dot_product_attention is the plain (math) formulation."""
    return True


def enable_flash_sdp(enabled: bool) -> None:
    """Accepted; there is no flash kernel to switch."""


def enable_mem_efficient_sdp(enabled: bool) -> None:
    """Accepted; there is no memory-efficient kernel to switch."""


def enable_math_sdp(enabled: bool) -> None:
    """Accepted; the math formulation is ember's only one."""
