"""``torch.nn.modules.adaptive``'s names, from where ember defines them."""

from ..adaptive import *  # noqa: F403
