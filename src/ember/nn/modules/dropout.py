"""``torch.nn.modules.dropout``'s names, from where ember defines them."""

from ..activation_extra import AlphaDropout, FeatureAlphaDropout  # noqa: F401
from ..dropout import *  # noqa: F403
from ..dropout import _DropoutNd  # noqa: F401
