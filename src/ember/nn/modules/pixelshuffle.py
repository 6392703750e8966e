"""``torch.nn.modules.pixelshuffle``'s names, from where ember defines them."""

from ..sampling import PixelShuffle, PixelUnshuffle  # noqa: F401
