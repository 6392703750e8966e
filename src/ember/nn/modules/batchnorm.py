"""``torch.nn.modules.batchnorm``'s names, from where ember defines them."""

from ..lazy import LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d  # noqa: F401
from ..lazy import _LazyNormMixin as _LazyNormBase  # noqa: E402, F401
from ..norm_extra import SyncBatchNorm  # noqa: F401
from ..normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, _BatchNorm, _NormBase  # noqa: F401
