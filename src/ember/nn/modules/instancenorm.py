"""``torch.nn.modules.instancenorm``'s names, from where ember defines them."""

from ..lazy import LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d  # noqa: F401
from ..norm_extra import InstanceNorm3d  # noqa: F401
from ..normalization import InstanceNorm1d, InstanceNorm2d, _InstanceNorm  # noqa: F401
