"""``torch.nn.modules.module``'s names, from where ember defines them."""

from ..module import Module  # noqa: F401
