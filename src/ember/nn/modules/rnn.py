"""``torch.nn.modules.rnn``'s names, from where ember defines them."""

from ..rnn import *  # noqa: F403
from ..rnn_cell import *  # noqa: F403
