"""``torch.nn.modules.sparse``'s names, from where ember defines them."""

from ..embedding_bag import *  # noqa: F403
from ..sparse import *  # noqa: F403
