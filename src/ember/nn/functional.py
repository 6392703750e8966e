"""``ember.nn.functional``: the functional forms of the nn layers (PyTorch's ``F``).

Every function here is defined by an op module (``ember/ops``) or a composite module
(``ember/functional``) and exported with ``functional=True``; this module only collects them.
"""

from .. import functional as _composites  # noqa: F401  (registers them before they are collected)
from ..ops._registry import FUNCTIONAL
from ..ops._torch_keywords import with_torch_keywords

globals().update(with_torch_keywords(FUNCTIONAL))  # also PyTorch's keywords (input=, other=)
__all__ = sorted(FUNCTIONAL)

from .._missing import module_getattr as _module_getattr  # noqa: E402

__getattr__ = _module_getattr(
    "ember.nn.functional", globals()
)  # PyTorch names ember lacks: ember._missing
