"""``torch.nn.modules.transformer``'s names, from where ember defines them."""

from ..transformer import *  # noqa: F403
