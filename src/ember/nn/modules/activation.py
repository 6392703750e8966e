"""``torch.nn.modules.activation``'s names, from where ember defines them."""

from ..activation import *  # noqa: F403
from ..activation_extra import *  # noqa: F403
from ..attention import MultiheadAttention  # noqa: F401
