"""``ember.version``: PyTorch's ``torch.version`` names, which programs print or test: ember's
version, and None for the GPU toolkits (``cuda``, ``hip``), as PyTorch's CPU-only build."""

from __future__ import annotations

__version__ = "0.1.0"
git_version = "unknown"
debug = False
cuda = None  # (no CUDA: a CPU-only framework)
hip = None
rocm = None
xpu = None

__all__ = ["__version__", "cuda", "debug", "git_version", "hip", "rocm", "xpu"]
