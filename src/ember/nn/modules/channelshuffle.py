"""``torch.nn.modules.channelshuffle``'s names, from where ember defines them."""

from ..activation_extra import ChannelShuffle  # noqa: F401
