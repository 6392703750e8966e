"""``torch.nn.modules.linear``'s names, from where ember defines them."""

from ..lazy import LazyLinear  # noqa: F401
from ..linear import *  # noqa: F403
