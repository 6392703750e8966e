"""``torch.nn.modules.pooling``'s names, from where ember defines them."""

from ..pool_extra import *  # noqa: F403
from ..pool_extra import _LPPoolNd, _MaxUnpoolNd  # noqa: F401
from ..pooling import *  # noqa: F403
from ..pooling import (  # noqa: F401
    _AdaptivePool,  # noqa: E402
    _AvgPoolNd,
    _MaxPoolNd,
)


class _AdaptiveKind(type):
    """PyTorch's _AdaptiveAvgPoolNd / _AdaptiveMaxPoolNd for ``isinstance`` and ``issubclass``
    tests: ember's adaptive pools share one base (`_AdaptivePool`) that records its kind."""

    def __instancecheck__(cls, obj) -> bool:
        return cls.__subclasscheck__(type(obj))

    def __subclasscheck__(cls, sub) -> bool:
        return issubclass(sub, _AdaptivePool) and getattr(sub, "_kind", None) == cls._kind


class _AdaptiveAvgPoolNd(metaclass=_AdaptiveKind):
    _kind = "avg"


class _AdaptiveMaxPoolNd(metaclass=_AdaptiveKind):
    _kind = "max"
