"""``ember.fft``: torch.fft's discrete Fourier transforms (ops/fft.py: three primitives with
scipy.fft's kernels and PyTorch's gradients, and these functions over them)."""

from __future__ import annotations

from .ops._torch_keywords import with_out as _with_out
from .ops.fft import (
    fft,
    fft2,
    fftfreq,
    fftn,
    fftshift,
    hfft,
    hfft2,
    hfftn,
    ifft,
    ifft2,
    ifftn,
    ifftshift,
    ihfft,
    ihfft2,
    ihfftn,
    irfft,
    irfft2,
    irfftn,
    rfft,
    rfft2,
    rfftfreq,
    rfftn,
)

__all__ = [
    "fft",
    "ifft",
    "fft2",
    "ifft2",
    "fftn",
    "ifftn",
    "rfft",
    "irfft",
    "rfft2",
    "irfft2",
    "rfftn",
    "irfftn",
    "hfft",
    "hfft2",
    "hfftn",
    "ihfft",
    "ihfft2",
    "ihfftn",
    "fftfreq",
    "rfftfreq",
    "fftshift",
    "ifftshift",
]


# PyTorch's ``out=`` on each function without its own (ops/_out.py)
globals().update(_with_out({_name: globals()[_name] for _name in __all__}))
