"""``torch.nn.modules.fold``'s names, from where ember defines them."""

from ..sampling import Fold, Unfold  # noqa: F401
