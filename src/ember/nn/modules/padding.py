"""``torch.nn.modules.padding``'s names, from where ember defines them."""

from ..padding import *  # noqa: F403
from ..padding import _ConstantPadNd, _PadNd  # noqa: E402, F401

# (ember's 2-d and 3-d layers derive from the 1-d one of their mode)
_ReflectionPadNd = ReflectionPad1d  # noqa: F405
_ReplicationPadNd = ReplicationPad1d  # noqa: F405
_CircularPadNd = CircularPad1d  # noqa: F405
