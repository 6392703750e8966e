"""``torch.nn.modules.flatten``'s names, from where ember defines them."""

from ..flatten import *  # noqa: F403
