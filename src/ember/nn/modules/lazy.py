"""``torch.nn.modules.lazy``'s names, from where ember defines them."""

from ..lazy import LazyModuleMixin  # noqa: F401
