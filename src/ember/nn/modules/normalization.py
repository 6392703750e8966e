"""``torch.nn.modules.normalization``'s names, from where ember defines them."""

from ..activation_extra import LocalResponseNorm  # noqa: F401
from ..normalization import GroupNorm, LayerNorm, RMSNorm  # noqa: F401
