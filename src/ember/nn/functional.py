"""``ember.nn.functional``: the functional forms of the nn layers (PyTorch's ``F``).

Every function here is defined by an op module (``ember/ops``) or a composite module
(``ember/functional``) and exported with ``functional=True``; this module only collects them.
"""

from .. import functional as _composites  # noqa: F401  (registers them before they are collected)
from ..ops._registry import FUNCTIONAL

globals().update(FUNCTIONAL)
__all__ = sorted(FUNCTIONAL)
