"""``ember.nn.functional``: the functional forms of the nn layers (PyTorch's ``F``).

Every function here is defined by an op module (``ember/ops``) or a composite module
(``ember/functional``) and exported with ``functional=True``; this module only collects them.
"""

from .. import functional as _composites  # noqa: F401  (registers them before they are collected)
from ..ops._registry import FUNCTIONAL
from ..ops._torch_keywords import with_torch_keywords

# also PyTorch's keywords (input=, other=), and out= as ember.* (one object per function)
globals().update(with_torch_keywords(FUNCTIONAL, out=True))
__all__ = sorted(FUNCTIONAL)

# PyTorch's public tables of grid_sample's modes (the integer codes aten's grid_sampler takes)
GRID_SAMPLE_INTERPOLATION_MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
GRID_SAMPLE_PADDING_MODES = {"zeros": 0, "border": 1, "reflection": 2}

from .._missing import module_getattr as _module_getattr  # noqa: E402

__getattr__ = _module_getattr(
    "ember.nn.functional", globals()
)  # PyTorch names ember lacks: ember._missing
