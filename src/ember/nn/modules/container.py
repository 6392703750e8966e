"""``torch.nn.modules.container``'s names, from where ember defines them."""

from ..container import *  # noqa: F403
