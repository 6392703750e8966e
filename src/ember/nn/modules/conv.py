"""``torch.nn.modules.conv``'s names, from where ember defines them."""

from ..conv import *  # noqa: F403
from ..conv import _ConvNd, _ConvTranspose  # noqa: F401
from ..lazy import (  # noqa: F401
    LazyConv1d,
    LazyConv2d,
    LazyConv3d,
    LazyConvTranspose1d,
    LazyConvTranspose2d,
    LazyConvTranspose3d,
)

_ConvTransposeNd = _ConvTranspose
