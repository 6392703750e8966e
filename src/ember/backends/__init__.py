"""``ember.backends``: the backend switches PyTorch programs set, for a CPU-only framework.

Programs written for PyTorch toggle ``torch.backends.cudnn.benchmark``, ``.deterministic``,
``torch.backends.cuda.matmul.allow_tf32`` and ask ``torch.backends.mps.is_available()``. Here
each switch is a plain attribute that keeps what is assigned (so code reading it back sees its
own value) and changes nothing: ember has no cuDNN, CUDA or MPS backend and its float32 matmul
never drops to TF32. The ``is_available()`` of each GPU backend is False. ``opt_einsum``
reports its own flags (ember's ``einsum`` orders contractions itself; see ops/einsum.py).
"""

from . import cpu, cuda, cudnn, mkldnn, mps, openmp, opt_einsum

__all__ = ["cpu", "cuda", "cudnn", "mkldnn", "mps", "openmp", "opt_einsum"]
